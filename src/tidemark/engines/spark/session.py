"""Spark session settings that hold while tidemark runs a write.

Spark 4 caps every Arrow batch it sends to Python both by rows
(``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000 by default) and by bytes
(``spark.sql.execution.arrow.maxBytesPerBatch``, 64 MiB, SPARK-51316). It checks the
byte cap after *every row*, by asking each column vector for its buffer sizes, and
that check costs more than the conversion to Arrow itself: handing 5M rows of
8 columns to ``mapInArrow`` took 6.8 s with it and 2.1 s without
(``benchmarks/profile_bulk.py``). Every tidemark write sends its rows to Python this
way (dedup, routing, file-group writes), so the check would be a large part of it.

Spark skips the check only when the byte cap is ``Int.MaxValue``. While a write
runs, :func:`write_session` sets that value, and batches stay capped by rows. A user
who has set ``maxBytesPerBatch`` on the session (say, for rows of tens of KiB, where
10,000 rows make a large batch) keeps their value: tidemark then changes nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

MAX_BYTES_PER_BATCH = "spark.sql.execution.arrow.maxBytesPerBatch"
NO_BYTE_CAP = str(2**31 - 1)  # Int.MaxValue: the one value for which Spark skips the check


@dataclass
class _Hold:
    writes: int  # writes of this session now inside write_session
    changed: bool  # whether tidemark set the value (and so must unset it)


_lock = threading.Lock()
_holds: dict[int, _Hold] = {}  # by id() of the SparkSession


@contextlib.contextmanager
def write_session(spark: Any) -> Iterator[None]:
    """Lift the per-row byte check of Arrow batches on ``spark`` for the ``with`` body.

    Safe for concurrent writes on one session from several threads: the first one in
    sets the value, the last one out unsets it. An explicit user value is never
    touched. Queries take the session's settings when they start, so a query of
    another thread that starts meanwhile gets the lifted check too; that changes
    batch sizes in bytes, never results.
    """
    key = id(spark)
    with _lock:
        hold = _holds.get(key)
        if hold is None:
            hold = _holds[key] = _Hold(0, changed=MAX_BYTES_PER_BATCH not in spark.conf.getAll)
            if hold.changed:
                spark.conf.set(MAX_BYTES_PER_BATCH, NO_BYTE_CAP)
        hold.writes += 1
    try:
        yield
    finally:
        with _lock:
            hold.writes -= 1
            if hold.writes == 0:
                del _holds[key]
                if hold.changed:
                    spark.conf.unset(MAX_BYTES_PER_BATCH)
