"""Keeping the metadata table bounded: clean old file slices, archive its timeline.

Every recorded data instant adds a log file to the ``files`` partition and three files to
the metadata timeline. As Hudi's metadata writer runs its table's cleaner and archiver
after a compaction, tidemark does, right after :func:`~tidemark.metadata.compact.compact_files_partition`
completed one (under the table lock):

* **clean**: keep the latest two file slices (the new one, and the one before it for readers
  that listed before the compaction completed); delete older base files and the log files
  whose instants completed before the previous slice's base instant was requested (they
  belong to older slices). Log files of pending or unknown instants are left alone.
* **archive**: move the metadata timeline's oldest completed instants into its own LSM
  history (``.hoodie/metadata/.hoodie/timeline/history``, the same layout as the data
  table's, :mod:`tidemark.timeline.history`): a prefix of the timeline, stopping at the first
  pending instant, at the previous slice's base instant (readers place base and log files
  by their instants' completion times, read from the active timeline, and skip files whose
  instant is not on it: every file still kept must keep its instant), and at the data
  table's earliest active instant (the metadata timeline stays behind the data table's, as
  Hudi keeps it, so every data instant still active keeps its metadata deltacommit, which
  :func:`tidemark.metadata.maintain.in_sync` checks). Oldest first, each instant's completed
  file last, as the data table's archival does.

So the metadata timeline holds about two compactions' worth of deltacommits plus whatever
the data table's active timeline still holds (hoodie.keep.max.commits), and the files
partition about two slices, however many commits the table has seen.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemark.format.log_file import parse_log_file_name
from tidemark.metadata.create import BOOTSTRAP_INSTANT
from tidemark.metadata.disable import METADATA_DIR
from tidemark.metadata.files import FILES_DIR, HFILE_NAME_RE
from tidemark.metadata.files_writer import withdraw
from tidemark.storage import Storage
from tidemark.storage.location import StorageLocation, storage_of
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name
from tidemark.timeline.history import ArchivedRecord, append
from tidemark.timeline.instant import parse_instant_file_name

_TIMELINE = f"{METADATA_DIR}/.hoodie/timeline"
_KEEP_SLICES = 2
_HISTORY_BATCH = 10  # level-0 history files merged at once (hoodie.timeline.compaction.batch.size)
# A compaction is pending as a compaction and completes as a commit (Hudi 1.x).
_PENDING_AS = {Action.COMMIT: (Action.COMMIT, Action.COMPACTION)}


@dataclass(frozen=True)
class MetadataUpkeep:
    """What one run deleted from the files partition and archived from the metadata timeline."""

    deleted_files: tuple[str, ...] = ()
    archived: tuple[Instant, ...] = ()


def _instants(storage: Storage) -> list[Instant]:
    found = {}
    for name in storage.list_names(_TIMELINE):
        inst = parse_instant_file_name(name)
        if inst is None:
            continue
        key = (inst.requested_time, inst.action)
        if inst.state is State.COMPLETED or key not in found:
            found[key] = inst
    return sorted(found.values(), key=lambda i: (i.requested_time, i.action.value))


def _clean(storage: Storage, completed: dict[str, str]) -> tuple[str | None, list[str]]:
    """Delete the slices before the previous one; returns (the previous slice's base instant, deleted)."""
    names = storage.list_names(FILES_DIR)
    bases = sorted((m.group("instant"), n) for n in names if (m := HFILE_NAME_RE.match(n))
                   and m.group("instant") in completed)
    if len(bases) < _KEEP_SLICES:
        return None, []
    keep_from = bases[-_KEEP_SLICES][0]
    doomed = [n for t, n in bases if t < keep_from]
    for name in names:
        parsed = parse_log_file_name(name)
        if parsed is not None and parsed.instant_time in completed and completed[parsed.instant_time] < keep_from:
            doomed.append(name)
    for name in doomed:
        storage.delete(f"{FILES_DIR}/{name}")
    return keep_from, sorted(doomed)


def _to_archive(instants: list[Instant], keep_from: str, data_first_active: str | None) -> list[Instant]:
    prefix: list[Instant] = []
    for inst in instants:
        if inst.state is not State.COMPLETED or inst.requested_time >= keep_from:
            break
        if data_first_active is not None and inst.requested_time >= data_first_active:
            break
        if (inst.completion_time or "") >= keep_from:  # its log may still be in a kept slice
            break
        prefix.append(inst)
    return prefix


def _read(storage: Storage, path: str) -> bytes | None:
    try:
        return storage.read_bytes(path) or None
    except FileNotFoundError:
        return None


def _withdraw_orphans(storage: Storage, instants: list[Instant]) -> bool:
    """Withdraw pending deltacommits whose data instant is gone from the data timeline.

    A writer stages its deltacommit before the lock (:mod:`tidemark.metadata.staged_deltacommit`).
    If its write was rolled back by another writer (an expired heartbeat) and the process then
    died before withdrawing, nothing else would remove the pending deltacommit, and archival
    stops at the first pending instant. The metadata timeline is listed before the data
    timeline: a data instant is requested before its deltacommit is staged and never comes back
    once rolled back, so one absent from the later listing cannot complete. The bootstrap's
    instants (``00000000000000000...``, written under the lock) are not data instants.
    """
    pending = {i.requested_time for i in instants
               if i.action is Action.DELTA_COMMIT and i.state is not State.COMPLETED
               and not i.requested_time.startswith(BOOTSTRAP_INSTANT)}
    if not pending:
        return False
    on_data_timeline = {i.requested_time for i in Timeline.load(storage)}
    return any([withdraw(storage, t) for t in sorted(pending - on_data_timeline)])


def clean_and_archive(storage: Storage) -> MetadataUpkeep:
    """Clean the files partition's old slices and archive the metadata timeline's old instants
    (see the module notes). Call under the table lock, after a compaction of the partition."""
    instants = _instants(storage)
    if _withdraw_orphans(storage, instants):
        instants = _instants(storage)
    completed = {i.requested_time: i.completion_time or "" for i in instants if i.state is State.COMPLETED}
    keep_from, deleted = _clean(storage, completed)
    if keep_from is None:
        return MetadataUpkeep()
    data_first_active = min((i.requested_time for i in Timeline.load(storage)), default=None)
    chosen = _to_archive(instants, keep_from, data_first_active)
    if not chosen:
        return MetadataUpkeep(tuple(deleted))
    mdt = storage_of(StorageLocation(storage.full_path(METADATA_DIR), dict(storage.options)))
    records = []
    for inst in chosen:
        metadata = _read(storage, f"{_TIMELINE}/{inst.file_name}") or b""
        plan = None
        for action in _PENDING_AS.get(inst.action, (inst.action,)):
            requested = instant_file_name(inst.requested_time, action, State.REQUESTED)
            plan = plan or _read(storage, f"{_TIMELINE}/{requested}")
        records.append(ArchivedRecord(inst, metadata, plan))
    append(mdt, records, batch=_HISTORY_BATCH)
    for inst in chosen:  # oldest first; within one instant, its completed file last
        for state in (State.REQUESTED, State.INFLIGHT):
            for action in _PENDING_AS.get(inst.action, (inst.action,)):
                storage.delete(f"{_TIMELINE}/{instant_file_name(inst.requested_time, action, state)}")
        storage.delete(f"{_TIMELINE}/{inst.file_name}")
    return MetadataUpkeep(tuple(deleted), tuple(chosen))
