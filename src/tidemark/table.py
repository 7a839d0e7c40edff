"""The public entry point: :class:`Table`, one Hudi v8 table at a path.

Guarantees: every write either publishes one completed instant or leaves
nothing visible; bad input raises a :class:`~tidemark.errors.TidemarkError`
before anything is written; readers only ever see completed instants.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tidemark.concurrency import writer_settings
from tidemark.concurrency.heartbeat import last_heartbeat_ms, now_ms
from tidemark.concurrency.writer_settings import WriterSettings
from tidemark.config import WriteConfig, resolve_write_config
from tidemark.config.resolve import parse_option, validate_keys
from tidemark.errors import (
    ClusteringAbortedError,
    ClusteringConflictError,
    ConfigError,
    CorruptPropertiesError,
    InvalidInputError,
    TableExistsError,
    TableNotFoundError,
    TidemarkError,
    WriterAliveError,
)
from tidemark.format.clustering_plan import CLUSTER_OPERATION, ClusteringPlan
from tidemark.format.log_file import delete_ordering_field
from tidemark.format.names import TEMP_DIR, TIMELINE_DIR
from tidemark.format.partition_path import URL_ENCODE_KEY
from tidemark.format.properties import (
    COPY_ON_WRITE,
    MERGE_ON_READ,
    PROPERTIES_PATH,
    TableConfig,
    check_fields_exist,
    format_properties,
    load_properties,
)
from tidemark.format.schema import META_SCHEMA, arrow_schema_from_avro, avro_schema_json
from tidemark.read.plan import PartitionFilter, ReadPlan, incremental_plan, prune, snapshot_plan
from tidemark.services.archive import ArchiveResult, archive
from tidemark.services.clean import (
    CleanResult,
    commits_since_last_clean,
    execute_clean,
    needs_cleaning,
    schedule_clean,
    superseded_base_file,
)
from tidemark.services.rollback import RollbackResult, find_instant, rollback
from tidemark.services.savepoint import RestoreResult, SavepointResult, create_savepoint, delete_savepoint, restore
from tidemark.storage import LocalStorage, Storage
from tidemark.timeline import Action, Instant, State, Timeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidemark.merge import RecordMerger
    from tidemark.services.cluster import ClusteringProgress
    from tidemark.services.compaction import CompactionResult

log = logging.getLogger(__name__)

# A write that lost to a clustering which completed while it was being planned runs again on
# the clustered table (ingestion is never failed by clustering); this bounds the reruns.
CLUSTERING_RERUNS = 5


@dataclass(frozen=True)
class CommitResult:
    """What one write published."""

    instant_time: str
    completion_time: str
    operation: str
    num_inserts: int
    num_updates: int
    num_deletes: int
    file_groups: tuple[str, ...]  # file ids written
    partitions: tuple[str, ...]
    num_files: int
    bytes_written: int
    attempts: int = 1  # > 1 when the write was retried after a conflict


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


@dataclass(frozen=True)
class IncrementalResult:
    """Rows of an incremental read, and the checkpoint to pass as ``start`` next time.

    ``deletes`` holds the records the same commits deleted: their last stored values,
    ``_hoodie_commit_time`` of the deleting commit, and ``_hoodie_operation`` = ``delete``.
    Apply ``rows`` and ``deletes`` in ``_hoodie_commit_time`` order to keep a mirror exact.
    """

    rows: Any  # a Spark DataFrame, or a pyarrow Table with spark=None
    checkpoint: str | None
    instants: tuple[Instant, ...]
    find_deletes: Callable[[], Any] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def deletes(self) -> Any:
        """The deleted records (same kind as ``rows``), found on first use: a consumer that never
        asks pays nothing for them."""
        return self.find_deletes() if self.find_deletes is not None else None


def _names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{what} must be column names, got {value!r}")
    return tuple(i.strip() for i in items)


def _spark_to_arrow(schema: Any) -> pa.Schema | None:
    if schema is None or isinstance(schema, pa.Schema):
        return schema
    from tidemark.engines.spark import require_pyspark

    require_pyspark("a schema given as a Spark type or DDL string")
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    if isinstance(schema, str):
        schema = StructType.fromDDL(schema)
    return to_arrow_schema(schema, timezone="UTC")


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
        if spark is not None:
            from tidemark.engines.spark import register

            register(spark)

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
    ) -> Table:
        """Create an empty table at ``path`` (a new or empty folder).

        Raises TableExistsError if the path holds a table or any other file,
        ConfigError for bad names or options. ``schema`` (pyarrow, Spark
        StructType or DDL) is optional: without it the first write sets it.
        """
        keys = _names(record_key, "record_key")
        if not keys:
            raise ConfigError("record_key needs at least one column name")
        partitions = _names(partition_by, "partition_by")
        ordering = _names(ordering_field, "ordering_field")
        table_type = str(table_type).upper()
        if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
            raise ConfigError(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}, got {table_type!r}")
        raw = validate_keys(options or {})
        write_config = resolve_write_config({k: v for k, v in raw.items() if k not in _TABLE_KEYS})
        storage = LocalStorage(path)
        if storage.exists(PROPERTIES_PATH):
            raise TableExistsError(path, "a table already exists there; use Table.open")
        if storage.exists("") and not os.path.isdir(storage.base_path):
            raise TableExistsError(path, "it is a file")
        if storage.exists("") and not storage.is_empty_dir(""):
            raise TableExistsError(path, "the folder is not empty; choose a new or empty folder")
        arrow_schema = _spark_to_arrow(schema)
        name = raw.get("hoodie.table.name") or os.path.basename(storage.base_path.rstrip("/")) or "table"
        merge = _merge_settings(raw, ordering)
        ordering = merge.ordering_fields
        if arrow_schema is not None:
            for role, cols in (("record key", keys), ("partition", partitions), ("ordering", ordering)):
                absent = [c for c in cols if c not in arrow_schema.names]
                if absent:
                    raise ConfigError(f"the schema lacks the {role} column(s) {absent}")
            merge.check_schema(arrow_schema, key_fields=keys, partition_fields=partitions)
            from tidemark.write.validate import check_key_types, check_storable, storable_schema

            arrow_schema = storable_schema(arrow_schema)
            check_key_types(arrow_schema, keys, partitions)
            check_storable(arrow_schema)
        config = TableConfig(
            name=name,
            table_type=table_type,
            record_key_fields=keys,
            partition_fields=partitions,
            ordering_fields=ordering,
            hive_style_partitioning=parse_option("hoodie.datasource.write.hive_style_partitioning", raw),
            partition_url_encode=parse_option(URL_ENCODE_KEY, raw),
            create_schema=avro_schema_json(arrow_schema, name) if arrow_schema is not None else None,
            database=parse_option("hoodie.database.name", raw),
            **_merge_fields(raw, merge),
            **_index_fields(raw, keys),
        )
        _check_concurrency_mode(write_config, config)
        # A table created for several writers records their settings at once (see set_concurrency).
        settings = WriterSettings.of(write_config.concurrency_mode, write_config.lock, storage.base_path)
        config = replace(config, extra={**config.extra, **settings.to_properties()})
        for folder in (TIMELINE_DIR, f"{TIMELINE_DIR}/history", TEMP_DIR):
            os.makedirs(storage.full_path(folder), exist_ok=True)
        if "hoodie.metadata.enable" in raw and write_config.metadata_enable:  # asked for: a metadata table
            from tidemark.metadata.create import write_metadata_table

            write_metadata_table(storage, name, {})
            config = replace(config, extra={**config.extra, **{"hoodie.table.metadata.partitions": "files",
                                                                "hoodie.table.metadata.partitions.inflight": ""}})
        # hoodie.properties last: until it exists the folder is not a table.
        storage.write_atomic(PROPERTIES_PATH, format_properties(config.to_properties()).encode())
        table = cls(storage, config, spark=spark, write_config=write_config)
        table._schema = arrow_schema
        return table

    @classmethod
    def open(cls, path: str, *, spark: SparkSession | None, options: Mapping[str, Any] | None = None) -> Table:
        """Open the table at ``path``. Raises TableNotFoundError if there is none."""
        write_config = resolve_write_config(
            {k: v for k, v in validate_keys(options or {}).items() if k not in _TABLE_KEYS}
        )
        storage = LocalStorage(path)
        props = load_properties(storage.read_bytes)
        if props is None:
            detail = "the path does not exist" if not storage.exists("") else f"{PROPERTIES_PATH} is missing"
            raise TableNotFoundError(path, detail)
        config = TableConfig.from_properties(props)
        if config.create_schema:
            try:
                create_schema = arrow_schema_from_avro(config.create_schema)
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptPropertiesError(
                    PROPERTIES_PATH, f"hoodie.table.create.schema is not an Avro record schema ({exc})"
                ) from None
            _check_key_fields(config, create_schema, "hoodie.table.create.schema")
        _check_table_options(validate_keys(options or {}), props)
        _check_concurrency_mode(write_config, config)
        return cls(storage, config, spark=spark, write_config=write_config)

    # -- facts --------------------------------------------------------------------------
    @property
    def path(self) -> str:
        return self.storage.base_path

    @property
    def schema(self) -> pa.Schema | None:
        """The user columns' schema (no meta columns), or None before the first write."""
        if self._schema is None:
            self._schema = self._load_schema()
        return self._schema

    def _load_schema(self) -> pa.Schema | None:
        schema_json = Timeline.load(self.storage).latest_schema_json()
        if schema_json:
            schema = arrow_schema_from_avro(schema_json)
            _check_key_fields(self.config, schema, "the schema of the latest commit")
            return schema
        if self.config.create_schema:
            return arrow_schema_from_avro(self.config.create_schema)
        return None

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
        from tidemark.write.commit import CommitProtocol

        if self._commit_protocol is None:
            self._commit_protocol = CommitProtocol(self.storage, self.write_config)
            self._commit_protocol.guard = self._check_writer
        return self._commit_protocol

    # -- writer settings ------------------------------------------------------------------
    def writer_settings(self) -> WriterSettings:
        """The concurrency mode and lock this Table's writes use (from its options)."""
        return WriterSettings.of(self.write_config.concurrency_mode, self.write_config.lock, self.path)

    def recorded_writer_settings(self) -> WriterSettings | None:
        """The settings the table records for its writers (None: none, a single-writer table)."""
        return writer_settings.table_settings(self.storage)

    def _check_writer(self, *, record: bool = False) -> None:
        """Refuse to write with settings that disagree with the table's (WriterSettingsError),
        before anything is written. ``record``: the first multi-writer ingestion write on a table
        that records nothing records its settings. An in_process writer first claims the table
        for this process (InProcessLockError if another process uses in_process on it)."""
        mine = self.writer_settings()
        if mine.provider == "in_process":
            self._protocol().lock.provider  # noqa: B018 - creating the provider claims the table
        writer_settings.check(self.storage, mine, record=record)
        self._drop_unmaintained_metadata_table()

    def _drop_unmaintained_metadata_table(self, *, remove: bool = False) -> None:
        """Before any change, under the table lock: keep a metadata table's ``files`` partition if
        tidemark can maintain it (the others dropped), else remove the table as Hudi does with
        hoodie.metadata.enable=false (docs/metadata-table.md). ``remove``: the action about to run
        is one tidemark does not record in it (clean, rollback, restore), so it goes. Runs again
        at every guard, so one a Hudi writer recreated or left out of sync meanwhile is caught."""
        from tidemark import metadata
        from tidemark.metadata import maintain

        if not metadata.metadata_table_present(self.storage):
            return
        lock = self._protocol().lock
        # Inside the commit protocol's critical section the lock is already ours (it is not reentrant).
        with contextlib.nullcontext() if lock.held else lock.hold("keep or remove the metadata table"):
            why = ""
            if remove:
                if metadata.drop_metadata_table(self.storage):
                    why = "removed before an action tidemark does not record in it"
            else:
                _kept, why = maintain.keep_or_drop(self.storage, enabled=self.write_config.metadata_enable)
            if why:
                log.warning("%s: metadata table (.hoodie/metadata): %s", self.path, why)

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
        from tidemark.concurrency.transaction import TableLock
        from tidemark.config.resolve import resolve_write_config as resolve

        config = self.write_config if options is None else resolve(
            {k: v for k, v in validate_keys(options).items() if k not in _TABLE_KEYS}
        )
        new = WriterSettings.of(config.concurrency_mode, config.lock, self.path)
        with writer_settings.properties_mutex(self.storage):
            old = writer_settings.table_settings(self.storage)
            if old == new:
                return new
            lock = TableLock(old.lock_settings(self.write_config.lock), self.path) if old is not None else None
            try:
                with lock.hold("change the table's writer settings") if lock else contextlib.nullcontext():
                    self._refuse_if_writes_alive(old, new)
                    writer_settings.write_settings(self.storage, new)
            finally:
                if lock is not None:
                    lock.close()
        return new

    def _refuse_if_writes_alive(self, old: WriterSettings | None, new: WriterSettings) -> None:
        from tidemark.concurrency.heartbeat import HeartbeatPolicy
        from tidemark.errors import WriterSettingsError
        from tidemark.timeline.instant_time import parse_instant_time

        policy = HeartbeatPolicy(self.write_config.heartbeat_interval_ms, self.write_config.heartbeat_tolerable_misses)
        alive = [
            i.requested_time
            for i in Timeline.load(self.storage).pending
            if i.action.writes_data and not policy.is_expired(
                self.storage, i.requested_time,
                requested_ms=int(parse_instant_time(i.requested_time).timestamp() * 1000),
            )
        ]
        if alive:
            recorded = old.options() if old is not None else {}
            raise WriterSettingsError(
                f"cannot change the writer settings of {self.path} while writes are running: pending "
                f"write(s) {alive[:5]} are alive (heartbeat, or requested less than {policy.expiry_ms} ms ago). "
                "Stop every writer, wait for the expiry (or roll failed writes back with `tidemark clean`), "
                "and call it again. Nothing was changed.",
                recorded=recorded,
                given=new.options(),
            )

    def _pipeline_factory(self) -> Any:
        from tidemark.write.engine import TableLayout

        cfg = self.config
        from tidemark.merge import MergeConfig
        from tidemark.write.client import bucket_spec

        layout = TableLayout(cfg.record_key_fields, cfg.partition_fields, cfg.ordering_fields,
                             cfg.hive_style_partitioning, merge=MergeConfig.of_table(cfg), bucket=bucket_spec(cfg),
                             url_encode=cfg.partition_url_encode)
        if self.spark is None:
            from tidemark.engines.arrow.writer import ArrowWritePipeline

            return lambda spec, schema, operation: ArrowWritePipeline(layout, spec, schema)
        from tidemark.engines.spark.writer import SparkWritePipeline

        spark, wc = self.spark, self.write_config

        def make(spec: Any, schema: pa.Schema, operation: str) -> Any:
            parallelism = wc.bulk_insert_parallelism if operation == "bulk_insert" else wc.upsert_parallelism
            return SparkWritePipeline(spark, layout, spec, schema, parallelism=parallelism, operation=operation)

        return make

    def _engine_session(self) -> contextlib.AbstractContextManager[None]:
        """The engine's settings for the span of one write (Spark: Arrow batches capped by rows only)."""
        if self.spark is None:
            return contextlib.nullcontext()
        from tidemark.engines.spark.session import write_session

        return write_session(self.spark)

    def _write(self, operation: str, data: Any, *, partition_paths: Sequence[str] | None = None) -> CommitResult:
        from tidemark.write.client import WriteClient, counts

        self._check_writer(record=True)
        client = WriteClient(self.storage, self.config, self.write_config, self._pipeline_factory(),
                             protocol=self._protocol())
        reruns = 0
        lost = 0
        while True:
            try:
                with self._engine_session():
                    if partition_paths is None:
                        outcome = client.write(operation, data, self.schema)
                    else:
                        outcome = client.delete_partitions(partition_paths, self.schema)
                break
            except ClusteringConflictError as conflict:
                # A clustering completed after this write planned and replaced a file group it
                # updated. Ingestion wins: run the write again on the clustered table.
                if conflict.rejected or reruns >= CLUSTERING_RERUNS:
                    raise
                reruns += 1
                log.info("write lost to clustering %s; running it again", conflict.clustering_instant)
            except TidemarkError:
                raise
            except Exception as missing:  # FileNotFoundError, or a Spark job's error naming the file
                gone = superseded_base_file(self.storage, missing)
                if gone is None:
                    raise
                # The base file this write merged against was replaced by a concurrent commit
                # and then cleaned: a write-write conflict the commit check would also have
                # found, so it is reported, and retried, as one.
                lost += 1
                if lost > self.write_config.retries_on_conflict:
                    raise gone from missing
                log.warning("%s; retrying, attempt %d of %d", gone, lost + 1,
                            self.write_config.retries_on_conflict + 1)
        if lost:
            outcome = replace(outcome, attempts=outcome.attempts + lost)
        if self._schema is None and outcome.schema is not None:
            self._adopt_schema(outcome.schema)
        if outcome.instant.action is Action.DELTA_COMMIT and self.write_config.compact_inline:
            self._compact_inline()
        self._run_inline_services()
        stats = outcome.stats
        inserts, updates, deletes = counts(stats)
        instant = outcome.instant
        result = CommitResult(
            instant_time=instant.requested_time,
            completion_time=instant.completion_time or "",
            operation=outcome.operation,
            num_inserts=inserts,
            num_updates=updates,
            num_deletes=deletes,
            file_groups=tuple(sorted({s.file_id for s in stats})),
            partitions=tuple(sorted({s.partition_path for s in stats})),
            num_files=len(stats),
            bytes_written=sum(s.file_size for s in stats),
            attempts=outcome.attempts + reruns,
        )
        self._maybe_cluster_inline()
        return result

    def _maybe_cluster_inline(self) -> None:
        """hoodie.clustering.inline: cluster once max.commits writes completed since the last one."""
        settings = self.write_config.clustering
        if not settings.inline:
            return
        timeline = Timeline.load(self.storage)
        since = 0
        for inst in reversed(timeline.by_completion_time()):
            if not inst.action.writes_data:
                continue
            if inst.action is Action.REPLACE_COMMIT and timeline.commit_metadata(inst).operation == CLUSTER_OPERATION:
                break
            since += 1
        if since < settings.inline_max_commits:
            return
        try:
            self.cluster()
        except ClusteringAbortedError as aborted:  # ingestion wins; the next write tries again
            log.warning("inline clustering aborted: %s", aborted)
        except TidemarkError as error:  # the write itself committed: never fail it for the service
            log.warning("inline clustering failed (the write committed): %s", error)

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
        query = _query_type(query_type)
        plan = snapshot_plan(
            self.storage, Timeline.load(self.storage), as_of=as_of, read_optimized=query == "read_optimized"
        )
        cfg = self.config
        files = prune(plan.files, filters, cfg.partition_fields, cfg.hive_style_partitioning,
                      url_encode=cfg.partition_url_encode)
        return ReadPlan(tuple(files), plan.commit_times, logs=plan.logs)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)

    def _read_plan(self, plan: ReadPlan) -> Any:
        # Built once here, shipped to the tasks; only merge-on-read slices with logs need one.
        merger = self.merger() if plan.merges else None
        deletes_ordered_by = delete_ordering_field(self.config.ordering_fields)
        if self.spark is None:
            from tidemark.engines.arrow.reader import read_plan as arrow_read

            return arrow_read(self.storage, plan, self.schema, merger=merger, delete_ordering_field=deletes_ordered_by)
        from tidemark.engines.spark.reader import read_plan as spark_read

        return spark_read(
            self.spark, self.storage, plan, self.schema, merger=merger, delete_ordering_field=deletes_ordered_by
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
        from tidemark.format.log_file import delete_ordering_field
        from tidemark.format.schema import with_meta_columns
        from tidemark.read.changes import OPERATION_COLUMN, deleted_records

        schema = with_meta_columns(self.schema or pa.schema([]))
        timeline = Timeline.load(self.storage)
        active = {i.requested_time for i in timeline.instants}
        if any(i.requested_time not in active for i in instants):
            timeline = timeline.with_history()
        deleted = deleted_records(
            self.storage, timeline, instants, merger=self.merger(), schema=schema,
            delete_ordering_field=delete_ordering_field(self.config.ordering_fields),
        ) if self.schema is not None else schema.append(pa.field(OPERATION_COLUMN, pa.string())).empty_table()
        if self.spark is None:
            return deleted
        from tidemark.engines.spark.reader import arrow_to_spark

        return arrow_to_spark(self.spark, deleted)

    # -- maintenance --------------------------------------------------------------------
    def _compact_inline(self) -> None:
        from tidemark.services.compaction import delta_commits_since_last_compaction

        due = self.write_config.compact_inline_max_delta_commits
        if delta_commits_since_last_compaction(Timeline.load(self.storage)) >= due:
            self.compact()

    def compact(self) -> CompactionResult | None:
        """Compact a merge-on-read table: merge every file slice's logs into a new base file.

        The plan is made under the table lock and takes only logs of deltacommits that
        completed before it; it runs without the lock, so writers keep appending (their
        logs land on the new slices). A compaction left pending by a crashed process is
        finished first. Returns None when there was nothing to compact.
        """
        from tidemark.concurrency.heartbeat import Heartbeat
        from tidemark.services import compaction

        if self.config.table_type != MERGE_ON_READ:
            raise ConfigError(f"only MERGE_ON_READ tables are compacted; {self.path} is {self.config.table_type}")
        protocol = self._protocol()
        self._check_writer()
        timeline = Timeline.load(self.storage)
        plan = None
        for pending in compaction.pending_compactions(timeline):
            if self.write_config.multi_writer and not protocol.heartbeats.is_expired(
                self.storage, pending.requested_time
            ):
                return None  # another process is running it
            plan = compaction.load_plan(self.storage, pending.requested_time)
            break
        if plan is None:
            with protocol.lock.hold("schedule a compaction"):
                plan = compaction.schedule(self.storage, Timeline.load(self.storage))
            if plan is None:
                return None
        heartbeat = None
        if self.write_config.multi_writer:
            heartbeat = Heartbeat(self.storage, plan.instant_time, protocol.heartbeats).start()
        try:
            schema = self.schema or pa.schema([])
            cfg = self.config
            run_slices = None
            if self.spark is not None:  # one Spark task per slice; else one after the other here
                pipeline = self._pipeline_factory()(None, schema, "upsert")
                run_slices = pipeline.compact_slices
            stats = compaction.execute(
                self.storage, plan, user_schema=schema, ordering_fields=cfg.ordering_fields,
                merger=self.merger(),
                compression=self.write_config.compression, max_file_size=self.write_config.max_file_size,
                run_slices=run_slices, bloom_filter=self.write_config.bloom_filter,
            )
            with protocol.lock.hold("complete a compaction"):
                instant = compaction.complete(self.storage, plan, stats, user_schema=schema, table_name=cfg.name)
        finally:
            if heartbeat is not None:
                heartbeat.stop()
        return compaction.CompactionResult(instant, tuple(stats))

    def rollback(self, instant_time: str, *, force: bool = False) -> RollbackResult:
        """Roll back a pending write, or the latest completed one. Publishes a rollback instant.

        A pending write whose heartbeat is alive (its writer is running) is refused with
        WriterAliveError unless ``force``: the writer then fails at commit. A write that
        built on a rolled-back completed instant cannot commit afterwards (it gets
        RolledBackConflictError), so the rollback is never undone by a concurrent writer.
        """
        self._check_writer()
        protocol = self._protocol()
        with protocol.lock.hold("roll back an instant"):  # no lock in single-writer mode
            protocol.finish_interrupted(Timeline.load(self.storage))
            timeline = Timeline.load(self.storage)
            instant = find_instant(timeline, instant_time)
            if not instant.is_completed and not force and protocol.writer_alive(instant):
                beat = last_heartbeat_ms(self.storage, instant.requested_time) or now_ms()
                raise WriterAliveError(instant.requested_time, now_ms() - beat)
            return rollback(self.storage, instant, timeline=timeline)

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

        Defaults come from the ``hoodie.clustering.plan.strategy.*`` options. The plan is made
        under the table lock (a static view of the table) and published as
        ``<t>.clustering.requested``; the files are rewritten without the lock (on Spark when
        the table has a SparkSession, else in this process), concurrently with writers; the
        result is a ``replacecommit`` (operation CLUSTER). Rows keep their commit times.

        Ingestion wins: if a write touched a planned file group meanwhile, the clustering is
        rolled back and ClusteringAbortedError raised (run it again). ``progress`` is called
        as groups finish. Returns what was done (``clustered`` is False if nothing needed it).
        """
        if self.write_config.non_blocking:
            from tidemark.write.nbcc import refuse_base_file_operation

            refuse_base_file_operation("cluster")
        if self.schema is None:  # nothing written yet: nothing to cluster (a scheduled service must not fail)
            return ClusteringResult(None, None, 0, 0, 0, 0, 0, 0, (), _names(sort_by, "sort_by"))
        self._check_writer()
        service, settings = self._clustering(sort_by, target_file_size, small_file_limit, max_groups)
        outcome = service.run(settings, progress)
        rolled_back = tuple(r.rolled_back.requested_time for r in outcome.rolled_back)
        plan = outcome.plan
        if outcome.instant is None or plan is None:
            return ClusteringResult(None, None, 0, 0, 0, 0, 0, 0, (), settings.sort_columns, rolled_back)
        stats = outcome.stats
        return ClusteringResult(
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

    def _clustering(
        self,
        sort_by: str | Sequence[str] | None,
        target_file_size: int | None,
        small_file_limit: int | None,
        max_groups: int | None,
    ) -> tuple[Any, Any]:
        from tidemark.services.cluster import ArrowExecutor, ClusteringService, SparkExecutor, clustering_config

        schema = self.schema
        if schema is None:
            raise InvalidInputError("the table has no schema yet (no writes): nothing to cluster")
        settings = clustering_config(
            self.write_config.clustering, sort_by=sort_by, target_file_size=target_file_size,
            small_file_limit=small_file_limit, max_groups=max_groups, schema=schema,
        )
        executor = ArrowExecutor() if self.spark is None else SparkExecutor(self.spark)
        service = ClusteringService(self.storage, self.write_config, self._protocol(), schema=schema,
                                    table_name=self.config.name, executor=executor)
        return service, settings

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

    def clean(self) -> CleanResult:
        """Clean the table by hand: roll back failed writes whose heartbeat expired (never a live
        one), then delete the file versions that hoodie.clean.policy lets go.

        The plan is made under the table lock and published as ``<t>.clean.requested``; the
        files are deleted outside the lock, concurrently with writers. Never deleted: the
        latest version of each file group, versions inside the retained time-travel window,
        the version a pending write may be merging against, savepointed files.
        """
        return self._clean(rollback_failed=True)

    def _clean(self, *, rollback_failed: bool) -> CleanResult:
        protocol = self._protocol()
        self._check_writer()
        # Pending cleans of dead cleaners are adopted below (and reported), not in the rollback step.
        rolled_back = tuple(protocol.rollback_expired_writes(finish_cleans=False)) if rollback_failed else ()
        if not needs_cleaning(self.storage, Timeline.load(self.storage), self.write_config.clean):
            # Checked without the lock first, so writers that clean inline after every commit
            # take the lock only when there is something to do.
            return CleanResult(rolled_back=rolled_back, skipped="nothing to clean")
        with protocol.lock.hold("schedule a clean"):
            scheduled, why = schedule_clean(
                self.storage,
                Timeline.load(self.storage),
                self.write_config.clean,
                protocol.heartbeats,
                multi_writer=self.write_config.multi_writer,
            )
        results = [execute_clean(self.storage, plan) for plan in scheduled]
        if not results:
            return CleanResult(rolled_back=rolled_back, skipped=why)
        last = results[-1]
        return CleanResult(
            rolled_back=rolled_back,
            clean_instant=last.clean_instant,
            deleted_files=tuple(f for r in results for f in r.deleted_files),
            earliest_to_retain=last.earliest_to_retain,
            kept_for_savepoints=tuple(f for r in results for f in r.kept_for_savepoints),
            finished=tuple(r.clean_instant for r in results[:-1] if r.clean_instant is not None),
        )

    def archive(self) -> ArchiveResult:
        """Move old completed instants into the archived timeline (``.hoodie/timeline/history``)
        once more than hoodie.keep.max.commits commits are active, keeping hoodie.keep.min.commits.
        Runs under the table lock. Time travel and incremental reads still reach archived instants."""
        self._check_writer()
        protocol = self._protocol()
        with protocol.lock.hold("archive the timeline"):
            timeline = Timeline.load(self.storage)
            if protocol.finish_interrupted(timeline):  # a crash's leftovers would hold archival back
                timeline = timeline.reload()
            return archive(self.storage, timeline, self.write_config.archive)

    def _run_inline_services(self) -> None:
        """After a successful write: clean and archive if due. A failing service is logged, never
        raised: the write it follows is committed, and ingestion must not fail for a service."""
        clean, keep = self.write_config.clean, self.write_config.archive
        try:
            timeline = Timeline.load(self.storage)
            if clean.automatic and commits_since_last_clean(timeline) >= clean.max_commits:
                self._clean(rollback_failed=False)  # the write already rolled back failed writes
                timeline = timeline.reload()
            if keep.automatic and len(timeline.completed_data_instants) > keep.max_commits:
                self.archive()
        except (TidemarkError, OSError) as exc:
            log.warning("inline table service failed after a successful write: %s", exc)

    # -- savepoints and restore ----------------------------------------------------------
    def savepoint(self, instant_time: str, *, comment: str = "") -> SavepointResult:
        """Pin the table as of the completed commit ``instant_time``: cleaning never deletes the
        files a reader sees at that instant, so time travel to it and restore keep working."""
        self._check_writer()
        with self._protocol().lock.hold("create a savepoint"):
            return create_savepoint(self.storage, Timeline.load(self.storage), instant_time, comment=comment)

    def savepoints(self) -> list[Instant]:
        """The completed savepoints, oldest first."""
        return Timeline.load(self.storage).filter(actions=[Action.SAVEPOINT], states=[State.COMPLETED])

    def delete_savepoint(self, instant_time: str) -> Instant:
        """Remove a savepoint; its files become cleanable again. NotSavepointedError if none."""
        self._check_writer()
        with self._protocol().lock.hold("delete a savepoint"):
            return delete_savepoint(self.storage, Timeline.load(self.storage), instant_time)

    def restore(self, instant_time: str) -> RestoreResult:
        """Roll the table back to the savepointed ``instant_time``: every write after it (pending
        ones too) is rolled back, newest first, and a restore instant records it.
        NotSavepointedError if the instant has no savepoint. Stop the writers first: their
        pending writes are rolled back and will fail to commit, as will a write that built on
        a rolled-back commit (RolledBackConflictError). A restore a crash interrupted is
        finished by the next write or clean; until then every commit fails."""
        self._check_writer()
        self._drop_unmaintained_metadata_table(remove=True)
        protocol = self._protocol()
        with protocol.lock.hold("restore to a savepoint"):
            protocol.finish_interrupted(Timeline.load(self.storage))
            return restore(self.storage, Timeline.load(self.storage), instant_time)

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


def _check_key_fields(config: TableConfig, schema: pa.Schema, source: str) -> None:
    """hoodie.properties' key, partition and ordering fields must name columns of the schema."""
    check_fields_exist(config, schema.names, schema_source=source)


def _query_type(value: str) -> str:
    query = str(value).lower().replace("-", "_")
    if query not in ("snapshot", "read_optimized"):
        raise ConfigError(f"query_type must be snapshot or read_optimized, got {value!r}")
    return query


_TABLE_KEYS = {
    "hoodie.table.name", "hoodie.database.name", "hoodie.datasource.write.hive_style_partitioning", URL_ENCODE_KEY,
}
_MERGE_KEYS = (
    "hoodie.record.merge.mode",
    "hoodie.table.partial.update.mode",
    "hoodie.record.merge.column.groups",
    "hoodie.write.record.merge.custom.implementation.classes",
)
_INDEX_KEYS = ("hoodie.index.type", "hoodie.bucket.index.num.buckets", "hoodie.bucket.index.hash.field")
_TABLE_KEYS |= {*_MERGE_KEYS, *_INDEX_KEYS}


def _merge_settings(raw: Mapping[str, str], ordering: tuple[str, ...]) -> Any:
    from tidemark.merge import MergeConfig

    return MergeConfig.build(
        mode=parse_option("hoodie.record.merge.mode", raw),
        ordering_fields=ordering,
        partial_update_mode=parse_option("hoodie.table.partial.update.mode", raw),
        column_groups=parse_option("hoodie.record.merge.column.groups", raw),
        custom_class=parse_option("hoodie.write.record.merge.custom.implementation.classes", raw),
    )


def _merge_fields(raw: Mapping[str, str], merge: Any) -> dict[str, Any]:
    from tidemark.merge.config import format_column_groups

    return {
        "record_merge_mode": merge.mode,
        "partial_update_mode": "IGNORE_DEFAULTS" if merge.partial_update else None,
        "merge_column_groups": format_column_groups(merge.column_groups) if merge.column_groups else None,
        "custom_merger_class": merge.custom_class,
    }


def _index_fields(raw: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, Any]:
    from tidemark.write.bucket import BucketSpec

    index_type = parse_option("hoodie.index.type", raw)
    if index_type != "BUCKET":
        for key in ("hoodie.bucket.index.num.buckets", "hoodie.bucket.index.hash.field"):
            if key in raw:
                raise ConfigError(f"{key} needs hoodie.index.type=BUCKET", key=key)
        return {"index_type": index_type}
    hash_fields = _names(parse_option("hoodie.bucket.index.hash.field", raw), "hoodie.bucket.index.hash.field")
    if len(hash_fields) == 1 and "," in hash_fields[0]:
        hash_fields = tuple(f.strip() for f in hash_fields[0].split(",") if f.strip())
    spec = BucketSpec(parse_option("hoodie.bucket.index.num.buckets", raw), hash_fields or keys, keys)
    return {"index_type": "BUCKET", "bucket_num_buckets": spec.num_buckets, "bucket_hash_fields": spec.hash_fields}


def _check_concurrency_mode(write_config: WriteConfig, config: TableConfig) -> None:
    """Non-blocking concurrency control needs a merge-on-read table with a bucket index: only
    there can every writer append to a file group fixed by the key, without reading or
    replacing another writer's files."""
    if not write_config.non_blocking:
        return
    missing = []
    if config.table_type != MERGE_ON_READ:
        missing.append(f"table_type=MERGE_ON_READ (this table is {config.table_type})")
    if not config.bucket_index:
        missing.append("hoodie.index.type=BUCKET with hoodie.bucket.index.num.buckets")
    if missing:
        raise ConfigError(
            "hoodie.write.concurrency.mode=non_blocking_concurrency_control needs " + " and ".join(missing)
            + "; use optimistic_concurrency_control for other tables",
            key="hoodie.write.concurrency.mode",
        )


def _check_table_options(raw: Mapping[str, str], props: Mapping[str, str]) -> None:
    """Table-scope options given to open() must agree with hoodie.properties: they cannot change."""
    if URL_ENCODE_KEY in raw:
        stored_encode = props.get(URL_ENCODE_KEY, "false").strip().lower() == "true"
        if parse_option(URL_ENCODE_KEY, raw) != stored_encode:
            raise ConfigError(
                f"{URL_ENCODE_KEY} is fixed when a table is created (it decides how partition folders are "
                f"named): this table has {str(stored_encode).lower()!r}, the options give {raw[URL_ENCODE_KEY]!r}",
                key=URL_ENCODE_KEY,
            )
    for key in (*_MERGE_KEYS, *_INDEX_KEYS):
        if key not in raw:
            continue
        given = parse_option(key, raw)
        stored_raw = props.get(key)
        if stored_raw is None and key in ("hoodie.index.type",):
            stored_raw = "SIMPLE"
        stored = parse_option(key, {key: stored_raw}) if stored_raw is not None else None
        if key == "hoodie.bucket.index.hash.field" and given is not None and stored is not None:
            given, stored = given.replace(" ", ""), stored.replace(" ", "")
        if given != stored:
            raise ConfigError(
                f"{key} is fixed when a table is created: this table has {stored_raw!r}, the options "
                f"give {raw[key]!r}; it cannot change on an existing table",
                key=key,
            )
