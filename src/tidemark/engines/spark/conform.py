"""Bringing a batch's column to the table's (evolved) type in Spark.

``Column.cast`` widens scalars and casts structs of the same shape, but cannot fill
the fields a struct lacks (a batch written before a nested field was added): those are
built field by field here, nulls where the batch has nothing.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, from_arrow_type, to_arrow_schema
from pyspark.sql.types import DataType


def spark_type(t: pa.DataType) -> DataType:
    return from_arrow_type(t)


def arrow_schema_of(df: DataFrame) -> pa.Schema:
    """A DataFrame's schema as Arrow's (timestamps in UTC, as every engine writes them)."""
    return to_arrow_schema(df.schema, timezone="UTC")


def spark_schema_of(schema: pa.Schema) -> Any:
    return from_arrow_schema(schema)


def conform(column: Column, have: pa.DataType, want: pa.DataType) -> Column:
    """``column`` (of Arrow type ``have``) as ``want``: promoted types cast, absent struct fields null."""
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        present = {f.name for f in have}
        fields = [
            conform(column.getField(f.name), have.field(f.name).type, f.type).alias(f.name)
            if f.name in present else F.lit(None).cast(spark_type(f.type)).alias(f.name)
            for f in want
        ]
        return F.when(column.isNull(), F.lit(None).cast(spark_type(want))).otherwise(F.struct(*fields))
    if (pa.types.is_list(have) or pa.types.is_large_list(have)) and pa.types.is_list(want) \
            and pa.types.is_struct(want.value_type):
        return F.transform(column, lambda item: conform(item, have.value_type, want.value_type))
    return column.cast(spark_type(want))
