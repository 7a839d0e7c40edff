"""Footers are read with ranged GETs on object stores, never by downloading the base file.

The bloom index (write/key_pruning.py, used by the Arrow and Spark engines), clustering's row
counts and ``tidemark show`` need a base file's footer only: its key range, bloom filter, row
count or schema. A counting proxy between the store and the S3 server (tests/counting_proxy.py)
measures the response bytes each really moved.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from counting_proxy import CountingProxy
from tidemark.format.parquet_file import read_data_file
from tidemark.fsview import FileSystemView
from tidemark.storage.location import open_storage
from tidemark.timeline import Timeline
from tidemark.write.key_pruning import KeyLocator, files_that_may_hold, read_key_footers

ROWS = 120_000
KEY_COLUMNS = ["_hoodie_record_key", "_hoodie_partition_path"]
NO_SMALL_FILES = {"hoodie.parquet.small.file.limit": "0"}  # new keys go to a new file group


def _rows(ids: list[str], ts: int) -> pa.Table:
    # Random payloads do not compress: the base file is large, its footer is not.
    return pa.table({"id": ids, "ts": [ts] * len(ids),
                     "payload": [os.urandom(48).hex() for _ in ids]})


@pytest.fixture(scope="module")
def big_table(moto_server: Any) -> Iterator[tuple[str, dict[str, str]]]:
    """A non-partitioned table on S3 whose one base file is several MB."""
    bucket = moto_server.create_bucket("ranges-big")
    uri = f"s3://{bucket}/t"
    options = moto_server.storage_options()
    table = tidemark.Table.create(uri, spark=None, record_key="id", ordering_field="ts",
                                  storage_options=options, options=NO_SMALL_FILES)
    table.bulk_insert(_rows([f"k{i:07d}" for i in range(ROWS)], 1))
    table.close()
    yield uri, options


@pytest.fixture
def proxy(moto_server: Any) -> Iterator[CountingProxy]:
    with CountingProxy(moto_server.port) as counting:
        yield counting


def _proxied(options: dict[str, str], proxy: CountingProxy) -> dict[str, str]:
    return dict(options, aws_endpoint_url=proxy.endpoint)


def test_bloom_pruning_reads_footers_with_ranged_gets(big_table: tuple[str, dict[str, str]],
                                                      proxy: CountingProxy) -> None:
    uri, options = big_table
    storage = open_storage(uri, _proxied(options, proxy))
    [base] = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    assert base.size > 5 << 20
    proxy.take()

    # Keys past the file's key range: ruled out by the footer's min/max keys.
    kept, stats = files_that_may_hold(storage, [base], {base.partition_path: pa.array(["z1", "z2"])})
    moved = proxy.take()
    assert kept == [] and stats.by_range == 1
    assert moved.requests["HEAD"] == 0  # the listing's size is used
    assert 1 <= moved.requests["GET"] <= 3 and len(moved.ranges) == moved.requests["GET"]
    assert moved.body_bytes["GET"] < base.size / 10, (moved, base.size)
    print(f"footer check: {moved.body_bytes['GET']} bytes in {moved.requests['GET']} GETs, file {base.size}")

    # Keys inside the range that the file does not hold: the bloom filter (in the same footer).
    kept, stats = files_that_may_hold(storage, [base], {base.partition_path: pa.array(["k0000001x"])})
    moved = proxy.take()
    assert kept == [] and stats.by_bloom == 1
    assert moved.body_bytes["GET"] < base.size / 10

    # A key it holds: kept (pruning never loses a match), at the same cost.
    kept, _ = files_that_may_hold(storage, [base], {base.partition_path: pa.array(["k0000042"])})
    assert kept == [base] and proxy.take().body_bytes["GET"] < base.size / 10


def test_the_spark_engines_footer_reads_are_ranged_gets(big_table: tuple[str, dict[str, str]],
                                                       proxy: CountingProxy) -> None:
    """The Spark engine reads its footers on the driver (``read_key_footers``: the probe's and
    the upsert's key locator's) with ranged GETs too, never downloading a base file."""
    uri, options = big_table
    storage = open_storage(uri, _proxied(options, proxy))
    [base] = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    proxy.take()
    [footer] = read_key_footers(storage, [base])
    moved = proxy.take()
    assert footer.has_filter and footer.low == "k0000000" and footer.high == f"k{ROWS - 1:07d}"
    assert moved.requests["HEAD"] == 0 and 1 <= moved.requests["GET"] <= 3
    assert moved.body_bytes["GET"] < base.size / 10, (moved, base.size)
    found = KeyLocator([footer]).locate(pa.array(["k0000042", "k0000001x", "z1"]), None)
    assert found.tolist() == [0, -1, -1]
    # Many files' footers are read side by side, and come back in the files' order.
    gone = dataclasses.replace(base, path=base.path.replace(".parquet", "-gone.parquet"))
    footers = read_key_footers(storage, [base, gone, base])
    assert footers[0] == footers[2] == footer and not footers[1].has_filter


def test_an_upsert_of_new_keys_downloads_no_base_file(big_table: tuple[str, dict[str, str]],
                                                      proxy: CountingProxy) -> None:
    uri, options = big_table
    proxied = _proxied(options, proxy)
    table = tidemark.Table.open(uri, spark=None, storage_options=proxied, options=NO_SMALL_FILES)
    [base] = FileSystemView(table.storage, Timeline.load(table.storage)).latest_base_files()
    proxy.take()
    table.upsert(_rows(["z0000001", "z0000002"], 2))
    moved = proxy.take()
    table.close()
    # The whole commit (timeline, properties, the footer) moved far less than the base file.
    assert moved.body_bytes["GET"] < base.size / 10, (moved, base.size)
    read = hudi_rs_read(uri, storage_options=options)
    assert read.num_rows == ROWS + 2
    assert sorted(read.filter(pa.compute.starts_with(read["id"], "z"))["id"].to_pylist()) == ["z0000001", "z0000002"]


def test_open_ranged_reads_what_open_input_reads(big_table: tuple[str, dict[str, str]],
                                                 proxy: CountingProxy) -> None:
    uri, options = big_table
    storage = open_storage(uri, _proxied(options, proxy))
    base = max(FileSystemView(storage, Timeline.load(storage)).latest_base_files(), key=lambda f: f.size)
    proxy.take()
    ranged = pq.ParquetFile(storage.open_ranged(base.path))  # size unknown: one HEAD
    assert ranged.metadata.num_rows == ROWS
    # What the Arrow and Spark engines' index reads of a kept file: its key columns alone.
    keys = read_data_file(storage.open_ranged(base.path), columns=KEY_COLUMNS)
    moved = proxy.take()
    assert moved.requests["HEAD"] == 2  # two sources of unknown size: one HEAD each
    assert moved.body_bytes["GET"] < base.size / 3, (moved, base.size)  # the random payloads not read
    whole = pq.read_table(storage.open_input(base.path), columns=KEY_COLUMNS)
    assert keys.equals(whole) and keys.num_rows == ROWS
    assert proxy.take().body_bytes["GET"] >= base.size  # what the footer reads no longer do
    with pytest.raises(FileNotFoundError):
        storage.open_ranged("no/such.parquet")
