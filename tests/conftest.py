"""Shared fixtures: one local SparkSession for the whole run, and hudi-rs helpers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[Any]:
    """A real ZooKeeper server on 127.0.0.1 for the whole run (see tests/zookeeper.py)."""
    from zookeeper import ZooKeeperServer

    server = ZooKeeperServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("tidemark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "4g")
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def hudi_rs_read(path: str, **options: Any) -> pa.Table:
    """Read a table with hudi-rs (the independent reader), as one Arrow table."""
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(os.path.abspath(path)).build()
    # hudi_options={"hoodie.read.use.read_optimized.mode": "true"}: a read-optimized query
    read_options = HudiReadOptions(hudi_options=options.get("hudi_options") or {})
    if "as_of" in options:
        read_options = read_options.with_as_of_timestamp(options["as_of"])
    if "start" in options or "end" in options:
        read_options = read_options.with_query_type(HudiQueryType.Incremental)
        if options.get("start"):
            read_options = read_options.with_start_timestamp(options["start"])
        if options.get("end"):
            read_options = read_options.with_end_timestamp(options["end"])
    batches = table.read(read_options)
    if not batches:
        return pa.table({})
    return pa.Table.from_batches(batches)


def rows_of(table: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    """Sorted tuples of ``columns`` from a Spark DataFrame or an Arrow table."""
    if isinstance(table, pa.Table):
        if table.num_rows == 0:
            return []
        data = table.select(columns).to_pylist()
        return sorted(tuple(r[c] for c in columns) for r in data)
    return sorted(tuple(r[c] for c in columns) for r in table.select(*columns).collect())
