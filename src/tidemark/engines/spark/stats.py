"""Write statistics as Spark rows: what a write task returns to the driver, and the job that
collects them.

Tasks hand back one row per file they wrote (:data:`STATS_DDL`); the driver turns them into
:class:`~tidemark.format.commit_metadata.WriteStat` s. A write job runs in a job group of its
own so that it can be cancelled, and an early conflict a task stopped at comes back typed.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from tidemark.engines.spark.connect import JobHandle
from tidemark.errors import EarlyConflictError
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import write_token
from tidemark.write.spec import WriteSpec

STATS_DDL = (
    "partition_path string, file_id string, path string, prev_commit string, "
    "prev_base_file string, num_writes long, num_inserts long, num_updates long, "
    "num_deletes long, file_size long, write_ms long, base_file string, log_files string"
)


def stat_row(s: WriteStat) -> dict[str, object]:
    return {
        "partition_path": s.partition_path,
        "file_id": s.file_id,
        "path": s.path,
        "prev_commit": s.prev_commit,
        "prev_base_file": s.prev_base_file,
        "num_writes": s.num_writes,
        "num_inserts": s.num_inserts,
        "num_updates": s.num_updates,
        "num_deletes": s.num_deletes,
        "file_size": s.file_size,
        "write_ms": s.total_write_time_ms,
        "base_file": s.base_file,
        "log_files": ",".join(s.log_files) if s.log_files else None,  # file names hold no comma
    }


STATS_SCHEMA = pa.schema(
    [
        ("partition_path", pa.string()),
        ("file_id", pa.string()),
        ("path", pa.string()),
        ("prev_commit", pa.string()),
        ("prev_base_file", pa.string()),
        ("num_writes", pa.int64()),
        ("num_inserts", pa.int64()),
        ("num_updates", pa.int64()),
        ("num_deletes", pa.int64()),
        ("file_size", pa.int64()),
        ("write_ms", pa.int64()),
        ("base_file", pa.string()),
        ("log_files", pa.string()),
    ]
)


def stats_table(stats: Sequence[WriteStat]) -> pa.Table:
    return pa.Table.from_pylist([stat_row(s) for s in stats], schema=STATS_SCHEMA)


def task_stats_table(spec: WriteSpec, stats: Sequence[WriteStat]) -> pa.Table:
    """A write task's stats, once its files are confirmed: if the write was rolled back while
    the task wrote (the task outlived its failed job), the task deletes its files and raises
    WriteRolledBackError instead (``markers/fence.py``)."""
    if spec.markers.fence is not None:
        spec.markers.fence.confirm(spec.storage(), [s.path for s in stats])
    return stats_table(stats)


def stat_from_row(row: object) -> WriteStat:
    r = row.asDict()  # type: ignore[attr-defined]
    return WriteStat(
        partition_path=r["partition_path"],
        file_id=r["file_id"],
        path=r["path"],
        prev_commit=r["prev_commit"],
        prev_base_file=r["prev_base_file"],
        num_writes=r["num_writes"],
        num_inserts=r["num_inserts"],
        num_updates=r["num_updates"],
        num_deletes=r["num_deletes"],
        file_size=r["file_size"],
        total_write_time_ms=r["write_ms"],
        base_file=r["base_file"],
        log_files=tuple(r["log_files"].split(",")) if r["log_files"] else (),
        log_version=1 if r["log_files"] else None,
        log_offset=0 if r["log_files"] else None,
    )


def task_token() -> tuple[str, int]:
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is None:  # pragma: no cover - only inside Spark tasks
        return write_token(0, 0, 0), 0
    return write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId()), tc.partitionId()




def run_stats_job(frame: DataFrame, job: JobHandle) -> list[WriteStat]:
    """Collect the stats of a write job, run under ``job`` (cancellable with it).

    A task that stopped at an early conflict fails the job; its EarlyConflictError comes
    back to the driver as text inside Spark's error and is raised again here, typed. A failed
    job returns once its tasks stopped (:meth:`JobHandle.wait_for_tasks`).
    """
    try:
        with job.running(interrupt=True):
            return [stat_from_row(r) for r in frame.collect()]
    except Exception as failure:
        early = EarlyConflictError.from_text(str(failure))
        if early is not None:
            raise early from None
        raise
