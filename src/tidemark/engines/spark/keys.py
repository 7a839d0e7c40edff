"""Record-key and partition-path columns as Spark expressions (Hudi's key generators).

* record key: one field -> its value as a string; several -> ``f1:v1,f2:v2``
  (Hudi's complex key generator);
* partition path: values joined by ``/``, each ``field=value`` when hive-style;
  a null or empty value becomes ``__HIVE_DEFAULT_PARTITION__``; with url-encoding
  each value is escaped as Hudi does (:mod:`tidemark.format.partition_path`).

The Arrow engine (:mod:`tidemark.engines.arrow.keys`) computes the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from tidemark.format.names import DEFAULT_PARTITION
from tidemark.format.partition_path import ESCAPED, escape_value


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


def _escaped(value: Column) -> Column:
    """Hudi's url-encoding: each character of ESCAPED replaced by its ``%XX`` ('%' first)."""
    for char in ESCAPED:
        value = F.replace(value, F.lit(char), F.lit(escape_value(char)))
    return value


def partition_path_column(fields: Sequence[str], *, hive_style: bool, url_encode: bool = False) -> Column:
    if not fields:
        return F.lit("")
    parts = []
    for name in fields:
        value = F.col(name).cast("string")
        value = F.when(value.isNull() | (value == ""), F.lit(DEFAULT_PARTITION)).otherwise(value)
        if url_encode:
            value = _escaped(value)
        parts.append(F.concat(F.lit(f"{name}="), value) if hive_style else value)
    return F.concat_ws("/", *parts)
