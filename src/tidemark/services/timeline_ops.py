"""The table services that are one step under the table lock: rolling back an instant,
archiving the timeline, creating and deleting savepoints, restoring to a savepoint.

Each runs through :func:`tidemark.services.runner.run_locked`; those that change what is
on the timeline first finish what a crash interrupted (rollbacks, cleans, restores), as
every write does.
"""

from __future__ import annotations

from tidemark.concurrency.heartbeat import last_heartbeat_ms, now_ms
from tidemark.config.resolve import ArchiveConfig
from tidemark.errors import WriterAliveError
from tidemark.recovery.rollback import RollbackResult, find_instant, rollback
from tidemark.recovery.savepoint import RestoreResult, SavepointResult, create_savepoint, delete_savepoint, restore
from tidemark.services.archive import ArchiveResult, archive
from tidemark.services.runner import run_locked
from tidemark.timeline import Instant, Timeline
from tidemark.write.commit import CommitProtocol


def rollback_instant(protocol: CommitProtocol, instant_time: str, *, force: bool) -> RollbackResult:
    """Roll back ``instant_time`` (see ``Table.rollback``); WriterAliveError for a live pending
    write unless ``force``."""
    storage = protocol.storage

    def step() -> RollbackResult:
        for finished in protocol.finish_interrupted(Timeline.load(storage)):
            if finished.rolled_back.requested_time == instant_time:  # its own rollback, interrupted (a full disk)
                return finished
        timeline = Timeline.load(storage)
        instant = find_instant(timeline, instant_time)
        if not instant.is_completed and not force and protocol.writer_alive(instant):
            beat = last_heartbeat_ms(storage, instant.requested_time) or now_ms()
            raise WriterAliveError(instant.requested_time, now_ms() - beat)
        return rollback(storage, instant, timeline=timeline)

    return run_locked(protocol.lock, "roll back an instant", step)  # no lock in single-writer mode


def archive_timeline(protocol: CommitProtocol, config: ArchiveConfig) -> ArchiveResult:
    storage = protocol.storage

    def step() -> ArchiveResult:
        timeline = Timeline.load(storage)
        if protocol.finish_interrupted(timeline):  # a crash's leftovers would hold archival back
            timeline = timeline.reload()
        return archive(storage, timeline, config)

    return run_locked(protocol.lock, "archive the timeline", step)


def savepoint(protocol: CommitProtocol, instant_time: str, *, comment: str) -> SavepointResult:
    storage = protocol.storage
    return run_locked(
        protocol.lock, "create a savepoint",
        lambda: create_savepoint(storage, Timeline.load(storage), instant_time, comment=comment),
    )


def remove_savepoint(protocol: CommitProtocol, instant_time: str) -> Instant:
    storage = protocol.storage
    return run_locked(
        protocol.lock, "delete a savepoint", lambda: delete_savepoint(storage, Timeline.load(storage), instant_time)
    )


def restore_to(protocol: CommitProtocol, instant_time: str) -> RestoreResult:
    storage = protocol.storage

    def step() -> RestoreResult:
        protocol.finish_interrupted(Timeline.load(storage))
        return restore(storage, Timeline.load(storage), instant_time)

    return run_locked(protocol.lock, "restore to a savepoint", step)
