"""Upgrade a version 6 table (Hudi 0.14 / 0.15) to version 8 in place, as Hudi 1.x's upgrade does.

What changes (Hudi's six-to-eight upgrade):

* the timeline moves to layout 2: every instant file in ``.hoodie/`` gets its version 8
  name in ``.hoodie/timeline/`` -- completed ones ``<t>_<completion>.<action>``, the
  completion time being the old file's modification time (what Hudi 1.x reads for a
  version 6 instant); commit and deltacommit metadata is rewritten from JSON to Avro;
  a pending clustering's ``replacecommit`` is named ``clustering``;
* the archived timeline (``.hoodie/archived/``) is appended to the LSM history
  (``.hoodie/timeline/history/``);
* ``hoodie.properties``: table version 8, layout version 2, ``hoodie.timeline.path``,
  ``hoodie.table.initial.version``, the merge mode and strategy chosen from the payload
  class, the key generator type (:mod:`tidemark.format.properties_v6`);
* a metadata table (``.hoodie/metadata``, itself a version 6 table) is deleted and no
  longer listed in ``hoodie.properties``, as Hudi's upgrade deletes one that is behind:
  readers list the folders instead, and a writer that maintains one rebuilds it.

Crash safety: the steps run under the table lock in an order that keeps the table one
whole table at every moment. ``.hoodie/timeline/`` is first marked half written
(``UPGRADE_MARKER``); readers (tidemark, and Hudi 0.x / hudi-rs, which follow
``hoodie.properties``) keep reading the version 6 timeline until ``hoodie.properties`` is
replaced atomically with its version 8 form, the one switch. Only then are the marker
and the old instant files removed. Every step is idempotent, so ``upgrade`` run again
after a crash finishes the job from wherever it stopped.

Refused (nothing changed): a table with pending instants (a write or service of a
Hudi 0.x writer still running or failed: finish or roll it back with Hudi 0.x first,
as Hudi's upgrade rolls failed writes back before it starts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tidemark.errors import UnsupportedTableError
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.names import HOODIE_DIR, TIMELINE_DIR
from tidemark.format.properties import (
    ALL_ORDERING_FIELDS,
    MERGE_STRATEGY_IDS,
    PROPERTIES_PATH,
    TABLE_VERSION,
    format_properties,
    load_properties,
)
from tidemark.format.properties_v6 import KEYGEN_TYPES, PAYLOAD_KEY, SUPPORTED_OLD_VERSIONS, merge_settings_v6
from tidemark.storage import Storage
from tidemark.timeline import history
from tidemark.timeline.archived_v1 import read_v1_archive
from tidemark.timeline.instant import Action, State, instant_file_name
from tidemark.timeline.layout_v1 import (
    LAYOUT_V1_DIR,
    LEGACY_LOGS_MARKER,
    PENDING_RENAMES,
    UPGRADE_MARKER,
    load_v1_instants,
    parse_v1_file_name,
)

METADATA_DIR = f"{HOODIE_DIR}/metadata"
_COMMIT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass(frozen=True)
class UpgradeResult:
    """What an upgrade did. ``from_version`` is 8 when the table already was (then only
    leftovers of an interrupted upgrade, if any, were removed)."""

    from_version: int
    to_version: int
    instants: int  # active instants moved to the layout 2 timeline
    archived: int  # archived instants moved to the LSM history
    resumed: bool  # an interrupted upgrade was found and finished

    @property
    def upgraded(self) -> bool:
        return self.from_version != self.to_version


def upgrade_table(storage: Storage, *, archive_batch: int = 10) -> UpgradeResult:
    """Upgrade the table at ``storage`` to version 8. Call under the table lock."""
    props = load_properties(storage.read_bytes) or {}
    version = props.get("hoodie.table.version", "")
    if version == str(TABLE_VERSION):
        resumed = _finish(storage)
        return UpgradeResult(TABLE_VERSION, TABLE_VERSION, 0, 0, resumed)
    if version not in SUPPORTED_OLD_VERSIONS:
        raise UnsupportedTableError(
            f"cannot upgrade the table at {storage.base_path!r}: table version {version or '(none)'} is not one "
            f"tidemark upgrades (it upgrades version 6, Hudi 0.14/0.15); upgrade it with Apache Hudi"
        )
    instants = load_v1_instants(storage)
    pending = [i for i in instants if not i.is_completed]
    if pending:
        raise UnsupportedTableError(
            f"cannot upgrade the table at {storage.base_path!r}: instants are pending "
            f"({', '.join(str(i) for i in pending)}); finish or roll them back with Hudi 0.x first "
            "(Hudi's upgrade, too, rolls failed writes back before it starts). Nothing was changed."
        )
    resumed = storage.exists(UPGRADE_MARKER)
    # 1. Mark the layout 2 folder half written: readers stay on the version 6 timeline.
    storage.write_atomic(UPGRADE_MARKER, b"upgrade from table version 6 in progress; run `tidemark upgrade` again\n")
    # 2. The active timeline, renamed and (commit metadata) re-encoded.
    completions = {(i.requested_time, i.action): i.completion_time for i in instants}
    for name in storage.list_names(LAYOUT_V1_DIR):
        parsed = parse_v1_file_name(name)
        if parsed is None:
            continue
        requested, action, state = parsed
        completion = completions.get((requested, action))
        target = _v2_name(requested, action, state, completion)
        data = storage.read_bytes(f"{LAYOUT_V1_DIR}/{name}")
        storage.write_atomic(f"{TIMELINE_DIR}/{target}", _v2_content(action, state, data, name))
    if props.get("hoodie.table.type") == "MERGE_ON_READ":
        # Its logs keep their version 6 names: readers look their writers up (fsview/legacy_logs.py).
        storage.write_atomic(LEGACY_LOGS_MARKER, b"log files named after their base instant (table version 6)\n")
    # 3. The archived timeline, into the LSM history (replaced whole on a rerun).
    archived = read_v1_archive(storage)
    if archived and not _history_has(storage, archived):
        history.append(storage, archived, batch=archive_batch)
    # 4. The switch: hoodie.properties says version 8, atomically.
    storage.write_atomic(PROPERTIES_PATH, format_properties(upgraded_properties(props)).encode())
    # 5. Leftovers: the marker and the old instant files.
    _finish(storage)
    return UpgradeResult(int(version), TABLE_VERSION, len(instants), len(archived), resumed)


def _v2_name(requested: str, action: Action, state: State, completion: str | None) -> str:
    if state is State.COMPLETED:
        return instant_file_name(requested, action, state, completion)
    return instant_file_name(requested, PENDING_RENAMES.get(action, action), state)


def _v2_content(action: Action, state: State, data: bytes, source: str) -> bytes:
    # Hudi's upgrade re-encodes commit and deltacommit files (JSON in v6, Avro in v8) and a
    # completed replacecommit's; every other file (Avro already, or empty) moves as it is.
    if not data.strip() or action not in _COMMIT_ACTIONS:
        return data
    if action is Action.REPLACE_COMMIT and state is not State.COMPLETED:
        return data
    if data.lstrip()[:1] != b"{":
        return data  # already Avro
    return CommitMetadata.from_bytes(data, source=f"{LAYOUT_V1_DIR}/{source}").to_bytes()


def _history_has(storage: Storage, records: list[history.ArchivedRecord]) -> bool:
    # A rerun after a crash that came after step 3 must not archive the same instants twice.
    if not history.has_history(storage):
        return False
    known = {(i.requested_time, i.action) for i in history.ArchivedTimeline.load(storage).instants}
    return all((r.instant.requested_time, r.instant.action) in known for r in records)


def _finish(storage: Storage) -> bool:
    """Remove what a completed switch leaves behind. True if there was anything."""
    props = load_properties(storage.read_bytes) or {}
    if props.get("hoodie.table.initial.version", str(TABLE_VERSION)) == str(TABLE_VERSION):
        return False  # born version 8: .hoodie/ holds no layout 1 instants to remove
    found = False
    for name in storage.list_names(LAYOUT_V1_DIR):
        if parse_v1_file_name(name) is not None:
            storage.delete(f"{LAYOUT_V1_DIR}/{name}")
            found = True
    if not props.get("hoodie.table.metadata.partitions") and storage.exists(METADATA_DIR):
        # A version 6 metadata table is not upgraded in place: Hudi's upgrade deletes one that is
        # behind, and its next writer rebuilds it. The switch already dropped its partitions.
        storage.delete_tree(METADATA_DIR)
        found = True
    if storage.exists(UPGRADE_MARKER):
        storage.delete(UPGRADE_MARKER)
        found = True
    return found


def upgraded_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The version 8 ``hoodie.properties`` of a version 6 table (what Hudi's upgrade writes)."""
    out = dict(props)
    mode, payload = merge_settings_v6(props)
    out.update(
        {
            "hoodie.table.version": str(TABLE_VERSION),
            "hoodie.table.initial.version": props.get("hoodie.table.version") or "6",
            "hoodie.timeline.layout.version": "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.record.merge.mode": mode,
        }
    )
    if mode == "CUSTOM":
        out["hoodie.record.merge.strategy.id"] = "00000000-0000-0000-0000-000000000000"  # payload based
    else:
        out["hoodie.record.merge.strategy.id"] = MERGE_STRATEGY_IDS[mode]
    if payload:
        out[PAYLOAD_KEY] = payload
    keygen = KEYGEN_TYPES.get(props.get("hoodie.table.keygenerator.class") or "")
    if keygen:
        out["hoodie.table.keygenerator.type"] = keygen
    ordering = props.get("hoodie.table.precombine.field")
    if ordering and "hoodie.table.ordering.fields" not in out and ALL_ORDERING_FIELDS not in out:
        out["hoodie.table.ordering.fields"] = ordering
    out.pop("hoodie.archivelog.folder", None)  # layout 1's archive folder; v8 has the history path
    # The version 6 metadata table is deleted, not upgraded (see _finish): none is listed any more.
    for key in ("hoodie.table.metadata.partitions", "hoodie.table.metadata.partitions.inflight"):
        out.pop(key, None)
    return out
