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
from tidemark.errors import ConfigError, InvalidInputError, TableExistsError, TableNotFoundError
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
from tidemark.timeline import Instant, Timeline

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
        if table_type == MERGE_ON_READ:
            raise ConfigError("MERGE_ON_READ tables are not supported yet; use COPY_ON_WRITE")
        if table_type != COPY_ON_WRITE:
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
    def _write(self, operation: str, df: DataFrame) -> CommitResult:
        from tidemark.engines.spark.client import SparkWriteClient, counts

        instant, stats, op_name = SparkWriteClient(self).write(operation, df)
        inserts, updates, deletes = counts(stats)
        return CommitResult(
            instant_time=instant.requested_time,
            completion_time=instant.completion_time or "",
            operation=op_name,
            num_inserts=inserts,
            num_updates=updates,
            num_deletes=deletes,
            file_groups=tuple(sorted({s.file_id for s in stats})),
            partitions=tuple(sorted({s.partition_path for s in stats})),
            num_files=len(stats),
            bytes_written=sum(s.file_size for s in stats),
        )

    def upsert(self, df: DataFrame) -> CommitResult:
        """Insert new keys and update existing ones (merged by the ordering field, if any)."""
        return self._write("upsert", df)

    def insert(self, df: DataFrame) -> CommitResult:
        """Insert records; keys already in the table follow hoodie.datasource.insert.dup.policy."""
        return self._write("insert", df)

    def delete(self, df: DataFrame) -> CommitResult:
        """Delete the records whose keys are in ``df`` (other columns are ignored)."""
        return self._write("delete", df)

    def bulk_insert(self, df: DataFrame) -> CommitResult:
        """Write ``df`` into new file groups without an index lookup: the fast initial load."""
        return self._write("bulk_insert", df)

    def insert_overwrite(self, df: DataFrame) -> CommitResult:
        """Replace the partitions present in ``df`` with its records (a replacecommit)."""
        return self._write("insert_overwrite", df)

    # -- reads --------------------------------------------------------------------------
    def read_plan(self, *, as_of: str | None = None, filters: Sequence[PartitionFilter] | None = None) -> ReadPlan:
        plan = snapshot_plan(self.storage, Timeline.load(self.storage), as_of=as_of)
        files = prune(plan.files, filters, self.config.partition_fields, self.config.hive_style_partitioning)
        return ReadPlan(tuple(files), plan.commit_times)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)

    def _spark(self) -> SparkSession:
        if self.spark is None:
            raise InvalidInputError("this Table was opened without a SparkSession; pass spark=...")
        return self.spark

    def read(self, as_of: str | None = None, *, filters: Sequence[PartitionFilter] | None = None) -> DataFrame:
        """The table as of now (or as of instant ``as_of``): meta columns plus user columns.

        ``filters`` prune partitions: ``[("city", "=", "sf")]``, ops = != < <= > >= in, not in.
        """
        from tidemark.engines.spark.reader import read_plan

        plan = self.read_plan(as_of=as_of, filters=filters)
        return read_plan(self._spark(), self.storage, plan, self.schema)

    def read_incremental(self, start: str | None = None, end: str | None = None) -> DataFrame:
        """Rows written by commits that *completed* in ``(start, end]`` (completion times)."""
        return self.read_changes(start=start, end=end).rows

    def read_changes(self, start: str | None = None, end: str | None = None) -> IncrementalResult:
        """Like read_incremental, plus the checkpoint to pass as ``start`` next time."""
        from tidemark.engines.spark.reader import read_plan

        plan = self.incremental_plan(start=start, end=end)
        rows = read_plan(self._spark(), self.storage, plan, self.schema)
        return IncrementalResult(rows, plan.end, plan.instants)

    # -- maintenance --------------------------------------------------------------------
    def rollback(self, instant_time: str) -> RollbackResult:
        """Roll back a pending write, or the latest completed one. Publishes a rollback instant."""
        timeline = Timeline.load(self.storage)
        return rollback(self.storage, find_instant(timeline, instant_time), timeline=timeline)

    def rollback_failed_writes(self) -> list[RollbackResult]:
        """Roll back every pending write (safe only when no writer is running)."""
        from tidemark.write.commit import CommitProtocol

        return CommitProtocol(self.storage, self.write_config).rollback_failed_writes()

    def __repr__(self) -> str:
        return f"Table({self.path!r}, type={self.config.table_type}, key={list(self.config.record_key_fields)})"


_TABLE_KEYS = {"hoodie.table.name", "hoodie.database.name", "hoodie.datasource.write.hive_style_partitioning"}
