"""Clustering on Spark: one task per clustering group, each rewriting its group with pyarrow.

The driver ships the plan's groups (small) with the task function over a range of one
row per group, and collects write statistics (pickled: only the driver reads them); it
never sees rows. The same DataFrame job runs on a classic session and on Spark Connect.
Progress, as tasks (groups) finish, comes from Spark's status tracker polled by a thread
on a classic session, and from the progress the Connect server streams with the job's
results on Spark Connect.
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from tidemark.engines.spark.connect import JobHandle, is_connect
from tidemark.engines.spark.task_failures import typed_task_failures
from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import write_token
from tidemark.services.cluster import ClusteringExecutor, ClusteringProgress, ProgressCallback
from tidemark.write.cluster_group import ClusterSpec, rewrite_group

TasksDone = Callable[[int, int], None]  # (groups finished, groups in all)

_OUT = pa.schema([("stat", pa.binary())])


class SparkClusteringExecutor:
    def __init__(self, spark: Any, *, poll_seconds: float = 0.5) -> None:
        self.spark = spark
        self.poll_seconds = poll_seconds

    def rewrite(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_tasks: TasksDone | None = None
    ) -> list[WriteStat]:
        if not groups:
            return []

        shipped = list(groups)  # small: shipped to the tasks with the function

        def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            tc = TaskContext.get()
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId()) if tc else write_token(
                        index, 0, index)
                    stats = [pickle.dumps(s) for s in rewrite_group(spec, shipped[index], token=token)]
                    if stats:
                        yield pa.RecordBatch.from_arrays([pa.array(stats, pa.binary())], schema=_OUT)

        # One partition per group, one stage, no shuffle: task i rewrites group i.
        frame = self.spark.range(0, len(groups), 1, len(groups))
        job = JobHandle(self.spark, f"tidemark-clustering-{spec.write.instant_time}",
                        f"tidemark clustering {spec.write.instant_time}")
        with job.running(interrupt=False), self._progress(job, len(groups), on_tasks):
            collected = frame.mapInArrow(run, "stat binary").collect()
        if on_tasks is not None:
            on_tasks(len(groups), len(groups))
        return [pickle.loads(r[0]) for r in collected]

    def _progress(self, job: JobHandle, total: int, on_tasks: TasksDone | None) -> Any:
        import contextlib

        if on_tasks is None:
            return contextlib.nullcontext()
        if is_connect(self.spark):
            return _connect_progress(self.spark, total, on_tasks)
        return _tracker_progress(self.spark, job.name, total, on_tasks, self.poll_seconds)


class _tracker_progress:  # noqa: N801 - used as a context manager function
    """A thread polling the status tracker for the tasks done in ``job_group``'s jobs."""

    def __init__(self, spark: Any, job_group: str, total: int, on_tasks: TasksDone, poll_seconds: float) -> None:
        self.args = (spark, job_group, total, on_tasks, poll_seconds)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> None:
        self.thread.start()

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)

    def _watch(self) -> None:
        spark, job_group, total, on_tasks, poll_seconds = self.args
        tracker = spark.sparkContext.statusTracker()
        last = -1
        while not self.stop.wait(poll_seconds):
            done = 0
            for job_id in tracker.getJobIdsForGroup(job_group):
                info = tracker.getJobInfo(job_id)
                for stage_id in info.stageIds if info else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage is not None:
                        done += stage.numCompletedTasks
            done = min(done, total)
            if done != last:
                last = done
                on_tasks(done, total)


class _connect_progress:  # noqa: N801 - used as a context manager function
    """A progress handler of the Connect client, for the job this thread runs: the client calls
    its handlers for every operation of the session, in the thread that reads the results."""

    def __init__(self, spark: Any, total: int, on_tasks: TasksDone) -> None:
        self.spark, self.total, self.on_tasks = spark, total, on_tasks
        self.thread = threading.get_ident()
        self.last = -1

    def __call__(self, stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
        if threading.get_ident() != self.thread:
            return  # another thread's query
        finished = min(self.total, sum(s.num_completed_tasks for s in stages or ()))
        if finished != self.last:
            self.last = finished
            self.on_tasks(finished, self.total)

    def __enter__(self) -> None:
        self.spark.registerProgressHandler(self)

    def __exit__(self, *exc: object) -> None:
        self.spark.removeProgressHandler(self)


class SparkExecutor(ClusteringExecutor):
    """The clustering executor of the Spark engine (reports progress per finished task)."""

    def __init__(self, spark: object) -> None:
        self.spark = spark

    def run(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_progress: ProgressCallback | None
    ) -> list[WriteStat]:
        def tasks_done(done: int, total: int) -> None:
            if on_progress is not None:
                on_progress(ClusteringProgress(done, total))

        with typed_task_failures():
            stats = SparkClusteringExecutor(self.spark).rewrite(spec, groups, tasks_done)
        if on_progress is not None:
            on_progress(ClusteringProgress(len(groups), len(groups), len(stats), sum(s.file_size for s in stats)))
        return stats
