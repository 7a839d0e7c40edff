"""The public entry point: :class:`Table`, one Hudi v8 table at a path.

Guarantees: every write either publishes one completed instant or leaves
nothing visible; bad input raises a :class:`~tidemark.errors.TidemarkError`
before anything is written; readers only ever see completed instants.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tidemark.config import WriteConfig, resolve_write_config
from tidemark.config.resolve import parse_option, validate_keys
from tidemark.errors import ConfigError, TableExistsError, TableNotFoundError, TidemarkError
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

log = logging.getLogger(__name__)


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

    def timeline(self, *, include_archived: bool = False) -> list[Instant]:
        """Every instant on the active timeline (plus the archived ones if asked), by requested time."""
        timeline = Timeline.load(self.storage)
        return (timeline.with_history() if include_archived else timeline).instants

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
        lost = 0
        while True:
            try:
                outcome = client.write(operation, data, self.schema)
                break
            except TidemarkError:
                raise
            except Exception as missing:  # FileNotFoundError, or a Spark job's error naming the file
                conflict = superseded_base_file(self.storage, missing)
                if conflict is None:
                    raise
                # The base file this write merged against was replaced by a concurrent commit
                # and then cleaned: a write-write conflict the commit check would also have
                # found, so it is reported, and retried, as one.
                lost += 1
                if lost > self.write_config.retries_on_conflict:
                    raise conflict from missing
                log.warning("%s; retrying, attempt %d of %d", conflict, lost + 1,
                            self.write_config.retries_on_conflict + 1)
        if lost:
            outcome = replace(outcome, attempts=outcome.attempts + lost)
        if self._schema is None:
            self._adopt_schema(outcome.schema)
        self._run_inline_services()
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
    def read_plan(self, *, as_of: str | None = None, filters: Sequence[PartitionFilter] | None = None) -> ReadPlan:
        plan = snapshot_plan(self.storage, Timeline.load(self.storage), as_of=as_of)
        files = prune(plan.files, filters, self.config.partition_fields, self.config.hive_style_partitioning)
        return ReadPlan(tuple(files), plan.commit_times)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)

    def _read_plan(self, plan: ReadPlan) -> Any:
        if self.spark is None:
            from tidemark.engines.arrow.reader import read_plan as arrow_read

            return arrow_read(self.storage, plan, self.schema)
        from tidemark.engines.spark.reader import read_plan as spark_read

        return spark_read(self.spark, self.storage, plan, self.schema)

    def read(self, as_of: str | None = None, *, filters: Sequence[PartitionFilter] | None = None) -> Any:
        """The table as of now (or as of instant ``as_of``): meta columns plus user columns.

        A Spark DataFrame, or a pyarrow Table when the table was opened with ``spark=None``.
        ``filters`` prune partitions: ``[("city", "=", "sf")]``, ops = != < <= > >= in, not in.
        """
        return self._read_plan(self.read_plan(as_of=as_of, filters=filters))

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
        rolled_back = tuple(protocol.rollback_expired_writes()) if rollback_failed else ()
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
        with self._protocol().lock.hold("archive the timeline"):
            return archive(self.storage, Timeline.load(self.storage), self.write_config.archive)

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
        with self._protocol().lock.hold("create a savepoint"):
            return create_savepoint(self.storage, Timeline.load(self.storage), instant_time, comment=comment)

    def savepoints(self) -> list[Instant]:
        """The completed savepoints, oldest first."""
        return Timeline.load(self.storage).filter(actions=[Action.SAVEPOINT], states=[State.COMPLETED])

    def delete_savepoint(self, instant_time: str) -> Instant:
        """Remove a savepoint; its files become cleanable again. NotSavepointedError if none."""
        with self._protocol().lock.hold("delete a savepoint"):
            return delete_savepoint(self.storage, Timeline.load(self.storage), instant_time)

    def restore(self, instant_time: str) -> RestoreResult:
        """Roll the table back to the savepointed ``instant_time``: every write after it (pending
        ones too) is rolled back, newest first, and a restore instant records it.
        NotSavepointedError if the instant has no savepoint. Stop the writers first: their
        pending writes are rolled back and will fail to commit."""
        with self._protocol().lock.hold("restore to a savepoint"):
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


_TABLE_KEYS = {"hoodie.table.name", "hoodie.database.name", "hoodie.datasource.write.hive_style_partitioning"}
