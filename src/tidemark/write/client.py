"""One write, end to end and engine-agnostic: validate, plan, write, commit or roll back.

    validate + dedup + index lookup        (engine; nothing on disk yet: bad input changes nothing)
    start: requested instant               (commit protocol; under the lock in multi-writer modes)
    plan inserts (file sizing), inflight
    write file groups                      (engine tasks; markers first)
    complete: conflict checks, publish     (commit protocol; under the lock)

Each attempt runs in the engine's write session. On a write conflict the attempt is rolled
back and, if ``hoodie.write.num.retries.on.conflict.failures`` allows, run again from the
start with a new instant against the new state of the table; a write that lost to a
clustering runs again too (the one retry loop: :mod:`tidemark.write.retry`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Generic

import pyarrow as pa

from tidemark.config import WriteConfig
from tidemark.errors import CommitError, EarlyConflictError
from tidemark.format.bloom import footer_size
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.log_file import log_schema_json
from tidemark.format.names import META_COLUMNS
from tidemark.format.properties import MERGE_ON_READ, TableConfig
from tidemark.format.schema import avro_schema_json, with_meta_columns
from tidemark.format.schema_evolution import evolve
from tidemark.fsview import BaseFile, FileSystemView
from tidemark.markers import MarkerSpec, MarkerType
from tidemark.markers.batch import MarkerBatch
from tidemark.markers.early_conflict import ConflictDetector, ConflictSignalWatcher, FileGroup
from tidemark.markers.fence import WriteFence
from tidemark.markers.server import MarkerServer
from tidemark.merge import MergeConfig
from tidemark.metadata.listing import table_view
from tidemark.storage import Storage
from tidemark.storage.location import location_of
from tidemark.timeline import Action, Instant, Timeline
from tidemark.timeline.table_schema import latest_table_schema
from tidemark.write.bucket import BucketAssignment, BucketSpec, existing_buckets, new_bucket_salt
from tidemark.write.commit import CommitProtocol, PendingWrite
from tidemark.write.engine import FrameT, WorkloadProfile, WritePipeline, WritePipelines
from tidemark.write.nbcc import empty_base_writer, refuse_base_file_operation
from tidemark.write.operation import Overwrite, WriteOperation
from tidemark.write.plan import InsertBucket, SmallFile, SoleSmallFile, plan_inserts
from tidemark.write.retry import WriteSession, run_with_retries
from tidemark.write.spec import WriteSpec
from tidemark.write.validate import check_key_types, check_storable, require_columns

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteOutcome:
    instant: Instant
    stats: tuple[WriteStat, ...]
    operation: str
    schema: pa.Schema | None  # None: the write fixed no schema (a delete or no rows, on a table without one)
    attempts: int = 1


class WriteClient(Generic[FrameT]):
    """Runs writes against one table with one engine (its frames are ``FrameT``)."""

    def __init__(
        self,
        storage: Storage,
        table_config: TableConfig,
        config: WriteConfig,
        pipelines: WritePipelines[FrameT],
        *,
        protocol: CommitProtocol | None = None,
        session: WriteSession = contextlib.nullcontext,
    ) -> None:
        """``session``: the engine's write session, entered around each attempt (it makes the
        engine's errors typed: a data file found gone raises DataFileNotFoundError)."""
        self.storage = storage
        self.table_config = table_config
        self.config = config
        self.pipelines = pipelines
        self.protocol = protocol or CommitProtocol(storage, config)
        self.session = session
        self.merge_config = MergeConfig.of_table(table_config)
        self.bucket = bucket_spec(table_config)

    def _user_schema(self, pipeline_schema: pa.Schema, table_schema: pa.Schema | None) -> pa.Schema:
        """The table's schema, or (first write) the batch's, checked for the key fields."""
        if table_schema is not None:
            return table_schema
        cfg = self.table_config
        names = pipeline_schema.names
        require_columns("record key", cfg.record_key_fields, names)
        require_columns("partition", cfg.partition_fields, names)
        require_columns("ordering", cfg.ordering_fields, names)
        schema = pa.schema([f for f in pipeline_schema if f.name not in META_COLUMNS])
        check_storable(schema)
        self.merge_config.check_schema(schema, key_fields=cfg.record_key_fields, partition_fields=cfg.partition_fields)
        return schema

    def _evolved_schema(self, incoming: pa.Schema, table_schema: pa.Schema) -> pa.Schema:
        """The table's schema evolved by the batch's columns (Hudi's schema evolution on write)."""
        cfg = self.table_config
        fixed = (*cfg.record_key_fields, *cfg.partition_fields, *cfg.ordering_fields)
        evolution = evolve(table_schema, incoming, fixed_fields=fixed)
        if not evolution.changed:
            return table_schema
        check_storable(evolution.schema)
        self.merge_config.check_schema(
            evolution.schema, key_fields=cfg.record_key_fields, partition_fields=cfg.partition_fields
        )
        log.info("schema evolves: added %s, promoted %s", list(evolution.added), list(evolution.promoted))
        return evolution.schema

    def write(
        self, operation: str | WriteOperation, data: object, table_schema: pa.Schema | None
    ) -> WriteOutcome:
        """Run ``operation`` with ``data``'s rows (retried on conflicts as configured).

        ``delete_partition`` deletes the partitions that ``data``'s rows belong to.
        """
        operation = WriteOperation.parse(operation)
        return self._with_retries(lambda: self._write_once(operation, data, table_schema))

    def delete_partitions(self, partition_paths: Iterable[str], table_schema: pa.Schema | None) -> WriteOutcome:
        """Replace every file group of the named partitions with nothing (``delete_partition``).

        Raises InvalidInputError for a table without partitions, or for a path that names no
        partition of the table (nothing is written then).
        """
        paths = sorted(set(partition_paths))
        return self._with_retries(lambda: self._delete_partitions_once(paths, table_schema))

    def _with_retries(self, write_once: Callable[[], WriteOutcome]) -> WriteOutcome:
        outcome, attempts = run_with_retries(write_once, self.session, self.storage, self.config)
        return replace(outcome, attempts=attempts)

    @contextlib.contextmanager
    def _markers_for(
        self, pipeline: WritePipeline[FrameT], pending: PendingWrite, spec: WriteSpec
    ) -> Iterator[tuple[WriteSpec, MarkerServer | None]]:
        """``spec`` for this write's instant and markers, with the marker server (if the write
        uses one) running around it."""
        early = self.config.early_conflict
        if early is not None:
            early = early.for_write(pending.instant_time, pending.seen or frozenset())
        fence = WriteFence(pending.instant_time, pending.action) if pipeline.tasks_outlive_failures else None
        in_process = pipeline.tasks_in_writer_process and early is None
        # Unset: what costs a write least. Tasks that are this process's threads write MARKERS
        # files (the planned markers in one); executors create direct markers. (With early
        # conflict detection on, the option was resolved with its strategy.)
        marker_type = self.config.markers_type or (
            MarkerType.TIMELINE_SERVER_BASED.value if in_process else MarkerType.DIRECT.value
        )
        if marker_type != MarkerType.TIMELINE_SERVER_BASED.value:
            direct = MarkerSpec(MarkerType.DIRECT, early_conflict=early, fence=fence)
            spec = replace(spec, instant_time=pending.instant_time, markers=direct)
            if early is None:
                yield spec, None
                return
            watcher = ConflictSignalWatcher(self.storage, pending.instant_time, pipeline.cancel_write).start()
            try:
                yield spec, None
            except Exception as failure:
                signalled = watcher.stop()
                if signalled is not None and not isinstance(failure, EarlyConflictError):
                    raise signalled from failure  # the job was cancelled because of it
                raise
            finally:
                watcher.stop()
            return
        if in_process:
            with MarkerBatch(self.storage, pending.instant_time, max_files=self.config.marker_batch_threads) as batch:
                batched = MarkerSpec(MarkerType.TIMELINE_SERVER_BASED, batch_id=batch.batch_id, fence=fence)
                yield replace(spec, instant_time=pending.instant_time, markers=batched), None
            return
        server = MarkerServer(
            self.storage,
            pending.instant_time,
            host=pipeline.marker_server_host,
            batch_interval_ms=self.config.marker_batch_interval_ms,
            num_threads=self.config.marker_batch_threads,
            early_conflict=early,
            on_conflict=lambda _conflict: pipeline.cancel_write(),
        ).start()
        try:
            served = MarkerSpec(
                MarkerType.TIMELINE_SERVER_BASED, server_url=server.url, early_conflict=early, fence=fence
            )
            yield replace(spec, instant_time=pending.instant_time, markers=served), server
        finally:
            server.stop()

    def _check_early(self, pending: PendingWrite, file_groups: set[FileGroup]) -> None:
        """Before any task starts: stop now if an existing file group we will write is taken."""
        early = self.config.early_conflict
        if early is None or not file_groups:
            return
        ConflictDetector(self.storage, early.for_write(pending.instant_time, pending.seen or frozenset())).check(
            file_groups
        )

    @property
    def merge_on_read(self) -> bool:
        return self.table_config.table_type == MERGE_ON_READ

    def _write_once(self, operation: WriteOperation, data: object, table_schema: pa.Schema | None) -> WriteOutcome:
        op_name, action = operation.hudi_name, operation.action(merge_on_read=self.merge_on_read)
        if self.config.non_blocking and operation.replaces_base_files:
            refuse_base_file_operation(operation.value)
        cfg = self.table_config
        keys_only = operation.keys_only
        batch = self.pipelines.batch(data)
        incoming_schema = self.pipelines.schema_of(batch)
        check_key_types(incoming_schema, cfg.record_key_fields, cfg.partition_fields)
        # A delete, or a write of no rows, on a table without a schema yet fixes none: the next
        # write of whole rows sets it (else the table would be stuck with the delete's columns).
        fixes_schema = table_schema is None and not keys_only and not self.pipelines.is_empty(batch)
        protocol = self.protocol
        protocol.prepare_for_write()
        snapshot = protocol.take_snapshot()  # the timeline prepare_for_write listed: one listing, not two
        # The schema of the snapshot this write plans against (a concurrent writer may have
        # evolved it since the caller read it); the commit reconciles it with later ones.
        table_schema = latest_table_schema(snapshot, table_schema)
        if keys_only:
            user_schema = table_schema or incoming_schema
        elif table_schema is None:
            user_schema = self._user_schema(incoming_schema, table_schema)
        else:
            user_schema = self._evolved_schema(incoming_schema, table_schema)
        pipeline = self.pipelines.pipeline(user_schema, operation)
        view = table_view(self.storage, snapshot)  # lists only the partitions the write asks about
        # The bucket index routes by key hash; bulk_insert writes into the buckets too.
        dedup = operation.writes_rows and (
            self.bucket is not None or operation is not WriteOperation.BULK_INSERT
            or self.config.combine_before_bulk_insert
        )
        try:
            # Everything that can reject the input happens before the instant is requested.
            prepared = pipeline.prepare(
                batch, allow_missing=self.config.set_null_for_missing_columns, keys_only=keys_only, dedup=dedup
            )
            if operation is WriteOperation.DELETE_PARTITION:
                self._require_partitioned()
                require_columns("partition", cfg.partition_fields, incoming_schema.names)
                paths = sorted(pipeline.partition_counts(prepared))
                return self._delete_partitions_once(paths, table_schema, prepared_for_write=True)
            profile: WorkloadProfile | None = None  # simple index: counted before the instant is requested
            tagged: FrameT | None
            if self.bucket is not None:
                tagged = self._tag_buckets(operation, pipeline, prepared, view)
                if self.config.non_blocking:
                    view = self._ensure_file_groups(pipeline, tagged, user_schema, view)
            elif operation is WriteOperation.BULK_INSERT:
                tagged = None
            else:
                policy = self.config.insert_dup_policy if operation is WriteOperation.INSERT else "none"
                looked = pipeline.look_up(  # may reject null keys
                    prepared, view, find_existing=operation.looks_up_keys, drop_existing=policy == "drop",
                    sole=self._sole_small_file(operation, view),
                )
                tagged, profile = looked.rows, looked.profile
                if policy == "fail":
                    _refuse_existing(profile)

            pending = protocol.start(op_name, action)
            pending.planned_against(view.timeline)
            try:
                replaced: dict[str, list[str]] = {}
                with self._markers_for(pipeline, pending, _spec(self, user_schema)) as (spec, server):
                    try:
                        if tagged is None:
                            protocol.inflight(pending)
                            stats = pipeline.write_bulk(spec, prepared)
                        else:
                            stats, replaced = self._write_tagged(
                                operation, pipeline, spec, tagged, profile, view, pending
                            )
                        if server is not None:
                            server.final_check()
                    except Exception as failure:
                        found = server.conflict_error() if server is not None else None
                        if found is not None and not isinstance(failure, EarlyConflictError):
                            raise found from failure  # the job was cancelled because of it
                        raise
                recorded = (user_schema if not keys_only else table_schema) if table_schema is not None \
                    else user_schema if fixes_schema else None
                instant = protocol.complete(
                    pending,
                    stats,
                    schema_json=avro_schema_json(recorded, cfg.name) if recorded is not None else None,
                    replaced_file_ids=replaced,
                )
            except BaseException:
                protocol.abort_if_pending(pending)
                raise
        finally:
            pipeline.release()
        return WriteOutcome(instant, tuple(stats), op_name, user_schema if fixes_schema or table_schema else None)

    def _require_partitioned(self) -> None:
        from tidemark.errors import InvalidInputError

        if not self.table_config.partition_fields:
            raise InvalidInputError(
                "delete_partition needs a partitioned table; to empty this table, run "
                "insert_overwrite_table with an empty batch"
            )

    def _delete_partitions_once(
        self, paths: Sequence[str], table_schema: pa.Schema | None, *, prepared_for_write: bool = False
    ) -> WriteOutcome:
        from tidemark.errors import InvalidInputError

        operation = WriteOperation.DELETE_PARTITION
        if self.config.non_blocking and operation.replaces_base_files:  # a replacecommit: not log-only
            refuse_base_file_operation(operation.value)
        self._require_partitioned()
        protocol = self.protocol
        if not prepared_for_write:
            protocol.prepare_for_write()
        view = table_view(self.storage, Timeline.load(self.storage))
        known = set(view.partitions())
        unknown = [p for p in paths if p not in known]
        if unknown or not paths:
            shown = ", ".join(repr(p) for p in sorted(known)[:5]) or "none"
            raise InvalidInputError(
                f"delete_partition: {', '.join(map(repr, unknown)) or 'no partition'} named no partition of the "
                f"table; its partitions (as stored, e.g. city=sf) include: {shown}"
            )
        replaced = _replaced_groups(view, operation.overwrite, set(paths))
        pending = protocol.start(operation.hudi_name, operation.action(merge_on_read=self.merge_on_read))
        pending.planned_against(view.timeline)
        try:
            protocol.inflight(pending)
            schema = table_schema or pa.schema([])
            instant = protocol.complete(
                pending, [], schema_json=avro_schema_json(schema, self.table_config.name) if table_schema else None,
                replaced_file_ids=replaced,
            )
        except BaseException:
            protocol.abort_if_pending(pending)
            raise
        return WriteOutcome(instant, (), operation.hudi_name, schema)

    def _tag_buckets(
        self, operation: WriteOperation, pipeline: WritePipeline[FrameT], batch: FrameT, view: FileSystemView
    ) -> FrameT:
        """Bucket index: each row's file group from its key's bucket; a bucket's current file group
        is found by listing (file ids start with the bucket number)."""
        assert self.bucket is not None
        groups = [(g.partition_path, g.file_id) for g in view.file_groups()]
        assignment = BucketAssignment(
            self.bucket,
            existing_buckets(groups),
            salt=new_bucket_salt() if operation.overwrite is not Overwrite.NONE else None,
            # A non-blocking delete is kept even where the bucket is new: it carries an ordering
            # value and must still win against a concurrent, older insert of the key.
            only_existing=operation is WriteOperation.DELETE and not self.config.non_blocking,
        )
        policy = self.config.insert_dup_policy
        if operation is WriteOperation.INSERT and policy != "none":
            # drop / fail need to know which keys exist: the one case that looks keys up.
            looked = pipeline.look_up(batch, view, find_existing=True, drop_existing=policy == "drop")
            if policy == "fail":
                _refuse_existing(looked.profile)
            batch = looked.rows
        return pipeline.assign_buckets(batch, view, assignment)

    def _ensure_file_groups(
        self, pipeline: WritePipeline[FrameT], tagged: FrameT, user_schema: pa.Schema, view: FileSystemView
    ) -> FileSystemView:
        """Non-blocking writers only append logs: create the file groups of new buckets first
        (see :mod:`tidemark.write.nbcc`) and return a view that has them."""
        wanted = pipeline.file_groups_of(tagged)
        if wanted <= {(g.partition_path, g.file_id) for g in view.file_groups()}:
            return view
        self.protocol.create_file_groups(
            wanted,
            empty_base_writer(self.storage, with_meta_columns(user_schema), self.config.compression),
            action=Action.DELTA_COMMIT,
            schema_json=avro_schema_json(user_schema, self.table_config.name),
        )
        view = table_view(self.storage, Timeline.load(self.storage))
        absent = wanted - {(g.partition_path, g.file_id) for g in view.file_groups()}
        if absent:  # only if a writer in another mode gave the bucket a file group of another id
            raise CommitError(
                f"bucket file groups {sorted(absent)[:3]} could not be created: their buckets have file groups "
                "with other ids; write this table only with non_blocking_concurrency_control writers"
            )
        return view

    def _record_size(self, timeline: Timeline) -> int:
        """Average bytes per record of the latest commit that wrote files, else the estimate.

        Each base file's bloom-filter footer (a fixed ~430 KB, as in Hudi) is taken out first:
        left in, the records of a commit of a few rows would look enormous and split the next
        large insert into tiny files.
        """
        for inst in reversed(timeline.by_completion_time()):
            if not inst.action.writes_data:
                continue
            # Log files (merge-on-read) hold Avro rows: they say nothing of a base file's record size.
            stats = [s for s in timeline.commit_metadata(inst).write_stats if not s.log_files]
            rows = sum(s.num_writes for s in stats)
            size = sum(max(0, s.file_size - footer_size(s.num_writes)) for s in stats)
            if rows > 0 and size > 0:
                return max(1, size // rows)
        return self.config.record_size_estimate

    def _sole_small_file(self, operation: WriteOperation, view: FileSystemView) -> SoleSmallFile | None:
        """An upsert's test for partitions whose keys need no lookup (:class:`SoleSmallFile`):
        the one file group that takes all of a partition's rows is the one :meth:`_plan_inserts`
        would top up with its new keys, by the same sizes."""
        if operation is not WriteOperation.UPSERT or self.merge_on_read or not operation.tops_up_small_files \
                or self.config.small_file_limit <= 0:
            return None
        return SoleSmallFile(self.config.small_file_limit, self.config.max_file_size, self._record_size(view.timeline))

    def _plan_inserts(
        self, counts: dict[str, int], view: FileSystemView, *, use_small_files: bool, record_size: int,
        rewritten: frozenset[tuple[str, str]] = frozenset(),
    ) -> list[InsertBucket]:
        small: dict[str, list[SmallFile]] = {}
        if use_small_files and self.config.small_file_limit > 0:
            for base in view.latest_base_files(counts):
                if base.size < self.config.small_file_limit:
                    small.setdefault(base.partition_path, []).append(SmallFile(base.file_id, base.path, base.size))
        return plan_inserts(counts, small, record_size=record_size, max_file_size=self.config.max_file_size,
                            rewritten=rewritten)

    def _write_weights(
        self,
        latest: Mapping[FileGroup, BaseFile],
        profile: WorkloadProfile,
        buckets: Sequence[InsertBucket],
        *,
        updates_written: bool,
        record_size: int,
    ) -> dict[FileGroup, int]:
        """The file groups a write touches, each with the bytes its write is expected to cost.

        A copy-on-write file group rewrites its base file whole, whatever the rows it gets;
        rows add their estimated size (an update's share is the batch's updates spread evenly
        over the file groups they hit). The engine uses this to spread the writes over tasks.
        """
        # Merge-on-read appends logs: no base file is rewritten.
        rewrite = {} if self.merge_on_read else {group: base.size for group, base in latest.items()}
        weights: dict[FileGroup, int] = {}
        if updates_written and profile.updated:
            share = profile.existing // len(profile.updated) * record_size
            weights = {group: rewrite.get(group, 0) + share for group in profile.updated}
        for b in buckets:
            group = (b.partition_path, b.file_id)
            weights[group] = weights.get(group, rewrite.get(group, 0)) + b.records * record_size
        return weights

    def _write_tagged(
        self,
        operation: WriteOperation,
        pipeline: WritePipeline[FrameT],
        spec: WriteSpec,
        tagged: FrameT,
        profile: WorkloadProfile | None,
        view: FileSystemView,
        pending: PendingWrite,
    ) -> tuple[list[WriteStat], dict[str, list[str]]]:
        # Only the partitions tagging listed and the batch touches (no other partition is listed).
        scope = view.listed_partitions()
        if scope is not None and profile is not None:
            scope |= {*profile.inserts, *(p for p, _ in profile.updated)}
        latest = {(g.partition_path, g.file_id): g.latest for g in view.file_groups(scope)}
        base_files = {group: base.path for group, base in latest.items()}
        replaced: dict[str, list[str]] = {}
        if operation is WriteOperation.DELETE:
            self.protocol.inflight(pending)
            rows = pipeline.delete_rows(tagged)
            if self.config.early_conflict is not None:
                self._check_early(pending, pipeline.file_groups_of(rows))
            weights = None if profile is None else self._write_weights(
                latest, profile, (), updates_written=True, record_size=self._record_size(view.timeline)
            )
            return pipeline.write_file_groups(spec, rows, base_files, weights), replaced
        if self.bucket is not None:
            return self._write_buckets(operation, pipeline, spec, tagged, view, pending, base_files)
        # Merge-on-read: inserts always start new file groups (base files), so every key stays
        # findable from base files alone and existing groups only ever get logs appended.
        small_files = operation.tops_up_small_files and not self.merge_on_read
        assert profile is not None  # the simple index profiles every tagged batch
        record_size = self._record_size(view.timeline)
        updates_written = operation.looks_up_keys and not (
            operation is WriteOperation.INSERT and self.config.insert_dup_policy == "drop"
        )
        buckets = self._plan_inserts(dict(profile.inserts), view, use_small_files=small_files, record_size=record_size,
                                     rewritten=profile.updated if updates_written else frozenset())
        weights = self._write_weights(
            latest, profile, buckets, updates_written=updates_written, record_size=record_size
        )
        for b in buckets:
            if b.base_file:
                base_files[(b.partition_path, b.file_id)] = b.base_file
        if operation.overwrite is not Overwrite.NONE:
            replaced = _replaced_groups(view, operation.overwrite, {b.partition_path for b in buckets})
            base_files = {}
        self.protocol.inflight(pending, [(b.partition_path, b.file_id) for b in buckets])
        rows = pipeline.route(tagged, buckets)
        if self.config.early_conflict is not None:
            existing = {(b.partition_path, b.file_id) for b in buckets if b.base_file}
            existing |= pipeline.file_groups_of(tagged)  # the file groups of existing keys
            existing |= {(p, f) for p, ids in replaced.items() for f in ids}
            self._check_early(pending, existing)
        return pipeline.write_file_groups(spec, rows, base_files, weights), replaced

    def _write_buckets(
        self,
        operation: WriteOperation,
        pipeline: WritePipeline[FrameT],
        spec: WriteSpec,
        tagged: FrameT,
        view: FileSystemView,
        pending: PendingWrite,
        base_files: dict[tuple[str, str], str],
    ) -> tuple[list[WriteStat], dict[str, list[str]]]:
        """Bucket index: every row already carries its bucket's file id; write those file groups."""
        replaced: dict[str, list[str]] = {}
        if operation.overwrite is not Overwrite.NONE:
            replaced = _replaced_groups(view, operation.overwrite, set(pipeline.partition_counts(tagged)))
            base_files = {}
        self.protocol.inflight(pending)
        rows = pipeline.route(tagged, None)  # every row carries its bucket's file id
        if self.config.early_conflict is not None:
            existing = {key for key in pipeline.file_groups_of(rows) if key in base_files}
            existing |= {(p, f) for p, ids in replaced.items() for f in ids}
            self._check_early(pending, existing)
        return pipeline.write_file_groups(spec, rows, base_files), replaced


def _refuse_existing(profile: WorkloadProfile) -> None:
    """insert's ``hoodie.datasource.insert.dup.policy=fail``: no key of the batch may exist."""
    from tidemark.errors import InvalidInputError

    if profile.existing:
        raise InvalidInputError(
            f"{profile.existing} record(s) of the insert already exist in the table and "
            "hoodie.datasource.insert.dup.policy=fail; use upsert to update them"
        )


def _replaced_groups(view: FileSystemView, overwrite: Overwrite, partitions: set[str]) -> dict[str, list[str]]:
    """The file groups an overwrite replaces, by partition: the batch's partitions, or all."""
    replaced: dict[str, list[str]] = {}
    for group in view.file_groups(None if overwrite is Overwrite.TABLE else partitions):
        replaced.setdefault(group.partition_path, []).append(group.file_id)
    return replaced


def bucket_spec(cfg: TableConfig) -> BucketSpec | None:
    """The table's bucket index, or None with the simple index."""
    if not cfg.bucket_index:
        return None
    return BucketSpec(
        num_buckets=cfg.bucket_num_buckets or 0,
        hash_fields=cfg.bucket_hash_fields or cfg.record_key_fields,
        record_key_fields=cfg.record_key_fields,
    )


def _spec(client: WriteClient, user_schema: pa.Schema) -> WriteSpec:
    return WriteSpec(
        base_path=client.storage.base_path,
        location=location_of(client.storage),
        instant_time="",  # set once the instant exists
        schema=pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(user_schema)),
        ordering_fields=client.table_config.ordering_fields,
        compression=client.config.compression,
        max_file_size=client.config.max_file_size,
        merge=client.merge_config,
        log_schema=log_schema_json(user_schema, client.table_config.name) if client.merge_on_read else None,
        log_block_format=client.config.log_block_format,
        table_name=client.table_config.name,
        bloom_filter=client.config.bloom_filter,
    )


def counts(stats: Sequence[WriteStat]) -> tuple[int, int, int]:
    return (
        sum(s.num_inserts for s in stats),
        sum(s.num_updates for s in stats),
        sum(s.num_deletes for s in stats),
    )


__all__ = ["WriteClient", "WriteOutcome", "counts"]
