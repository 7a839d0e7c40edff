"""Archival: keep the active timeline bounded by moving old instants into the history.

Runs entirely under the table lock (it rewrites the timeline; writing one small
history file is quick)::

    choose   once more than hoodie.keep.max.commits commits are active: the oldest
             instants, in requested-time order, leaving hoodie.keep.min.commits
    write    their files' bytes into a new history file; switch the manifest
    delete   their active files, oldest instant first, each one's completed file last

Which instants may go — a prefix of the active timeline, stopping at the first
instant that must stay:

* a pending instant, and anything that completed after the earliest pending
  instant was requested: a writer's conflict check compares the timeline with
  its snapshot, so no conflict candidate may vanish under it;
* a savepoint (it stays active), and with hoodie.archive.beyond.savepoint=false
  anything from the earliest savepoint on, so restore can roll back to it;
* a replacecommit whose replaced file groups still have files: without it the
  file-system view would see those groups again;
* merge-on-read: a deltacommit that appended log files and completed after the
  latest completed compaction was planned: its logs are still in a latest file
  slice, and readers (hudi-rs too) place a log in its slice by the completion
  time of its deltacommit, read from the active timeline;
* the prefix is shortened until every archived instant completed before every
  instant left active, so an incremental reader can tell from the active timeline
  alone whether its range reaches into the history.

Deleting oldest first keeps Hudi's "before the timeline starts" rule true at every
step: a reader listing mid-way sees some instants archived and the rest active.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tidemark.config.resolve import ArchiveConfig
from tidemark.format.names import TIMELINE_DIR
from tidemark.recovery.clean import committed_versions
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name
from tidemark.timeline.history import ArchivedRecord, append
from tidemark.timeline.instant import parse_instant_file_name


@dataclass(frozen=True)
class ArchiveResult:
    archived: tuple[Instant, ...] = ()
    manifest_version: int = 0
    skipped: str | None = None  # why nothing was archived


def _replaced_files_remain(storage: Storage, timeline: Timeline, instant: Instant, cache: dict[str, object]) -> bool:
    replaced = {
        (partition, file_id)
        for partition, ids in timeline.commit_metadata(instant).replaced_file_ids.items()
        for file_id in ids
    }
    if not replaced:
        return False
    if "versions" not in cache:  # one listing per archival, only if a replacecommit is due
        cache["versions"] = committed_versions(storage, timeline)
    versions = cache["versions"]
    assert isinstance(versions, dict)
    return any(key in versions for key in replaced)


def _latest_compaction(timeline: Timeline) -> str | None:
    """Requested time of the latest completed compaction (logs completed before it were merged)."""
    for inst in reversed(timeline.completed):
        if inst.action is Action.COMMIT and timeline.commit_metadata(inst).compacted:
            return inst.requested_time
    return None


def choose(storage: Storage, timeline: Timeline, config: ArchiveConfig) -> tuple[list[Instant], str | None]:
    """The instants to archive now (a prefix of the active timeline), or why none."""
    commits = timeline.completed_data_instants
    if len(commits) <= config.max_commits:
        return [], f"{len(commits)} commits on the active timeline (archival starts above {config.max_commits})"
    cut = sorted(i.requested_time for i in commits)[-config.min_commits]
    pending = min((i.requested_time for i in timeline.pending), default=None)
    savepoints = [i.requested_time for i in timeline.filter(actions=[Action.SAVEPOINT])]
    if savepoints and not config.beyond_savepoint:
        cut = min(cut, min(savepoints))
    cache: dict[str, object] = {}
    # Only merge-on-read tables have deltacommits: copy-on-write never reads this.
    compacted_up_to = _latest_compaction(timeline) if any(
        i.action is Action.DELTA_COMMIT for i in timeline.completed) else None
    prefix: list[Instant] = []
    for inst in timeline:
        if inst.action is Action.SAVEPOINT:
            continue
        if inst.requested_time >= cut or not inst.is_completed:
            break
        if pending is not None and (inst.requested_time >= pending or (inst.completion_time or "") >= pending):
            break
        if inst.action is Action.REPLACE_COMMIT and _replaced_files_remain(storage, timeline, inst, cache):
            break
        if (
            inst.action is Action.DELTA_COMMIT
            and (compacted_up_to is None or (inst.completion_time or "") >= compacted_up_to)
            and any(s.log_files for s in timeline.commit_metadata(inst).write_stats)
        ):
            break
        prefix.append(inst)
    # An incremental reader decides from the active timeline alone whether its range reaches
    # into the history: every archived instant must have completed before every one left active.
    while prefix:
        chosen = set(prefix)
        left = min(
            (i.completion_time for i in timeline.completed
             if i.action is not Action.SAVEPOINT and i not in chosen and i.completion_time),
            default=None,
        )
        if left is None or max(i.completion_time or "" for i in prefix) < left:
            break
        prefix.pop()
    if not prefix:
        return [], ("the oldest instants are still needed (pending writes, savepoints, replaced files or "
                    "uncompacted logs)")
    return prefix, None


def _bytes_or_none(storage: Storage, path: str) -> bytes | None:
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    return data or None


# Table services are pending under another action than the one they complete as (Hudi 1.x):
# a clustering completes as a replacecommit, a compaction as a commit.
_PENDING_AS = {
    Action.REPLACE_COMMIT: (Action.REPLACE_COMMIT, Action.CLUSTERING),
    Action.COMMIT: (Action.COMMIT, Action.COMPACTION),
    Action.DELTA_COMMIT: (Action.DELTA_COMMIT, Action.LOG_COMPACTION),
}


def _pending_names(inst: Instant, state: State) -> list[str]:
    actions = _PENDING_AS.get(inst.action, (inst.action,))
    return [instant_file_name(inst.requested_time, action, state) for action in actions]


def _plan_bytes(storage: Storage, inst: Instant) -> bytes | None:
    for name in _pending_names(inst, State.REQUESTED):
        data = _bytes_or_none(storage, f"{TIMELINE_DIR}/{name}")
        if data:
            return data
    return None


def _completed_names(names: Iterable[str], inst: Instant) -> list[str]:
    """Every completed file of ``inst`` (its own name last). One instant has one, unless two
    processes completed it (a clean executed twice by an earlier tidemark, or another writer's
    doing): a copy left behind would keep an old instant active ahead of archived ones, and
    readers take the archived commits after it for uncommitted."""
    others = [n for n in names if n != inst.file_name and n.startswith(inst.requested_time)
              and (i := parse_instant_file_name(n)) is not None and i.requested_time == inst.requested_time
              and i.action is inst.action and i.state is State.COMPLETED]
    return [*others, inst.file_name]


def archive(storage: Storage, timeline: Timeline, config: ArchiveConfig) -> ArchiveResult:
    """Archive what :func:`choose` allows. Call under the table lock."""
    chosen, why = choose(storage, timeline, config)
    if not chosen:
        return ArchiveResult(skipped=why)
    records = [
        ArchivedRecord(
            inst,
            storage.read_bytes(f"{TIMELINE_DIR}/{inst.file_name}"),
            _plan_bytes(storage, inst),
        )
        for inst in chosen
    ]
    manifest = append(storage, records, batch=config.compaction_batch)
    # The listing the timeline was loaded from, when it was a plain load (no second LIST).
    names = timeline.file_names if timeline.file_names is not None else storage.list_names(TIMELINE_DIR)
    for inst in chosen:  # oldest first; within one instant, its completed file last
        for state in (State.REQUESTED, State.INFLIGHT):
            for name in _pending_names(inst, state):
                storage.delete(f"{TIMELINE_DIR}/{name}")
        for name in _completed_names(names, inst):
            storage.delete(f"{TIMELINE_DIR}/{name}")
    return ArchiveResult(tuple(chosen), manifest.version)
