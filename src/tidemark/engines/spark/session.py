"""The Spark sessions tidemark starts, and the settings that hold while it runs a write.

:func:`start_spark` gives the CLI's ``--spark`` commands (and the demo) a session:
the active one, or a quiet local one.

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
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemark.engines.spark import require_pyspark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark's gateway logger: at the root level, Spark skips its "Setting default log level" note.
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def start_spark(scratch: str, *, app_name: str = "tidemark") -> tuple[SparkSession, bool]:
    """The active SparkSession if there is one, else a new local one; second: whether we made it
    (then the caller stops it). A new session runs ``local[2]`` with its UI off, the FAIR
    scheduler (concurrent writers' jobs share the cores instead of queueing) and Spark's logs
    quiet, configured by a file written into ``scratch``, a folder of the caller's.

    Raises :class:`~tidemark.errors.MissingDependencyError` when PySpark is not installed.
    """
    require_pyspark("a Spark session")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    os.environ["PYSPARK_PYTHON"] = sys.executable
    log4j = os.path.join(scratch, "log4j2.properties")
    with open(log4j, "w") as fh:
        fh.write(_LOG4J)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
        # Jobs of the concurrent writers share the two cores instead of queueing.
        .config("spark.scheduler.mode", "FAIR")
        # Quiet from the first line: setLogLevel only applies once the JVM is up.
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark, True
