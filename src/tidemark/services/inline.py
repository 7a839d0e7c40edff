"""Table services a write runs after it commits, when due (Hudi's inline services).

Compaction (``hoodie.compact.inline``) runs first, then cleaning and archival, then clustering
(``hoodie.clustering.inline``). A service that fails is logged, never raised: the write it
follows is committed, and ingestion must not fail for a table service.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from tidemark.config import WriteConfig
from tidemark.errors import ClusteringAbortedError, TidemarkError
from tidemark.format.clustering_plan import CLUSTER_OPERATION
from tidemark.recovery.clean import commits_since_last_clean
from tidemark.storage import Storage
from tidemark.timeline import Action, Timeline

log = logging.getLogger(__name__)


def run_after_write(
    storage: Storage,
    config: WriteConfig,
    *,
    delta_commit: bool,
    compact: Callable[[], Any],
    clean: Callable[[], Any],
    archive: Callable[[], Any],
    cluster: Callable[[], Any],
) -> None:
    """Run the services that are due after a committed write (``delta_commit``: it was one)."""
    if delta_commit and config.compact_inline:
        from tidemark.services.compaction import delta_commits_since_last_compaction

        if delta_commits_since_last_compaction(Timeline.load(storage)) >= config.compact_inline_max_delta_commits:
            compact()
    try:
        timeline = Timeline.load(storage)
        if config.clean.automatic and commits_since_last_clean(timeline) >= config.clean.max_commits:
            clean()  # the write already rolled back failed writes
            timeline = timeline.reload()
        if config.archive.automatic and len(timeline.completed_data_instants) > config.archive.max_commits:
            archive()
    except (TidemarkError, OSError) as exc:
        log.warning("inline table service failed after a successful write: %s", exc)
    due = config.clustering.inline_max_commits
    if config.clustering.inline and _writes_since_clustering(Timeline.load(storage)) >= due:
        try:
            cluster()
        except ClusteringAbortedError as aborted:  # ingestion wins; the next write tries again
            log.warning("inline clustering aborted: %s", aborted)
        except TidemarkError as error:  # the write itself committed: never fail it for the service
            log.warning("inline clustering failed (the write committed): %s", error)


def _writes_since_clustering(timeline: Timeline) -> int:
    since = 0
    for inst in reversed(timeline.by_completion_time()):
        if not inst.action.writes_data:
            continue
        if inst.action is Action.REPLACE_COMMIT and timeline.commit_metadata(inst).operation == CLUSTER_OPERATION:
            break
        since += 1
    return since
