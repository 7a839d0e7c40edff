"""The engine seam: what ``Table`` asks of an engine, chosen once when a table is opened.

An engine runs the data-parallel work and nothing else: the write pipeline (the client in
:mod:`tidemark.write.client` runs the write and the commit protocol), reads of a read plan,
and the executors of compaction and clustering (the services in :mod:`tidemark.services`
plan, lock and commit). Two engines implement it: :class:`~tidemark.engines.arrow.engine.ArrowEngine`
(in this process, on pyarrow tables) and :class:`~tidemark.engines.spark.engine.SparkEngine`
(Spark jobs; a Spark Connect session can be a variant of it). ``Table`` never asks which one
it has.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import pyarrow as pa

from tidemark.config import WriteConfig
from tidemark.merge import RecordMerger
from tidemark.read.plan import ReadPlan
from tidemark.services.cluster import ClusteringExecutor
from tidemark.services.compaction import SliceRunner
from tidemark.storage import Storage
from tidemark.write.client import PipelineFactory  # (spec, user schema, operation) -> one write's pipeline
from tidemark.write.engine import TableLayout

__all__ = ["Engine", "PipelineFactory"]


class Engine(Protocol):
    """Arrow or Spark: the write pipelines, the reader, and the services' executors."""

    @property
    def session(self) -> Any:
        """The engine's session (a SparkSession), or None for the in-process engine."""

    def pipelines(self, layout: TableLayout, config: WriteConfig) -> PipelineFactory:
        """Builds the pipeline of each write (one per write: pipelines hold per-write state)."""

    def write_session(self) -> contextlib.AbstractContextManager[None]:
        """The engine's settings for the span of one write."""

    def read(
        self,
        storage: Storage,
        plan: ReadPlan,
        schema: pa.Schema | None,
        *,
        merger: RecordMerger | None,
        delete_ordering_field: str | None,
    ) -> Any:
        """The rows of ``plan`` as the engine's frame (meta columns, then user columns)."""

    def frame(self, rows: pa.Table) -> Any:
        """A small pyarrow table computed in this process, as the engine's frame."""

    def slice_runner(self) -> SliceRunner | None:
        """How compaction runs its file slices (None: one after the other in this process)."""

    def clustering_executor(self) -> ClusteringExecutor:
        """How clustering rewrites its groups."""
