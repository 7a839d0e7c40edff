"""Tables on an object store: the moto S3 server (tests/moto_server.py), Arrow engine and Spark.

Every table here lives at ``s3://<fresh bucket>/t``; hudi-rs reads it through the same storage
options and must agree with tidemark after each operation.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.storage.location import open_storage
from tidemark.timeline import Action, State, Timeline

COLUMNS = ["id", "v"]
NO_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _batch(*pairs: tuple[int, int]) -> pa.Table:
    return pa.table({
        "id": [k for k, _ in pairs], "part": [f"p{k % 2}" for k, _ in pairs], "v": [v for _, v in pairs],
    })


def _create(uri: str, opts: dict[str, str], *, table_type: str = "COPY_ON_WRITE", **options: str) -> Table:
    return Table.create(uri, spark=None, record_key="id", partition_by="part", table_type=table_type,
                        options={**NO_SERVICES, **options}, storage_options=opts)


def _agree(table: Table, opts: dict[str, str], expected: list[tuple[Any, ...]], **read: Any) -> None:
    """tidemark and hudi-rs both read ``expected`` from the S3 table."""
    assert rows_of(table.read(**read), COLUMNS) == expected
    assert rows_of(hudi_rs_read(table.path, storage_options=opts, **read), COLUMNS) == expected


def test_copy_on_write_table_on_s3_writes_reads_and_agrees_with_hudi_rs(moto_server: Any, s3_bucket: str) -> None:
    opts = moto_server.storage_options()
    uri = f"s3://{s3_bucket}/t"
    table = _create(uri, opts)
    assert table.path == uri
    first = table.bulk_insert(_batch((1, 0), (2, 0), (3, 0)))
    _agree(table, opts, [(1, 0), (2, 0), (3, 0)])
    table.upsert(_batch((2, 1), (4, 1)))
    _agree(table, opts, [(1, 0), (2, 1), (3, 0), (4, 1)])
    table.delete(pa.table({"id": [1], "part": ["p1"]}))
    _agree(table, opts, [(2, 1), (3, 0), (4, 1)])
    _agree(table, opts, [(1, 0), (2, 0), (3, 0)], as_of=first.instant_time)
    # a second handle opened from the URI sees the same table
    again = Table.open(uri, spark=None, storage_options=opts)
    assert rows_of(again.read(), COLUMNS) == [(2, 1), (3, 0), (4, 1)]
    # nothing lives on the local disk: the timeline is in the bucket
    keys = [o["Key"] for o in moto_server.boto3_client("s3").list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert "t/.hoodie/hoodie.properties" in keys
    assert sum(k.startswith("t/.hoodie/timeline/") and k.endswith(".commit") for k in keys) == 3
