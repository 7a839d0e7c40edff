"""Conflict resolution at commit time, as a named checklist.

Three questions, as in Hudi's strategy interface:

1. which instants are *candidates*: data instants that completed but were not
   yet completed in the timeline snapshot this write planned against (its index
   lookup and file sizing could not see them), plus pending table-service plans
   (compaction, clustering). Comparing with the snapshot, not with our requested
   time, matters: a commit can complete after we loaded the timeline but before
   our instant time was generated;
2. does a candidate *conflict* with this write — each rule below raises
   :class:`WriteConflictError` with the instant and file groups:
   * ``no_shared_file_groups``: both wrote (or replaced) a file group;
   * ``no_concurrent_inserts_of_same_keys`` (tidemark's default strategy, not
     Hudi's): both wrote the same record key in a partition — this is how two
     writers inserting the same new key would create a duplicate, since each
     put it in a new file group of its own. Decided exactly from the written
     key columns, read only where both inserted into the same partition;
3. can it be resolved: not here; the write aborts and may be retried.

Whatever the strategy, :func:`not_built_on_rolled_back` also holds: a write must not
publish on top of a completed instant that a rollback removed after the write planned
(its new file versions carry the rolled-back rows, which would come back), nor while a
restore is pending (see the function).

Clustering (a table service) and ingestion: with the default update strategy
``allow`` a pending clustering plan never fails a write: the clustering checks
at its own commit and aborts if a write touched its file groups (ingestion
wins, see :mod:`tidemark.services.cluster`). A write that planned against the
table before a clustering *completed* and updated a file group it replaced
gets :class:`ClusteringConflictError`, which :class:`tidemark.Table` answers by
running the write again on the clustered table. With ``reject`` a write that
touches a file group of a pending clustering fails.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import (
    ClusteringConflictError,
    ConfigError,
    InstantNotFoundError,
    RolledBackConflictError,
    SchemaConflictError,
    WriteConflictError,
)
from tidemark.format.clustering_plan import CLUSTER_OPERATION
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, read_avro
from tidemark.format.log_file import parse_log_file_name
from tidemark.format.names import COMMIT_TIME, RECORD_KEY, TIMELINE_DIR, parse_base_file_name
from tidemark.format.parquet_file import read_data_file
from tidemark.format.schema import arrow_schema_from_avro, avro_schema_json, table_name_of
from tidemark.format.schema_evolution import union
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name

_SERVICE_PLANS = {Action.COMPACTION, Action.CLUSTERING, Action.LOG_COMPACTION}


@dataclass(frozen=True)
class CommitWindow:
    """What this write validates against: every data instant its snapshot did not contain."""

    requested_time: str
    seen: frozenset[str]  # requested times of the instants completed in the write's snapshot
    # The file names of the snapshot's listing (Timeline.file_names), when it was a plain load:
    # the instants completed since are then found among the names that are new, not by a pass
    # over every instant. The same instants either way (seen is what that listing completed).
    snapshot_files: AbstractSet[str] | None = None

    def completed_since(self, timeline: Timeline) -> list[Instant]:
        """Completed instants (any action) not completed in the snapshot, other than this write."""
        fresh = timeline.completed_since(self.snapshot_files)
        if fresh is None:
            fresh = timeline.completed
        return [i for i in fresh if i.requested_time != self.requested_time and i.requested_time not in self.seen]

    def candidates(self, timeline: Timeline) -> list[Instant]:
        done = [i for i in self.completed_since(timeline) if i.action.writes_data]
        plans = [i for i in timeline.pending if i.action in _SERVICE_PLANS]
        return sorted(done, key=lambda i: i.completion_time or "") + plans


@dataclass(frozen=True)
class PendingCommit:
    instant_time: str
    stats: tuple[WriteStat, ...]
    replaced: dict[str, tuple[str, ...]]
    seen: frozenset[str]  # instants completed in the snapshot the write planned against
    snapshot_files: AbstractSet[str] | None = None  # that snapshot's listing (CommitWindow)

    @property
    def window(self) -> CommitWindow:
        return CommitWindow(self.instant_time, self.seen, self.snapshot_files)

    def file_groups(self) -> set[tuple[str, str]]:
        touched = {(s.partition_path, s.file_id) for s in self.stats}
        for partition, ids in self.replaced.items():
            touched.update((partition, f) for f in ids)
        return touched


def _written_keys(storage: Storage, stats: Iterable[WriteStat], instant_time: str) -> dict[str, pa.Array]:
    """Per partition, the record keys that ``instant_time`` wrote (rows carrying its commit time)."""
    out: dict[str, list[pa.Array]] = {}
    for stat in stats:
        if stat.num_inserts <= 0 or not stat.path:
            continue
        try:
            source = storage.open_ranged(stat.path)  # two columns: ranged reads of their chunks
            table = read_data_file(source, path=stat.path, columns=[COMMIT_TIME, RECORD_KEY])
        except FileNotFoundError:  # cleaned since: its keys live on in a later version we also check
            continue
        mine = table.filter(pc.equal(table.column(COMMIT_TIME), instant_time))
        out.setdefault(stat.partition_path, []).append(mine.column(RECORD_KEY).combine_chunks())
    return {p: pa.concat_arrays(arrays) for p, arrays in out.items()}


def file_group_of(path: str) -> tuple[str, str] | None:
    """(partition, file id) of a base or log file path relative to the table, or None."""
    partition, _, name = path.rpartition("/")
    parsed = parse_base_file_name(name) or parse_log_file_name(name)
    return None if parsed is None else (partition, parsed.file_id)


def undone_by_rollback(
    storage: Storage, timeline: Timeline, rollback: Instant
) -> tuple[str | None, set[tuple[str, str]]]:
    """The instant a rollback undoes, and the file groups it removes files from.

    From its plan (``<r>.rollback.requested``: every file it is to delete) and, once completed,
    its metadata (the files it did delete); either may be missing (archived, half written).
    """
    target: str | None = None
    files: list[str] = []
    plan = f"{TIMELINE_DIR}/{instant_file_name(rollback.requested_time, Action.ROLLBACK, State.REQUESTED)}"
    try:
        rec = read_avro(storage.read_bytes(plan))
        target = (rec.get("instantToRollback") or {}).get("commitTime")
        files += rec.get("filesToDelete") or []
    except (FileNotFoundError, ValueError, EOFError):
        pass
    if rollback.is_completed:
        try:
            rec = read_avro(timeline.instant_bytes(rollback))
        except (FileNotFoundError, InstantNotFoundError, ValueError, EOFError):
            rec = {}
        target = target or next(iter(rec.get("commitsRollback") or []), None)
        for meta in (rec.get("partitionMetadata") or {}).values():
            files += meta.get("successDeleteFiles") or []
    groups = {g for g in map(file_group_of, files) if g is not None}
    return target, groups


def not_built_on_rolled_back(storage: Storage, timeline: Timeline, mine: PendingCommit) -> None:
    """A write must not publish on top of what a rollback or restore removed since it planned.

    * a rollback (completed, or left pending by a dead process) of an instant that was
      completed in the write's snapshot, which removed files of a file group the write
      touches: the write's new file versions were built on the rolled-back ones (its base
      file, or the slice its logs were appended to), so publishing it would bring the
      rolled-back rows back. Rollbacks of writes that were pending in the snapshot never
      conflict: the write could not see their files.
    * any pending restore: it is rolling the table back to a savepoint and must be finished
      first (the next write or `tidemark clean` finishes it). A restore runs under the table
      lock, so one seen pending from under the lock was interrupted.

    Raises :class:`RolledBackConflictError`. Holds whatever the conflict strategy, so a
    rollback is never undone by a concurrent writer.
    """
    for restore in timeline.pending:
        if restore.action is Action.RESTORE:
            raise RolledBackConflictError(
                instant_time=mine.instant_time, conflicting_instant=restore.requested_time, rolled_back=None,
                file_groups=[],
            )
    touched = mine.file_groups()
    # Rollbacks not completed in the snapshot: the pending ones and those completed since.
    completed = [i for i in mine.window.completed_since(timeline) if i.action is Action.ROLLBACK]
    for rollback in sorted([*completed, *(i for i in timeline.pending if i.action is Action.ROLLBACK)],
                           key=lambda i: i.requested_time):
        if rollback.requested_time in mine.seen:
            continue
        target, groups = undone_by_rollback(storage, timeline, rollback)
        if target is None or target not in mine.seen:
            continue
        shared = sorted(touched & groups)
        if shared:
            raise RolledBackConflictError(
                instant_time=mine.instant_time, conflicting_instant=rollback.requested_time, rolled_back=target,
                file_groups=shared,
            )


def reconcile_schema(timeline: Timeline, mine: PendingCommit, schema_json: str) -> str:
    """The schema this write records: its own, united with every schema that writes completed
    since its snapshot recorded (in completion order), so that compatible schema changes of
    concurrent writers all land (the table's schema is the union). Raises
    :class:`SchemaConflictError` naming the columns when no schema reads both writes' files
    (the same new column with types neither promotes to, ...). Holds under every strategy
    and concurrency mode: the latest commit's schema must read every file of the table.
    """
    window = mine.window
    united: pa.Schema | None = None
    for theirs in window.candidates(timeline):
        if not theirs.is_completed:
            continue
        their_json = timeline.commit_metadata(theirs).schema_json
        if not their_json or their_json == schema_json:
            continue
        ours = united if united is not None else arrow_schema_from_avro(schema_json)
        united, problems = union(arrow_schema_from_avro(their_json), ours)
        if united is None:
            raise SchemaConflictError(
                instant_time=mine.instant_time, conflicting_instant=theirs.requested_time, problems=problems
            )
    return schema_json if united is None else avro_schema_json(united, table_name_of(schema_json))


class ConflictResolutionStrategy:
    """tidemark's default: Hudi's file-group rule plus the concurrent-insert key rule."""

    check_keys = True
    # hoodie.clustering.updates.strategy=reject: a pending clustering's file groups are off limits.
    reject_updates_under_clustering = False

    def check(self, storage: Storage, timeline: Timeline, mine: PendingCommit) -> None:
        window = mine.window
        for theirs in window.candidates(timeline):
            if not theirs.is_completed:
                if theirs.action is Action.CLUSTERING and self.reject_updates_under_clustering:
                    self.not_under_pending_clustering(timeline, mine, theirs)
                # Otherwise a pending plan lets the write through: a clustering checks at its own
                # commit and aborts if we touched its file groups (ingestion wins). A pending
                # compaction does not conflict with a deltacommit: our logs complete after its
                # plan, so they are not in it and the file-system view puts them on the
                # compacted slice.
                continue
            meta = timeline.commit_metadata(theirs)
            if meta.compacted:
                # A compaction only merged logs that completed before its plan; logs we
                # append complete after it and land on its new slices (fsview), so
                # ingestion on merge-on-read never conflicts with compaction.
                continue
            if meta.operation == CLUSTER_OPERATION:
                self.not_replaced_by_clustering(mine, theirs, meta)
                # A clustering rewrites rows with their own commit times: it inserts no new key.
                continue
            self.no_shared_file_groups(mine, theirs, meta)
            if self.check_keys:
                self.no_concurrent_inserts_of_same_keys(storage, mine, theirs, meta)

    @staticmethod
    def not_replaced_by_clustering(mine: PendingCommit, theirs: Instant, meta: CommitMetadata) -> None:
        """The write must not update a file group that a clustering replaced since its snapshot."""
        shared = sorted(mine.file_groups() & meta.file_groups())
        if shared:
            raise ClusteringConflictError(
                instant_time=mine.instant_time, clustering_instant=theirs.requested_time, file_groups=shared,
                rejected=False,
            )

    @staticmethod
    def not_under_pending_clustering(timeline: Timeline, mine: PendingCommit, theirs: Instant) -> None:
        """reject strategy: the write must not touch a file group of a pending clustering plan."""
        plan = timeline.clustering_plan(theirs)
        if plan is None:
            return
        shared = sorted(mine.file_groups() & plan.file_groups())
        if shared:
            raise ClusteringConflictError(
                instant_time=mine.instant_time, clustering_instant=theirs.requested_time, file_groups=shared,
                rejected=True,
            )

    @staticmethod
    def no_shared_file_groups(mine: PendingCommit, theirs: Instant, meta: CommitMetadata) -> None:
        shared = sorted(mine.file_groups() & meta.file_groups())
        if shared:
            raise WriteConflictError(
                instant_time=mine.instant_time, conflicting_instant=theirs.requested_time, file_groups=shared
            )

    @staticmethod
    def no_concurrent_inserts_of_same_keys(
        storage: Storage, mine: PendingCommit, theirs: Instant, meta: CommitMetadata
    ) -> None:
        their_partitions = {s.partition_path for s in meta.write_stats if s.num_inserts > 0}
        my_stats = [s for s in mine.stats if s.num_inserts > 0 and s.partition_path in their_partitions]
        if not my_stats:
            return
        my_keys = _written_keys(storage, my_stats, mine.instant_time)
        their_keys = _written_keys(
            storage, [s for s in meta.write_stats if s.partition_path in my_keys], theirs.requested_time
        )
        for partition, keys in my_keys.items():
            other = their_keys.get(partition)
            if other is None or len(other) == 0 or len(keys) == 0:
                continue
            both = pc.is_in(keys, value_set=other)
            if pc.any(both).as_py():
                duplicated = keys.filter(both).to_pylist()[:5]
                error = WriteConflictError(
                    instant_time=mine.instant_time,
                    conflicting_instant=theirs.requested_time,
                    file_groups=[(partition, f"<keys {', '.join(map(str, duplicated))}>")],
                )
                error.keys = duplicated  # type: ignore[attr-defined]
                raise error


class FileGroupConflictResolutionStrategy(ConflictResolutionStrategy):
    """Hudi's SimpleConcurrentFileWritesConflictResolutionStrategy: file groups only."""

    check_keys = False


class NonBlockingConflictResolution(ConflictResolutionStrategy):
    """Non-blocking concurrency control: deltacommits never conflict with one another.

    Every writer appends its own log files to file groups fixed by the bucket index;
    readers and compaction merge them with the table's record merger, in completion
    order. The one thing that can still lose a write is a file group *replaced*
    since the snapshot (an insert_overwrite or clustering by a writer in another
    mode): logs appended to a replaced group would vanish, so that conflicts.
    """

    def check(self, storage: Storage, timeline: Timeline, mine: PendingCommit) -> None:
        window = mine.window
        for theirs in window.candidates(timeline):
            if not theirs.is_completed or theirs.action is not Action.REPLACE_COMMIT:
                continue
            meta = timeline.commit_metadata(theirs)
            shared = sorted(mine.file_groups() & {(p, f) for p, ids in meta.replaced_file_ids.items() for f in ids})
            if shared:
                raise WriteConflictError(
                    instant_time=mine.instant_time, conflicting_instant=theirs.requested_time, file_groups=shared
                )


_STRATEGIES: dict[str, type[ConflictResolutionStrategy]] = {
    "tidemark": ConflictResolutionStrategy,
    "key_aware": ConflictResolutionStrategy,
    "simple": FileGroupConflictResolutionStrategy,
    "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy": (
        FileGroupConflictResolutionStrategy
    ),
}


def strategy_by_name(name: str) -> ConflictResolutionStrategy:
    """A strategy by short name, Hudi class name, or ``module:Class`` import path."""
    if name in _STRATEGIES:
        return _STRATEGIES[name]()
    if ":" in name:
        import importlib

        module, _, cls = name.partition(":")
        try:
            return getattr(importlib.import_module(module), cls)()
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"cannot load conflict resolution strategy {name!r}: {exc}",
                              key="hoodie.write.lock.conflict.resolution.strategy") from exc
    raise ConfigError(
        f"unknown conflict resolution strategy {name!r}; use one of {sorted(_STRATEGIES)} or module:Class",
        key="hoodie.write.lock.conflict.resolution.strategy",
    )
