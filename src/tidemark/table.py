"""The public entry point: :class:`Table`, one Hudi v8 table at a path.

Guarantees: every write either publishes one completed instant or leaves
nothing visible; bad input raises a :class:`~tidemark.errors.TidemarkError`
before anything is written; readers only ever see completed instants.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tidemark.concurrency import writer_settings
from tidemark.concurrency.settings_change import change_writer_settings
from tidemark.concurrency.writer_settings import WriterSettings
from tidemark.config import WriteConfig, resolve_write_config
from tidemark.config.table_options import column_names, resolve_writer_options
from tidemark.engines.spark import arrow_schema_of_any
from tidemark.engines.spark.table_api import provide_table_api
from tidemark.errors import ConfigError, InvalidInputError, TableUpgradeRequiredError
from tidemark.format.clustering_plan import ClusteringPlan
from tidemark.format.log_file import delete_ordering_field
from tidemark.format.properties import COPY_ON_WRITE, MERGE_ON_READ, TABLE_VERSION, TableConfig, load_properties
from tidemark.format.schema import META_SCHEMA
from tidemark.read.changes import IncrementalResult
from tidemark.read.plan import PartitionFilter, ReadPlan, incremental_plan
from tidemark.read.table import load_schema, table_read_plan
from tidemark.recovery.clean import CleanResult
from tidemark.recovery.rollback import RollbackResult
from tidemark.recovery.savepoint import RestoreResult, SavepointResult
from tidemark.services import timeline_ops
from tidemark.services.archive import ArchiveResult
from tidemark.services.cluster import ClusteringResult
from tidemark.services.inline import run_after_write
from tidemark.services.runner import run_service
from tidemark.storage import Storage
from tidemark.storage.failures import storage_failures_typed_as
from tidemark.timeline import Action, Instant, State, Timeline
from tidemark.write.result import CommitResult
from tidemark.write.table_setup import create_table, open_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidemark.engines.base import Engine
    from tidemark.merge import RecordMerger
    from tidemark.services.cluster import ClusteringProgress
    from tidemark.services.compaction import CompactionResult
    from tidemark.services.upgrade import UpgradeResult
    from tidemark.write.engine import WritePipelines

log = logging.getLogger(__name__)


__all__ = ["ClusteringResult", "CommitResult", "IncrementalResult", "Table"]


class Table:
    """A Hudi v8 table: create or open it, write DataFrames, read it back."""

    def __init__(
        self,
        storage: Storage,
        config: TableConfig,
        *,
        spark: SparkSession | None,
        write_config: WriteConfig,
    ) -> None:
        self.storage = storage
        self.config = config
        self.spark = spark
        self.write_config = write_config
        self._schema: pa.Schema | None = None
        self._commit_protocol: Any = None
        self._bootstrap_asked = write_config.metadata_bootstrap  # until a metadata table is seen
        self.engine: Engine = _engine_for(spark)  # chosen once: Table never asks which it is

    # -- create / open ------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        path: str,
        *,
        spark: SparkSession | None,
        record_key: str | Sequence[str],
        partition_by: str | Sequence[str] = (),
        ordering_field: str | Sequence[str] | None = None,
        table_type: str = COPY_ON_WRITE,
        options: Mapping[str, Any] | None = None,
        schema: Any = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> Table:
        """Create an empty table at ``path`` (a new or empty folder).

        ``path`` is a local path or a URI (``file://``, ``s3://``, ``gs://``, ``az://``,
        ``abfs://``); ``storage_options`` are the object store's (hudi-rs / delta-rs keys such as
        ``aws_endpoint_url``), the standard environment variables when absent.

        Raises TableExistsError if the path holds a table or any other file,
        ConfigError for bad names or options. ``schema`` (pyarrow, Spark
        StructType or DDL) is optional: without it the first write sets it.
        """
        opened = create_table(
            path, record_key=record_key, partition_by=partition_by, ordering_field=ordering_field,
            table_type=table_type, options=options, schema=schema, to_arrow=arrow_schema_of_any,
            storage_options=storage_options,
        )
        table = cls(opened.storage, opened.config, spark=spark, write_config=opened.write_config)
        table._schema = opened.schema
        return table

    @classmethod
    def open(
        cls,
        path: str,
        *,
        spark: SparkSession | None,
        options: Mapping[str, Any] | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> Table:
        """Open the table at ``path`` (a local path or URI, as in :meth:`create`).

        Raises TableNotFoundError if there is none.
        """
        opened = open_table(path, options, storage_options)
        return cls(opened.storage, opened.config, spark=spark, write_config=opened.write_config)

    # -- facts --------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.storage.base_path

    @property
    def schema(self) -> pa.Schema | None:
        """The user columns' schema (no meta columns), or None before the first write.

        Read from the timeline each time: writers (this one or others) evolve it.
        """
        self._schema = self._load_schema() or self._schema
        return self._schema

    def _load_schema(self) -> pa.Schema | None:
        return load_schema(self.storage, self.config)

    def _schema_for_write(self) -> pa.Schema | None:
        """What a write is handed as the table's schema: the one this Table knows, listed only
        when it knows none. Not the freshest: the write takes the schema of the timeline
        snapshot it plans against (another writer may have evolved it) and the commit
        reconciles it with schemas recorded since, so listing the timeline here too would
        only cost a request."""
        return self._schema if self._schema is not None else self.schema

    def merger(self) -> RecordMerger:
        """The table's record merger, from its merge settings and current schema (picklable): what
        merges records everywhere, merge-on-read reads and compaction included."""
        from tidemark.merge import MergeConfig

        return MergeConfig.of_table(self.config).merger(self.schema)

    def _adopt_schema(self, schema: pa.Schema) -> None:
        self._schema = pa.schema([f for f in schema if f.name not in META_SCHEMA.names])

    def timeline(self, *, include_archived: bool = False) -> list[Instant]:
        """Every instant on the active timeline (plus the archived ones if asked), by requested time."""
        timeline = Timeline.load(self.storage)
        return (timeline.with_history() if include_archived else timeline).instants

    # -- writes -------------------------------------------------------------------------
    def _protocol(self) -> Any:
        self._refuse_old_version()  # every write and table service comes here
        return self._unchecked_protocol()

    def _refuse_old_version(self) -> None:
        if self.config.table_version != TABLE_VERSION:
            raise TableUpgradeRequiredError(self.path, str(self.config.table_version), "write to")

    def _unchecked_protocol(self) -> Any:
        from tidemark.write.commit import CommitProtocol

        if self._commit_protocol is None:
            self._commit_protocol = CommitProtocol(self.storage, self.write_config)
            self._commit_protocol.guard = self._check_writer
            self._commit_protocol.settings_guard = lambda: self._check_writer(metadata=False)
        return self._commit_protocol

    # -- writer settings ------------------------------------------------------------------
    def writer_settings(self) -> WriterSettings:
        """The concurrency mode and lock this Table's writes use (from its options)."""
        return WriterSettings.of(self.write_config.concurrency_mode, self.write_config.lock, self.path)

    def recorded_writer_settings(self) -> WriterSettings | None:
        """The settings the table records for its writers (None: none, a single-writer table)."""
        return writer_settings.table_settings(self.storage)

    def _check_writer(self, *, record: bool = False, metadata: bool = True) -> None:
        """Refuse to write with settings that disagree with the table's (WriterSettingsError),
        before anything is written. ``record``: the first multi-writer ingestion write on a table
        that records nothing records its settings. An in_process writer first claims the table
        for this process (InProcessLockError if another process uses in_process on it).
        ``metadata``: also keep or remove the metadata table (not needed before a write: its
        commit does it under the lock, right before it records its files there)."""
        self._refuse_old_version()
        mine = self.writer_settings()
        if mine.provider == "in_process":
            self._protocol().lock.provider  # noqa: B018 - creating the provider claims the table
        writer_settings.check(self.storage, mine, record=record)
        if metadata:
            self._guard_metadata_table()

    def _guard_metadata_table(self) -> None:
        """Keep the metadata table's files partition true, or remove it (metadata/maintain.py)."""
        from tidemark.metadata.maintain import guard_before_change

        protocol = self._protocol()
        why = guard_before_change(self.storage, protocol.lock, enabled=self.write_config.metadata_enable,
                                  bootstrap=self.write_config.metadata_bootstrap, timeline=protocol.timeline_under_lock)
        if why:
            log.warning("%s: metadata table (.hoodie/metadata): %s", self.path, why)

    @storage_failures_typed_as("change of writer settings")
    def set_concurrency(self, options: Mapping[str, Any] | None = None) -> WriterSettings:
        """Change the concurrency mode and lock that the table records for its writers.

        ``options``: ``hoodie.write.concurrency.mode`` and the ``hoodie.write.lock.*`` options of
        the new settings (default: this Table's own options). ``single_writer`` removes the
        recorded settings. Afterwards writers with the old settings are refused, writers with
        the new ones accepted.

        Safe to call while writers may run: it holds the *old* settings' lock, and is refused
        (WriterSettingsError) while any pending write is alive (a live heartbeat, or requested
        within the heartbeat expiry): stop the writers first. With old settings ``in_process``,
        InProcessLockError if another process uses that lock. Returns the new settings.
        """
        wanted = self.write_config if options is None else resolve_write_config(resolve_writer_options(options))
        return change_writer_settings(self.storage, self.write_config, wanted)

    def _pipelines(self) -> WritePipelines[Any]:
        from tidemark.merge import MergeConfig
        from tidemark.write.client import bucket_spec
        from tidemark.write.engine import TableLayout

        cfg = self.config
        layout = TableLayout(cfg.record_key_fields, cfg.partition_fields, cfg.ordering_fields,
                             cfg.hive_style_partitioning, merge=MergeConfig.of_table(cfg), bucket=bucket_spec(cfg),
                             url_encode=cfg.partition_url_encode, merge_on_read=cfg.table_type == MERGE_ON_READ)
        return self.engine.pipelines(layout, self.write_config)

    @storage_failures_typed_as("write")  # before the attempts and after the commit too
    def _write(self, operation: str, data: Any, *, partition_paths: Sequence[str] | None = None) -> CommitResult:
        from tidemark.write.client import WriteClient

        self._check_writer(record=True, metadata=False)
        if self._bootstrap_asked:  # hoodie.metadata.enable=true given, no metadata table seen yet: make one
            from tidemark.metadata.bootstrap import bootstrap_if_possible

            self._bootstrap_asked = not bootstrap_if_possible(self.storage, self._protocol().lock)
        client = WriteClient(self.storage, self.config, self.write_config, self._pipelines(),
                             protocol=self._protocol(), session=self.engine.write_session)
        if partition_paths is None:
            outcome = client.write(operation, data, self._schema_for_write())
        else:
            outcome = client.delete_partitions(partition_paths, self._schema_for_write())
        if outcome.schema is not None:
            self._adopt_schema(outcome.schema)
        result = CommitResult.of(outcome.instant, outcome.operation, outcome.stats, outcome.attempts)
        run_after_write(
            self.storage, self.write_config, delta_commit=outcome.instant.action is Action.DELTA_COMMIT,
            compact=self.compact, clean=lambda hint: self._clean(rollback_failed=False, hint=hint),
            archive=self.archive, cluster=self.cluster, timeline=self._protocol().committed_timeline,
            written=outcome.instant,
        )
        return result

    def upsert(self, data: Any) -> CommitResult:
        """Insert new keys and update existing ones, merged by the table's merge mode."""
        return self._write("upsert", data)

    def insert(self, data: Any) -> CommitResult:
        """Insert records; keys already in the table follow hoodie.datasource.insert.dup.policy."""
        return self._write("insert", data)

    def delete(self, data: Any) -> CommitResult:
        """Delete the records whose keys are in ``data``.

        Ordering columns in ``data`` are compared with the stored record's: a delete older than
        the stored record removes nothing. Other columns are ignored. Merge-on-read tables keep
        a delete's ordering value in the log when the table has one ordering field of an integer
        type; with several ordering fields or another type a delete there removes whatever is
        stored (the log's delete records hold one integer ordering value).
        """
        return self._write("delete", data)

    def bulk_insert(self, data: Any) -> CommitResult:
        """Write ``data`` into new file groups without an index lookup: the fast initial load."""
        return self._write("bulk_insert", data)

    def insert_overwrite(self, data: Any) -> CommitResult:
        """Replace the partitions present in ``data`` with its records (a replacecommit)."""
        return self._write("insert_overwrite", data)

    def insert_overwrite_table(self, data: Any) -> CommitResult:
        """Replace the whole table with ``data``'s records (a replacecommit; an empty batch empties it).

        Every file group of every partition is replaced, including partitions ``data`` has no
        rows for. Readers of earlier instants (time travel, incremental) still see the old rows
        until the cleaner removes the replaced files.
        """
        return self._write("insert_overwrite_table", data)

    def delete_partitions(self, partitions: Any) -> CommitResult:
        """Delete whole partitions (Hudi's ``delete_partition``: a replacecommit of their file groups).

        ``partitions`` is a list of partition paths as stored (``"city=sf"``, or ``"sf"`` without
        hive-style folders; ``"2024/01/31"`` for several fields), or a batch whose rows' partitions
        are deleted (it needs the record-key and partition columns, as Hudi's does).

        Raises InvalidInputError, and writes nothing, if the table has no partitions or a path
        names no partition of the table.
        """
        if isinstance(partitions, str):
            partitions = [partitions]
        if isinstance(partitions, (list, tuple, set, frozenset)) and all(isinstance(p, str) for p in partitions):
            return self._write("delete_partition", None, partition_paths=list(partitions))
        return self._write("delete_partition", partitions)

    # -- reads --------------------------------------------------------------------------
    def read_plan(
        self,
        *,
        as_of: str | None = None,
        filters: Sequence[PartitionFilter] | None = None,
        query_type: str = "snapshot",
    ) -> ReadPlan:
        return table_read_plan(self.storage, self.config, as_of=as_of, filters=filters, query_type_=query_type)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)

    def _read_plan(self, plan: ReadPlan) -> Any:
        # Built once here, shipped to the tasks; only merge-on-read slices with logs need one.
        merger = self.merger() if plan.merges else None
        deletes_ordered_by = delete_ordering_field(self.config.ordering_fields)
        return self.engine.read(
            self.storage, plan, self.schema, merger=merger, delete_ordering_field=deletes_ordered_by
        )

    def read(
        self,
        as_of: str | None = None,
        *,
        filters: Sequence[PartitionFilter] | None = None,
        query_type: str = "snapshot",
    ) -> Any:
        """The table as of now (or as of instant ``as_of``): meta columns plus user columns.

        A Spark DataFrame, or a pyarrow Table when the table was opened with ``spark=None``.
        ``filters`` prune partitions: ``[("city", "=", "sf")]``, ops = != < <= > >= in, not in.
        ``query_type="read_optimized"`` reads only base files: on a merge-on-read table it
        skips the log files (faster, but without the changes not yet compacted).
        """
        return self._read_plan(self.read_plan(as_of=as_of, filters=filters, query_type=query_type))

    def read_incremental(self, start: str | None = None, end: str | None = None) -> Any:
        """Rows written by commits that *completed* in ``(start, end]`` (completion times)."""
        return self.read_changes(start=start, end=end).rows

    def read_changes(self, start: str | None = None, end: str | None = None) -> IncrementalResult:
        """Like read_incremental, plus the checkpoint to pass as ``start`` next time.

        Commits are taken in completion-time order, so a consumer that passes each
        checkpoint back as ``start`` sees every commit exactly once, even one that
        started before others but completed after them.
        """
        plan = self.incremental_plan(start=start, end=end)
        return IncrementalResult(self._read_plan(plan), plan.end, plan.instants,
                                 functools.partial(self._deleted_by, plan.instants))

    def _deleted_by(self, instants: Sequence[Instant]) -> Any:
        """The records ``instants`` deleted (see :mod:`tidemark.read.changes`), as the engine's frame."""
        from tidemark.read.changes import deleted_by

        deleted = deleted_by(self.storage, instants, self.schema, self.merger,
                             delete_ordering_field(self.config.ordering_fields))
        return self.engine.frame(deleted)

    # -- maintenance --------------------------------------------------------------------
    @storage_failures_typed_as("compaction")
    def compact(self) -> CompactionResult | None:
        """Compact a merge-on-read table: merge every file slice's logs into a new base file.

        The plan is made under the table lock and takes only logs of deltacommits that completed before
        it; it runs without the lock, so writers keep appending (their logs land on the new slices). A
        compaction left pending by a crashed process is finished first. Returns None when there was
        nothing to compact.
        """
        from tidemark.services.compaction import CompactionSteps

        if self.config.table_type != MERGE_ON_READ:
            raise ConfigError(f"only MERGE_ON_READ tables are compacted; {self.path} is {self.config.table_type}")
        protocol = self._protocol()
        self._check_writer()
        steps = CompactionSteps(
            self.storage, self.write_config, heartbeats=protocol.heartbeats,
            schema=lambda: self.schema or pa.schema([]), merger=self.merger,
            ordering_fields=self.config.ordering_fields, table_name=self.config.name,
            run_slices=self.engine.slice_runner(),
        )
        heartbeats = protocol.heartbeats if self.write_config.multi_writer else None
        return run_service(steps, protocol.lock, storage=self.storage, heartbeats=heartbeats)

    @storage_failures_typed_as("rollback")
    def rollback(self, instant_time: str, *, force: bool = False) -> RollbackResult:
        """Roll back a pending write, or the latest completed one. Publishes a rollback instant.

        A pending write whose heartbeat is alive (its writer is running) is refused with
        WriterAliveError unless ``force``: the writer then fails at commit. A write that
        built on a rolled-back completed instant cannot commit afterwards (it gets
        RolledBackConflictError), so the rollback is never undone by a concurrent writer.
        """
        self._check_writer()
        return timeline_ops.rollback_instant(self._protocol(), instant_time, force=force)

    @storage_failures_typed_as("clustering")
    def cluster(
        self,
        *,
        sort_by: str | Sequence[str] | None = None,
        target_file_size: int | None = None,
        small_file_limit: int | None = None,
        max_groups: int | None = None,
        progress: Callable[[ClusteringProgress], None] | None = None,
    ) -> ClusteringResult:
        """Rewrite small file groups into files of ``target_file_size`` bytes, optionally sorted.

        Defaults come from the ``hoodie.clustering.plan.strategy.*`` options. The plan is made under the
        table lock (a static view of the table) and published as ``<t>.clustering.requested``; the files
        are rewritten without the lock (on Spark when the table has a SparkSession, else in this process),
        concurrently with writers; the result is a ``replacecommit`` (operation CLUSTER). Rows keep their
        commit times.

        Ingestion wins: if a write touched a planned file group meanwhile, the clustering is rolled back
        and ClusteringAbortedError raised (run it again). ``progress`` is called as groups finish.
        Returns what was done (``clustered`` is False if nothing needed it).
        """
        if self.write_config.non_blocking:
            from tidemark.write.nbcc import refuse_base_file_operation

            refuse_base_file_operation("cluster")
        if self.schema is None:  # nothing written yet: nothing to cluster (a scheduled service must not fail)
            return ClusteringResult.nothing(column_names(sort_by, "sort_by"))
        self._check_writer()
        service, settings = self._clustering(sort_by, target_file_size, small_file_limit, max_groups)
        return ClusteringResult.of(service.run(settings, progress), settings.sort_columns)

    def clustering_plan(
        self,
        *,
        sort_by: str | Sequence[str] | None = None,
        target_file_size: int | None = None,
        small_file_limit: int | None = None,
        max_groups: int | None = None,
    ) -> ClusteringPlan | None:
        """What :meth:`cluster` with these arguments would rewrite now (None: nothing); changes nothing."""
        if self.schema is None:
            return None
        service, settings = self._clustering(sort_by, target_file_size, small_file_limit, max_groups)
        return service.preview(settings)

    def _clustering(self, sort_by: str | Sequence[str] | None, target_file_size: int | None,
                    small_file_limit: int | None, max_groups: int | None) -> tuple[Any, Any]:
        from tidemark.services.cluster import ClusteringService, clustering_config

        schema = self.schema
        if schema is None:
            raise InvalidInputError("the table has no schema yet (no writes): nothing to cluster")
        settings = clustering_config(
            self.write_config.clustering, sort_by=sort_by, target_file_size=target_file_size,
            small_file_limit=small_file_limit, max_groups=max_groups, schema=schema,
        )
        service = ClusteringService(self.storage, self.write_config, self._protocol(), schema=schema,
                                    table_name=self.config.name, executor=self.engine.clustering_executor())
        return service, settings

    @storage_failures_typed_as("rollback of failed writes")
    def rollback_failed_writes(self, *, force: bool = False) -> list[RollbackResult]:
        """Roll back failed writes: with several writers only those whose heartbeat expired,
        with a single writer every pending write but one whose heartbeat is alive (a writer
        in another process is running it), or every one with ``force`` (its writer then fails).
        Rollbacks, restores and cleans that a crash interrupted are finished first."""
        protocol = self._protocol()
        self._check_writer()
        if self.write_config.multi_writer:
            return list(protocol.rollback_expired_writes())
        return list(protocol.rollback_failed_writes(force=force))

    @storage_failures_typed_as("clean")
    def clean(self) -> CleanResult:
        """Clean the table by hand: roll back failed writes whose heartbeat expired (never a live
        one), then delete the file versions that hoodie.clean.policy lets go.

        The plan is made under the table lock and published as ``<t>.clean.requested``; the
        files are deleted outside the lock, concurrently with writers. Never deleted: the
        latest version of each file group, versions inside the retained time-travel window,
        the version a pending write may be merging against, savepointed files.
        """
        return self._clean(rollback_failed=True)

    def _clean(self, *, rollback_failed: bool, hint: Timeline | None = None) -> CleanResult:
        from tidemark.services.cleaning import run_clean

        protocol = self._protocol()
        self._check_writer()
        return run_clean(protocol, self.write_config, rollback_failed=rollback_failed, hint=hint)

    @storage_failures_typed_as("archival")
    def archive(self) -> ArchiveResult:
        """Move old completed instants into the archived timeline (``.hoodie/timeline/history``)
        once more than hoodie.keep.max.commits commits are active, keeping hoodie.keep.min.commits.
        Runs under the table lock. Time travel and incremental reads still reach archived instants."""
        self._check_writer()
        return timeline_ops.archive_timeline(self._protocol(), self.write_config.archive)

    # -- savepoints and restore ----------------------------------------------------------
    @storage_failures_typed_as("savepoint")
    def savepoint(self, instant_time: str, *, comment: str = "") -> SavepointResult:
        """Pin the table as of the completed commit ``instant_time``: cleaning never deletes the
        files a reader sees at that instant, so time travel to it and restore keep working."""
        self._check_writer()
        return timeline_ops.savepoint(self._protocol(), instant_time, comment=comment)

    def savepoints(self) -> list[Instant]:
        """The completed savepoints, oldest first."""
        return Timeline.load(self.storage).filter(actions=[Action.SAVEPOINT], states=[State.COMPLETED])

    @storage_failures_typed_as("savepoint's deletion")
    def delete_savepoint(self, instant_time: str) -> Instant:
        """Remove a savepoint; its files become cleanable again. NotSavepointedError if none."""
        self._check_writer()
        return timeline_ops.remove_savepoint(self._protocol(), instant_time)

    @storage_failures_typed_as("restore")
    def restore(self, instant_time: str) -> RestoreResult:
        """Roll the table back to the savepointed ``instant_time``: every write after it (pending
        ones too) is rolled back, newest first, and a restore instant records it.
        NotSavepointedError if the instant has no savepoint. Stop the writers first: their
        pending writes are rolled back and will fail to commit, as will a write that built on
        a rolled-back commit (RolledBackConflictError). A restore a crash interrupted is
        finished by the next write or clean; until then every commit fails."""
        self._check_writer()
        return timeline_ops.restore_to(self._protocol(), instant_time)

    @storage_failures_typed_as("upgrade")
    def upgrade(self) -> UpgradeResult:
        """Upgrade a version 6 table (Hudi 0.14/0.15) to version 8 in place, as Hudi 1.x's upgrade
        does (:mod:`tidemark.services.upgrade`), under the table lock. Safe to run again after a
        crash (it finishes the job) and on a version 8 table (it changes nothing). Afterwards the
        table is written like any other; Hudi 0.x can no longer read it."""
        from tidemark.services.upgrade import upgrade_table

        with self._unchecked_protocol().lock.hold("upgrade the table to version 8"):
            result = upgrade_table(self.storage)
        props = load_properties(self.storage.read_bytes)
        assert props is not None
        self.config = TableConfig.from_properties(props)
        self._schema = None
        return result

    def close(self) -> None:
        """Release lock-provider connections (ZooKeeper sessions, ...)."""
        if self._commit_protocol is not None:
            self._commit_protocol.close()
            self._commit_protocol = None

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Table({self.path!r}, type={self.config.table_type}, key={list(self.config.record_key_fields)})"


def _engine_for(spark: SparkSession | None) -> Engine:
    """The engine of a table opened with ``spark`` (the one place that asks)."""
    if spark is None:
        from tidemark.engines.arrow.engine import ArrowEngine

        return ArrowEngine()
    from tidemark.engines.spark.engine import SparkEngine

    return SparkEngine(spark)


provide_table_api(Table)  # the data source's writers create and write tables through it
