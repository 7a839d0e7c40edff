"""Running one write again when it lost for a reason the table resolves by itself.

Two losses never fail a write:

* a clustering completed after the write planned and replaced a file group it updated
  (ClusteringConflictError): ingestion wins over clustering, so the write runs again on
  the clustered table, at most :data:`CLUSTERING_RERUNS` times;
* the base file the write merged against was replaced by a concurrent commit and then
  cleaned (the engine raises DataFileNotFoundError; :func:`superseded_base_file` names the
  commit): the write-write conflict the commit check would also have found, so it is
  reported, and retried, as one, up to ``hoodie.write.retries.on.conflict`` times.

Write conflicts found at commit are retried by the write client itself.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from tidemark.errors import ClusteringConflictError, DataFileNotFoundError
from tidemark.recovery.clean import superseded_base_file
from tidemark.storage import Storage
from tidemark.write.client import WriteOutcome

log = logging.getLogger(__name__)

# A write that lost to a clustering which completed while it was being planned runs again on
# the clustered table (ingestion is never failed by clustering); this bounds the reruns.
CLUSTERING_RERUNS = 5


def write_with_reruns(
    write: Callable[[], WriteOutcome],
    session: Callable[[], contextlib.AbstractContextManager[None]],
    storage: Storage,
    *,
    retries_on_conflict: int,
) -> tuple[WriteOutcome, int]:
    """Run ``write`` inside the engine's ``session`` until it publishes (see the module
    docstring). Returns its outcome (``attempts`` counting the lost base files) and the number
    of clustering reruns."""
    reruns = 0
    lost = 0
    while True:
        try:
            with session():
                outcome = write()
            break
        except ClusteringConflictError as conflict:
            # A clustering completed after this write planned and replaced a file group it
            # updated. Ingestion wins: run the write again on the clustered table.
            if conflict.rejected or reruns >= CLUSTERING_RERUNS:
                raise
            reruns += 1
            log.info("write lost to clustering %s; running it again", conflict.clustering_instant)
        except DataFileNotFoundError as missing:  # the engine found a data file gone
            gone = superseded_base_file(storage, missing)
            if gone is None:
                raise missing.original from missing.original.__cause__
            # The base file this write merged against was replaced by a concurrent commit
            # and then cleaned: a write-write conflict the commit check would also have
            # found, so it is reported, and retried, as one.
            lost += 1
            if lost > retries_on_conflict:
                raise gone from missing.original
            log.warning("%s; retrying, attempt %d of %d", gone, lost + 1, retries_on_conflict + 1)
    if lost:
        outcome = replace(outcome, attempts=outcome.attempts + lost)
    return outcome, reruns
