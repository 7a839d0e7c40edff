"""Shared fixtures: one local SparkSession for the whole run, and hudi-rs helpers."""

from __future__ import annotations

import os
import re
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
def moto_server() -> Iterator[Any]:
    """A real S3 + DynamoDB server (moto) on 127.0.0.1 for the whole run (see tests/moto_server.py)."""
    from moto_server import MotoServer

    server = MotoServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_connect() -> Iterator[Any]:
    """A real Spark Connect server (``local[2]``) on 127.0.0.1 for the whole run (see
    tests/spark_connect_server.py); ``.url`` is its ``sc://`` address.

    Its clients run in processes of their own (tests/spark_history.py, writer_process.py):
    a process that creates a Connect session switches PySpark to Connect for good, which
    would break the shared classic session of the other tests."""
    from spark_connect_server import SparkConnectServer

    server = SparkConnectServer(master="local[2]").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster_session() -> Iterator[Any]:
    """A real Spark standalone cluster (a master and two workers of one core each, on
    127.0.0.1) for the whole run (see tests/spark_cluster.py); ``.master_url`` and
    ``.driver_conf()`` make a driver of it, which runs in a process of its own (one JVM holds
    one SparkContext, and this run's is the shared local session)."""
    from spark_cluster import SparkCluster

    cluster = SparkCluster(workers=2, cores=1).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def s3_bucket(moto_server: Any, request: pytest.FixtureRequest) -> str:
    """A fresh, empty bucket on the test S3 server; its name."""
    import uuid

    return moto_server.create_bucket(f"t-{uuid.uuid4().hex[:12]}")


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
    """Read a table with hudi-rs (the independent reader), as one Arrow table.

    ``path`` may be a URI (``s3://bucket/t``) with ``storage_options={...}`` (hudi-rs takes the
    same keys as tidemark).

    hudi-rs lists the active timeline and then reads the instant files it listed; an
    archival running meanwhile (inline, in a concurrent writer) may move one of them to
    the history in between, exactly as it would under a Hudi reader. Only that race is
    retried, and only after checking the missing instant really was archived.
    """
    for _ in range(5):
        try:
            return _hudi_rs_read_once(path, **options)
        except Exception as error:  # hudi-rs raises its own HudiCoreError
            missing = re.search(r"/\.hoodie/timeline/(\d{17})_\d{17}\.\w+ not found", str(error))
            if missing is None:
                raise
            from tidemark.storage import LocalStorage
            from tidemark.storage.location import open_storage
            from tidemark.timeline import Timeline

            storage = (open_storage(path, options.get("storage_options")) if "://" in path
                       else LocalStorage(os.path.abspath(path)))
            history = Timeline.load(storage).with_history()
            assert any(i.requested_time == missing.group(1) and i.is_completed for i in history.instants), (
                f"hudi-rs lost timeline file {missing.group(0)} that was not archived"
            )
    return _hudi_rs_read_once(path, **options)


def _hudi_rs_read_once(path: str, **options: Any) -> pa.Table:
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    # storage_options: an object-store table's options (aws_endpoint_url, ...), as tidemark takes them
    builder = HudiTableBuilder.from_base_uri(path if "://" in path else os.path.abspath(path))
    for key, value in (options.get("storage_options") or {}).items():
        builder = builder.with_storage_option(key, value)
    table = builder.build()
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


def reader_views(path: str) -> str:
    """What tidemark and hudi-rs each take as a local table's latest base files, and whether
    tidemark trusts its metadata table: for the message of a failed comparison between them."""
    from hudi import HudiTableBuilder

    from tidemark.fsview import FileSystemView
    from tidemark.metadata.listing import metadata_listing
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    base = os.path.abspath(path)
    storage = LocalStorage(base)
    timeline = Timeline.load(storage)
    trusted, why = metadata_listing(storage, timeline)
    ours = {b.path for b in FileSystemView(storage, timeline).latest_base_files()}
    theirs = {f.base_file_relative_path() for f in HudiTableBuilder.from_base_uri(base).build().get_file_slices()}
    mdt_timeline = os.path.join(base, ".hoodie", "metadata", ".hoodie", "timeline")
    mdt_names = sorted(os.listdir(mdt_timeline)) if os.path.isdir(mdt_timeline) else []
    return "\n".join([
        f"metadata table: {'trusted by tidemark' if trusted is not None else 'not trusted: ' + why}",
        f"latest base files only tidemark reads: {sorted(ours - theirs)}",
        f"latest base files only hudi-rs reads: {sorted(theirs - ours)}",
        f"data timeline (last 20): {sorted(i.file_name for i in timeline)[-20:]}",
        f"metadata timeline: {mdt_names}",
    ])


def rows_of(table: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    """Sorted tuples of ``columns`` from a Spark DataFrame or an Arrow table."""
    if isinstance(table, pa.Table):
        if table.num_rows == 0:
            return []
        data = table.select(columns).to_pylist()
        return sorted(tuple(r[c] for c in columns) for r in data)
    return sorted(tuple(r[c] for c in columns) for r in table.select(*columns).collect())
