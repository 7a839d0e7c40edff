"""Clustering on the Arrow engine: the groups of a plan rewritten one after another in this process."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import write_token
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
