"""What a metadata table's "in sync" verdict depends on, so that it is not worked out twice.

:func:`tidemark.metadata.maintain.in_sync` reads the ``files`` partition's base file, parses
the metadata timeline and walks the data timeline. A commit asks it before its lock and
again under it (a Hudi writer may have changed the table in between); usually nothing it
depends on changed, and the second answer is the first. :func:`sync_key` names everything
the verdict reads, from listings the check makes anyway:

* the declared metadata partitions (``hoodie.properties``) and the metadata table's folders;
* the ``files`` partition's base files (an HFile is never rewritten under the same name);
* the metadata timeline's completed instants (its pending deltacommits do not count: the
  commit's own, written between the two checks, would otherwise always differ);
* the data timeline's file names, less the pending writes' (a commit's own pending instant
  is written between the two checks too; pending cleans, rollbacks and restores do count),
  and its earliest instant.

Equal keys, equal verdicts; and a table that only gained instants that keep it in sync stays
in sync (:func:`known_in_sync`), which is how a table looks from one commit to the next. The
verdict is remembered only for a table found in sync, per table path in this process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidemark.metadata.files import FILES_DIR
from tidemark.metadata.files_writer import TIMELINE
from tidemark.storage import Storage
from tidemark.timeline import Action, State, Timeline, instant_file_name
from tidemark.timeline.instant import parse_instant_file_name

# Data-table actions whose completed instants Hudi mirrors with a metadata deltacommit.
MIRRORED = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLEAN, Action.ROLLBACK, Action.RESTORE)
BOOTSTRAP_PREFIX = "0000000000"  # Hudi initialises each partition with deltacommits 00000000000000000, ...1, ...
_COUNTED_WHILE_PENDING = (Action.CLEAN, Action.ROLLBACK, Action.RESTORE)
_IN_SYNC: dict[str, tuple[Any, ...]] = {}  # table path -> the key of the last state found in sync


def sync_key(storage: Storage, props: Mapping[str, str], subdirs: Sequence[str], timeline: Timeline) -> tuple[Any, ...]:
    """The state the in-sync verdict depends on (see the module notes)."""
    files = frozenset(n for n in storage.list_names(FILES_DIR) if n.endswith(".hfile"))
    completed_mdt = frozenset(n for n in storage.list_names(TIMELINE)
                              if not n.startswith(".") and not n.endswith((".requested", ".inflight")))
    names = timeline.file_names if timeline.file_names is not None else {i.file_name for i in timeline}
    # The pending writes' instant files do not count (a commit's own is written between checks).
    skip = {instant_file_name(i.requested_time, i.action, state) for i in timeline.pending
            if i.action not in _COUNTED_WHILE_PENDING for state in (State.REQUESTED, State.INFLIGHT)}
    data = frozenset(n for n in names if not n.startswith(".")) - skip
    first_active = min((i.requested_time for i in timeline), default=None)
    declared = (props.get("hoodie.table.metadata.partitions"), props.get("hoodie.table.metadata.partitions.inflight"))
    return (declared, tuple(sorted(subdirs)), files, completed_mdt, data, first_active)


def known_in_sync(storage: Storage, key: tuple[Any, ...], timeline: Timeline) -> bool:
    """Whether the table (``key``, of ``timeline``) is in sync by what was found before: in
    exactly this state, or in an earlier one from which it only grew by instants that keep it
    in sync (each data instant completed since with its metadata deltacommit, each metadata
    deltacommit completed since with its data instant, or a clean's, which records before it
    completes). Anything else (an instant removed: archival, a rollback; another base file;
    other properties) is worked out again in full."""
    old = _IN_SYNC.get(storage.base_path)
    if old is None:
        return False
    if old == key:
        return True
    if old[:3] != key[:3] or old[5] != key[5] or not (old[3] <= key[3] and old[4] <= key[4]):
        return False
    cleaning = {i.requested_time for i in timeline.pending if i.action is Action.CLEAN}
    for name in key[3] - old[3]:
        instant = parse_instant_file_name(name)
        if (instant is not None and instant.action is Action.DELTA_COMMIT and instant.state is State.COMPLETED
                and not instant.requested_time.startswith(BOOTSTRAP_PREFIX)
                and not timeline.is_completed(instant.requested_time) and instant.requested_time not in cleaning):
            return False
    recorded: set[str] | None = None
    for name in key[4] - old[4]:
        instant = parse_instant_file_name(name)
        if instant is None or instant.state is not State.COMPLETED or instant.action not in MIRRORED:
            continue
        if recorded is None:  # completed deltacommits (the key holds no pending metadata instant)
            recorded = {n.split("_", 1)[0] for n in key[3] if n.endswith(".deltacommit")}
        if instant.requested_time not in recorded:
            return False
    remember_in_sync(storage, key)
    return True


def remember_in_sync(storage: Storage, key: tuple[Any, ...]) -> None:
    _IN_SYNC[storage.base_path] = key


def forget(storage: Storage) -> None:
    _IN_SYNC.pop(storage.base_path, None)
