"""Clustering on the Arrow engine: the groups of a plan rewritten one after another in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import write_token
from tidemark.services.cluster import ClusteringExecutor, ClusteringProgress, ProgressCallback
from tidemark.write.cluster_group import ClusterSpec, rewrite_group

GroupDone = Callable[[int, Sequence[WriteStat]], None]


class ArrowClusteringExecutor:
    """Rewrites every group in turn; reports each finished group to ``on_group``."""

    def rewrite(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_group: GroupDone | None = None
    ) -> list[WriteStat]:
        stats: list[WriteStat] = []
        for index, group in enumerate(groups):
            written = rewrite_group(spec, group, token=write_token(index, 0, index))
            stats.extend(written)
            if on_group is not None:
                on_group(index, written)
        return stats


class ArrowExecutor(ClusteringExecutor):
    """The clustering executor of the Arrow engine (reports progress per group)."""

    def run(
        self, spec: ClusterSpec, groups: Sequence[ClusteringGroup], on_progress: ProgressCallback | None
    ) -> list[WriteStat]:
        written: list[WriteStat] = []

        def group_done(index: int, stats: Sequence[WriteStat]) -> None:
            written.extend(stats)
            if on_progress is not None:
                on_progress(ClusteringProgress(index + 1, len(groups), len(written),
                                               sum(s.file_size for s in written)))

        return ArrowClusteringExecutor().rewrite(spec, groups, group_done)
