"""Clustering: rewrite many small file groups into few target-size ones, optionally sorted.

Lifecycle of one clustering (a table service; a ``replacecommit`` on completion)::

    schedule()   [lock] roll back dead clusterings; load the table (a static view: nobody
                 commits meanwhile); choose small file groups that no pending clustering
                 and no pending write (its inflight plan, its markers) claims; new instant
                 time; <t>.clustering.requested with the plan (HoodieClusteringPlan)
    execute()    <t>.clustering.inflight; the engine rewrites each group into new file
                 groups (markers first), concurrently with writers, no lock
    commit()     [lock] reload the timeline; ingestion wins: abort if any write that
                 completed after the plan, or any pending write whose files we can see,
                 touched a planned file group; else publish <t>_<c>.replacecommit
                 (operation CLUSTER, partitionToReplaceFileIds = the input groups)
    abort()      [lock] roll the clustering back (files and instant); ClusteringAbortedError

Why writers never lose to clustering (``hoodie.clustering.updates.strategy=allow``):

* a write that completes before the clustering commits is seen by the commit check
  above, and the clustering aborts;
* a write still pending at that moment and visible through its markers or
  inflight plan makes the clustering abort too;
* a write that planned against the table before the clustering completed but
  was not yet visible gets :class:`~tidemark.errors.ClusteringConflictError` at
  its commit if it updated a replaced file group; ``Table`` then runs the write
  again on the clustered table. It is never failed.

With ``reject`` a write that touches a file group of a pending clustering fails
at its commit (see :mod:`tidemark.concurrency.conflict`) and the clustering keeps its plan.

Rows keep their ``_hoodie_commit_time`` (Hudi's ``preserveHoodieMetadata``), so
incremental reads do not see clustered rows as changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa

from tidemark.concurrency.conflict import PendingCommit, not_built_on_rolled_back
from tidemark.concurrency.heartbeat import Heartbeat, HeartbeatPolicy
from tidemark.config.resolve import ClusteringConfig, WriteConfig
from tidemark.errors import ClusteringAbortedError, CommitError, ConfigError, CorruptInstantError
from tidemark.format.clustering_plan import CLUSTER_OPERATION, ClusteringGroup, ClusteringPlan, SliceInfo
from tidemark.format.commit_metadata import CommitMetadata, WriteStat
from tidemark.format.names import META_COLUMNS, TIMELINE_DIR, parse_base_file_name
from tidemark.format.schema import arrow_schema_from_avro, avro_schema_json
from tidemark.fsview import BaseFile, FileSystemView
from tidemark.markers import delete_markers, marked_data_files
from tidemark.metadata.listing import table_view
from tidemark.metadata.maintain import record_if_maintained
from tidemark.recovery.rollback import RollbackResult, rollback
from tidemark.services.runner import ServiceSteps, run_service
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.location import location_of
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time
from tidemark.timeline.instant_time import parse_instant_time
from tidemark.write.cluster_group import ClusterSpec
from tidemark.write.commit import CommitProtocol
from tidemark.write.file_group import WriteSpec

log = logging.getLogger(__name__)

FileGroupId = tuple[str, str]  # (partition path, file id)
_INGESTION = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


# -- planning (pure) ------------------------------------------------------------------------
def plan_clustering(
    files: Iterable[BaseFile],
    config: ClusteringConfig,
    *,
    exclude: set[FileGroupId] = frozenset(),  # type: ignore[assignment]
) -> ClusteringPlan | None:
    """Groups of small base files per partition, like Hudi's size-based plan strategy.

    A file is a candidate when it is below the small-file limit and its file group
    is not excluded. Per partition, candidates go largest first into the first
    group with room under ``max_bytes_per_group``; each group is written as
    ``ceil(bytes / target_file_size)`` files. Without sort columns a group of a
    single file is left alone (rewriting it changes nothing); at most
    ``max_groups`` groups are planned. None when there is nothing to do.
    """
    by_partition: dict[str, list[BaseFile]] = {}
    for f in files:
        if f.size < config.small_file_limit and (f.partition_path, f.file_id) not in exclude:
            by_partition.setdefault(f.partition_path, []).append(f)
    groups: list[ClusteringGroup] = []
    for partition in sorted(by_partition):
        candidates = sorted(by_partition[partition], key=lambda f: (-f.size, f.file_id))
        if len(candidates) < 2 and not config.sort_columns:
            continue
        # First fit, largest first: few groups, each as full as max_bytes_per_group allows.
        bins: list[list[BaseFile]] = []
        sizes: list[int] = []
        for f in candidates:
            for i, used in enumerate(sizes):
                if used + f.size <= config.max_bytes_per_group:
                    bins[i].append(f)
                    sizes[i] += f.size
                    break
            else:
                bins.append([f])
                sizes.append(f.size)
        for chosen in bins:
            if len(chosen) < 2 and not config.sort_columns:
                continue  # rewriting one file alone changes nothing
            total = sum(f.size for f in chosen)
            outputs = max(1, -(-total // config.target_file_size))
            slices = tuple(SliceInfo(f.partition_path, f.file_id, f.path, f.size) for f in chosen)
            groups.append(ClusteringGroup(slices, outputs))
    groups = groups[: config.max_groups]
    if not groups:
        return None
    return ClusteringPlan(tuple(groups), config.sort_columns, config.target_file_size)


def _file_ids_of(paths: Iterable[str]) -> set[FileGroupId]:
    out: set[FileGroupId] = set()
    for path in paths:
        partition, _, name = path.rpartition("/")
        parsed = parse_base_file_name(name)
        if parsed is not None:
            out.add((partition, parsed.file_id))
    return out


def pending_write_footprint(storage: Storage, timeline: Timeline, instant: Instant) -> set[FileGroupId]:
    """File groups a pending write has shown it touches: its inflight plan and its markers.

    A write that has not planned or written a file yet shows nothing; the commit check
    of the write itself covers it (see the module docstring).
    """
    groups = _file_ids_of(marked_data_files(storage, instant.requested_time))
    if instant.state is State.INFLIGHT:
        try:
            data = storage.read_bytes(f"{TIMELINE_DIR}/{instant.file_name}")
            if data:
                meta = CommitMetadata.from_bytes(data)
                groups |= meta.file_groups()
        except (FileNotFoundError, CorruptInstantError):  # completed or rolled back meanwhile
            pass
    return groups


# -- results --------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClusteringProgress:
    """How far the rewrite is: sent to the caller's progress callback as groups finish."""

    groups_done: int
    groups_total: int
    files_written: int = 0
    bytes_written: int = 0


ProgressCallback = Callable[[ClusteringProgress], None]


@dataclass(frozen=True)
class ScheduledClustering:
    instant_time: str
    plan: ClusteringPlan
    heartbeat: Heartbeat | None = field(default=None, repr=False, compare=False)
    schema: pa.Schema | None = field(default=None, repr=False, compare=False)  # the table's, at the plan
    # Instants completed when the plan was made: the clustering rewrites their files.
    seen: frozenset[str] = field(default=frozenset(), repr=False, compare=False)


def _latest_schema_json(timeline: Timeline) -> str | None:
    """The table schema as the latest completed write left it (Avro JSON)."""
    return timeline.latest_schema_json()


@dataclass(frozen=True)
class ClusteringOutcome:
    instant: Instant | None  # None: nothing to cluster
    plan: ClusteringPlan | None
    stats: tuple[WriteStat, ...] = ()
    rolled_back: tuple[RollbackResult, ...] = ()  # dead clusterings rolled back first


@dataclass(frozen=True)
class ClusteringResult:
    """What one clustering did; ``instant_time`` is None when there was nothing to cluster."""

    instant_time: str | None
    completion_time: str | None
    groups: int  # clustering groups rewritten
    file_groups_replaced: int
    files_before: int  # base files read
    files_after: int  # base files written
    bytes_before: int
    bytes_after: int
    partitions: tuple[str, ...]
    sort_columns: tuple[str, ...]
    rolled_back: tuple[str, ...] = ()  # dead clusterings rolled back first (their instants)

    @property
    def clustered(self) -> bool:
        return self.instant_time is not None

    @classmethod
    def nothing(cls, sort_columns: tuple[str, ...], rolled_back: tuple[str, ...] = ()) -> ClusteringResult:
        return cls(None, None, 0, 0, 0, 0, 0, 0, (), sort_columns, rolled_back)

    @classmethod
    def of(cls, outcome: ClusteringOutcome, sort_columns: tuple[str, ...]) -> ClusteringResult:
        rolled_back = tuple(r.rolled_back.requested_time for r in outcome.rolled_back)
        plan = outcome.plan
        if outcome.instant is None or plan is None:
            return cls.nothing(sort_columns, rolled_back)
        stats = outcome.stats
        return cls(
            instant_time=outcome.instant.requested_time,
            completion_time=outcome.instant.completion_time,
            groups=len(plan.groups),
            file_groups_replaced=len(plan.file_groups()),
            files_before=plan.num_input_files,
            files_after=len(stats),
            bytes_before=sum(g.input_bytes for g in plan.groups),
            bytes_after=sum(s.file_size for s in stats),
            partitions=tuple(sorted({g.partition_path for g in plan.groups})),
            sort_columns=plan.sort_columns,
            rolled_back=rolled_back,
        )


class ClusteringExecutor:
    """What an engine provides: rewrite the groups, calling ``on_progress`` as they finish."""

    def run(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_progress: ProgressCallback | None
    ) -> list[WriteStat]:
        raise NotImplementedError


# -- the service ----------------------------------------------------------------------------
class ClusteringService:
    """Schedules, executes and commits clusterings of one table (see the module docstring)."""

    def __init__(
        self,
        storage: Storage,
        config: WriteConfig,
        protocol: CommitProtocol,
        *,
        schema: pa.Schema,
        table_name: str,
        executor: ClusteringExecutor,
    ) -> None:
        self.storage = storage
        self.config = config
        self.protocol = protocol
        self.lock = protocol.lock
        self.schema = schema
        self.table_name = table_name
        self.executor = executor
        self.heartbeats = HeartbeatPolicy(config.heartbeat_interval_ms, config.heartbeat_tolerable_misses)

    # -- schedule --------------------------------------------------------------------------
    def _dead_clusterings(self, timeline: Timeline) -> list[Instant]:
        pending = timeline.pending_clustering
        if not self.config.multi_writer:
            return list(pending)  # one writer at a time: none of them can be running
        return [
            i for i in pending
            if self.heartbeats.is_expired(
                self.storage, i.requested_time,
                requested_ms=int(parse_instant_time(i.requested_time).timestamp() * 1000),
            )
        ]

    def _claimed(self, timeline: Timeline) -> set[FileGroupId]:
        """File groups that pending clusterings plan to replace or pending writes touch."""
        claimed: set[FileGroupId] = set()
        for inst in timeline.pending:
            if inst.action is Action.CLUSTERING:
                plan = timeline.clustering_plan(inst)
                if plan is not None:
                    claimed |= plan.file_groups()
            elif inst.action in _INGESTION:
                claimed |= pending_write_footprint(self.storage, timeline, inst)
        return claimed

    @staticmethod
    def _with_logs(view: FileSystemView) -> set[FileGroupId]:
        """Merge-on-read file groups whose latest slice has log files: clustering rewrites base
        files only, so these wait for a compaction (their logs would otherwise be lost)."""
        return {(s.base.partition_path, s.base.file_id) for s in view.latest_file_slices() if s.logs}

    def preview(self, clustering: ClusteringConfig) -> ClusteringPlan | None:
        """The plan that scheduling would make now, without the lock and without writing anything."""
        timeline = Timeline.load(self.storage)
        view = table_view(self.storage, timeline)
        exclude = self._claimed(timeline) | self._with_logs(view)
        return plan_clustering(view.latest_base_files(), clustering, exclude=exclude)

    def schedule(self, clustering: ClusteringConfig) -> tuple[ScheduledClustering | None, list[RollbackResult]]:
        """Under the lock: the plan and its requested instant, or None if nothing needs clustering."""
        with self.lock.hold("schedule clustering"):
            return self._plan(clustering)

    def _plan(self, clustering: ClusteringConfig) -> tuple[ScheduledClustering | None, list[RollbackResult]]:
        """:meth:`schedule`'s work; the caller holds the lock. Finishes interrupted rollbacks and
        rolls back dead clusterings first."""
        timeline = Timeline.load(self.storage)
        # Rollbacks a crash or a full disk interrupted first (a clustering's own abort among them).
        for finished in self.protocol.finish_interrupted(timeline, finish_cleans=False):
            log.info("finished the interrupted rollback of %s", finished.rolled_back.requested_time)
            timeline = timeline.reload()
        rolled_back: list[RollbackResult] = []  # dead clusterings, as the result reports them
        for dead in self._dead_clusterings(timeline):
            log.info("rolling back clustering %s (its writer is gone)", dead.requested_time)
            rolled_back.append(rollback(self.storage, dead, timeline=timeline))
            timeline = timeline.reload()
        view = table_view(self.storage, timeline)
        exclude = self._claimed(timeline) | self._with_logs(view)
        plan = plan_clustering(view.latest_base_files(), clustering, exclude=exclude)
        if plan is None:
            return None, rolled_back
        while True:
            instant_time = new_instant_time(floor=timeline.max_time())
            if self.config.multi_writer and self.config.clock_skew_ms:
                time.sleep(self.config.clock_skew_ms / 1000)
            heartbeat = None
            if self.config.multi_writer:
                heartbeat = Heartbeat(self.storage, instant_time, self.heartbeats).start()
            name = instant_file_name(instant_time, Action.CLUSTERING, State.REQUESTED)
            if self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", plan.to_bytes()) is CreateOutcome.CREATED:
                # Rewrite with the schema of the table now (a writer may have added columns since
                # this Table object read it): every planned file was written with it or a subset.
                schema_json = _latest_schema_json(timeline)
                schema = arrow_schema_from_avro(schema_json) if schema_json else self.schema
                seen = frozenset(i.requested_time for i in timeline.completed)
                return ScheduledClustering(instant_time, plan, heartbeat, schema, seen), rolled_back
            if heartbeat is not None:
                heartbeat.stop()
            timeline = timeline.reload()

    # -- execute ---------------------------------------------------------------------------
    def execute(self, scheduled: ScheduledClustering, on_progress: ProgressCallback | None = None) -> list[WriteStat]:
        inflight = instant_file_name(scheduled.instant_time, Action.CLUSTERING, State.INFLIGHT)
        self.storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}")
        user_schema = scheduled.schema if scheduled.schema is not None else self.schema
        file_schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS]
                                + [f for f in user_schema if f.name not in META_COLUMNS])
        spec = ClusterSpec(
            WriteSpec(
                base_path=self.storage.base_path,
                location=location_of(self.storage),
                instant_time=scheduled.instant_time,
                schema=file_schema,
                ordering_fields=(),
                compression=self.config.compression,
                bloom_filter=self.config.bloom_filter,
                max_file_size=scheduled.plan.target_file_size or self.config.clustering.target_file_size,
            ),
            scheduled.plan.sort_columns,
        )
        if on_progress is not None:
            on_progress(ClusteringProgress(0, len(scheduled.plan.groups)))
        return self.executor.run(spec, scheduled.plan.groups, on_progress)

    # -- commit ----------------------------------------------------------------------------
    def _ingestion_wins(self, timeline: Timeline, scheduled: ScheduledClustering) -> None:
        """Raise ClusteringAbortedError if a write touched a planned file group since the plan."""
        mine = scheduled.plan.file_groups()
        # Completion times are generated under the lock above every time on the timeline, and
        # the plan's time was too: an instant completed after the plan has a greater one.
        for inst in timeline.completed_data_instants:
            if (inst.completion_time or "") <= scheduled.instant_time or inst.requested_time == scheduled.instant_time:
                continue
            shared = sorted(mine & timeline.commit_metadata(inst).file_groups())
            if shared:
                raise ClusteringAbortedError(
                    instant_time=scheduled.instant_time, conflicting_instant=inst.requested_time, file_groups=shared
                )
        if self.config.clustering.reject_updates:
            return  # writes to our groups fail at their own commit: they cannot win
        for inst in timeline.pending:
            if inst.action in _INGESTION:
                shared = sorted(mine & pending_write_footprint(self.storage, timeline, inst))
                if shared:
                    raise ClusteringAbortedError(
                        instant_time=scheduled.instant_time, conflicting_instant=inst.requested_time,
                        file_groups=shared,
                    )

    def commit(self, scheduled: ScheduledClustering, stats: Sequence[WriteStat]) -> Instant:
        """Publish the clustering, or roll it back and raise (ClusteringAbortedError, ...)."""
        try:
            self._remove_unreported(scheduled, stats)
            with self.lock.hold("commit clustering"):
                instant = self._publish(scheduled, stats)
        except BaseException:
            self.abort(scheduled)
            raise
        self._finish(scheduled)
        return instant

    def _remove_unreported(self, scheduled: ScheduledClustering, stats: Sequence[WriteStat]) -> None:
        reported = {s.path for s in stats}
        for path in marked_data_files(self.storage, scheduled.instant_time):  # failed or speculative attempts
            if path not in reported:
                self.storage.delete(path)

    def _publish(self, scheduled: ScheduledClustering, stats: Sequence[WriteStat]) -> Instant:
        """:meth:`commit`'s checks and publication; the caller holds the lock."""
        t = scheduled.instant_time
        timeline = Timeline.load(self.storage)
        # The clustering becomes the latest completed instant: it must carry the table's
        # latest schema, not an older one (writes may have evolved it meanwhile).
        schema_json = _latest_schema_json(timeline) or avro_schema_json(self.schema, self.table_name)
        meta = CommitMetadata(
            operation=CLUSTER_OPERATION,
            write_stats=tuple(sorted(stats, key=lambda s: (s.partition_path, s.file_id))),
            extra={"schema": schema_json},
            replaced_file_ids=scheduled.plan.replaced_file_ids(),
            is_replace=True,
        )
        if not any(i.requested_time == t and not i.is_completed for i in timeline):
            raise CommitError(f"clustering {t} is no longer pending (rolled back?)", instant_time=t)
        if scheduled.heartbeat is not None and not scheduled.heartbeat.is_alive():
            raise CommitError(f"clustering {t}: its heartbeat expired", instant_time=t)
        self._ingestion_wins(timeline, scheduled)
        # Like a write: never publish rows of an instant rolled back since the plan.
        replaced = {p: tuple(ids) for p, ids in scheduled.plan.replaced_file_ids().items()}
        not_built_on_rolled_back(self.storage, timeline, PendingCommit(t, tuple(stats), replaced,
                                                                       scheduled.seen))
        self.lock.assert_held()  # the fence, as for writes
        record_if_maintained(self.storage, t, stats,  # the metadata table first, as Hudi orders it
                             compact_after=self.config.metadata_compact_max_delta_commits)
        completion = new_instant_time(floor=max(filter(None, [timeline.max_time(), t])))
        name = instant_file_name(t, Action.REPLACE_COMMIT, State.COMPLETED, completion)
        outcome = self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", meta.to_bytes())
        if outcome is not CreateOutcome.CREATED:
            raise CommitError(f"could not publish {name}: {outcome.value}", instant_time=t)
        return Instant(t, Action.REPLACE_COMMIT, State.COMPLETED, completion)

    def abort(self, scheduled: ScheduledClustering) -> RollbackResult | None:
        """Roll the clustering back (if still pending): its files go, a rollback instant records it."""
        try:
            return self._roll_back(scheduled)
        finally:
            self._finish(scheduled)

    def _roll_back(self, scheduled: ScheduledClustering) -> RollbackResult | None:
        with self.lock.hold("roll back a clustering"):
            timeline = Timeline.load(self.storage)
            pending = [i for i in timeline.pending_clustering if i.requested_time == scheduled.instant_time]
            if not pending:
                return None
            return rollback(self.storage, pending[0], timeline=timeline)

    def _finish(self, scheduled: ScheduledClustering) -> None:
        if scheduled.heartbeat is not None:
            scheduled.heartbeat.stop()
        delete_markers(self.storage, scheduled.instant_time)

    # -- all of it -------------------------------------------------------------------------
    def run(self, clustering: ClusteringConfig, on_progress: ProgressCallback | None = None) -> ClusteringOutcome:
        """Schedule, execute and commit one clustering (:func:`~tidemark.services.runner.run_service`;
        the heartbeat starts with the plan, before its instant is published)."""
        steps = _ClusteringSteps(self, clustering, on_progress)
        instant = run_service(steps, self.lock, storage=self.storage, heartbeats=None)
        if instant is None or steps.scheduled is None:
            return ClusteringOutcome(None, None, (), tuple(steps.rolled_back))
        return ClusteringOutcome(instant, steps.scheduled.plan, tuple(steps.stats), tuple(steps.rolled_back))


class _ClusteringSteps(ServiceSteps[ScheduledClustering, list[WriteStat], Instant]):
    """Clustering's steps. Its completion is :meth:`ClusteringService.commit`, which takes the
    lock itself ("commit clustering": it first deletes the files of failed task attempts outside
    the lock) and rolls the clustering back itself if it cannot publish."""

    plan_purpose = "schedule clustering"
    complete_purpose = None  # ClusteringService.commit holds the lock for its checks and publication

    def __init__(
        self, service: ClusteringService, clustering: ClusteringConfig, on_progress: ProgressCallback | None
    ) -> None:
        self.service = service
        self.clustering = clustering
        self.on_progress = on_progress
        self.rolled_back: list[RollbackResult] = []
        self.scheduled: ScheduledClustering | None = None
        self.stats: list[WriteStat] = []
        self.committing = False  # from then on, commit() aborts and tidies itself

    def plan(self) -> ScheduledClustering | None:
        self.scheduled, self.rolled_back = self.service._plan(self.clustering)
        return self.scheduled

    def instant_time(self, plan: ScheduledClustering) -> str:
        return plan.instant_time

    def execute(self, plan: ScheduledClustering) -> list[WriteStat]:
        self.stats = self.service.execute(plan, self.on_progress)
        return self.stats

    def complete(self, plan: ScheduledClustering, result: list[WriteStat]) -> Instant:
        self.committing = True
        return self.service.commit(plan, result)

    def abort(self, plan: ScheduledClustering) -> None:
        if not self.committing:
            self.service._roll_back(plan)

    def finish(self, plan: ScheduledClustering) -> None:
        if not self.committing:
            self.service._finish(plan)


def clustering_config(
    base: ClusteringConfig,
    *,
    sort_by: str | Sequence[str] | None,
    target_file_size: int | None,
    small_file_limit: int | None,
    max_groups: int | None,
    schema: pa.Schema | None,
) -> ClusteringConfig:
    """``base`` with the caller's overrides, checked against the table's columns."""
    from tidemark.config.resolve import check_clustering_sizes

    config = base
    if sort_by is not None:
        columns = (sort_by,) if isinstance(sort_by, str) else tuple(sort_by)
        config = replace(config, sort_columns=tuple(c.strip() for c in columns if c and c.strip()))
    overrides: dict[str, int] = {}
    for name, value in (("target_file_size", target_file_size), ("small_file_limit", small_file_limit),
                        ("max_groups", max_groups)):
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"{name} must be a positive whole number, got {value!r}")
            overrides[name] = value
    config = replace(
        config,
        target_file_size=overrides.get("target_file_size", config.target_file_size),
        small_file_limit=overrides.get("small_file_limit", config.small_file_limit),
        max_groups=overrides.get("max_groups", config.max_groups),
    )
    if target_file_size is not None and small_file_limit is None and config.small_file_limit > target_file_size:
        # Asking for smaller files than the default limit: files at the target are not small.
        config = replace(config, small_file_limit=target_file_size)
    check_clustering_sizes(config)
    if schema is not None:
        known = set(schema.names) | set(META_COLUMNS)
        unknown = [c for c in config.sort_columns if c not in known]
        if unknown:
            raise ConfigError(
                f"sort column(s) {unknown} are not columns of the table; it has {schema.names}",
                key="hoodie.clustering.plan.strategy.sort.columns",
            )
    return config
