"""Savepoints and restore.

A savepoint pins the table as of one completed commit: the base files a reader
sees at that instant are listed in the savepoint's metadata, and cleaning never
deletes them, so time travel to the instant keeps working and the table can be
restored to it. Like Hudi, the savepoint instant carries the commit's time::

    <t>.savepoint.inflight         HoodieSavepointMetadata (the files), written first so
                                   a clean executing from now on spares them
    <t>_<done>.savepoint           the same metadata, once no clean that planned before
                                   the savepoint is still deleting

Restore rolls back, newest first, every write after a savepointed instant (under
the table lock), then records it::

    <r>.restore.requested          HoodieRestorePlan: the instants to roll back
    <r>.restore.inflight
    ... one rollback per instant ...
    <r>_<done>.restore             HoodieRestoreMetadata, with each rollback's metadata

A restore left requested or inflight by a crash is finished by the next writer or service
(:func:`finish_pending_restores`); until then every commit fails (it would build on
instants the restore is removing).

Restore refuses an instant that is not savepointed, and one after which instants
were already archived (their files can no longer be listed from the active timeline).
"""

from __future__ import annotations

import getpass
import time
from dataclasses import dataclass
from typing import Any

from tidemark.errors import InstantNotFoundError, NotSavepointedError, TidemarkError
from tidemark.format.commit_metadata import read_avro, write_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.fsview import FileSystemView
from tidemark.metadata.maintain import record_if_maintained
from tidemark.recovery.clean import last_clean_earliest_to_retain
from tidemark.recovery.rollback import RollbackResult, rollback
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time

_WRITES = {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING, Action.COMPACTION}


@dataclass(frozen=True)
class SavepointResult:
    savepoint: Instant
    files: tuple[str, ...]  # the base files pinned, relative to the table


@dataclass(frozen=True)
class RestoreResult:
    restore_instant: Instant
    savepoint_time: str
    rollbacks: tuple[RollbackResult, ...]

    @property
    def rolled_back(self) -> tuple[Instant, ...]:
        return tuple(r.rolled_back for r in self.rollbacks)


def _savepoint_metadata(files: list[str], comment: str) -> bytes:
    by_partition: dict[str, list[str]] = {}
    for path in files:
        partition, _, name = path.rpartition("/")
        by_partition.setdefault(partition, []).append(name)
    record = {
        "savepointedBy": _user(),
        "savepointedAt": int(time.time()),
        "comments": comment,
        "partitionMetadata": {
            p: {"partitionPath": p, "savepointDataFile": sorted(names)} for p, names in by_partition.items()
        },
        "version": 1,
    }
    return write_avro("savepoint", record)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "tidemark"


def savepoints(timeline: Timeline) -> list[Instant]:
    return timeline.filter(actions=[Action.SAVEPOINT], states=[State.COMPLETED])


def create_savepoint(
    storage: Storage, timeline: Timeline, instant_time: str, *, comment: str = "", wait_s: float = 300.0
) -> SavepointResult:
    """Savepoint the completed commit ``instant_time``. Call under the table lock."""
    commit = timeline.completed_instant(instant_time)
    if commit is None or not commit.action.writes_data:
        detail = (
            "it was archived; savepoint an instant on the active timeline"
            if timeline.is_archived(instant_time)
            else "no completed commit has that time"
        )
        raise InstantNotFoundError(instant_time, detail)
    existing = [s for s in savepoints(timeline) if s.requested_time == instant_time]
    if existing:
        return SavepointResult(existing[0], tuple(_files_of(storage, existing[0])))
    retained_from = last_clean_earliest_to_retain(timeline)
    if retained_from is not None and instant_time < retained_from:
        raise TidemarkError(
            f"cannot savepoint {instant_time}: cleaning already deleted file versions before "
            f"{retained_from} (its earliest retained instant); savepoint a later instant"
        )
    view = FileSystemView(storage, timeline, as_of=instant_time)
    files = sorted(b.path for b in view.latest_base_files())
    metadata = _savepoint_metadata(files, comment)
    inflight = f"{TIMELINE_DIR}/{instant_file_name(instant_time, Action.SAVEPOINT, State.INFLIGHT)}"
    storage.write_atomic(inflight, metadata)
    try:
        _wait_for_running_cleans(storage, wait_s)
        missing = [f for f in files if not storage.exists(f)]
        if missing:
            raise TidemarkError(
                f"cannot savepoint {instant_time}: a clean deleted {len(missing)} of its files "
                f"(e.g. {missing[0]}) while the savepoint was taken; savepoint a later instant"
            )
        completion = new_instant_time(floor=Timeline.load(storage).max_time())
        done = instant_file_name(instant_time, Action.SAVEPOINT, State.COMPLETED, completion)
        storage.create_if_absent(f"{TIMELINE_DIR}/{done}", metadata)
    except BaseException:
        storage.delete(inflight)
        raise
    storage.delete(inflight)
    return SavepointResult(Instant(instant_time, Action.SAVEPOINT, State.COMPLETED, completion), tuple(files))


def _wait_for_running_cleans(storage: Storage, wait_s: float) -> None:
    """Wait until the cleans that were executing when the savepoint appeared are done.

    A clean that reaches its inflight state after our inflight savepoint exists reads
    it and spares our files; one already inflight may have read the savepoints before.
    """
    running = {i.requested_time for i in Timeline.load(storage).filter(actions=[Action.CLEAN], states=[State.INFLIGHT])}
    deadline = time.monotonic() + wait_s
    while running:
        still = {i.requested_time for i in Timeline.load(storage).pending if i.action is Action.CLEAN}
        running &= still
        if not running:
            return
        if time.monotonic() > deadline:
            raise TidemarkError(f"clean {min(running)} is still running; try the savepoint again later")
        time.sleep(0.05)


def _files_of(storage: Storage, savepoint: Instant) -> list[str]:
    path = f"{TIMELINE_DIR}/{savepoint.file_name}"
    rec = read_avro(storage.read_bytes(path), source=path)
    out = []
    for meta in (rec.get("partitionMetadata") or {}).values():
        partition = meta.get("partitionPath") or ""
        out += [f"{partition}/{n}" if partition else n for n in meta.get("savepointDataFile") or []]
    return sorted(out)


def delete_savepoint(storage: Storage, timeline: Timeline, instant_time: str) -> Instant:
    """Remove the savepoint of ``instant_time``: its files become cleanable again."""
    found = [s for s in timeline.filter(actions=[Action.SAVEPOINT]) if s.requested_time == instant_time]
    if not found:
        raise NotSavepointedError(instant_time)
    for state in (State.INFLIGHT, State.REQUESTED):
        storage.delete(f"{TIMELINE_DIR}/{instant_file_name(instant_time, Action.SAVEPOINT, state)}")
    storage.delete(f"{TIMELINE_DIR}/{found[0].file_name}")
    return found[0]


def restore(storage: Storage, timeline: Timeline, instant_time: str) -> RestoreResult:
    """Roll the table back to the savepointed ``instant_time``. Call under the table lock."""
    if not any(s.requested_time == instant_time for s in savepoints(timeline)):
        raise NotSavepointedError(instant_time)
    if timeline.archived_before is not None and instant_time < timeline.archived_before:
        later_archived = [
            i for i in timeline.with_history().completed if i.requested_time > instant_time and i not in timeline
        ]
        if later_archived:
            raise TidemarkError(
                f"cannot restore to {instant_time}: {len(later_archived)} later instant(s) were archived "
                f"(e.g. {later_archived[0].requested_time}); hoodie.archive.beyond.savepoint=false keeps them"
            )
    doomed = [i for i in timeline if i.action in _WRITES and i.requested_time > instant_time]
    restore_time = new_instant_time(floor=timeline.max_time())
    infos = [{"commitTime": i.requested_time, "action": i.action.value} for i in doomed]
    plan = {"instantsToRollback": infos, "version": 1, "savepointToRestoreTimestamp": instant_time}
    requested = instant_file_name(restore_time, Action.RESTORE, State.REQUESTED)
    storage.create_if_absent(f"{TIMELINE_DIR}/{requested}", write_avro("restore_plan", plan))
    inflight = instant_file_name(restore_time, Action.RESTORE, State.INFLIGHT)
    storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}", write_avro("restore_plan", plan))
    return _execute_restore(storage, restore_time, plan, time.monotonic())


def _execute_restore(storage: Storage, restore_time: str, plan: dict[str, Any], started: float) -> RestoreResult:
    """Roll back the planned instants still on the timeline, then publish the restore.

    Safe to repeat: instants rolled back already are gone from the timeline (a rollback left
    pending must be finished first, see :func:`finish_pending_rollbacks`).
    """
    instant_time = plan.get("savepointToRestoreTimestamp") or ""
    infos = list(plan.get("instantsToRollback") or [])
    planned = {i["commitTime"] for i in infos}
    current = Timeline.load(storage)
    doomed = [i for i in current if i.action in _WRITES and i.requested_time in planned]
    # Pending writes first, then completed ones newest completion first: each rollback then
    # undoes the latest state, which rollback() insists on.
    doomed = [i for i in doomed if not i.is_completed] + sorted(
        (i for i in doomed if i.is_completed), key=lambda i: i.completion_time or "", reverse=True
    )
    results: list[RollbackResult] = []
    for inst in doomed:
        results.append(rollback(storage, inst, timeline=current))
        current = current.reload()
    # Savepoints of instants that no longer exist would pin nothing real.
    for sp in current.filter(actions=[Action.SAVEPOINT]):
        if sp.requested_time > instant_time:
            delete_savepoint(storage, current, sp.requested_time)
    # Each planned instant's rollback, this run's or (an interrupted restore) an earlier one's.
    rollback_meta: dict[str, list[dict[str, Any]]] = {}
    for done in current.filter(actions=[Action.ROLLBACK], states=[State.COMPLETED]):
        if done.requested_time < restore_time:
            continue
        rec = read_avro(storage.read_bytes(f"{TIMELINE_DIR}/{done.file_name}"))
        for target in rec.get("commitsRollback") or []:
            if target in planned:
                rollback_meta[target] = [rec]
    meta = {
        "startRestoreTime": restore_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "instantsToRollback": [i["commitTime"] for i in infos],
        "hoodieRestoreMetadata": rollback_meta,
        "version": 1,
        "restoreInstantInfo": infos,
        "extraMetadata": {"savepoint": instant_time},
    }
    # The metadata table mirrors the restore as Hudi's does: a deltacommit of the restore's time
    # listing every rolled-back file as deleted (each rollback recorded its own already; an
    # interrupted restore's earlier rollbacks did too, so only this run's are named again).
    record_if_maintained(storage, restore_time, (), sorted({f for r in results for f in r.deleted_files}))
    completion = new_instant_time(floor=Timeline.load(storage).max_time())
    done_name = instant_file_name(restore_time, Action.RESTORE, State.COMPLETED, completion)
    storage.create_if_absent(f"{TIMELINE_DIR}/{done_name}", write_avro("restore", meta))
    return RestoreResult(Instant(restore_time, Action.RESTORE, State.COMPLETED, completion), instant_time,
                         tuple(results))


def finish_pending_restores(storage: Storage, timeline: Timeline) -> list[RestoreResult]:
    """Complete restores that a crashed process left requested or inflight.

    Call under the table lock (a restore runs under it, so one seen pending from there was
    interrupted), after finishing pending rollbacks. Writes cannot have completed since the
    restore began: a pending restore fails every commit (see the conflict rules).
    """
    results = []
    for pending in timeline.filter(actions=[Action.RESTORE], states=[State.REQUESTED, State.INFLIGHT]):
        plan: dict[str, Any] = {}
        for state in (State.INFLIGHT, State.REQUESTED):
            path = f"{TIMELINE_DIR}/{instant_file_name(pending.requested_time, Action.RESTORE, state)}"
            if storage.exists(path):
                plan = read_avro(storage.read_bytes(path))
                break
        if not plan:
            continue
        inflight = instant_file_name(pending.requested_time, Action.RESTORE, State.INFLIGHT)
        storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}", write_avro("restore_plan", plan))
        results.append(_execute_restore(storage, pending.requested_time, plan, time.monotonic()))
    return results
