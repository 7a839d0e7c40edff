"""The archived timeline of a version 6 table: ``.hoodie/archived/.commits_.archive.<n>_<token>``.

Hudi 0.x archives instants into log files (the format of merge-on-read logs) whose Avro
data blocks hold ``HoodieArchivedMetaEntry`` records: ``commitTime``, ``actionType``,
``actionState``, ``stateTransitionTime`` (when the state was reached: the completion
time of a completed instant) and the instant's metadata in the field its action names
(``hoodieCommitMetadata`` for commits and deltacommits, ``hoodieCleanMetadata``, ...).
Commit metadata there is an Avro record or, from older writers, JSON text. Each block
carries its writer schema in its header, so no schema is assumed here.

:func:`read_v1_archive` turns the completed entries into the history records of version 8
(:class:`~tidemark.timeline.history.ArchivedRecord`, Avro commit metadata), which the
upgrade appends to the LSM history, as Hudi's upgrade does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tidemark.errors import CorruptTableError
from tidemark.format.commit_metadata import CommitMetadata, write_avro
from tidemark.format.log_file import BlockType, decode_avro_records, decode_blocks
from tidemark.storage import Storage
from tidemark.timeline.history import ArchivedRecord
from tidemark.timeline.instant import Action, Instant, State
from tidemark.timeline.layout_v1 import ARCHIVED_DIR

_ARCHIVE_RE = re.compile(r"^\.commits_\.archive\.(\d+)")

# The entry field holding each action's metadata, and the Avro kind tidemark writes it as.
_METADATA_FIELD: dict[Action, tuple[str, str | None]] = {
    Action.COMMIT: ("hoodieCommitMetadata", None),
    Action.DELTA_COMMIT: ("hoodieCommitMetadata", None),
    Action.REPLACE_COMMIT: ("hoodieReplaceCommitMetadata", None),
    Action.CLEAN: ("hoodieCleanMetadata", "clean"),
    Action.ROLLBACK: ("hoodieRollbackMetadata", "rollback"),
    Action.SAVEPOINT: ("hoodieSavePointMetadata", "savepoint"),
    Action.RESTORE: ("hoodieRestoreMetadata", "restore"),
}
_ACTIONS = {a.value: a for a in Action}


def archive_files(storage: Storage) -> list[str]:
    """The archive log files, oldest first (by their number)."""
    found = []
    for name in storage.list_names(ARCHIVED_DIR):
        m = _ARCHIVE_RE.match(name)
        if m:
            found.append((int(m.group(1)), name))
    return [f"{ARCHIVED_DIR}/{name}" for _, name in sorted(found)]


def _commit_bytes(value: Any, *, replace: bool, source: str) -> bytes:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    meta = CommitMetadata.from_bytes(text.encode("utf-8"), source=source)
    if replace and not meta.is_replace:
        meta = CommitMetadata(meta.operation, meta.write_stats, meta.extra, meta.replaced_file_ids, True,
                              meta.compacted)
    return meta.to_bytes()


def _metadata_bytes(action: Action, entry: Mapping[str, Any], source: str) -> bytes:
    field_name, kind = _METADATA_FIELD.get(action, ("", None))
    value = entry.get(field_name) if field_name else None
    if value is None:
        return b""
    if kind is None:
        return _commit_bytes(value, replace=action is Action.REPLACE_COMMIT, source=source)
    try:
        return write_avro(kind, value)
    except Exception:  # noqa: BLE001 - fastavro raises many types; a schema drift loses only the detail
        # The v6 record does not fit the v8 schema tidemark writes: keep the instant, without detail
        # (tidemark reads clean/rollback/savepoint metadata of archived instants nowhere).
        return b""


def read_v1_archive(storage: Storage) -> list[ArchivedRecord]:
    """Completed instants of the version 6 archive, as version 8 history records, by time."""
    out: dict[tuple[str, Action], ArchivedRecord] = {}
    for path in archive_files(storage):
        for block in decode_blocks(storage.read_bytes(path)):
            schema = block.schema_json
            if block.block_type != BlockType.AVRO_DATA or not schema:
                continue
            try:
                entries = decode_avro_records(block.content, schema)
            except Exception as exc:  # fastavro raises many types
                raise CorruptTableError(f"{path} is not a readable Hudi archive log ({exc}); restore it from a "
                                        "backup or remove it to upgrade without that history", path=path) from None
            for entry in entries:
                action = _ACTIONS.get(str(entry.get("actionType") or ""))
                state = str(entry.get("actionState") or "COMPLETED").upper()
                requested = str(entry.get("commitTime") or "")
                if action is None or state != "COMPLETED" or not requested:
                    continue
                completion = str(entry.get("stateTransitionTime") or requested)
                instant = Instant(requested, action, State.COMPLETED, max(completion, requested))
                out[(requested, action)] = ArchivedRecord(instant, _metadata_bytes(action, entry, path), None)
    return [out[k] for k in sorted(out)]
