"""The Spark engine's key columns, built as SQL text, agree with the Arrow engine's on odd input.

The write path builds its expressions as SQL text (engines/spark/expressions.py: one parse
instead of a dozen py4j calls per Column part), so column names must be quoted and values
escaped whatever they hold: backquotes, dots and spaces in names; quotes, backslashes, '%',
'/', commas, non-ASCII, empty and null in values.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tidemark.engines.arrow.keys import partition_path_array, record_key_array
from tidemark.engines.spark.expressions import key_hash
from tidemark.engines.spark.keys import null_key_condition, partition_path_column, record_key_column

ODD_NAMES = ["a`b", "c.d", "e f"]
VALUES = ["plain", "it's", 'say "hi"', "back\\slash", "100%", "a/b", "x,y", "née ✓", "", None]


def _frame(spark: Any) -> tuple[Any, pa.Table]:
    table = pa.table({
        ODD_NAMES[0]: pa.array(VALUES, pa.string()),
        ODD_NAMES[1]: pa.array(list(range(len(VALUES))), pa.int64()),
        ODD_NAMES[2]: pa.array(list(reversed(VALUES)), pa.string()),
    })
    return spark.createDataFrame(table.to_pandas()), table


@pytest.mark.parametrize("url_encode", [False, True])
@pytest.mark.parametrize("hive_style", [False, True])
def test_partition_path_matches_arrow(spark: Any, hive_style: bool, url_encode: bool) -> None:
    df, table = _frame(spark)
    got = [r[0] for r in df.select(partition_path_column(ODD_NAMES, hive_style=hive_style, url_encode=url_encode))
           .collect()]
    want = partition_path_array(table, ODD_NAMES, hive_style=hive_style, url_encode=url_encode).to_pylist()
    assert got == want


def test_record_keys_and_null_check_match_arrow(spark: Any) -> None:
    df, table = _frame(spark)
    rows = df.select(record_key_column(ODD_NAMES[1:2]).alias("one"), record_key_column(ODD_NAMES).alias("many"),
                     null_key_condition(ODD_NAMES).alias("null")).collect()
    assert [r["one"] for r in rows] == record_key_array(table, ODD_NAMES[1:2]).to_pylist()
    # Null and empty values of a key of several fields are placeholders, in both engines alike.
    assert [r["many"] for r in rows] == record_key_array(table, ODD_NAMES).to_pylist()
    # A row has no key when every field of it is null or empty (the integer field never is).
    texts = ["" if v is None else v for v in VALUES]
    both = df.select(null_key_condition([ODD_NAMES[0], ODD_NAMES[2]]).alias("null")).collect()
    assert [r["null"] for r in both] == [not v and not w for v, w in zip(texts, reversed(texts), strict=True)]
    assert [r["null"] for r in rows] == [False] * len(VALUES)
    assert [r["null"] for r in df.select(null_key_condition(ODD_NAMES[:1]).alias("null")).collect()] == [
        not v for v in texts]


def test_key_hash_is_the_column_api_value(spark: Any) -> None:
    """The insert buckets are ranges of this hash: its SQL text must give what the Column API gave."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame([(k,) for k in ["k1", "it's", "", "née"]], "_hoodie_record_key string")
    old = F.pmod(F.xxhash64(F.col("_hoodie_record_key")), F.lit(1 << 30)) / float(1 << 30)
    rows = df.select(key_hash().alias("new"), old.alias("old")).collect()
    assert all(r["new"] == r["old"] for r in rows)
    assert all(0.0 <= r["new"] < 1.0 for r in rows)
