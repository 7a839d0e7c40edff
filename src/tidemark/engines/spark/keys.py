"""Record-key and partition-path columns as Spark expressions (Hudi's key generators).

* record key: one field -> its value as a string; several -> ``f1:v1,f2:v2``
  (Hudi's complex key generator);
* partition path: values joined by ``/``, each ``field=value`` when hive-style;
  a null or empty value becomes ``__HIVE_DEFAULT_PARTITION__``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from tidemark.format.names import DEFAULT_PARTITION


def record_key_column(fields: Sequence[str]) -> Column:
    if len(fields) == 1:
        return F.col(fields[0]).cast("string")
    parts = [F.concat(F.lit(f"{name}:"), F.col(name).cast("string")) for name in fields]
    # concat_ws skips nulls; null keys are rejected before this matters.
    return F.concat_ws(",", *parts)


def null_key_condition(fields: Sequence[str]) -> Column:
    cond = F.lit(False)
    for name in fields:
        cond = cond | F.col(name).isNull()
    return cond


def partition_path_column(fields: Sequence[str], *, hive_style: bool) -> Column:
    if not fields:
        return F.lit("")
    parts = []
    for name in fields:
        value = F.col(name).cast("string")
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION)).otherwise(value)
        parts.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return F.concat_ws("/", *parts)
