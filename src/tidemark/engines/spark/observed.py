"""Counts a Spark write needs, observed in passes that run anyway rather than in jobs of their own.

Two passes of an upsert carry their counts as observed metrics (``DataFrame.observe``: global
aggregates that Spark computes while the rows stream through, read on the driver after the
job):

* the keys of the arriving batch (partition path, record key), kept as a local checkpoint for
  the index (the bloom probe and the broadcast lookup read them, not the batch's source again),
  with the batch's row count, its partition paths and the null/ambiguous-key checks;
* the tagged batch, kept for the write, with the workload profile: rows, new keys per
  partition path and the file groups of existing keys.

Each replaces a grouped job (a pass over the rows plus a shuffle stage) that only counted.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Observation

from tidemark.engines.spark.connect import is_connect
from tidemark.engines.spark.expressions import name, named, sql_text
from tidemark.format.names import PARTITION_PATH
from tidemark.write.engine import FILE_ID_COLUMN, WorkloadProfile

# A profile counts new keys per partition path with one aggregate per path; beyond this many
# paths the grouped job is cheaper than the per-row comparisons.
OBSERVED_PARTITIONS = 128

# The arriving keys are kept with the checks while Spark's estimate of their size is at most
# this (the estimate of a parquet source is its compressed size); larger batches are counted
# by a grouped job and their keys are not kept.
KEPT_KEY_BYTES = 256 << 20


def observable(frame: DataFrame) -> bool:
    """Whether ``frame``'s session returns observed metrics from a local checkpoint. Classic
    Spark does; Spark Connect runs the checkpoint as a command whose answer carries none (the
    observation stays empty), so there the counts take the grouped job."""
    return not is_connect(frame.sparkSession)


def kept_with(frame: DataFrame, metrics: Sequence[Column], columns: Sequence[str]) -> tuple[DataFrame, Any]:
    """``frame``'s ``columns`` computed once and kept (a local checkpoint, memory then disk), and
    the values of ``metrics`` over every row of ``frame``, from that one job."""
    observation = Observation(f"tidemark-{uuid.uuid4().hex}")  # unique among concurrent writes
    observed = frame.observe(observation, *metrics)
    if list(columns) != observed.columns:
        observed = observed.select(*columns)
    kept = observed.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
    return kept, observation.get


@dataclass(frozen=True)
class ProfileMetrics:
    """The observed metrics of a tagged batch's workload profile, and how to read them back."""

    partitions: Sequence[str] | None  # the batch's partition paths (None: a non-partitioned table)

    def columns(self) -> list[Column]:
        # SQL text: one parse each, not a dozen py4j calls per Column part (engines/spark/expressions.py).
        fid, pp = name(FILE_ID_COLUMN), name(PARTITION_PATH)
        is_new = f"{fid} IS NULL"
        metrics = [named("count(1)", "rows"), named(f"count_if({is_new})", "inserts")]
        if self.partitions is None:
            # At most one per file group of the table.
            metrics.append(named(f"collect_set({fid})", "groups"))
            return metrics
        # collect_set skips the nulls
        metrics.append(named(f"collect_set(CASE WHEN NOT ({is_new}) THEN struct({pp}, {fid}) END)", "groups"))
        new_in = [named(f"count_if({is_new} AND {pp} = {sql_text(p)})", f"_tm_new_{i}")
                  for i, p in enumerate(self.partitions)]
        return [*metrics, *new_in]

    def profile(self, counts: Any) -> WorkloadProfile | None:
        """The profile from the observed ``counts``; None when some new key's partition path is
        not among :attr:`partitions` (then the caller counts with a grouped job)."""
        rows, inserts = counts["rows"] or 0, counts["inserts"] or 0
        if self.partitions is None:
            return WorkloadProfile(
                inserts={"": inserts} if inserts else {},
                existing=rows - inserts,
                updated=frozenset(("", file_id) for file_id in counts["groups"] or ()),
            )
        by_path = {p: counts[f"_tm_new_{i}"] or 0 for i, p in enumerate(self.partitions)}
        if sum(by_path.values()) != inserts:
            return None
        return WorkloadProfile(
            inserts={p: n for p, n in by_path.items() if n},
            existing=rows - inserts,
            updated=frozenset((g[0] or "", g[1]) for g in counts["groups"] or ()),
        )
