"""Spark reads of a read plan: the JVM's parquet reader over the planned base files."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.format.names import COMMIT_TIME
from tidemark.format.schema import with_meta_columns
from tidemark.read.plan import ReadPlan
from tidemark.storage import Storage


def read_plan(spark: SparkSession, storage: Storage, plan: ReadPlan, user_schema: pa.Schema | None) -> DataFrame:
    """A DataFrame of the plan's rows: the five meta columns, then the user columns."""
    schema = from_arrow_schema(with_meta_columns(user_schema or pa.schema([])))
    if not plan.files:
        return spark.createDataFrame([], schema)
    paths = [storage.full_path(f.path) for f in plan.files]
    df = spark.read.schema(schema).parquet(*paths)
    if plan.commit_times is not None:
        df = df.filter(F.col(COMMIT_TIME).isin(sorted(plan.commit_times)))
    return df
