"""Cleaning: delete file versions that no reader, writer or savepoint can need any more.

Lifecycle of one clean, Hudi's::

    schedule   [lock] the table is static: list the committed file versions, decide
               what the policy lets go, write <c>.clean.requested (HoodieCleanerPlan)
    execute    outside the lock, concurrent with writers:
               <c>.clean.inflight; re-read the savepoints (one may have been taken
               since the plan) and spare their files; delete the planned files
    complete   [lock] unless another executor of the plan completed it already:
               the metadata table's deltacommit, then <c>_<done>.clean
               (HoodieCleanMetadata)

What a plan never deletes:

* the latest version of a live file group (readers of the current snapshot);
* any version that was the latest at some time at or after the *earliest instant
  to retain*: the N-th latest commit (KEEP_LATEST_COMMITS), now minus H hours
  (KEEP_LATEST_BY_HOURS), so time travel into that window finds its files; and,
  like Hudi, the version that was the latest just before it;
* any version that was the latest when the earliest pending write started: that
  writer may be merging against it (its previous base file);
* files listed by a savepoint, completed or in progress.

A plan left requested or inflight by a dead cleaner is finished by the next one
(its heartbeat tells whether it is dead, as for writes); a live one is left alone.
Deleting is idempotent, so finishing a half-executed plan is safe; and a cleaner
only judged dead (a late heartbeat) that finishes too completes nothing twice.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tidemark.concurrency.conflict import undone_by_rollback
from tidemark.concurrency.heartbeat import Heartbeat, HeartbeatPolicy
from tidemark.config.resolve import CleanConfig, CleanPolicy
from tidemark.errors import (
    BaseFileGoneError,
    CorruptInstantError,
    DataFileNotFoundError,
    RolledBackConflictError,
    WriteConflictError,
)
from tidemark.format.commit_metadata import read_avro, write_avro
from tidemark.format.log_file import parse_log_file_name
from tidemark.format.names import TIMELINE_DIR, parse_base_file_name
from tidemark.metadata.listing import table_listing
from tidemark.metadata.maintain import record_if_maintained
from tidemark.recovery.clean_partitions import partitions_to_clean
from tidemark.recovery.named_files import table_file_named
from tidemark.recovery.rollback import RollbackResult
from tidemark.storage import CreateOutcome, Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time

_DATA_WRITES = {Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT, Action.CLUSTERING, Action.COMPACTION}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileVersion:
    """One committed base file of a file group."""

    partition_path: str
    file_id: str
    instant_time: str
    path: str


@dataclass(frozen=True)
class CleanPlan:
    """What one clean deletes, decided under the lock against a static table."""

    instant_time: str  # the clean's requested time
    policy: CleanPolicy
    earliest_to_retain: str  # versions still the latest at or after this time are kept
    last_completed_commit: str
    files: Mapping[str, tuple[str, ...]]  # partition -> table-relative paths

    @property
    def num_files(self) -> int:
        return sum(len(v) for v in self.files.values())

    def to_avro(self) -> bytes:
        record: dict[str, Any] = {
            "earliestInstantToRetain": {
                "timestamp": self.earliest_to_retain,
                "action": Action.COMMIT.value,
                "state": State.COMPLETED.value.upper(),
            },
            "policy": self.policy.value,
            "filesToBeDeletedPerPartition": None,
            "version": 2,
            "filePathsToBeDeletedPerPartition": {
                p: [{"filePath": path, "isBootstrapBaseFile": False} for path in paths]
                for p, paths in self.files.items()
            },
            "partitionsToBeDeleted": [],
        }
        return write_avro("cleaner_plan", record)

    @classmethod
    def from_avro(cls, instant_time: str, data: bytes, *, source: str | None = None) -> CleanPlan:
        rec = read_avro(data, source=source)
        earliest = (rec.get("earliestInstantToRetain") or {}).get("timestamp") or ""
        files = {
            p: tuple(f["filePath"] for f in infos if f.get("filePath"))
            for p, infos in (rec.get("filePathsToBeDeletedPerPartition") or {}).items()
        }
        return cls(instant_time, CleanPolicy(rec.get("policy") or CleanPolicy.KEEP_LATEST_COMMITS.value),
                   earliest, "", files)


@dataclass(frozen=True)
class CleanResult:
    """What :meth:`tidemark.Table.clean` did."""

    rolled_back: tuple[RollbackResult, ...] = ()  # failed writes rolled back first
    clean_instant: Instant | None = None  # the published clean, None if nothing was cleaned
    deleted_files: tuple[str, ...] = ()
    earliest_to_retain: str | None = None
    kept_for_savepoints: tuple[str, ...] = ()  # planned, but a savepoint taken since needs them
    skipped: str | None = None  # why no clean ran (nothing to clean, another cleaner is running...)
    finished: tuple[Instant, ...] = field(default=())  # pending cleans of dead cleaners completed


# -- planning ------------------------------------------------------------------------------


def committed_versions(storage: Storage, timeline: Timeline) -> dict[tuple[str, str], list[FileVersion]]:
    """Every committed base file by file group, oldest first (files of pending writes are not)."""
    return committed_files(storage, timeline)[0]


def committed_files(
    storage: Storage, timeline: Timeline, partitions: set[str] | None = None
) -> tuple[dict[tuple[str, str], list[FileVersion]], dict[tuple[str, str], list[tuple[str, str]]]]:
    """Committed base files by file group (oldest first), and committed log files by file group
    as (completion time of their deltacommit, path): from the metadata table's listing or the
    partition folders (:func:`~tidemark.metadata.listing.table_listing`). ``partitions``: only
    these need listing (the metadata table's listing is taken whole, it costs no more)."""
    groups: dict[tuple[str, str], list[FileVersion]] = {}
    logs: dict[tuple[str, str], list[tuple[str, str]]] = {}
    history: dict[str, str] | None = None
    listing = table_listing(storage, timeline)
    scope = listing.all_partitions()
    if scope is None and partitions is not None:
        scope = sorted(partitions)
    # The metadata table's listing, the one folder of a non-partitioned table, or the folders
    # asked for; a walk of the table only for all partitions of one without a metadata table.
    infos = storage.walk_files("") if scope is None else (i for p in scope for i in listing.files(p))
    for info in infos:
        parsed = parse_base_file_name(info.name)
        if parsed is None:
            log_name = parse_log_file_name(info.name)
            if log_name is None:
                continue
            done = timeline.completed_instant(log_name.instant_time)
            if done is not None and done.completion_time:
                completed = done.completion_time
            elif timeline.is_archived(log_name.instant_time):
                if history is None:  # read once, only for logs of archived deltacommits
                    history = {i.requested_time: i.completion_time or i.requested_time
                               for i in timeline.with_history().completed}
                completed = history.get(log_name.instant_time, log_name.instant_time)
            else:
                continue  # a pending or failed write's log: rollback's, not cleaning's
            partition = info.path.rsplit("/", 1)[0] if "/" in info.path else ""
            logs.setdefault((partition, log_name.file_id), []).append((completed, info.path))
            continue
        owner = timeline.completed_instant(parsed.instant_time)
        # A savepoint stands for its commit once that commit was archived (it shares its time).
        known = owner is not None and (owner.action.writes_data or owner.action is Action.SAVEPOINT)
        if not (known or timeline.is_archived(parsed.instant_time)):
            continue
        partition = info.path.rsplit("/", 1)[0] if "/" in info.path else ""
        version = FileVersion(partition, parsed.file_id, parsed.instant_time, info.path)
        groups.setdefault((partition, parsed.file_id), []).append(version)
    for versions in groups.values():
        versions.sort(key=lambda v: (v.instant_time, v.path))
    return groups, logs


def _logs_of_slices(
    versions: list[FileVersion], logs: list[tuple[str, str]], doomed: set[str], *, whole_group: bool
) -> list[str]:
    """Merge-on-read: the log files of the doomed file slices. A log belongs to the slice of the
    latest base version whose instant is not after the log's completion time (as readers see it)."""
    out = []
    for completed, path in logs:
        owner = None
        for version in versions:
            if version.instant_time <= completed:
                owner = version
        if whole_group or (owner is not None and owner.path in doomed):
            out.append(path)
    return out


def savepointed_files(storage: Storage, timeline: Timeline) -> set[str]:
    """Files of every savepoint, completed or in progress (its inflight file holds the list)."""
    files: set[str] = set()
    for sp in timeline.filter(actions=[Action.SAVEPOINT]):
        name = sp.file_name if sp.is_completed else instant_file_name(sp.requested_time, Action.SAVEPOINT,
                                                                        State.INFLIGHT)
        try:
            rec = read_avro(storage.read_bytes(f"{TIMELINE_DIR}/{name}"), source=f"{TIMELINE_DIR}/{name}")
        except FileNotFoundError:
            continue
        for meta in (rec.get("partitionMetadata") or {}).values():
            partition = meta.get("partitionPath") or ""
            for file_name in meta.get("savepointDataFile") or []:
                files.add(f"{partition}/{file_name}" if partition else file_name)
    return files


def earliest_pending_write(timeline: Timeline) -> str | None:
    return min((i.requested_time for i in timeline.pending if i.action in _DATA_WRITES), default=None)


def _earliest_to_retain(timeline: Timeline, config: CleanConfig, now: datetime) -> str | None:
    """The start of the retained time-travel window, or None if the policy keeps everything so far."""
    if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
        commits = sorted(i.requested_time for i in timeline.completed_data_instants)
        if len(commits) <= config.commits_retained:
            return None
        return commits[-config.commits_retained]
    if config.policy is CleanPolicy.KEEP_LATEST_BY_HOURS:
        return format_instant_time(now - config.hours_retained)
    return None  # KEEP_LATEST_FILE_VERSIONS keeps versions by count, not by time


def _replaced_groups(timeline: Timeline) -> dict[tuple[str, str], str]:
    """File groups replaced by a completed replacecommit, with the replacing instant's time."""
    replaced: dict[tuple[str, str], str] = {}
    for inst in timeline.completed_data_instants:
        if inst.action is Action.REPLACE_COMMIT:
            for partition, ids in timeline.commit_metadata(inst).replaced_file_ids.items():
                for file_id in ids:
                    replaced.setdefault((partition, file_id), inst.requested_time)
    return replaced


def plan_clean(
    storage: Storage, timeline: Timeline, config: CleanConfig, *, instant_time: str, now: datetime | None = None
) -> CleanPlan | None:
    """Decide what a clean at ``instant_time`` deletes; None if nothing. Call under the lock."""
    now = now or datetime.now(UTC)
    done = timeline.completed_data_instants
    if not done:
        return None
    window = _earliest_to_retain(timeline, config, now)
    by_versions = config.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS
    if window is None and not by_versions:
        return None  # the retained window still reaches back to the first commit
    pending = earliest_pending_write(timeline)
    # Versions still the latest at or after `bound` stay: time travel into the window, and the
    # version each pending write merges against. (A write plans a moment before it requests
    # its instant; a version superseded in that moment is one it conflicts on anyway, and
    # should the cleaner take it first the write fails as that conflict: BaseFileGoneError.)
    bound = min(filter(None, [window, pending]), default=None)
    saved = savepointed_files(storage, timeline)
    replaced = _replaced_groups(timeline)
    doomed: dict[str, list[str]] = {}

    def superseded_before_bound(successor_time: str) -> bool:
        # Strictly before: the version that was the latest just before the bound stays too
        # (Hudi keeps it as well), so rolling back the bound commit itself loses nothing.
        return bound is None or successor_time < bound

    all_versions, all_logs = committed_files(storage, timeline, partitions_to_clean(timeline, config))
    for key, versions in all_versions.items():
        replaced_at = replaced.get(key)
        if replaced_at is not None:
            # The whole group left the table at `replaced_at`; once that is before the bound, no
            # retained reader sees any of its versions.
            if superseded_before_bound(replaced_at):
                chosen: Iterable[FileVersion] = versions
            else:
                continue
        else:
            older = versions[:-1]  # the latest version of a live group always stays
            if by_versions:
                keep = config.file_versions_retained
                older = versions[: max(0, len(versions) - keep)]
            chosen = [v for v, successor in zip(older, versions[1:], strict=False)
                      if superseded_before_bound(successor.instant_time)]
        gone = {v.path for v in chosen if v.path not in saved}
        for path in sorted(gone):
            doomed.setdefault(key[0], []).append(path)
        if gone and key in all_logs:
            whole = replaced_at is not None and len(gone) == len(versions)
            doomed.setdefault(key[0], []).extend(
                p for p in _logs_of_slices(versions, all_logs[key], gone, whole_group=whole) if p not in saved
            )
    if not doomed:
        return None
    last = max(i.requested_time for i in done)
    # KEEP_LATEST_FILE_VERSIONS without pending writes has no time window: record the clean's
    # own time (a savepoint of an earlier instant may miss versions this clean deletes).
    earliest = bound or instant_time
    return CleanPlan(
        instant_time, config.policy, earliest, last, {p: tuple(sorted(paths)) for p, paths in doomed.items()}
    )


# -- scheduling and execution -----------------------------------------------------------------


def needs_cleaning(storage: Storage, timeline: Timeline, config: CleanConfig) -> bool:
    """Whether a clean would do anything: a pending clean to finish, or files to delete.

    A hint for taking the lock, computed without it; the plan itself is made under it.
    """
    if timeline.filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT]):
        return True
    return plan_clean(storage, timeline, config, instant_time=timeline.max_time() or "") is not None


def _cleaner_alive(storage: Storage, instant: Instant, heartbeats: HeartbeatPolicy) -> bool:
    requested_ms = int(parse_instant_time(instant.requested_time).timestamp() * 1000)
    return not heartbeats.is_expired(storage, instant.requested_time, requested_ms=requested_ms)


@dataclass
class ScheduledClean:
    """A clean plan on the timeline, and the heartbeat that says its executor is alive."""

    plan: CleanPlan
    heartbeat: Heartbeat | None


def schedule_clean(
    storage: Storage,
    timeline: Timeline,
    config: CleanConfig,
    heartbeats: HeartbeatPolicy,
    *,
    multi_writer: bool,
) -> tuple[list[ScheduledClean], str | None]:
    """Under the lock: adopt the plans of dead cleaners, or plan a new clean.

    Returns the plans this process must execute, and why no new plan was made.
    """
    adopted: list[ScheduledClean] = []
    for inst in timeline.filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT]):
        if multi_writer and _cleaner_alive(storage, inst, heartbeats):
            return [], f"clean {inst.requested_time} is running in another process"
        requested = instant_file_name(inst.requested_time, Action.CLEAN, State.REQUESTED)
        try:
            path = f"{TIMELINE_DIR}/{requested}"
            plan = CleanPlan.from_avro(inst.requested_time, storage.read_bytes(path), source=path)
        except FileNotFoundError:
            continue
        beat = Heartbeat(storage, inst.requested_time, heartbeats).start() if multi_writer else None
        adopted.append(ScheduledClean(plan, beat))
    if adopted:
        return adopted, None
    instant_time = new_instant_time(floor=timeline.max_time())
    new_plan = plan_clean(storage, timeline, config, instant_time=instant_time)
    if new_plan is None:
        return [], "nothing to clean"
    beat = Heartbeat(storage, instant_time, heartbeats).start() if multi_writer else None
    name = instant_file_name(instant_time, Action.CLEAN, State.REQUESTED)
    if storage.create_if_absent(f"{TIMELINE_DIR}/{name}", new_plan.to_avro()) is not CreateOutcome.CREATED:
        if beat is not None:
            beat.stop()
        return [], f"could not publish the clean plan {name}"
    return [ScheduledClean(new_plan, beat)], None


def _complete_once(storage: Storage, instant_time: str, deleted: list[str], metadata: bytes) -> str | None:
    """Under the lock: record the clean ``instant_time`` in the metadata table and publish its
    completed file, unless it completed already (another executor of its plan). Returns its
    completion time (None: completed and archived already, not found in the history either)."""
    timeline = Timeline.load(storage)
    mine = [i for i in timeline if i.requested_time == instant_time and i.action is Action.CLEAN]
    done = next((i.completion_time for i in mine if i.is_completed), None)
    if done is not None:
        return done
    if not mine:  # completed and archived while this executor was deleting: nothing left to do
        storage.delete(f"{TIMELINE_DIR}/{instant_file_name(instant_time, Action.CLEAN, State.INFLIGHT)}")
        archived = timeline.with_history().completed_instant(instant_time)
        return archived.completion_time if archived is not None else None
    record_if_maintained(storage, instant_time, (), deleted)  # the metadata table first, as Hudi orders it
    completion = new_instant_time(floor=timeline.max_time())
    name = instant_file_name(instant_time, Action.CLEAN, State.COMPLETED, completion)
    storage.create_if_absent(f"{TIMELINE_DIR}/{name}", metadata)
    return completion


def execute_clean(
    storage: Storage, scheduled: ScheduledClean,
    under_lock: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> CleanResult:
    """Delete the planned files (sparing savepoints) outside the lock, then publish the clean
    under it (``under_lock()``: the table lock's hold, or nothing for a caller holding it).

    A plan may be executed twice: a cleaner judged dead (its heartbeat late on a loaded
    machine) may still be running when another process adopts its plan. Deleting twice is
    harmless; completing twice is not: a second completed file for one instant outlives the
    archival of the first, leaving an old instant active ahead of archived ones, and readers
    (Hudi's and hudi-rs) then take the archived commits after it for uncommitted. So the
    metadata table's deltacommit and the completed instant are written under the lock, by
    whichever executor gets there first; the other finds the clean completed and returns
    its result without writing."""
    plan = scheduled.plan
    started = time.monotonic()
    try:
        inflight = instant_file_name(plan.instant_time, Action.CLEAN, State.INFLIGHT)
        requested = instant_file_name(plan.instant_time, Action.CLEAN, State.REQUESTED)
        if storage.exists(f"{TIMELINE_DIR}/{requested}"):  # not completed and archived meanwhile
            storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}", plan.to_avro())
        # After the inflight file exists, so a savepoint taken from now on waits for this
        # clean, and one taken before is seen here (see recovery/savepoint.py).
        timeline = Timeline.load(storage)
        saved = savepointed_files(storage, timeline)
        partitions: dict[str, dict[str, list[str]]] = {}
        deleted: list[str] = []
        spared: list[str] = []
        for partition, paths in plan.files.items():
            entry = partitions.setdefault(partition, {"success": [], "failed": []})
            for path in paths:
                if path in saved:
                    spared.append(path)
                    continue
                storage.delete(path)  # already gone (a half-executed plan finished again): fine
                deleted.append(path)
                entry["success"].append(path.rsplit("/", 1)[-1])
        meta = {
            "policy": plan.policy.value,
            "startCleanTime": plan.instant_time,
            "timeTakenInMillis": int((time.monotonic() - started) * 1000),
            "totalFilesDeleted": len(deleted),
            "earliestCommitToRetain": plan.earliest_to_retain,
            "lastCompletedCommitTimestamp": plan.last_completed_commit,
            "partitionMetadata": {
                p: {
                    "partitionPath": p,
                    "policy": plan.policy.value,
                    "deletePathPatterns": e["success"],
                    "successDeleteFiles": e["success"],
                    "failedDeleteFiles": e["failed"],
                    "isPartitionDeleted": False,
                }
                for p, e in partitions.items()
            },
            "version": 2,
            "bootstrapPartitionMetadata": None,
        }
        with under_lock():
            completion = _complete_once(storage, plan.instant_time, deleted, write_avro("clean", meta))
        return CleanResult(
            clean_instant=Instant(plan.instant_time, Action.CLEAN, State.COMPLETED, completion),
            deleted_files=tuple(deleted),
            earliest_to_retain=plan.earliest_to_retain,
            kept_for_savepoints=tuple(spared),
        )
    finally:
        if scheduled.heartbeat is not None:
            scheduled.heartbeat.stop()


def finish_pending_clean(
    storage: Storage, inst: Instant, heartbeats: HeartbeatPolicy, *, multi_writer: bool
) -> CleanResult | None:
    """Execute the plan of a clean left requested or inflight by a cleaner that is gone (its
    heartbeat expired, or single-writer mode). Call under the table lock, after checking that.
    None if its plan cannot be read (it is then left for `tidemark clean` to report)."""
    plan = None
    for state in (State.REQUESTED, State.INFLIGHT):
        name = instant_file_name(inst.requested_time, Action.CLEAN, state)
        try:
            plan = CleanPlan.from_avro(inst.requested_time, storage.read_bytes(f"{TIMELINE_DIR}/{name}"))
            break
        except FileNotFoundError:
            continue
        except CorruptInstantError as damaged:  # never block every write on it: `tidemark clean` reports it
            log.warning("the plan of pending clean %s cannot be read (%s); left for tidemark clean",
                        inst.requested_time, damaged)
            return None
    if plan is None:
        return None
    beat = Heartbeat(storage, inst.requested_time, heartbeats).start() if multi_writer else None
    return execute_clean(storage, ScheduledClean(plan, beat))


def superseded_base_file(
    storage: Storage, failure: DataFileNotFoundError | FileNotFoundError
) -> WriteConflictError | None:
    """The conflict behind a write that found its base file gone, or None if it was not that.

    :class:`RolledBackConflictError` when a rollback (or restore) of the instant that wrote
    the file removed it; else :class:`BaseFileGoneError`, as follows.

    A writer reads the latest version of a file group as its snapshot showed it. The
    cleaner deletes a version only after a newer one (or a replacecommit) completed, so a
    version that vanished under a writer was superseded by a commit the writer's snapshot
    did not contain: the same write-write conflict the commit check would report.

    ``failure`` names the files an engine found gone: a FileNotFoundError, or the
    :class:`DataFileNotFoundError` an engine raises for it (the Spark engine reads them from
    its job's error, :mod:`tidemark.engines.spark.errors`).
    """
    if isinstance(failure, DataFileNotFoundError):
        candidates = list(failure.paths)
    elif failure.filename or failure.args:
        candidates = [str(failure.filename or failure.args[0])]
    else:
        return None
    named = [table_file_named(storage, c) for c in candidates]
    missing = [path for path in named if path is not None and not storage.exists(path)]
    if not missing:
        return None
    path = missing[0]
    parsed = parse_base_file_name(path.rsplit("/", 1)[-1])
    if parsed is None:
        return None
    partition = path.rsplit("/", 1)[0] if "/" in path else ""
    timeline = Timeline.load(storage)
    for rollback in timeline.filter(actions=[Action.ROLLBACK]):
        target, _ = undone_by_rollback(storage, timeline, rollback)
        if target == parsed.instant_time:
            return RolledBackConflictError(
                instant_time=None, conflicting_instant=rollback.requested_time, rolled_back=target,
                file_groups=[(partition, parsed.file_id)], base_file=path,
            )
    group = committed_versions(storage, timeline).get((partition, parsed.file_id), [])
    newer = [v.instant_time for v in group if v.instant_time > parsed.instant_time]
    replaced_by = _replaced_groups(timeline).get((partition, parsed.file_id))
    culprit = min(newer, default=None) or replaced_by
    if culprit is None:
        return None
    return BaseFileGoneError(base_file=path, conflicting_instant=culprit, file_group=(partition, parsed.file_id))


def commits_since_last_clean(timeline: Timeline) -> int:
    """Completed commits requested after the latest clean (inline cleaning's trigger)."""
    cleans = [i.requested_time for i in timeline.filter(actions=[Action.CLEAN])]
    last = max(cleans, default="")
    return sum(1 for i in timeline.completed_data_instants if i.requested_time > last)


def last_clean_earliest_to_retain(timeline: Timeline) -> str | None:
    """The earliest instant to retain of the latest completed clean: time travel to an earlier
    instant may miss file versions that clean deleted (savepoints refuse such instants)."""
    done = timeline.filter(actions=[Action.CLEAN], states=[State.COMPLETED])
    if not done:
        return None
    latest = max(done, key=lambda i: i.requested_time)
    rec = read_avro(timeline.instant_bytes(latest), source=f"{TIMELINE_DIR}/{latest.file_name}")
    earliest = rec.get("earliestCommitToRetain") or ""
    return min(earliest, latest.requested_time) if earliest else latest.requested_time
