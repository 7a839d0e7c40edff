"""One write on Spark, end to end: validate, plan, write in tasks, commit or roll back.

All validation that can fail on the user's input runs before the write's
instant is requested, so bad input changes nothing on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from tidemark.engines.spark.writer import (
    FILE_ID_COLUMN,
    SparkWritePipeline,
    TableLayout,
    arrow_schema_of,
    check_insert_duplicates,
)
from tidemark.errors import InvalidInputError
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.format.schema import avro_schema_json
from tidemark.fsview import FileSystemView
from tidemark.timeline import Action, Instant, Timeline
from tidemark.write.commit import CommitProtocol, PendingWrite
from tidemark.write.file_group import OP_COLUMN, OP_DELETE, OP_UPSERT, WriteSpec
from tidemark.write.validate import require_columns

if TYPE_CHECKING:
    from tidemark.table import Table

OPERATIONS = {
    "upsert": ("UPSERT", Action.COMMIT),
    "insert": ("INSERT", Action.COMMIT),
    "delete": ("DELETE", Action.COMMIT),
    "bulk_insert": ("BULK_INSERT", Action.COMMIT),
    "insert_overwrite": ("INSERT_OVERWRITE", Action.REPLACE_COMMIT),
}


class SparkWriteClient:
    def __init__(self, table: Table) -> None:
        if table.spark is None:
            raise InvalidInputError("this Table was opened without a SparkSession; pass spark=... to write DataFrames")
        self.table = table
        self.spark = table.spark
        self.storage = table.storage
        self.config = table.write_config

    def _user_schema(self, df: DataFrame) -> pa.Schema:
        """The table's schema, or (first write) the batch's, checked for the key fields."""
        if self.table.schema is not None:
            return self.table.schema
        cfg = self.table.config
        schema = arrow_schema_of(df)
        names = schema.names
        require_columns("record key", cfg.record_key_fields, names)
        require_columns("partition", cfg.partition_fields, names)
        require_columns("ordering", cfg.ordering_fields, names)
        return schema

    def write(self, operation: str, df: DataFrame) -> tuple[Instant, list[WriteStat], str]:
        op_name, action = OPERATIONS[operation]
        df = df.drop(*[c for c in df.columns if c in META_COLUMNS])
        cfg = self.table.config
        keys_only = operation == "delete"
        user_schema = self.table.schema if keys_only else self._user_schema(df)
        if user_schema is None:  # delete on a table that was never written
            user_schema = arrow_schema_of(df)
        spec = WriteSpec(
            base_path=self.storage.base_path,
            instant_time="",  # set once the instant exists
            schema=pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(user_schema)),
            ordering_fields=cfg.ordering_fields,
            compression=self.config.compression,
            max_file_size=self.config.max_file_size,
        )
        layout = TableLayout(
            cfg.record_key_fields, cfg.partition_fields, cfg.ordering_fields, cfg.hive_style_partitioning
        )
        parallelism = (
            self.config.bulk_insert_parallelism if operation == "bulk_insert" else self.config.upsert_parallelism
        )
        pipeline = SparkWritePipeline(
            self.spark,
            layout,
            spec,
            user_schema,
            record_size_estimate=self.config.record_size_estimate,
            small_file_limit=self.config.small_file_limit,
            parallelism=parallelism,
        )
        protocol = CommitProtocol(self.storage, self.config)
        timeline = Timeline.load(self.storage)
        view = FileSystemView(self.storage, timeline)

        # Everything that can reject the input happens before the instant is requested.
        prepared = pipeline.prepare(df, allow_missing=self.config.set_null_for_missing_columns, keys_only=keys_only)
        persisted: list[DataFrame] = []
        try:
            if operation == "bulk_insert":
                batch = pipeline.dedup(prepared) if self.config.combine_before_bulk_insert else prepared
                tagged = None
            else:
                batch = pipeline.dedup(prepared)
                if operation == "insert_overwrite":
                    tagged = batch.withColumn(FILE_ID_COLUMN, F.lit(None).cast("string"))
                else:
                    tagged, _ = pipeline.tag(batch, view)
                tagged = tagged.persist(StorageLevel.MEMORY_AND_DISK)
                persisted.append(tagged)
                if operation == "insert":
                    tagged = check_insert_duplicates(tagged, self.config.insert_dup_policy)

            pending = protocol.start(op_name, action)
            spec = WriteSpec(**{**spec.__dict__, "instant_time": pending.instant_time})
            pipeline.spec = spec
            replaced: dict[str, list[str]] = {}
            try:
                if tagged is None:
                    protocol.inflight(pending)
                    stats = pipeline.write_bulk(batch)
                else:
                    stats, replaced = self._write_tagged(operation, pipeline, tagged, view, protocol, pending)
                instant = protocol.complete(
                    pending,
                    stats,
                    schema_json=avro_schema_json(user_schema, cfg.name),
                    replaced_file_ids=replaced,
                )
            except BaseException:
                if not Timeline.load(self.storage).is_completed(pending.instant_time):
                    protocol.abort(pending)
                raise
        finally:
            for frame in persisted:
                frame.unpersist()
        if self.table.schema is None:
            self.table._adopt_schema(user_schema)
        return instant, stats, op_name

    def _write_tagged(
        self,
        operation: str,
        pipeline: SparkWritePipeline,
        tagged: DataFrame,
        view: FileSystemView,
        protocol: CommitProtocol,
        pending: PendingWrite,
    ) -> tuple[list[WriteStat], dict[str, list[str]]]:
        base_files: dict[tuple[str, str], str] = {}
        for group in view.file_groups():
            base_files[(group.partition_path, group.file_id)] = group.latest.path
        replaced: dict[str, list[str]] = {}
        if operation == "delete":
            found = tagged.filter(F.col(FILE_ID_COLUMN).isNotNull())
            deletes = found.select(RECORD_KEY, PARTITION_PATH, FILE_ID_COLUMN).withColumn(OP_COLUMN, F.lit(OP_DELETE))
            protocol.inflight(pending)
            return pipeline.write_file_groups(deletes, base_files), replaced
        updates = tagged.filter(F.col(FILE_ID_COLUMN).isNotNull())
        inserts = tagged.filter(F.col(FILE_ID_COLUMN).isNull())
        buckets = pipeline.plan_insert_buckets(inserts, view, use_small_files=operation != "insert_overwrite")
        for b in buckets:
            if b.base_file:
                base_files[(b.partition_path, b.file_id)] = b.base_file
        if operation == "insert_overwrite":
            partitions = {b.partition_path for b in buckets}
            for group in view.file_groups(partitions):
                replaced.setdefault(group.partition_path, []).append(group.file_id)
            base_files = {}
        protocol.inflight(pending, [(b.partition_path, b.file_id) for b in buckets])
        routed = pipeline.route_inserts(inserts, buckets) if buckets else None
        rows: DataFrame = updates
        if routed is not None:
            rows = updates.unionByName(routed)
        rows = rows.withColumn(OP_COLUMN, F.lit(OP_UPSERT))
        return pipeline.write_file_groups(rows, base_files), replaced


def counts(stats: Sequence[WriteStat]) -> tuple[int, int, int]:
    return (
        sum(s.num_inserts for s in stats),
        sum(s.num_updates for s in stats),
        sum(s.num_deletes for s in stats),
    )
