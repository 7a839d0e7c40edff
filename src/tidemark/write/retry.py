"""The one retry loop of a write: every attempt in the engine's write session, run again
for the losses the table resolves by itself.

* A write conflict (the commit check, early conflict detection, this writer's expired
  heartbeat) rolls the attempt back; it runs again from the start with a new instant,
  up to ``hoodie.write.num.retries.on.conflict.failures`` times. A conflict with a live
  writer's marker first waits for that writer; a schema conflict is never run again.
* The base file the write merged against was replaced by a concurrent commit and then
  cleaned (the engine raises :class:`DataFileNotFoundError`;
  :func:`~tidemark.recovery.clean.superseded_base_file` names the commit): the write-write
  conflict the commit check would also have found, reported and retried as one. A base file
  the engine could not read that is there is damage, not a loss: CorruptDataFileError
  (:func:`~tidemark.recovery.named_files.unreadable_data_file`), not run again.
* A clustering completed after the write planned and replaced a file group it updated
  (:class:`ClusteringConflictError`, not ``rejected``): ingestion wins over clustering, so
  the write runs again on the clustered table, at most :data:`CLUSTERING_RERUNS` times
  (then, if any are left, as a conflict retry).

The storage under the table failing (a full disk, ...: ``storage/failures.py``) is not run
again; the table's write raises it as :class:`StorageError`, saying what to do (typed around the
whole write: its attempts, what comes before them and its inline services after the commit).

Errors between the layers are typed: the loop matches exception classes, never text.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.config import WriteConfig
from tidemark.errors import (
    ClusteringConflictError,
    DataFileNotFoundError,
    EarlyConflictError,
    HeartbeatExpiredError,
    SchemaConflictError,
    WriteConflictError,
)
from tidemark.recovery.clean import superseded_base_file
from tidemark.recovery.named_files import unreadable_data_file
from tidemark.storage import Storage
from tidemark.timeline import Timeline

log = logging.getLogger(__name__)

# A write that lost to a clustering which completed while it was being planned runs again on
# the clustered table (ingestion is never failed by clustering); this bounds the reruns.
CLUSTERING_RERUNS = 5

T = TypeVar("T")

WriteSession = Callable[[], contextlib.AbstractContextManager[None]]


def run_with_retries(
    attempt: Callable[[], T], session: WriteSession, storage: Storage, config: WriteConfig
) -> tuple[T, int]:
    """Run ``attempt`` inside a fresh ``session()`` until it returns (see the module
    docstring); its result and the number of attempts it took. Raises the last loss once the
    budgets are spent, or at once what is not a loss above."""
    retries = config.retries_on_conflict
    conflicts = reruns = 0
    while True:
        try:
            with session():
                return attempt(), conflicts + reruns + 1
        except DataFileNotFoundError as missing:  # the engine found a data file gone
            gone = superseded_base_file(storage, missing)
            if gone is None:  # not gone: maybe there but damaged, else the engine's own error
                damaged = unreadable_data_file(storage, missing)
                if damaged is not None:
                    raise damaged from missing.original
                raise missing.original from missing.original.__cause__
            if conflicts >= retries:
                raise gone from missing.original
            conflicts += 1
            log.warning("%s; retrying, attempt %d of %d", gone, conflicts + 1, retries + 1)
        except (WriteConflictError, HeartbeatExpiredError) as conflict:
            if isinstance(conflict, SchemaConflictError):  # a rerun is refused
                raise
            if isinstance(conflict, ClusteringConflictError) and not conflict.rejected and reruns < CLUSTERING_RERUNS:
                reruns += 1
                log.info("write lost to clustering %s; running it again", conflict.clustering_instant)
                continue
            if conflicts >= retries:
                raise
            conflicts += 1
            log.warning("write conflict (%s); retrying, attempt %d of %d", conflict, conflicts + 1, retries + 1)
            if isinstance(conflict, EarlyConflictError) and conflict.reason == "marker":
                # Retrying at once would run into the same live writer again.
                wait_for_writer(storage, config, conflict.conflicting_instant)


def wait_for_writer(storage: Storage, config: WriteConfig, instant_time: str) -> None:
    """Wait until ``instant_time`` is no longer pending, or its heartbeat expired."""
    policy = HeartbeatPolicy(config.heartbeat_interval_ms, config.heartbeat_tolerable_misses)
    deadline = time.monotonic() + policy.expiry_ms / 1000
    pause = 0.05
    while time.monotonic() < deadline:
        timeline = Timeline.load(storage)
        if not any(i.requested_time == instant_time for i in timeline.pending):
            return
        if policy.is_expired(storage, instant_time):
            return
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


__all__ = ["CLUSTERING_RERUNS", "WriteSession", "run_with_retries", "wait_for_writer"]
