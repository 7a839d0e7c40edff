"""Rollback: remove a write's files and its instant, and record that it happened.

Steps, each safe to repeat if the process dies between them::

    raise the write's fence  (markers/fence.py: a task still writing deletes its own files)
    <r>.rollback.requested   plan: the instant to roll back and its files
    delete the data files (from markers, or from the commit metadata if completed)
    delete the instant's timeline files (completed file first, so data vanishes at once)
    delete its markers, and with them the fence
    <r>.rollback.inflight
    <r>_<c>.rollback         metadata: what was deleted

A rollback left requested or inflight is finished by :func:`finish_pending_rollbacks`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tidemark.errors import InstantNotFoundError, TidemarkError
from tidemark.format.commit_metadata import read_avro, write_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.markers import delete_markers, marked_data_files
from tidemark.markers.fence import raise_fence
from tidemark.metadata.maintain import metadata_recorded, record_if_maintained
from tidemark.metadata.staged_deltacommit import withdraw
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time


@dataclass(frozen=True)
class RollbackResult:
    rollback_instant: Instant
    rolled_back: Instant
    deleted_files: tuple[str, ...]


def _files_of(storage: Storage, timeline: Timeline, instant: Instant) -> list[str]:
    files = set(marked_data_files(storage, instant.requested_time))
    if instant.is_completed:
        files.update(s.path for s in timeline.commit_metadata(instant).write_stats if s.path)
    return sorted(files)


def rollback(storage: Storage, instant: Instant, *, timeline: Timeline | None = None) -> RollbackResult:
    """Roll back ``instant``: a pending write, or the latest completed data instant.

    Raises TidemarkError for a completed instant that later completed instants
    build on (rolling it back would silently undo them too).
    """
    timeline = timeline or Timeline.load(storage)
    if not instant.action.writes_data:
        raise TidemarkError(f"cannot roll back a {instant.action.value} instant")
    if instant.is_completed:
        later = [
            i for i in timeline.completed_data_instants if (i.completion_time or "") > (instant.completion_time or "")
        ]
        if later:
            raise TidemarkError(
                f"instant {instant.requested_time} cannot be rolled back: later commits "
                f"({', '.join(i.requested_time for i in later[:3])}) build on it; "
                "roll those back first (newest first)"
            )
    started = time.monotonic()
    if not instant.is_completed:
        # Before the markers are listed: a task of the write still running finishes no file unseen.
        raise_fence(storage, instant.requested_time)
    files = _files_of(storage, timeline, instant)
    if instant.is_completed:
        _not_being_compacted(storage, timeline, instant, files)
    rollback_time = new_instant_time(floor=timeline.max_time())
    plan = {
        "instantToRollback": {
            "commitTime": instant.requested_time,
            "action": instant.action.value,
        },
        "filesToDelete": files,
        "version": 1,
    }
    requested = instant_file_name(rollback_time, Action.ROLLBACK, State.REQUESTED)
    storage.create_if_absent(f"{TIMELINE_DIR}/{requested}", write_avro("rollback_plan", plan))
    return _execute(storage, rollback_time, instant, files, started)


def _not_being_compacted(storage: Storage, timeline: Timeline, instant: Instant, files: list[str]) -> None:
    """Refuse to roll back a completed instant whose files a pending compaction plan merges: the
    compacted slices would bring its rows back. (Plans are made under the lock, as rollbacks run,
    so this check cannot miss one.) Once that compaction completed it builds on the instant and
    must be rolled back first, like any later commit."""
    names = {f.rsplit("/", 1)[-1] for f in files}
    compactions = [Action.COMPACTION, Action.LOG_COMPACTION]
    for plan in timeline.filter(actions=compactions, states=[State.REQUESTED, State.INFLIGHT]):
        path = f"{TIMELINE_DIR}/{instant_file_name(plan.requested_time, plan.action, State.REQUESTED)}"
        try:
            rec = read_avro(storage.read_bytes(path))
        except FileNotFoundError:
            continue
        merged: set[str] = set()
        for op in rec.get("operations") or ():
            merged.update(op.get("deltaFilePaths") or ())
            if op.get("dataFilePath"):
                merged.add(op["dataFilePath"])
        if names & {m.rsplit("/", 1)[-1] for m in merged}:
            raise TidemarkError(
                f"instant {instant.requested_time} cannot be rolled back: compaction {plan.requested_time} "
                "is merging its files; run the compaction to its end (`tidemark compact`), then roll back "
                "the compaction first (newest first)"
            )


def _execute(
    storage: Storage, rollback_time: str, instant: Instant, files: list[str], started: float
) -> RollbackResult:
    if instant.is_completed:
        # Gone from the data timeline first: readers stop reading its files at once (the
        # metadata table still lists them until the rollback records their deletion below).
        storage.delete(f"{TIMELINE_DIR}/{instant.file_name}")
    deleted = [f for f in files if storage.delete(f)]
    # A completed clustering (a replacecommit) was pending as a clustering: remove those files too.
    actions = [instant.action] + ([Action.CLUSTERING] if instant.action is Action.REPLACE_COMMIT else [])
    for action in actions:
        for state in (State.INFLIGHT, State.REQUESTED):
            storage.delete(f"{TIMELINE_DIR}/{instant_file_name(instant.requested_time, action, state)}")
    # Only now, with the requested file gone (what fences the write's tasks from here on).
    delete_markers(storage, instant.requested_time)
    inflight = instant_file_name(rollback_time, Action.ROLLBACK, State.INFLIGHT)
    storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}")
    by_partition: dict[str, list[str]] = {}
    for f in deleted:
        partition = f.rsplit("/", 1)[0] if "/" in f else ""
        by_partition.setdefault(partition, []).append(f)
    meta = {
        "startRollbackTime": rollback_time,
        "timeTakenInMillis": int((time.monotonic() - started) * 1000),
        "totalFilesDeleted": len(deleted),
        "commitsRollback": [instant.requested_time],
        "partitionMetadata": {
            p: {"partitionPath": p, "successDeleteFiles": fs, "failedDeleteFiles": []} for p, fs in by_partition.items()
        },
        "version": 1,
        "instantsRollback": [{"commitTime": instant.requested_time, "action": instant.action.value}],
    }
    # The metadata table mirrors the rollback as Hudi's does: a deltacommit of the rollback's
    # time listing the deleted files as deleted (a pending write's were never listed; a
    # completed one's drop out, all of them even if a crashed run deleted some already; its
    # own deltacommit stays, see metadata/undone.py).
    listed = instant.is_completed or metadata_recorded(storage, instant.requested_time)
    if not listed:  # a pending metadata deltacommit of the write (staged before its commit) goes too
        withdraw(storage, instant.requested_time)
    record_if_maintained(storage, rollback_time, (), files if listed else deleted)
    completion = new_instant_time(floor=rollback_time)
    done = instant_file_name(rollback_time, Action.ROLLBACK, State.COMPLETED, completion)
    storage.create_if_absent(f"{TIMELINE_DIR}/{done}", write_avro("rollback", meta))
    return RollbackResult(
        Instant(rollback_time, Action.ROLLBACK, State.COMPLETED, completion),
        instant,
        tuple(deleted),
    )


def _pending_rollback_plans(storage: Storage, timeline: Timeline) -> Iterator[tuple[Instant, dict[str, Any]]]:
    """Each rollback left requested or inflight, with its plan (empty if it has none yet)."""
    for pending in timeline.filter(actions=[Action.ROLLBACK], states=[State.REQUESTED, State.INFLIGHT]):
        requested = f"{TIMELINE_DIR}/{instant_file_name(pending.requested_time, Action.ROLLBACK, State.REQUESTED)}"
        yield pending, (read_avro(storage.read_bytes(requested)) if storage.exists(requested) else {})


def pending_rollback_of(storage: Storage, timeline: Timeline, requested_time: str) -> bool:
    """Whether a rollback left requested or inflight (a crash, a full disk) targets the instant
    ``requested_time``: its timeline files may be gone, yet rolling it back finishes that rollback."""
    return any((plan.get("instantToRollback") or {}).get("commitTime") == requested_time
               for _, plan in _pending_rollback_plans(storage, timeline))


def finish_pending_rollbacks(storage: Storage, timeline: Timeline) -> list[RollbackResult]:
    """Complete rollbacks that a crashed process left requested or inflight."""
    results = []
    for pending, plan in _pending_rollback_plans(storage, timeline):
        target = plan.get("instantToRollback") or {}
        if not target:
            continue
        action = Action(target["action"])
        victim = timeline.completed_instant(target["commitTime"])
        if victim is None or victim.action is not action:
            victim = Instant(target["commitTime"], action, State.INFLIGHT)
        if not victim.is_completed:  # again: the crash may have come before the plan, or after the markers went
            raise_fence(storage, victim.requested_time)
        # The plan's files, and any marked since it was made (markers go only once files are deleted).
        files = sorted({*(plan.get("filesToDelete") or ()), *marked_data_files(storage, victim.requested_time)})
        results.append(_execute(storage, pending.requested_time, victim, files, time.monotonic()))
    return results


def find_instant(timeline: Timeline, requested_time: str) -> Instant:
    for inst in timeline:
        if inst.requested_time == requested_time and inst.action.writes_data:
            return inst
    raise InstantNotFoundError(requested_time, "no commit, deltacommit or replacecommit has that time")
