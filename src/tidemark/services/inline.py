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
from tidemark.errors import ClusteringAbortedError, StorageError, TidemarkError, WorkerDependencyError
from tidemark.format.clustering_plan import CLUSTER_OPERATION
from tidemark.recovery.clean import commits_since_last_clean
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, Timeline

log = logging.getLogger(__name__)


def run_after_write(
    storage: Storage,
    config: WriteConfig,
    *,
    delta_commit: bool,
    compact: Callable[[], Any],
    clean: Callable[[Timeline], Any],
    archive: Callable[[], Any],
    cluster: Callable[[], Any],
    timeline: Timeline | None = None,
    written: Instant | None = None,
) -> None:
    """Run the services that are due after a committed write (``delta_commit``: it was one).

    ``timeline``: the one the write read under its commit lock, with its instant completed;
    used only if ``written`` (the write's instant) is completed in it, else it is listed here.
    Whether a service is due is decided on it without listing the timeline again: a hint
    (other writers may have committed since); each service plans under its own lock on a
    fresh timeline. Listed again only after a service that changes what the next decision
    counts (compaction, archival). ``clean`` gets it too, for its own hint (whether anything
    is to clean before it takes the lock).
    """
    known = timeline is not None and written is not None and timeline.is_completed(written.requested_time)
    current = timeline if known and timeline is not None else Timeline.load(storage)
    if delta_commit and config.compact_inline:
        from tidemark.services.compaction import delta_commits_since_last_compaction

        if delta_commits_since_last_compaction(current) >= config.compact_inline_max_delta_commits:
            # Say the write committed when its compaction fails: written again, its inserts would be twice.
            done = f"the write{f' {written.requested_time}' if written is not None else ''} completed"
            try:
                compact()
            except StorageError as failure:
                raise StorageError(f"{done}; its inline compaction did not: {failure}", uri=failure.uri) from failure
            except WorkerDependencyError as failure:
                raise WorkerDependencyError(failure.module, failure.driver_python, completed=done) from failure
            except Exception:
                log.error("%s before its inline compaction failed: do not write it again", done)
                raise
            current = current.reload()
    try:
        if config.clean.automatic and commits_since_last_clean(current) >= config.clean.max_commits:
            clean(current)  # the write already rolled back failed writes; a clean adds no data instant
        if config.archive.automatic and len(current.completed_data_instants) > config.archive.max_commits:
            archive()
            current = current.reload()
    except (TidemarkError, OSError) as exc:
        log.warning("inline table service failed after a successful write: %s", exc)
    due = config.clustering.inline_max_commits
    if config.clustering.inline and _writes_since_clustering(current) >= due:
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
