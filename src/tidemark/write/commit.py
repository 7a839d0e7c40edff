"""The commit protocol of one write, free of any engine.

Lifecycle of a :class:`PendingWrite`::

    prepare_for_write()  finish rollbacks, restores and cleans that a crash interrupted;
                         EAGER: roll back every pending write without a live heartbeat
                         (single writer); LAZY: roll back only writes whose heartbeat
                         expired, under the lock
    start()              [lock] new instant time above every time on the timeline;
                         heartbeat; <t>.<action>.requested
    inflight()           <t>.<action>.inflight with the planned file groups
    ... the engine writes files, each after its marker ...
    complete()           delete partial files of failed task attempts (marked, not reported);
                         partition metafiles;
                         [lock] reload the timeline; conflict checks against instants that
                         completed since start, and against rollbacks since then of
                         instants it built on; own heartbeat still alive; completion time;
                         fence (the lock is still safely held); publish <t>_<c>.<action> atomically
                         stop heartbeat; delete markers
    abort()              [lock] roll the write back; nothing of it stays visible

Readers see the write only once ``complete`` published the completed file: the
single atomic step. In single-writer mode there is no lock and no heartbeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace

from tidemark.concurrency.conflict import (
    ConflictResolutionStrategy,
    NonBlockingConflictResolution,
    PendingCommit,
    not_built_on_rolled_back,
    reconcile_schema,
    strategy_by_name,
)
from tidemark.concurrency.heartbeat import HEARTBEAT_DIR, Heartbeat, HeartbeatPolicy, last_heartbeat_ms
from tidemark.concurrency.transaction import NoLock, TableLock
from tidemark.config import WriteConfig
from tidemark.errors import CommitError, HeartbeatExpiredError
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, inflight_metadata_bytes, write_avro
from tidemark.format.names import TEMP_DIR, TIMELINE_DIR
from tidemark.markers import delete_markers, marked_data_files
from tidemark.metadata.listing import table_view
from tidemark.metadata.maintain import record_if_maintained
from tidemark.metadata.staged_deltacommit import StagedDeltacommit, discard, publish_deltacommit, stage_deltacommit
from tidemark.recovery.clean import finish_pending_clean
from tidemark.recovery.rollback import RollbackResult, finish_pending_rollbacks, rollback
from tidemark.recovery.savepoint import finish_pending_restores
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.staged import StagedFile, stage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time
from tidemark.timeline.instant_time import parse_instant_time
from tidemark.write.partition_meta import ensure_partition_metafile

_WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass
class PendingWrite:
    instant_time: str
    action: Action
    operation: str
    heartbeat: Heartbeat | None = field(default=None, repr=False)
    # Instants completed in the timeline snapshot the write planned against: any other
    # instant that completes before we commit is a conflict candidate.
    seen: frozenset[str] | None = None
    # The file names of that snapshot's listing (Timeline.file_names): the commit finds the
    # instants completed since among the names that are new (concurrency/conflict.py).
    snapshot_files: AbstractSet[str] | None = field(default=None, repr=False)

    def planned_against(self, snapshot: Timeline) -> None:
        """Record the timeline snapshot the write planned against."""
        self.seen = frozenset(i.requested_time for i in snapshot.completed)
        self.snapshot_files = snapshot.file_names


@dataclass(frozen=True)
class CommitTiming:
    """Where the last commit's time under the lock went (for benchmarks and logs)."""

    lock_wait_ms: float
    critical_section_ms: float  # lock held: reload, conflict checks, publish (plus release)


def _window_across_archival(
    timeline: Timeline, seen: frozenset[str], from_snapshot: bool
) -> tuple[Timeline, frozenset[str]]:
    """The timeline and snapshot to check conflicts against, when archival ran since the snapshot.

    Archival may have moved instants that completed after our snapshot into the history;
    they are still conflict candidates. Instants archived before the snapshot are not: every
    instant that completed before the latest one our snapshot saw was visible to it
    (completion times are generated and published under the lock, in order), so they join
    ``seen``. The history is read only in this rare case, never on the common path.
    """
    if not from_snapshot or timeline.archived_before is None:
        return timeline, seen
    active = {i.requested_time for i in timeline.completed}
    if seen and seen <= active:  # nothing we saw was archived, so nothing newer was either
        return timeline, seen
    full = timeline.with_history()
    horizon = max((i.completion_time or "" for i in full.completed if i.requested_time in seen), default="")
    earlier = {i.requested_time for i in full.completed if (i.completion_time or "") <= horizon}
    return full, seen | earlier


def _requested_ms(instant_time: str) -> int:
    return int(parse_instant_time(instant_time).timestamp() * 1000)


class CommitProtocol:
    """Runs the protocol for writes to one table."""

    def __init__(self, storage: Storage, config: WriteConfig) -> None:
        self.storage = storage
        self.config = config
        self.lock: TableLock | NoLock = (
            TableLock(config.lock, storage.base_path, storage) if config.multi_writer else NoLock()
        )
        self.heartbeats = HeartbeatPolicy(config.heartbeat_interval_ms, config.heartbeat_tolerable_misses)
        self.strategy: ConflictResolutionStrategy = (
            NonBlockingConflictResolution() if config.non_blocking else strategy_by_name(config.conflict_strategy)
        )
        self.strategy.reject_updates_under_clustering = config.clustering.reject_updates
        self.last_commit_timing: CommitTiming | None = None
        # Refuses a writer whose concurrency settings disagree with the table's recorded ones
        # (WriterSettingsError); called before the write touches anything and again, under
        # the lock, right before it publishes. Set by the Table.
        self.guard: Callable[[], None] = lambda: None
        # The same without keeping or removing the metadata table (the Table sets it): before
        # a write plans and when it requests its instant, which change no file listing; the
        # commit runs the whole guard under its lock before it records its files.
        self.settings_guard: Callable[[], None] | None = None
        # The timeline the commit loaded under its lock, while its guard runs: the guard's check
        # of the metadata table reads it instead of listing the timeline folder again.
        self.timeline_under_lock: Timeline | None = None
        # The timeline prepare_for_write loaded last (after any rollbacks it ran): the write's
        # snapshot, taken once by take_snapshot so a write lists the timeline once before its
        # instant is requested.
        self._loaded: Timeline | None = None
        self._snapshot: Timeline | None = None
        # The timeline of the last commit, as read under its lock plus the instant it published.
        self.committed_timeline: Timeline | None = None

    def close(self) -> None:
        self.lock.close()

    # -- failed writes -------------------------------------------------------------------
    def writer_alive(self, instant: Instant) -> bool:
        """Whether the writer of pending ``instant`` is alive: it has a heartbeat file that is
        fresh. (A single-writer write keeps none; its writer is this client or dead.)"""
        return last_heartbeat_ms(self.storage, instant.requested_time) is not None and not self.heartbeats.is_expired(
            self.storage, instant.requested_time
        )

    def rollback_failed_writes(self, timeline: Timeline | None = None, *, force: bool = False) -> list[RollbackResult]:
        """EAGER cleaning (single writer): roll back every pending data write, except one whose
        heartbeat is alive (a writer in another process is running it: it is left alone) unless
        ``force``. Interrupted rollbacks, restores and cleans are finished first."""
        timeline = timeline or Timeline.load(self.storage)
        results: list[RollbackResult] = []
        if self._interrupted(timeline):  # checked first: the common path reads no more than before
            results += self.finish_interrupted(timeline)
            timeline = timeline.reload()
        for inst in timeline.pending:
            if inst.action in _WRITE_ACTIONS and (force or not self.writer_alive(inst)):
                results.append(rollback(self.storage, inst, timeline=timeline))
                timeline = timeline.reload()
        self._loaded = timeline
        return results

    def expired_pending_writes(self, timeline: Timeline) -> list[Instant]:
        return [
            i
            for i in timeline.pending
            if i.action in _WRITE_ACTIONS
            and self.heartbeats.is_expired(self.storage, i.requested_time, requested_ms=_requested_ms(i.requested_time))
        ]

    def rollback_expired_writes(self, *, finish_cleans: bool = True) -> list[RollbackResult]:
        """LAZY cleaning: roll back pending writes whose heartbeat expired, never a live one.

        Each rollback runs under the table lock after re-checking that the instant is
        still pending and expired, so two cleaners finding the same dead write roll it
        back once. Interrupted rollbacks, restores and (unless not ``finish_cleans``: a clean
        adopts them itself) cleans are finished first, whether or not any write expired.
        """
        results: list[RollbackResult] = []
        timeline = self._loaded = Timeline.load(self.storage)
        self._remove_leftovers_of_completed(timeline)
        if not self.expired_pending_writes(timeline) and not self._interrupted(timeline, finish_cleans):
            return results
        with self.lock.hold("roll back failed writes"):
            timeline = Timeline.load(self.storage)
            if self._interrupted(timeline, finish_cleans):
                results += self.finish_interrupted(timeline, finish_cleans=finish_cleans)
                timeline = timeline.reload()
            for inst in self.expired_pending_writes(timeline):
                results.append(rollback(self.storage, inst, timeline=timeline))
                timeline = timeline.reload()
            self._loaded = timeline
        return results

    # -- interrupted rollbacks, restores and cleans ----------------------------------------
    def _dead_cleans(self, timeline: Timeline) -> list[Instant]:
        """Pending cleans whose cleaner is gone. A cleaner executes outside the lock, so its
        heartbeat tells (single-writer mode keeps none: the cleaner was this client)."""
        cleans = timeline.filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT])
        if not self.config.multi_writer:
            return cleans
        return [
            c for c in cleans
            if self.heartbeats.is_expired(self.storage, c.requested_time, requested_ms=_requested_ms(c.requested_time))
        ]

    def _interrupted(self, timeline: Timeline, cleans: bool = True) -> bool:
        """Whether a rollback or restore is pending (from outside the lock: perhaps still running),
        or a clean whose cleaner is gone."""
        pending = timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], states=[State.REQUESTED, State.INFLIGHT])
        return bool(pending) or (cleans and bool(self._dead_cleans(timeline)))

    def finish_interrupted(self, timeline: Timeline, *, finish_cleans: bool = True) -> list[RollbackResult]:
        """Finish what crashed processes left half done: rollbacks, then restores, then cleans.

        Call under the table lock. Every rollback and restore runs under the lock, so one
        pending here was interrupted (its process died or lost the lock); a clean runs outside
        it and is finished only once its heartbeat expired. Returns the rollbacks done.
        """
        results = finish_pending_rollbacks(self.storage, timeline)
        if results:
            timeline = timeline.reload()
        if timeline.filter(actions=[Action.RESTORE], states=[State.REQUESTED, State.INFLIGHT]):
            for restored in finish_pending_restores(self.storage, timeline):
                results += restored.rollbacks
            timeline = timeline.reload()
        for clean in self._dead_cleans(timeline) if finish_cleans else ():
            finish_pending_clean(self.storage, clean, self.heartbeats, multi_writer=self.config.multi_writer)
        return results

    def _remove_leftovers_of_completed(self, timeline: Timeline) -> None:
        """Heartbeats and markers that a writer dying right after publishing left behind."""
        for info in self.storage.list_dir(HEARTBEAT_DIR):
            if timeline.is_completed(info.name) and self.heartbeats.is_expired(self.storage, info.name):
                self.storage.delete(info.path)
        for name in self.storage.list_subdirs(TEMP_DIR):
            if timeline.is_completed(name):
                delete_markers(self.storage, name)

    def prepare_for_write(self) -> list[RollbackResult]:
        """Before a write plans: roll back failed writes as the policy says. The timeline it
        loaded last is the write's snapshot (:meth:`take_snapshot`)."""
        (self.settings_guard or self.guard)()  # before any rollback: a mismatched writer must not touch others'
        self._loaded = self._snapshot = None
        results = self._prepare()
        self._snapshot, self._loaded = self._loaded, None
        return results

    def take_snapshot(self) -> Timeline:
        """The timeline loaded by the :meth:`prepare_for_write` just before (once), else a fresh one."""
        snapshot, self._snapshot = self._snapshot, None
        return snapshot if snapshot is not None else Timeline.load(self.storage)

    def _prepare(self) -> list[RollbackResult]:
        policy = self.config.failed_writes_policy
        if policy == "EAGER":
            return self.rollback_failed_writes()
        if policy == "LAZY":
            return self.rollback_expired_writes()
        # NEVER leaves failed writes alone, but not a rollback, restore or clean a crash interrupted.
        timeline = self._loaded = Timeline.load(self.storage)
        if self._interrupted(timeline):
            self._loaded = None
            with self.lock.hold("finish interrupted rollbacks"):
                return self.finish_interrupted(Timeline.load(self.storage))
        return []

    # -- start ---------------------------------------------------------------------------
    def _new_time(self, timeline: Timeline, at_least: str | None = None) -> str:
        floor = max(filter(None, [timeline.max_time(), at_least]), default=None)
        instant_time = new_instant_time(floor=floor)
        if self.config.multi_writer and self.config.clock_skew_ms:
            time.sleep(self.config.clock_skew_ms / 1000)
        return instant_time

    def start(self, operation: str, action: Action) -> PendingWrite:
        body = b""
        if action is Action.REPLACE_COMMIT:
            body = write_avro(
                "requested_replace",
                {"operationType": operation, "clusteringPlan": None, "extraMetadata": {}, "version": 1},
            )
        with self.lock.hold("start a write"):
            (self.settings_guard or self.guard)()
            timeline = Timeline.load(self.storage)
            while True:
                instant_time = self._new_time(timeline)
                heartbeat = None
                if self.config.multi_writer:  # alive before it is visible as pending
                    heartbeat = Heartbeat(self.storage, instant_time, self.heartbeats).start()
                requested = instant_file_name(instant_time, action, State.REQUESTED)
                if self.storage.create_if_absent(f"{TIMELINE_DIR}/{requested}", body) is CreateOutcome.CREATED:
                    return PendingWrite(instant_time, action, operation, heartbeat)
                if heartbeat is not None:
                    heartbeat.stop()
                timeline = timeline.reload()

    def create_file_groups(
        self,
        groups: Iterable[tuple[str, str]],
        write_base: Callable[[str, str, str], WriteStat],
        *,
        action: Action,
        schema_json: str | None,
    ) -> Instant | None:
        """Create file groups that do not exist yet, in an instant of their own, all under the lock.

        ``write_base(partition, file_id, instant_time)`` writes one group's first base file
        (after its marker). The timeline is read again under the lock, so among writers
        that all want a group, the first creates it and the others find it: nobody
        conflicts. Returns the completed instant, or None when every group existed.
        """
        with self.lock.hold("create file groups"):
            self.guard()
            timeline = Timeline.load(self.storage)
            view = table_view(self.storage, timeline)
            missing = sorted(g for g in set(groups) if view.group(*g) is None)
            if not missing:
                return None
            instant_time = self._new_time(timeline)
            operation = "INSERT"
            requested = instant_file_name(instant_time, action, State.REQUESTED)
            if self.storage.create_if_absent(f"{TIMELINE_DIR}/{requested}") is not CreateOutcome.CREATED:
                raise CommitError(f"instant {instant_time} exists already", instant_time=instant_time)
            pending = PendingWrite(instant_time, action, operation)
            self.inflight(pending, missing)
            try:
                stats = [write_base(partition, file_id, instant_time) for partition, file_id in missing]
            except BaseException:
                inflight = Instant(instant_time, action, State.INFLIGHT)
                rollback(self.storage, inflight, timeline=Timeline.load(self.storage))
                raise
            self._ensure_partition_metafiles(pending, [s.partition_path for s in stats])
            meta = CommitMetadata(
                operation=operation,
                write_stats=tuple(stats),
                extra={"schema": schema_json} if schema_json else {},
            )
            self.lock.assert_held()  # the fence: a writer whose lease ran out publishes nothing
            record_if_maintained(self.storage, instant_time, stats,  # the metadata table first, as Hudi
                                 compact_after=self.config.metadata_compact_max_delta_commits)
            completion_time = self._new_time(timeline, at_least=instant_time)
            name = instant_file_name(instant_time, action, State.COMPLETED, completion_time)
            if self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", meta.to_bytes()) is not CreateOutcome.CREATED:
                raise CommitError(f"could not publish {name}", instant_time=instant_time)
        delete_markers(self.storage, instant_time)
        return Instant(instant_time, action, State.COMPLETED, completion_time)

    def inflight(self, pending: PendingWrite, planned: Iterable[tuple[str, str]] = ()) -> None:
        name = instant_file_name(pending.instant_time, pending.action, State.INFLIGHT)
        self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", inflight_metadata_bytes(pending.operation, planned))

    # -- complete ------------------------------------------------------------------------
    def _remove_partial_files(self, pending: PendingWrite, stats: Sequence[WriteStat]) -> None:
        """Delete files that a failed or speculative task attempt wrote: marked but not reported."""
        reported = {s.path for s in stats}
        for path in marked_data_files(self.storage, pending.instant_time):
            if path not in reported:
                self.storage.delete(path)
        missing = [s.path for s in stats if not self.storage.exists(s.path)]
        if missing:
            raise CommitError(
                f"write {pending.instant_time} reported files that do not exist: {missing[:3]}",
                instant_time=pending.instant_time,
            )

    def _ensure_partition_metafiles(self, pending: PendingWrite, partitions: Iterable[str]) -> None:
        # The tasks wrote them before their files (write/partition_meta.py); checked again here.
        for partition in sorted(set(partitions)):
            ensure_partition_metafile(self.storage, partition, pending.instant_time)

    def _still_mine(self, pending: PendingWrite, timeline: Timeline) -> None:
        """Refuse to publish a write that was rolled back or whose heartbeat expired."""
        if timeline.pending_instant(pending.instant_time) is None:
            raise HeartbeatExpiredError(pending.instant_time, "its instant is no longer pending (rolled back?)")
        if pending.heartbeat is not None and not pending.heartbeat.is_alive():
            raise HeartbeatExpiredError(
                pending.instant_time,
                f"its heartbeat is older than {self.heartbeats.expiry_ms} ms "
                "(hoodie.client.heartbeat.interval_in_ms x tolerable.misses)",
            )

    def complete(
        self,
        pending: PendingWrite,
        stats: Sequence[WriteStat],
        *,
        schema_json: str | None,
        replaced_file_ids: Mapping[str, Sequence[str]] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> Instant:
        """Publish the write, or raise (WriteConflictError, HeartbeatExpiredError, ...) after rolling back."""
        replaced = {p: tuple(ids) for p, ids in (replaced_file_ids or {}).items()}
        try:
            self._remove_partial_files(pending, stats)
            self._ensure_partition_metafiles(pending, [s.partition_path for s in stats])
            extra_meta = dict(extra or {})
            if schema_json:
                extra_meta["schema"] = schema_json
            meta = CommitMetadata(
                operation=pending.operation,
                write_stats=tuple(sorted(stats, key=lambda s: (s.partition_path, s.file_id))),
                extra=extra_meta,
                replaced_file_ids=replaced,
                is_replace=pending.action is Action.REPLACE_COMMIT,
            )
            # The bytes are written ahead of the lock: under it a link names them (storage/staged.py).
            staged = stage(self.storage, TIMELINE_DIR, meta.to_bytes())
            # So is the metadata table's deltacommit, pending until under the lock (metadata/staged_deltacommit.py).
            mdt = stage_deltacommit(self.storage, pending.instant_time, stats) if self.config.metadata_enable else None
            waited = time.perf_counter()
            try:
                with self.lock.hold("commit"):
                    entered = time.perf_counter()
                    timeline, completion_time = self._publish_under_lock(pending, stats, replaced, staged, meta,
                                                                         schema_json, mdt)
                released = time.perf_counter()
            finally:
                staged.discard()
                discard(self.storage, mdt)
            published = Instant(pending.instant_time, pending.action, State.COMPLETED, completion_time)
            self.last_commit_timing = CommitTiming(
                lock_wait_ms=(entered - waited) * 1000, critical_section_ms=(released - entered) * 1000
            )
            # The timeline read under the lock with this instant completed: what the inline
            # services decide with (a hint; each service reloads under its own lock).
            self.committed_timeline = timeline.restricted(
                [*(i for i in timeline if i.requested_time != pending.instant_time), published])
        except BaseException:
            self.abort_if_pending(pending)
            raise
        if pending.heartbeat is not None:
            pending.heartbeat.stop()
        delete_markers(self.storage, pending.instant_time)
        return published

    def _publish_under_lock(
        self,
        pending: PendingWrite,
        stats: Sequence[WriteStat],
        replaced: dict[str, tuple[str, ...]],
        staged: StagedFile,
        meta: CommitMetadata,
        schema_json: str | None,
        mdt: StagedDeltacommit | None = None,
    ) -> tuple[Timeline, str]:
        """The critical section of :meth:`complete`, called holding the lock: reload the timeline,
        run the checks, publish ``staged`` (``meta``'s bytes; staged again if the schema is
        reconciled) after the metadata table's staged deltacommit ``mdt``. Returns the timeline read
        and the completion time."""
        # Loaded first: the guard changes no data-timeline file, and reads this one (one listing).
        timeline = self.timeline_under_lock = Timeline.load(self.storage)
        try:
            self.guard()
        finally:
            self.timeline_under_lock = None
        if self.config.multi_writer:
            seen = pending.seen
            if seen is None:  # no snapshot recorded: everything completed after we started counts
                seen = frozenset(
                    i.requested_time for i in timeline.completed if i.requested_time < pending.instant_time
                    and (i.completion_time or "") < pending.instant_time
                )
            checked, seen = _window_across_archival(timeline, seen, pending.seen is not None)
            mine = PendingCommit(pending.instant_time, tuple(stats), replaced, seen,
                                 pending.snapshot_files if pending.seen is not None else None)
            self.strategy.check(self.storage, checked, mine)
            not_built_on_rolled_back(self.storage, checked, mine)
            if schema_json:  # the union with schemas recorded since the snapshot, or a conflict
                reconciled = reconcile_schema(checked, mine, schema_json)
                if reconciled != schema_json:
                    staged.restage(replace(meta, extra={**meta.extra, "schema": reconciled}).to_bytes())
            self._still_mine(pending, timeline)
        self.lock.assert_held()  # the fence: a writer whose lease ran out publishes nothing
        # The metadata table's deltacommit completes first, as Hudi orders it (metadata/maintain.py).
        publish_deltacommit(self.storage, mdt, pending.instant_time, stats,
                            compact_after=self.config.metadata_compact_max_delta_commits)
        completion_time = self._new_time(timeline, at_least=pending.instant_time)
        name = instant_file_name(pending.instant_time, pending.action, State.COMPLETED, completion_time)
        outcome = staged.publish(f"{TIMELINE_DIR}/{name}")
        if outcome is not CreateOutcome.CREATED:
            raise CommitError(f"could not publish {name}: {outcome.value}", instant_time=pending.instant_time)
        return timeline, completion_time

    def abort(self, pending: PendingWrite) -> RollbackResult:
        """Roll back a write that will not complete: its files go, a rollback instant records it."""
        try:
            with self.lock.hold("roll back a failed write"):
                inst = Instant(pending.instant_time, pending.action, State.INFLIGHT)
                return rollback(self.storage, inst, timeline=Timeline.load(self.storage))
        finally:
            if pending.heartbeat is not None:
                pending.heartbeat.stop()

    def abort_if_pending(self, pending: PendingWrite) -> RollbackResult | None:
        timeline = Timeline.load(self.storage)
        if timeline.is_completed(pending.instant_time):
            return None
        if not any(i.requested_time == pending.instant_time for i in timeline):
            if pending.heartbeat is not None:  # somebody else rolled it back already
                pending.heartbeat.stop()
            return None
        return self.abort(pending)
