"""A commit's metadata deltacommit, written before the table lock and completed under it.

A write's deltacommit on the metadata timeline has the write's own requested time, and its
log file is named by that time (v8 names a log file by its deltacommit); what it records
(the files the write added) is known once the files are written. Only its completion time
must be decided under the lock. So, as Hudi 1.x's streaming metadata writes start the
metadata table's deltacommit with the data instant's time and write its log files before
the commit, :func:`stage_deltacommit` writes, before the lock:

* ``<t>.deltacommit.requested`` and ``<t>.deltacommit.inflight`` on the metadata timeline,
* the log file ``.files-0000-0_<t>.log.1_0-0-0`` (one HFile data block),
* the completed instant's bytes, staged under a hidden name (:mod:`tidemark.storage.staged`),

and :func:`publish_deltacommit`, under the lock (after the guard kept the metadata table),
lists the metadata timeline once, checks that the pending deltacommit is still there, and
names the completed file with one ``link``: the metadata table's completion time is above
every time on its timeline, as :func:`~tidemark.metadata.files_writer.record_instant` takes it.

What can change while the writer waits for the lock, and what then happens:

* another writer compacted the ``files`` partition: nothing to redo. The log file belongs
  to whichever slice its completion time places it in, which is after the compaction's
  time (readers slice by completion time); the compaction folded only completed log files.
* the metadata table was removed (a guard found it out of sync, or hoodie.metadata.enable
  =false), perhaps created again: the pending files are gone with it; the commit then
  records as before, everything under the lock (:func:`~tidemark.metadata.maintain.record_if_maintained`),
  which finds no metadata table or records into the new one.
* the write was rolled back by another writer (its heartbeat expired): the commit refuses
  to publish; :func:`withdraw` removes what it staged.

A crash after staging leaves a pending deltacommit: readers ignore it (Hudi and hudi-rs read
only blocks of completed instants), and the rollback of the failed write (by the next writer,
as for its data files) withdraws it (:mod:`tidemark.recovery.rollback`); if the write had
been rolled back already (by another writer, before this one staged), the next compaction of
the files partition withdraws it (:mod:`tidemark.metadata.timeline_service`). The hidden
staged file names no instant.

Whether the partition is due for compaction is decided from the slice counted before the
lock, plus this deltacommit's log: a count that missed other writers' logs added meanwhile
only puts the compaction off to a later commit, and a compaction that is due is checked
again in full under the lock (:func:`~tidemark.metadata.compact.compact_files_partition`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tidemark.errors import UnsupportedTableError
from tidemark.format.commit_metadata import WriteStat
from tidemark.metadata.compact import compact_files_partition
from tidemark.metadata.disable import METADATA_DIR
from tidemark.metadata.files import latest_slice
from tidemark.metadata.files_writer import (
    TIMELINE,
    DeltacommitFiles,
    completed_deltacommit,
    deltacommit_files,
    latest_time,
    withdraw,
    write_pending,
)
from tidemark.metadata.maintain import FILES_PARTITION, changes_of, maintained, record_if_maintained
from tidemark.metadata.timeline_service import clean_and_archive
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.staged import StagedFile, stage
from tidemark.timeline import Action, State, instant_file_name, new_instant_time
from tidemark.timeline.instant import parse_instant_file_name


@dataclass
class StagedDeltacommit:
    """A pending metadata deltacommit whose completed file waits for its name."""

    files: DeltacommitFiles
    completed: StagedFile
    logs_in_slice: int  # completed log files of the latest slice when staged
    published: str | None = None  # the completion time, once published


def stage_deltacommit(storage: Storage, instant_time: str, stats: Sequence[WriteStat],
                      deleted: Iterable[str] = ()) -> StagedDeltacommit | None:
    """Before the lock: write the pending deltacommit ``instant_time`` recording ``stats``
    (and the ``deleted`` files) and stage its completed file. None when the table has no
    metadata table tidemark keeps (or one it cannot record into: the guard under the lock
    decides about it, and the commit records as before)."""
    if FILES_PARTITION not in storage.list_subdirs(METADATA_DIR) or not maintained(storage):
        return None
    names = storage.list_names(TIMELINE)
    if completed_deltacommit(names, instant_time) is not None:
        return None
    try:
        files = deltacommit_files(storage, instant_time, changes_of(stats, deleted))
    except UnsupportedTableError:
        return None
    write_pending(storage, files)
    completed = {}
    for name in names:
        instant = parse_instant_file_name(name)
        if instant is not None and instant.state is State.COMPLETED and instant.completion_time:
            completed[instant.requested_time] = instant.completion_time
    file_slice = latest_slice(storage, completed)
    return StagedDeltacommit(files, stage(storage, TIMELINE, files.completed),
                             len(file_slice.log_names) if file_slice is not None else 0)


def publish_deltacommit(storage: Storage, staged: StagedDeltacommit | None, instant_time: str,
                        stats: Sequence[WriteStat], *, compact_after: int | None) -> str | None:
    """Under the lock, after the guard, right before the data instant ``instant_time`` is
    published: complete its metadata deltacommit (the staged one if it is still pending, else
    recorded in full), then compact the files partition if due. Returns the completion time
    (None: no metadata table kept)."""
    if staged is None:
        return record_if_maintained(storage, instant_time, stats, compact_after=compact_after)
    names = storage.list_names(TIMELINE)
    present = set(names)
    if not all(n in present for n in staged.files.pending_names) or not storage.exists(staged.files.log_path):
        # Removed (and maybe created again) since it was staged: record under the lock.
        return record_if_maintained(storage, instant_time, stats, compact_after=compact_after)
    done = completed_deltacommit(names, instant_time)
    if done is None:
        done = new_instant_time(floor=latest_time(storage, names))
        name = instant_file_name(instant_time, Action.DELTA_COMMIT, State.COMPLETED, done)
        if staged.completed.publish(f"{TIMELINE}/{name}") is not CreateOutcome.CREATED:
            raise FileExistsError(f"{TIMELINE}/{name} exists already")
    staged.published = done
    if (compact_after is not None and staged.logs_in_slice + 1 >= compact_after
            and compact_files_partition(storage, after=compact_after) is not None):
        clean_and_archive(storage)
    return done


def discard(storage: Storage, staged: StagedDeltacommit | None) -> None:
    """After the commit (published or not): drop the hidden staged file; withdraw the pending
    deltacommit if it was not published."""
    if staged is None:
        return
    staged.completed.discard()
    if staged.published is None:
        withdraw(storage, staged.files.instant_time)
