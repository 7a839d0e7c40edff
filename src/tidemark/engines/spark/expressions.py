"""Spark column expressions the write pipeline builds: key hashes, ``CASE`` routing, literals."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column
from pyspark.sql import functions as F

from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.write.plan import InsertBucket

HASH_COLUMN = "_tm_hash"


def key_hash() -> Column:
    """Where a record key falls in [0, 1): the insert buckets are ranges of this hash."""
    return F.pmod(F.xxhash64(F.col(RECORD_KEY)), F.lit(1 << 30)) / float(1 << 30)


def sql_text(value: str) -> str:
    """``value`` as a Spark SQL string literal that no quote, backslash or parser setting breaks."""
    return f"CAST(X'{value.encode().hex()}' AS STRING)" if value else "''"


def case_when(whens: Sequence[tuple[str, str]], null_type: str) -> Column:
    """``CASE WHEN condition THEN value ... END`` (null when none holds), parsed from SQL text.

    One parse: building the same expression with the Column API costs a few py4j calls per
    branch, 0.1 s for 4 branches and 0.8 s for 64.
    """
    if not whens:
        return F.lit(None).cast(null_type)
    return F.expr("CASE " + " ".join(f"WHEN {cond} THEN {value}" for cond, value in whens) + " END")


def bucket_of(buckets: Sequence[InsertBucket]) -> Column:
    """The file id of the bucket that takes a row, as one ``CASE`` expression over the key hash
    column ``HASH_COLUMN`` (null if no bucket takes it)."""
    pp, h = f"`{PARTITION_PATH}`", f"`{HASH_COLUMN}`"
    return case_when(
        [(f"{pp} = {sql_text(b.partition_path)} AND {h} >= {b.low!r}D AND {h} < {b.high!r}D", sql_text(b.file_id))
         for b in buckets],
        "string",
    )


