"""Clustering plans: what a ``<t>.clustering.requested`` file holds, as typed records.

A plan lists *groups*; each group is a set of file slices of one partition that
are read together and rewritten into ``num_output_groups`` new file groups. The
bytes are Hudi's ``HoodieRequestedReplaceMetadata`` with a ``HoodieClusteringPlan``
(operation type ``CLUSTER``), so Hudi tools can read a plan scheduled by tidemark.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemark.format.commit_metadata import read_avro, write_avro

CLUSTER_OPERATION = "CLUSTER"
PLAN_STRATEGY = "org.apache.hudi.client.clustering.plan.strategy.SparkSizeBasedClusteringPlanStrategy"
EXECUTION_STRATEGY = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
SORT_COLUMNS_PARAM = "hoodie.clustering.plan.strategy.sort.columns"
_MB = 1024 * 1024


@dataclass(frozen=True)
class SliceInfo:
    """One input file slice: a copy-on-write table's slice is just its base file."""

    partition_path: str
    file_id: str
    data_file_path: str  # table-relative
    size: int = 0  # not part of Hudi's record; known when the plan is made

    def to_avro(self) -> dict[str, Any]:
        return {
            "dataFilePath": self.data_file_path,
            "deltaFilePaths": [],
            "fileId": self.file_id,
            "partitionPath": self.partition_path,
            "bootstrapFilePath": "",
            "version": 1,
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> SliceInfo:
        return cls(rec.get("partitionPath") or "", rec.get("fileId") or "", rec.get("dataFilePath") or "")


@dataclass(frozen=True)
class ClusteringGroup:
    """Slices of one partition rewritten together into ``num_output_groups`` file groups."""

    slices: tuple[SliceInfo, ...]
    num_output_groups: int = 1

    @property
    def partition_path(self) -> str:
        return self.slices[0].partition_path if self.slices else ""

    @property
    def input_bytes(self) -> int:
        return sum(s.size for s in self.slices)

    def file_groups(self) -> set[tuple[str, str]]:
        return {(s.partition_path, s.file_id) for s in self.slices}

    def to_avro(self) -> dict[str, Any]:
        mb = self.input_bytes / _MB
        return {
            "slices": [s.to_avro() for s in self.slices],
            "metrics": {"TOTAL_IO_READ_MB": mb, "TOTAL_IO_WRITE_MB": mb, "TOTAL_IO_MB": 2 * mb,
                        "TOTAL_LOG_FILES": 0.0},
            "numOutputFileGroups": self.num_output_groups,
            "version": 1,
        }

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> ClusteringGroup:
        slices = tuple(SliceInfo.from_avro(s) for s in rec.get("slices") or ())
        return cls(slices, int(rec.get("numOutputFileGroups") or 1))


@dataclass(frozen=True)
class ClusteringPlan:
    """The whole plan of one clustering instant."""

    groups: tuple[ClusteringGroup, ...]
    sort_columns: tuple[str, ...] = ()
    target_file_size: int = 0
    extra: Mapping[str, str] = field(default_factory=dict)

    def file_groups(self) -> set[tuple[str, str]]:
        """(partition, file id) of every input file group: the groups this clustering replaces."""
        out: set[tuple[str, str]] = set()
        for group in self.groups:
            out |= group.file_groups()
        return out

    def replaced_file_ids(self) -> dict[str, tuple[str, ...]]:
        by_partition: dict[str, list[str]] = {}
        for partition, file_id in sorted(self.file_groups()):
            by_partition.setdefault(partition, []).append(file_id)
        return {p: tuple(ids) for p, ids in by_partition.items()}

    @property
    def num_input_files(self) -> int:
        return sum(len(g.slices) for g in self.groups)

    def to_bytes(self) -> bytes:
        params = {"hoodie.clustering.plan.strategy.target.file.max.bytes": str(self.target_file_size)}
        if self.sort_columns:
            params[SORT_COLUMNS_PARAM] = ",".join(self.sort_columns)
        plan = {
            "inputGroups": [g.to_avro() for g in self.groups],
            "strategy": {"strategyClassName": EXECUTION_STRATEGY, "strategyParams": params, "version": 1},
            "extraMetadata": {"planStrategy": PLAN_STRATEGY, **self.extra},
            "version": 1,
            # Rows keep their _hoodie_commit_time and _hoodie_commit_seqno (Hudi's default).
            "preserveHoodieMetadata": True,
        }
        record = {"operationType": CLUSTER_OPERATION, "clusteringPlan": plan, "extraMetadata": {}, "version": 1}
        return write_avro("requested_replace", record)

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str | None = None) -> ClusteringPlan | None:
        """The plan in a requested file, or None if it holds none (an insert_overwrite's).
        Raises CorruptInstantError naming ``source`` for content that is not Avro."""
        rec = read_avro(data, source=source)
        plan = rec.get("clusteringPlan")
        if not plan:
            return None
        params = (plan.get("strategy") or {}).get("strategyParams") or {}
        sort = tuple(c for c in (params.get(SORT_COLUMNS_PARAM) or "").split(",") if c)
        target = int(params.get("hoodie.clustering.plan.strategy.target.file.max.bytes") or 0)
        extra = {k: v for k, v in (plan.get("extraMetadata") or {}).items() if k != "planStrategy"}
        groups = tuple(ClusteringGroup.from_avro(g) for g in plan.get("inputGroups") or ())
        return cls(groups, sort, target, extra)
