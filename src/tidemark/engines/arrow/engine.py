"""The Arrow engine: every step in this process, on pyarrow tables (``spark=None``)."""

from __future__ import annotations

import contextlib
from typing import Any

import pyarrow as pa

from tidemark.config import WriteConfig
from tidemark.engines.arrow.cluster import ArrowExecutor
from tidemark.engines.arrow.reader import read_plan
from tidemark.engines.arrow.writer import ArrowWrites
from tidemark.engines.base import typed_engine_errors
from tidemark.merge import RecordMerger
from tidemark.read.plan import ReadPlan
from tidemark.services.cluster import ClusteringExecutor
from tidemark.services.compaction import SliceRunner
from tidemark.storage import Storage
from tidemark.write.engine import TableLayout, WritePipelines


class ArrowEngine:
    """See :class:`tidemark.engines.base.Engine`."""

    @property
    def session(self) -> Any:
        return None

    def pipelines(self, layout: TableLayout, config: WriteConfig) -> WritePipelines[pa.Table]:
        return ArrowWrites(layout, bulk_threads=config.bulk_insert_parallelism,
                           upsert_threads=config.upsert_parallelism)

    def write_session(self) -> contextlib.AbstractContextManager[None]:
        return typed_engine_errors()

    def read(
        self,
        storage: Storage,
        plan: ReadPlan,
        schema: pa.Schema | None,
        *,
        merger: RecordMerger | None,
        delete_ordering_field: str | None,
    ) -> Any:
        return read_plan(storage, plan, schema, merger=merger, delete_ordering_field=delete_ordering_field)

    def frame(self, rows: pa.Table) -> Any:
        return rows

    def slice_runner(self) -> SliceRunner | None:
        return None

    def clustering_executor(self) -> ClusteringExecutor:
        return ArrowExecutor()
