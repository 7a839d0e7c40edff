"""Clustering on Spark: one task per clustering group, each rewriting its group with pyarrow.

The driver ships the plan's groups (small) and collects write statistics; it
never sees rows. While the job runs a thread polls Spark's status tracker, so
the caller can show progress as tasks (groups) finish.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import write_token
from tidemark.services.cluster import ClusteringExecutor, ClusteringProgress, ProgressCallback
from tidemark.write.cluster_group import ClusterSpec, rewrite_group

TasksDone = Callable[[int, int], None]  # (groups finished, groups in all)


class SparkClusteringExecutor:
    def __init__(self, spark: Any, *, poll_seconds: float = 0.5) -> None:
        self.spark = spark
        self.poll_seconds = poll_seconds

    def rewrite(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_tasks: TasksDone | None = None
    ) -> list[WriteStat]:
        if not groups:
            return []
        sc = self.spark.sparkContext

        def run(items: Iterator[tuple[int, ClusteringGroup]]) -> Iterator[WriteStat]:
            from pyspark import TaskContext

            tc = TaskContext.get()
            for index, group in items:
                token = write_token(tc.partitionId(), tc.stageId(), tc.taskAttemptId()) if tc else write_token(
                    index, 0, index)
                yield from rewrite_group(spec, group, token=token)

        job_group = f"tidemark-clustering-{spec.write.instant_time}-{uuid.uuid4().hex[:6]}"
        sc.setJobGroup(job_group, f"tidemark clustering {spec.write.instant_time}", interruptOnCancel=False)
        stop = threading.Event()
        watcher = None
        if on_tasks is not None:
            watcher = threading.Thread(target=self._watch, args=(job_group, len(groups), on_tasks, stop), daemon=True)
            watcher.start()
        try:
            rdd = sc.parallelize(list(enumerate(groups)), numSlices=len(groups))
            stats: list[WriteStat] = rdd.mapPartitions(run).collect()
        finally:
            stop.set()
            if watcher is not None:
                watcher.join(timeout=5)
            sc.setLocalProperty("spark.jobGroup.id", None)
        if on_tasks is not None:
            on_tasks(len(groups), len(groups))
        return stats

    def _watch(self, job_group: str, total: int, on_tasks: TasksDone, stop: threading.Event) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        last = -1
        while not stop.wait(self.poll_seconds):
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

        stats = SparkClusteringExecutor(self.spark).rewrite(spec, groups, tasks_done)
        if on_progress is not None:
            on_progress(ClusteringProgress(len(groups), len(groups), len(stats), sum(s.file_size for s in stats)))
        return stats
