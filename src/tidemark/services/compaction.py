"""Compaction (merge-on-read): merge each file slice's logs into a new base file.

Lifecycle::

    schedule   [lock] reload the timeline; plan the latest slice of every file group
               that has logs, counting only deltacommits completed by now;
               <t>.compaction.requested  (HoodieCompactionPlan, Avro)
    execute    (no lock) <t>.compaction.inflight; per planned slice: read the base
               file and the planned logs, fold them with the table's record merger
               (tidemark.read.merge, as a snapshot read does), write the live records
               to <fileId>_<token>_<t>.parquet after its marker
    complete   [lock] <t>_<c>.commit  (v8: a compaction completes as a commit,
               ``operationType=COMPACT``, ``compacted=true``)

Why a log is never lost: the plan names only logs of deltacommits that completed
before the plan's time ``t``. A deltacommit still running when the plan is made
completes after ``t`` (instant times are generated above every time on the
timeline), so the file-system view puts its log on the *new* slice, the one
whose base instant is ``t``: it stays visible on top of the compacted base file.
Ingestion therefore never conflicts with compaction (see concurrency.conflict).

A compaction that died midway stays requested/inflight; the next ``compact()``
deletes its partial files (from markers) and runs the same plan again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.config import WriteConfig
from tidemark.errors import CommitError
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, read_avro, write_avro
from tidemark.format.log_file import delete_ordering_field
from tidemark.format.names import FILE_NAME, TIMELINE_DIR, base_file_name, join_partition, write_token
from tidemark.format.schema import avro_schema_json, with_meta_columns
from tidemark.fsview import FileSystemView
from tidemark.markers import IOType, MarkerSpec, delete_markers, marked_data_files, open_marker_writer
from tidemark.merge import RecordMerger
from tidemark.metadata.listing import table_view
from tidemark.metadata.maintain import record_if_maintained
from tidemark.read.merge import read_slice
from tidemark.services.runner import BUSY, ServiceSteps
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.location import location_of
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time
from tidemark.write.column_encoding import parquet_options
from tidemark.write.file_group import WriteSpec
from tidemark.write.footer import write_base_file
from tidemark.write.meta_columns import constant

OPERATION = "COMPACT"


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact: its base file and the logs to merge into it."""

    partition_path: str
    file_id: str
    base_instant_time: str
    base_file: str  # file name
    log_files: tuple[str, ...]  # file names, in merge order
    log_bytes: int = 0

    def to_avro(self) -> dict[str, Any]:
        return {
            "baseInstantTime": self.base_instant_time,
            "deltaFilePaths": list(self.log_files),
            "dataFilePath": self.base_file,
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "metrics": {"TOTAL_LOG_FILES": float(len(self.log_files)), "TOTAL_LOG_FILES_SIZE": float(self.log_bytes)},
            "bootstrapFilePath": None,
        }

    @classmethod
    def from_avro(cls, rec: dict[str, Any]) -> CompactionOperation:
        metrics: dict[str, float] = rec.get("metrics") or {}
        return cls(
            partition_path=str(rec.get("partitionPath") or ""),
            file_id=str(rec.get("fileId") or ""),
            base_instant_time=str(rec.get("baseInstantTime") or ""),
            base_file=str(rec.get("dataFilePath") or ""),
            log_files=tuple(rec.get("deltaFilePaths") or ()),
            log_bytes=int(metrics.get("TOTAL_LOG_FILES_SIZE", 0)),
        )


@dataclass(frozen=True)
class CompactionPlan:
    instant_time: str
    operations: tuple[CompactionOperation, ...]

    def to_bytes(self) -> bytes:
        return write_avro(
            "compaction_plan",
            {
                "operations": [op.to_avro() for op in self.operations],
                "extraMetadata": {},
                "version": 2,
                "strategy": None,
                "preserveHoodieMetadata": False,
                "missingSchedulePartitions": [],
            },
        )

    @classmethod
    def from_bytes(cls, instant_time: str, data: bytes, *, source: str | None = None) -> CompactionPlan:
        rec = read_avro(data, source=source)
        ops = tuple(CompactionOperation.from_avro(op) for op in rec.get("operations") or ())
        return cls(instant_time, ops)


@dataclass(frozen=True)
class CompactionResult:
    instant: Instant
    stats: tuple[WriteStat, ...]

    @property
    def file_groups(self) -> tuple[str, ...]:
        return tuple(sorted(s.file_id for s in self.stats))


# Runs compact_slice over the operations (an engine's tasks), with the table's merger.
SliceRunner = Callable[[WriteSpec, RecordMerger, list[CompactionOperation]], list[WriteStat]]


def pending_compactions(timeline: Timeline) -> list[Instant]:
    return [i for i in timeline.pending if i.action is Action.COMPACTION]


def delta_commits_since_last_compaction(timeline: Timeline) -> int:
    """Completed deltacommits after the latest compaction (scheduled or done)."""
    last = max(
        [i.requested_time for i in timeline if i.action is Action.COMPACTION]
        + [i.requested_time for i in timeline.completed if i.action is Action.COMMIT
           and timeline.commit_metadata(i).compacted],
        default="",
    )
    return sum(1 for i in timeline.completed if i.action is Action.DELTA_COMMIT and i.requested_time > last)


def plan_operations(view: FileSystemView) -> list[CompactionOperation]:
    """The latest slice of every file group that has logs (only completed instants are in the view)."""
    ops = []
    for group in sorted(view.file_groups(), key=lambda g: (g.partition_path, g.file_id)):
        current = group.latest_slice
        if not current.logs:
            continue
        ops.append(
            CompactionOperation(
                partition_path=group.partition_path,
                file_id=group.file_id,
                base_instant_time=current.base_instant_time,
                base_file=current.base.name,
                log_files=tuple(log.name for log in current.logs),
                log_bytes=sum(log.size for log in current.logs),
            )
        )
    return ops


def schedule(storage: Storage, timeline: Timeline) -> CompactionPlan | None:
    """Write ``<t>.compaction.requested``; call under the table lock with a fresh timeline.

    None when there is nothing to compact, or when a compaction is already pending
    (its base files are not visible yet, so a second plan would take the same logs).
    """
    if pending_compactions(timeline):
        return None
    ops = plan_operations(table_view(storage, timeline))
    if not ops:
        return None
    while True:
        instant_time = new_instant_time(floor=timeline.max_time())
        plan = CompactionPlan(instant_time, tuple(ops))
        name = instant_file_name(instant_time, Action.COMPACTION, State.REQUESTED)
        if storage.create_if_absent(f"{TIMELINE_DIR}/{name}", plan.to_bytes()) is CreateOutcome.CREATED:
            return plan
        timeline = timeline.reload()


def load_plan(storage: Storage, instant_time: str) -> CompactionPlan:
    name = instant_file_name(instant_time, Action.COMPACTION, State.REQUESTED)
    path = f"{TIMELINE_DIR}/{name}"
    return CompactionPlan.from_bytes(instant_time, storage.read_bytes(path), source=path)


def compact_slice(
    spec: WriteSpec, storage: Storage, op: CompactionOperation, task: int, merger: RecordMerger
) -> WriteStat:
    """Merge one planned slice into a new base file (what one engine task does).

    The slice is folded with ``merger`` (the table's, built once on the driver) exactly as a
    snapshot read folds it; the new base file keeps the live records only (deletes that won
    leave nothing behind).
    """
    started = time.monotonic()
    token = write_token(task, 0, 0)
    name = base_file_name(op.file_id, token, spec.instant_time)
    rel_path = join_partition(op.partition_path, name)
    markers = open_marker_writer(storage, spec.instant_time, spec.markers)
    try:
        markers.create(rel_path, IOType.MERGE)
    finally:
        markers.close()
    base_path = join_partition(op.partition_path, op.base_file)
    log_paths = [storage.open_input(join_partition(op.partition_path, f)) for f in op.log_files]
    merged = read_slice(
        storage.open_input(base_path),
        log_paths,
        merger,
        spec.schema,
        delete_ordering_field=delete_ordering_field(spec.ordering_fields),
        base_path=base_path,
    )
    # Records keep their commit time and sequence number: the compaction changes no record.
    merged = merged.set_column(merged.schema.get_field_index(FILE_NAME), FILE_NAME,
                               constant(name, merged.num_rows))
    out = storage.open_output(rel_path)
    write_base_file(merged, out.sink, spec, **parquet_options(spec, merged))
    file_size = out.commit()
    return WriteStat(
        partition_path=op.partition_path,
        file_id=op.file_id,
        path=rel_path,
        prev_commit=op.base_instant_time,
        num_writes=merged.num_rows,
        num_inserts=0,
        num_updates=0,
        num_deletes=0,
        file_size=file_size,
        prev_base_file=op.base_file,
        total_write_time_ms=int((time.monotonic() - started) * 1000),
        log_files_compacted=len(op.log_files),
    )


def execute(
    storage: Storage,
    plan: CompactionPlan,
    *,
    user_schema: pa.Schema,
    ordering_fields: Sequence[str],
    merger: RecordMerger,
    compression: str,
    max_file_size: int,
    run_slices: SliceRunner | None = None,
    bloom_filter: bool = True,
) -> list[WriteStat]:
    """Write the compacted base files of ``plan`` (no lock held). Safe to run again.

    ``merger`` is the table's record merger; ``run_slices`` runs :func:`compact_slice` over
    the operations (an engine: Spark tasks); by default they run one after the other here.
    """
    inflight = instant_file_name(plan.instant_time, Action.COMPACTION, State.INFLIGHT)
    storage.create_if_absent(f"{TIMELINE_DIR}/{inflight}")
    for leftover in marked_data_files(storage, plan.instant_time):  # a previous attempt died
        storage.delete(leftover)
    delete_markers(storage, plan.instant_time)
    spec = WriteSpec(
        location=location_of(storage),
        base_path=storage.base_path,
        instant_time=plan.instant_time,
        schema=with_meta_columns(user_schema),
        ordering_fields=tuple(ordering_fields),
        compression=compression,
        max_file_size=max_file_size,
        bloom_filter=bloom_filter,
        markers=MarkerSpec(),
    )
    if run_slices is not None:
        return run_slices(spec, merger, list(plan.operations))
    return [compact_slice(spec, storage, op, i, merger) for i, op in enumerate(plan.operations)]


def complete(storage: Storage, plan: CompactionPlan, stats: Sequence[WriteStat], *, user_schema: pa.Schema,
             table_name: str, metadata_compact_after: int | None = None) -> Instant:
    """Publish ``<t>_<c>.commit``; call under the table lock.

    Raises CommitError (publishing nothing) if the compaction is no longer pending: a restore
    rolled it back meanwhile, or another runner of the same plan completed it first.
    """
    timeline = Timeline.load(storage)
    mine = [i for i in timeline if i.requested_time == plan.instant_time]
    if not any(i.action is Action.COMPACTION and not i.is_completed for i in mine) or any(
        i.is_completed for i in mine
    ):
        raise CommitError(
            f"compaction {plan.instant_time} is no longer pending (rolled back by a restore, or completed by "
            "another runner of the same plan): its files are not published. Run compact() again if needed."
        )
    meta = CommitMetadata(
        operation=OPERATION,
        write_stats=tuple(sorted(stats, key=lambda s: (s.partition_path, s.file_id))),
        # The latest recorded schema: writes may have evolved it since the plan (it reads ours).
        extra={"schema": timeline.latest_schema_json() or avro_schema_json(user_schema, table_name)},
        compacted=True,
    )
    record_if_maintained(storage, plan.instant_time, stats,  # the metadata table first, as Hudi orders it
                         compact_after=metadata_compact_after)
    completion = new_instant_time(floor=max(filter(None, [timeline.max_time(), plan.instant_time])))
    name = instant_file_name(plan.instant_time, Action.COMMIT, State.COMPLETED, completion)
    if storage.create_if_absent(f"{TIMELINE_DIR}/{name}", meta.to_bytes()) is CreateOutcome.ALREADY_EXISTS:
        raise CommitError(f"compaction {plan.instant_time} was completed by another runner at the same moment")
    delete_markers(storage, plan.instant_time)
    return Instant(plan.instant_time, Action.COMMIT, State.COMPLETED, completion)


class CompactionSteps(ServiceSteps[CompactionPlan, list[WriteStat], CompactionResult]):
    """Compaction as a table service (:func:`tidemark.services.runner.run_service`): a pending
    compaction (a crashed runner's) is resumed, unless its runner's heartbeat is alive; else
    a plan is scheduled under the lock; slices run through ``run_slices`` (the engine's)."""

    plan_purpose = "schedule a compaction"
    complete_purpose = "complete a compaction"

    def __init__(
        self,
        storage: Storage,
        config: WriteConfig,
        *,
        heartbeats: HeartbeatPolicy,
        schema: Callable[[], pa.Schema],
        merger: Callable[[], RecordMerger],
        ordering_fields: Sequence[str],
        table_name: str,
        run_slices: SliceRunner | None,
    ) -> None:
        self.storage = storage
        self.config = config
        self.heartbeats = heartbeats
        self.schema = schema
        self.merger = merger
        self.ordering_fields = tuple(ordering_fields)
        self.table_name = table_name
        self.run_slices = run_slices

    def resume(self) -> CompactionPlan | None:
        for pending in pending_compactions(Timeline.load(self.storage)):
            if self.config.multi_writer and not self.heartbeats.is_expired(self.storage, pending.requested_time):
                return BUSY  # another process is running it
            return load_plan(self.storage, pending.requested_time)
        return None

    def plan(self) -> CompactionPlan | None:
        return schedule(self.storage, Timeline.load(self.storage))

    def instant_time(self, plan: CompactionPlan) -> str:
        return plan.instant_time

    def execute(self, plan: CompactionPlan) -> list[WriteStat]:
        return execute(
            self.storage, plan, user_schema=self.schema(), ordering_fields=self.ordering_fields,
            merger=self.merger(), compression=self.config.compression, max_file_size=self.config.max_file_size,
            run_slices=self.run_slices, bloom_filter=self.config.bloom_filter,
        )

    def complete(self, plan: CompactionPlan, result: list[WriteStat]) -> CompactionResult:
        instant = complete(self.storage, plan, result, user_schema=self.schema(), table_name=self.table_name,
                           metadata_compact_after=self.config.metadata_compact_max_delta_commits)
        return CompactionResult(instant, tuple(result))


__all__ = [
    "CompactionOperation",
    "CompactionSteps",
    "CompactionPlan",
    "CompactionResult",
    "compact_slice",
    "complete",
    "delta_commits_since_last_compaction",
    "execute",
    "load_plan",
    "pending_compactions",
    "plan_operations",
    "schedule",
]
