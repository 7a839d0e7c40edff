"""Keeping a metadata table's ``files`` partition true instead of removing the table.

tidemark maintains the ``files`` partition and nothing else. Before a change to a table that
has a metadata table, :func:`keep_or_drop` (under the table lock) decides:

* keep it when ``files`` is among ``hoodie.table.metadata.partitions``, its file group is the
  one tidemark can record into, and the metadata timeline is in sync with the data timeline
  (:func:`in_sync`). The partitions tidemark does not maintain (``column_stats``,
  ``record_index``, ``partition_stats``, secondary indexes, ...) are then dropped as Hudi drops
  a disabled one: ``hoodie.table.metadata.partitions`` becomes ``files`` (and the inflight
  list empty) first, their folders are deleted after, so no reader trusts a half-deleted one;
* otherwise remove the whole metadata table (:func:`~tidemark.metadata.disable.drop_metadata_table`).

Each action that publishes a data-table instant tidemark covers (a write's commit or
deltacommit, the instant that creates file groups, compaction, clustering) calls
:func:`record_if_maintained` under the lock, after its conflict checks and right before it
publishes: the metadata deltacommit of the same time completes first, as Hudi orders it (a
write's commit writes it before the lock and only completes it under the lock:
:mod:`tidemark.metadata.staged_deltacommit`). A crash between the two leaves a completed
metadata deltacommit whose data instant is not completed; readers ignore its files (hudi-rs
takes file slices only of completed data instants; tests/test_metadata_table.py checks it),
and the next writer finds the tables out of sync and removes the metadata table. A clean
records under the lock as it completes (:func:`tidemark.recovery.clean.execute_clean`); a
rollback (of a pending or a completed instant, alone
or in a restore) and a restore record the files they delete under their own instant times
(:mod:`tidemark.metadata.undone`).
After a compaction of the files partition its old slices are cleaned and its timeline
archived (:mod:`tidemark.metadata.timeline_service`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from typing import Any

from tidemark.concurrency.writer_settings import properties_mutex, read_properties
from tidemark.errors import UnsupportedTableError
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.properties import PROPERTIES_PATH, format_properties
from tidemark.metadata.compact import compact_files_partition
from tidemark.metadata.disable import INFLIGHT_PARTITIONS_KEY, METADATA_DIR, PARTITIONS_KEY, drop_metadata_table
from tidemark.metadata.files import FILES_DIR
from tidemark.metadata.files_writer import TIMELINE, PartitionChange, files_group, record_instant
from tidemark.metadata.sync_state import BOOTSTRAP_PREFIX, MIRRORED, forget, known_in_sync, remember_in_sync, sync_key
from tidemark.metadata.timeline_service import clean_and_archive
from tidemark.metadata.undone import undone_times
from tidemark.storage import Storage
from tidemark.timeline import Action, State, Timeline
from tidemark.timeline.instant import parse_instant_file_name

FILES_PARTITION = "files"
_MIRRORED = MIRRORED
_BOOTSTRAP_PREFIX = BOOTSTRAP_PREFIX


def _partitions(props: dict[str, str], key: str = PARTITIONS_KEY) -> list[str]:
    return [p.strip() for p in (props.get(key) or "").split(",") if p.strip()]


def maintained(storage: Storage) -> bool:
    """Whether the table's metadata table is one tidemark keeps: only ``files`` declared."""
    return _declares_only_files(read_properties(storage))


def _metadata_instants(storage: Storage) -> tuple[dict[str, str], set[str], str | None]:
    """(completed deltacommits: requested -> completion time, pending deltacommit times, the
    earliest completion time of any completed metadata instant)."""
    completed: dict[str, str] = {}
    pending: set[str] = set()
    earliest: str | None = None
    for name in storage.list_names(TIMELINE):
        instant = parse_instant_file_name(name)
        if instant is None:
            continue
        if instant.state is State.COMPLETED and instant.completion_time:
            earliest = min(filter(None, [earliest, instant.completion_time]))
            if instant.action is Action.DELTA_COMMIT:
                completed[instant.requested_time] = instant.completion_time
        elif instant.action is Action.DELTA_COMMIT:
            pending.add(instant.requested_time)
    return completed, pending - set(completed), earliest


def metadata_recorded(storage: Storage, instant_time: str) -> bool:
    """Whether the metadata table has a completed deltacommit for the data instant ``instant_time``
    (so it lists that instant's files)."""
    if FILES_PARTITION not in storage.list_subdirs(METADATA_DIR):
        return False
    return instant_time in _metadata_instants(storage)[0]


def in_sync(storage: Storage, timeline: Timeline) -> str | None:
    """Why the metadata table cannot be kept (None: it can).

    In sync means: the ``files`` partition has the one file group tidemark records into; every
    data instant of a mirrored action that completed after the metadata table's earliest
    completed instant has its completed deltacommit; no metadata deltacommit completed for a
    data instant (still on the active timeline's span) that did not complete (a crash between
    the two), a pending clean and the instants a rollback or restore undid or is undoing
    excepted (they record their deletions under their own times).
    """
    if FILES_PARTITION not in storage.list_subdirs(METADATA_DIR):
        return "it has no files partition folder"
    try:
        files_group(storage)
    except UnsupportedTableError as problem:
        return str(problem)
    completed, _pending, earliest = _metadata_instants(storage)
    behind = behind_data_timeline(timeline, completed, earliest)
    if behind is not None:
        return behind
    first_active = min((i.requested_time for i in timeline), default=None)
    # A clean records its deletions after deleting and before it completes, outside the lock:
    # its deltacommit may complete first, listing as deleted only files already gone.
    cleaning = {i.requested_time for i in timeline.filter(actions=[Action.CLEAN], states=[State.REQUESTED,
                                                                                           State.INFLIGHT])}
    undone: set[str] | None = None  # read only if needed: it opens the rollbacks' metadata
    for t in completed:
        if t.startswith(_BOOTSTRAP_PREFIX) or first_active is None or t < first_active or t in cleaning:
            continue
        if not timeline.is_completed(t):
            undone = undone_times(storage, timeline) if undone is None else undone
            if t not in undone:
                return f"metadata deltacommit {t} completed but data instant {t} did not"
    return None


def behind_data_timeline(timeline: Timeline, completed: dict[str, str], earliest: str | None) -> str | None:
    """Why the metadata table's listing may lack files of completed data instants (None: it
    does not). ``completed``: its completed deltacommits (requested -> completion time);
    ``earliest``: the earliest completion time of any of its completed instants. Behind
    means: no completed instant at all, or a data instant of a mirrored action that completed
    after the metadata table's first instant without its deltacommit (the comparison of the
    metadata table's completed instants with the data timeline Hudi makes too). A pending
    rollback or restore does not make it behind for keeping (finishing one records its
    deletions); a reader must not trust its listing meanwhile (:mod:`tidemark.metadata.listing`).
    """
    if earliest is None:
        return "its timeline has no completed instant"
    for inst in timeline.completed:
        after = (inst.completion_time or "") > earliest
        if inst.action in _MIRRORED and after and inst.requested_time not in completed:
            return f"data instant {inst.requested_time} ({inst.action.value}) has no completed metadata deltacommit"
    return None


def _declares_only_files(props: dict[str, str]) -> bool:
    return _partitions(props) == [FILES_PARTITION] and not _partitions(props, INFLIGHT_PARTITIONS_KEY)


def drop_unmaintained_partitions(storage: Storage, props: dict[str, str] | None = None,
                                 subdirs: Sequence[str] | None = None) -> list[str]:
    """Declare only ``files`` (properties first, under their mutex), then delete the folders of
    the other partitions. Idempotent; returns the partition folders deleted. ``props`` and
    ``subdirs`` (the metadata table's folders): as just read by the caller, if it did; when
    they show nothing to change, nothing is locked or written."""
    if props is None or not _declares_only_files(props):
        with properties_mutex(storage):
            props = read_properties(storage)
            if not _declares_only_files(props):
                props[PARTITIONS_KEY] = FILES_PARTITION
                props[INFLIGHT_PARTITIONS_KEY] = ""
                storage.write_atomic(PROPERTIES_PATH, format_properties(props).encode())
    subdirs = storage.list_subdirs(METADATA_DIR) if subdirs is None else subdirs
    gone = [d for d in subdirs if d not in (FILES_PARTITION, ".hoodie")]
    for name in gone:
        storage.delete_tree(f"{METADATA_DIR}/{name}")
    return gone


def keep_or_drop(storage: Storage, *, enabled: bool, timeline: Timeline | None = None) -> tuple[bool, str]:
    """Under the table lock, before a change: keep the metadata table (its ``files`` partition
    only) or remove it. Returns (kept, why) — ``why`` says what was done, "" if nothing.
    ``timeline``: the data timeline, if the caller loaded it under this lock already."""
    props = read_properties(storage)
    if FILES_PARTITION not in _partitions(props):
        dropped = drop_metadata_table(storage)
        return False, "removed: no files partition declared" if dropped else ""
    if not enabled:
        drop_metadata_table(storage)
        return False, "removed: hoodie.metadata.enable=false"
    subdirs = storage.list_subdirs(METADATA_DIR)
    timeline = Timeline.load(storage) if timeline is None else timeline
    key = sync_key(storage, props, subdirs, timeline)
    if not known_in_sync(storage, key, timeline):  # worked out again only when something it reads changed
        problem = in_sync(storage, timeline)
        if problem is not None:
            forget(storage)
            drop_metadata_table(storage)
            return False, f"removed: {problem}"
        remember_in_sync(storage, key)
    gone = drop_unmaintained_partitions(storage, props, subdirs)
    return True, f"kept the files partition, dropped {', '.join(sorted(gone))}" if gone else ""


def changes_of(stats: Sequence[WriteStat], deleted: Iterable[str] = ()) -> dict[str, PartitionChange]:
    """The files partition's change for an instant that wrote ``stats`` and deleted the files
    ``deleted`` (paths relative to the table)."""
    added: dict[str, dict[str, int]] = {}
    for stat in stats:
        added.setdefault(stat.partition_path, {})[stat.path.rsplit("/", 1)[-1]] = stat.file_size
    removed: dict[str, list[str]] = {}
    for path in deleted:
        partition, _, name = path.rpartition("/")
        removed.setdefault(partition, []).append(name)
    return {p: PartitionChange(added.get(p, {}), tuple(removed.get(p, ()))) for p in sorted({*added, *removed})}


def record_if_maintained(storage: Storage, instant_time: str, stats: Sequence[WriteStat],
                         deleted: Iterable[str] = (), *, compact_after: int | None = None) -> str | None:
    """Under the lock, right before the data instant ``instant_time`` is published: record its
    files in the ``files`` partition if the table has a metadata table tidemark keeps. With
    ``compact_after`` (the writer's hoodie.metadata.compact.max.delta.commits; None for a
    cleaner and for rollbacks), compact the partition once
    its latest slice has that many log files, then clean its old slices and archive its
    timeline. Returns the metadata deltacommit's completion time (None: no metadata table kept)."""
    if FILES_PARTITION not in storage.list_subdirs(METADATA_DIR) or not maintained(storage):
        return None
    completion = record_instant(storage, instant_time, changes_of(stats, deleted))
    if compact_after is not None and compact_files_partition(storage, after=compact_after) is not None:
        clean_and_archive(storage)
    return completion


__all__ = ["FILES_DIR", "behind_data_timeline", "changes_of", "drop_unmaintained_partitions", "in_sync",
           "keep_or_drop", "maintained", "record_if_maintained"]


def _kept_as_is(storage: Storage, *, enabled: bool) -> bool:
    """Whether :func:`keep_or_drop` would change nothing now (read only, no lock)."""
    props = read_properties(storage)
    if not enabled or not _declares_only_files(props):
        return False
    subdirs = storage.list_subdirs(METADATA_DIR)
    if set(subdirs) - {FILES_PARTITION, ".hoodie"}:
        return False
    timeline = Timeline.load(storage)
    key = sync_key(storage, props, subdirs, timeline)
    if known_in_sync(storage, key, timeline):
        return True
    if in_sync(storage, timeline) is not None:
        return False
    remember_in_sync(storage, key)
    return True


def guard_before_change(storage: Storage, lock: Any, *, enabled: bool, bootstrap: bool = False,
                        timeline: Timeline | None = None) -> str:
    """Before any change, under the table lock: keep a metadata table's ``files`` partition if
    tidemark can maintain it (the others dropped), else remove the table as Hudi does with
    hoodie.metadata.enable=false (docs/metadata-table.md). Called at every guard, so one a
    Hudi writer recreated or left out of sync meanwhile is caught. Returns why something changed
    ('' when nothing did).

    The lock is taken only when something is to change: a metadata table already as tidemark
    keeps it (only ``files``, in sync) is checked without it, so keeping one costs a write no
    lock round trip of its own (and a single-writer command with a lock it cannot use on this
    storage is not stopped by it). The check runs again under the lock inside every commit.

    ``bootstrap`` (hoodie.metadata.enable=true given explicitly): a table without a metadata
    table gets one when no instant is pending (:mod:`tidemark.metadata.bootstrap`, which logs
    it) — not when the lock is held already: that is a commit's critical section, whose own
    instant is pending. ``timeline``: the data timeline the commit loaded under the lock (used
    only while the lock is held)."""
    from tidemark import metadata

    if not metadata.metadata_table_present(storage):
        if bootstrap and not lock.held:
            from tidemark.metadata.bootstrap import bootstrap_if_possible

            bootstrap_if_possible(storage, lock)
        return ""
    if not lock.held and _kept_as_is(storage, enabled=enabled):
        return ""
    # Inside the commit protocol's critical section the lock is already ours (it is not reentrant).
    with contextlib.nullcontext() if lock.held else lock.hold("keep or remove the metadata table"):
        _kept, why = keep_or_drop(storage, enabled=enabled, timeline=timeline if lock.held else None)
        return why
