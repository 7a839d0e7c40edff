"""The Spark engine: writes, reads, compaction and clustering as Spark jobs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from tidemark.config import WriteConfig
from tidemark.engines.base import typed_engine_errors
from tidemark.engines.spark.cluster import SparkExecutor
from tidemark.engines.spark.compaction import compact_slices
from tidemark.engines.spark.conform import arrow_schema_of
from tidemark.engines.spark.datasource import register
from tidemark.engines.spark.reader import arrow_to_spark, read_plan
from tidemark.engines.spark.session import write_session
from tidemark.engines.spark.task_failures import typed_task_failures
from tidemark.engines.spark.writer import SparkWritePipeline
from tidemark.format.names import META_COLUMNS
from tidemark.merge import RecordMerger
from tidemark.read.plan import ReadPlan
from tidemark.services.cluster import ClusteringExecutor
from tidemark.services.compaction import CompactionOperation, SliceRunner
from tidemark.storage import Storage
from tidemark.write.engine import TableLayout, WritePipelines
from tidemark.write.file_group import WriteSpec
from tidemark.write.operation import WriteOperation


class SparkWrites:
    """One table's writes on Spark (:class:`tidemark.write.engine.WritePipelines`)."""

    def __init__(self, spark: SparkSession, layout: TableLayout, config: WriteConfig) -> None:
        self.spark = spark
        self.layout = layout
        self.config = config

    def batch(self, data: object) -> DataFrame:
        if not isinstance(data, DataFrame):  # a Spark Connect DataFrame is one too (pyspark >= 4)
            from tidemark.errors import InvalidInputError

            raise InvalidInputError(
                f"a Table opened with spark=... writes Spark DataFrames, not {type(data).__name__}; "
                "convert it with spark.createDataFrame(...)"
            )
        return data.drop(*[c for c in data.columns if c in META_COLUMNS])

    def schema_of(self, batch: DataFrame) -> pa.Schema:
        return arrow_schema_of(batch)

    def is_empty(self, batch: DataFrame) -> bool:
        return bool(batch.isEmpty())

    def pipeline(self, user_schema: pa.Schema, operation: WriteOperation) -> SparkWritePipeline:
        bulk = operation is WriteOperation.BULK_INSERT
        parallelism = self.config.bulk_insert_parallelism if bulk else self.config.upsert_parallelism
        return SparkWritePipeline(self.spark, self.layout, user_schema, parallelism=parallelism, operation=operation)


class SparkEngine:
    """See :class:`tidemark.engines.base.Engine`. Creating it registers the ``tidemark`` data
    source in the session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        register(spark)

    @property
    def session(self) -> Any:
        return self.spark

    def pipelines(self, layout: TableLayout, config: WriteConfig) -> WritePipelines[DataFrame]:
        return SparkWrites(self.spark, layout, config)

    @contextlib.contextmanager
    def write_session(self) -> Iterator[None]:
        # Spark's words typed: first a task's failure (a worker without tidemark, a damaged
        # file a task read), then a job's naming data files (gone or damaged: the write decides).
        with write_session(self.spark), typed_engine_errors(), typed_task_failures():
            yield

    def read(
        self,
        storage: Storage,
        plan: ReadPlan,
        schema: pa.Schema | None,
        *,
        merger: RecordMerger | None,
        delete_ordering_field: str | None,
    ) -> Any:
        return read_plan(self.spark, storage, plan, schema, merger=merger, delete_ordering_field=delete_ordering_field)

    def frame(self, rows: pa.Table) -> Any:
        return arrow_to_spark(self.spark, rows)

    def slice_runner(self) -> SliceRunner | None:
        spark = self.spark

        def run(spec: WriteSpec, merger: RecordMerger, operations: list[CompactionOperation]) -> list[Any]:
            with typed_task_failures():
                return compact_slices(spark, spec, merger, operations)

        return run

    def clustering_executor(self) -> ClusteringExecutor:
        return SparkExecutor(self.spark)
