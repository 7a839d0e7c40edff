"""The public entry point: :class:`Table`, one Hudi v8 table at a path.

Guarantees: every write either publishes one completed instant or leaves
nothing visible; bad input raises a :class:`~tidemark.errors.TidemarkError`
before anything is written; readers only ever see completed instants.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tidemark.config import WriteConfig, resolve_write_config
from tidemark.config.resolve import parse_option, validate_keys
from tidemark.errors import ConfigError, TableExistsError, TableNotFoundError
from tidemark.format.names import TEMP_DIR, TIMELINE_DIR
from tidemark.format.properties import (
    COPY_ON_WRITE,
    MERGE_ON_READ,
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
    parse_properties,
)
from tidemark.format.schema import META_SCHEMA, arrow_schema_from_avro, avro_schema_json
from tidemark.read.plan import PartitionFilter, ReadPlan, incremental_plan, prune, snapshot_plan
from tidemark.services.rollback import RollbackResult, find_instant, rollback
from tidemark.storage import LocalStorage, Storage
from tidemark.timeline import Action, Instant, Timeline

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tidemark.services.compaction import CompactionResult


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
class IncrementalResult:
    """Rows of an incremental read, and the checkpoint to pass as ``start`` next time."""

    rows: Any  # a Spark DataFrame
    checkpoint: str | None
    instants: tuple[Instant, ...]


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
            from tidemark.engines.spark.datasource import register

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
        if arrow_schema is not None:
            for role, cols in (("record key", keys), ("partition", partitions), ("ordering", ordering)):
                absent = [c for c in cols if c not in arrow_schema.names]
                if absent:
                    raise ConfigError(f"the schema lacks the {role} column(s) {absent}")
        config = TableConfig(
            name=name,
            table_type=table_type,
            record_key_fields=keys,
            partition_fields=partitions,
            ordering_fields=ordering,
            hive_style_partitioning=parse_option("hoodie.datasource.write.hive_style_partitioning", raw),
            create_schema=avro_schema_json(arrow_schema, name) if arrow_schema is not None else None,
            database=parse_option("hoodie.database.name", raw),
        )
        for folder in (TIMELINE_DIR, f"{TIMELINE_DIR}/history", TEMP_DIR):
            os.makedirs(storage.full_path(folder), exist_ok=True)
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
        if not storage.exists(PROPERTIES_PATH):
            detail = "the path does not exist" if not storage.exists("") else f"{PROPERTIES_PATH} is missing"
            raise TableNotFoundError(path, detail)
        props = parse_properties(storage.read_bytes(PROPERTIES_PATH).decode())
        config = TableConfig.from_properties(props)
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
        timeline = Timeline.load(self.storage)
        latest = timeline.last_completed_data_instant()
        if latest is not None:
            schema_json = timeline.commit_metadata(latest).schema_json
            if schema_json:
                return arrow_schema_from_avro(schema_json)
        if self.config.create_schema:
            return arrow_schema_from_avro(self.config.create_schema)
        return None

    def _adopt_schema(self, schema: pa.Schema) -> None:
        self._schema = pa.schema([f for f in schema if f.name not in META_SCHEMA.names])

    def timeline(self) -> list[Instant]:
        """Every instant on the active timeline, in requested-time order."""
        return Timeline.load(self.storage).instants

    # -- writes -------------------------------------------------------------------------
    def _protocol(self) -> Any:
        from tidemark.write.commit import CommitProtocol

        if self._commit_protocol is None:
            self._commit_protocol = CommitProtocol(self.storage, self.write_config)
        return self._commit_protocol

    def _pipeline_factory(self) -> Any:
        from tidemark.write.engine import TableLayout

        cfg = self.config
        layout = TableLayout(cfg.record_key_fields, cfg.partition_fields, cfg.ordering_fields,
                             cfg.hive_style_partitioning)
        if self.spark is None:
            from tidemark.engines.arrow.writer import ArrowWritePipeline

            return lambda spec, schema, operation: ArrowWritePipeline(layout, spec, schema)
        from tidemark.engines.spark.writer import SparkWritePipeline

        spark, wc = self.spark, self.write_config

        def make(spec: Any, schema: pa.Schema, operation: str) -> Any:
            parallelism = wc.bulk_insert_parallelism if operation == "bulk_insert" else wc.upsert_parallelism
            return SparkWritePipeline(spark, layout, spec, schema, parallelism=parallelism)

        return make

    def _write(self, operation: str, data: Any) -> CommitResult:
        from tidemark.write.client import WriteClient, counts

        client = WriteClient(self.storage, self.config, self.write_config, self._pipeline_factory(),
                             protocol=self._protocol())
        outcome = client.write(operation, data, self.schema)
        if self._schema is None:
            self._adopt_schema(outcome.schema)
        if outcome.instant.action is Action.DELTA_COMMIT and self.write_config.compact_inline:
            self._compact_inline()
        stats = outcome.stats
        inserts, updates, deletes = counts(stats)
        instant = outcome.instant
        return CommitResult(
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
            attempts=outcome.attempts,
        )

    def upsert(self, data: Any) -> CommitResult:
        """Insert new keys and update existing ones (merged by the ordering field, if any)."""
        return self._write("upsert", data)

    def insert(self, data: Any) -> CommitResult:
        """Insert records; keys already in the table follow hoodie.datasource.insert.dup.policy."""
        return self._write("insert", data)

    def delete(self, data: Any) -> CommitResult:
        """Delete the records whose keys are in ``data`` (other columns are ignored)."""
        return self._write("delete", data)

    def bulk_insert(self, data: Any) -> CommitResult:
        """Write ``data`` into new file groups without an index lookup: the fast initial load."""
        return self._write("bulk_insert", data)

    def insert_overwrite(self, data: Any) -> CommitResult:
        """Replace the partitions present in ``data`` with its records (a replacecommit)."""
        return self._write("insert_overwrite", data)

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
        files = prune(plan.files, filters, self.config.partition_fields, self.config.hive_style_partitioning)
        return ReadPlan(tuple(files), plan.commit_times, logs=plan.logs)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)

    def _read_plan(self, plan: ReadPlan) -> Any:
        if self.spark is None:
            from tidemark.engines.arrow.reader import read_plan as arrow_read

            return arrow_read(self.storage, plan, self.schema, ordering_fields=self.config.ordering_fields)
        from tidemark.engines.spark.reader import read_plan as spark_read

        return spark_read(self.spark, self.storage, plan, self.schema, ordering_fields=self.config.ordering_fields)

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
        return IncrementalResult(self._read_plan(plan), plan.end, plan.instants)

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
                self.storage, plan, user_schema=schema, table_name=cfg.name, ordering_fields=cfg.ordering_fields,
                compression=self.write_config.compression, max_file_size=self.write_config.max_file_size,
                run_slices=run_slices,
            )
            with protocol.lock.hold("complete a compaction"):
                instant = compaction.complete(self.storage, plan, stats, user_schema=schema, table_name=cfg.name)
        finally:
            if heartbeat is not None:
                heartbeat.stop()
        return compaction.CompactionResult(instant, tuple(stats))

    def rollback(self, instant_time: str) -> RollbackResult:
        """Roll back a pending write, or the latest completed one. Publishes a rollback instant."""
        with self._protocol().lock.hold("roll back an instant"):  # no lock in single-writer mode
            timeline = Timeline.load(self.storage)
            return rollback(self.storage, find_instant(timeline, instant_time), timeline=timeline)

    def rollback_failed_writes(self) -> list[RollbackResult]:
        """Roll back failed writes: with several writers only those whose heartbeat expired,
        with a single writer every pending write (none can be alive)."""
        protocol = self._protocol()
        if self.write_config.multi_writer:
            return list(protocol.rollback_expired_writes())
        return list(protocol.rollback_failed_writes())

    def clean(self) -> list[RollbackResult]:
        """Table services run by hand; for now: roll back expired failed writes (LAZY cleaning)."""
        return list(self._protocol().rollback_expired_writes())

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


def _query_type(value: str) -> str:
    query = str(value).lower().replace("-", "_")
    if query not in ("snapshot", "read_optimized"):
        raise ConfigError(f"query_type must be snapshot or read_optimized, got {value!r}")
    return query


_TABLE_KEYS = {"hoodie.table.name", "hoodie.database.name", "hoodie.datasource.write.hive_style_partitioning"}
