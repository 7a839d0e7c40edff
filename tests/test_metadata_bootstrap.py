"""A table without a metadata table gets one when a writer passes ``hoodie.metadata.enable=true``.

As Hudi's metadata writer initialises one from a listing of the table, and only when no
other instant is pending (metadata/bootstrap.py). On the default (the option not given) a
table without one keeps none. Checked against the folders and against hudi-rs, which lists
files through the metadata table once ``hoodie.table.metadata.partitions`` names ``files``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from test_metadata_table import _props
from tidemark.format.names import PARTITION_METAFILE
from tidemark.metadata import METADATA_DIR, PARTITIONS_KEY
from tidemark.metadata.files import read_files_partition
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline, instant_file_name, new_instant_time

ENABLED = {"hoodie.metadata.enable": "true"}
DISABLED = {"hoodie.metadata.enable": "false"}


def _ids(rows: Any) -> list[tuple[Any, ...]]:
    rows = rows if isinstance(rows, pa.Table) else rows.toArrow()
    return sorted((r["id"], r["v"]) for r in rows.select(["id", "v"]).to_pylist())


def _folders(path: Path) -> dict[str, dict[str, int]]:
    """Partition ("" for the table root) -> data file -> size, straight from the folders."""
    out: dict[str, dict[str, int]] = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if PARTITION_METAFILE not in files:
            continue
        rel = os.path.relpath(root, path)
        out["" if rel == "." else rel] = {f: os.path.getsize(os.path.join(root, f))
                                          for f in files if f != PARTITION_METAFILE}
    return out


def _assert_true(path: Path, table: tidemark.Table) -> None:
    assert _props(path)[PARTITIONS_KEY] == "files"
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    assert {p: dict(f) for p, f in listing.files.items()} == _folders(path)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())


def _batch(ids: list[int], v: str, partitioned: bool) -> pa.Table:
    cols: dict[str, Any] = {"id": ids, "v": [f"{v}{i}" for i in ids]}
    if partitioned:
        cols["p"] = ["a" if i % 2 else "b" for i in ids]
    return pa.table(cols)


@pytest.mark.parametrize(("table_type", "partitioned"), [("MERGE_ON_READ", True), ("COPY_ON_WRITE", False)])
def test_an_explicit_enable_bootstraps_a_table_without_one(tmp_path: Path, table_type: str,
                                                          partitioned: bool) -> None:
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", table_type=table_type,
                                  partition_by="p" if partitioned else (), options=DISABLED)
    table.upsert(_batch([1, 2, 3, 4], "x", partitioned))
    table.upsert(_batch([2, 3], "y", partitioned))  # a second slice: log files on merge-on-read
    table.close()
    assert not (path / METADATA_DIR).exists()

    plain = tidemark.Table.open(str(path), spark=None)  # the default does not bootstrap
    plain.upsert(_batch([5], "z", partitioned))
    assert not (path / METADATA_DIR).exists()
    assert not _props(path).get(PARTITIONS_KEY)
    plain.close()

    table = tidemark.Table.open(str(path), spark=None, options=ENABLED)
    done = table.upsert(_batch([1, 6], "w", partitioned))
    _assert_true(path, table)
    # The bootstrap listed the files of the three earlier commits; this write recorded its own.
    mdt = LocalStorage(str(path / METADATA_DIR))
    deltacommits = sorted(i.requested_time for i in Timeline.load(mdt).completed)
    assert deltacommits[0] == "00000000000000000" and done.instant_time in deltacommits
    assert _ids(table.read()) == [(1, "w1"), (2, "y2"), (3, "y3"), (4, "x4"), (5, "z5"), (6, "w6")]
    table.delete(_batch([4], "", partitioned).select(["id", "p"] if partitioned else ["id"]))
    _assert_true(path, table)
    # Later writers on the default keep it true.
    later = tidemark.Table.open(str(path), spark=None)
    later.upsert(_batch([7], "q", partitioned))
    _assert_true(path, later)


def test_spark_bootstraps_too(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    schema = "id long, p string, v string"
    table = tidemark.Table.create(str(path), spark=spark, record_key="id", partition_by="p", options=DISABLED)
    table.upsert(spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], schema))
    assert not (path / METADATA_DIR).exists()
    table = tidemark.Table.open(str(path), spark=spark, options=ENABLED)
    table.upsert(spark.createDataFrame([(3, "a", "z")], schema))
    _assert_true(path, table)


def test_no_bootstrap_while_another_instant_is_pending(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A pending instant of another writer stops the bootstrap (before the write and in the
    services after it); the write goes on without one. Once nothing is pending a write bootstraps."""
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", options=DISABLED)
    table.upsert(_batch([1, 2], "x", True))
    storage = LocalStorage(str(path))
    other = new_instant_time(floor=Timeline.load(storage).max_time())
    storage.create_if_absent(f".hoodie/timeline/{instant_file_name(other, Action.COMMIT, State.REQUESTED)}", b"")
    # NEVER: the write leaves the other one pending (as a live writer's would stay).
    table = tidemark.Table.open(str(path), spark=None,
                                options={**ENABLED, "hoodie.clean.failed.writes.policy": "NEVER"})
    with caplog.at_level(logging.WARNING, logger="tidemark"):
        table.upsert(_batch([3], "y", True))
        table.upsert(_batch([1], "z", True))
    assert not (path / METADATA_DIR).exists()
    assert not _props(path).get(PARTITIONS_KEY)
    assert any("not bootstrapped yet" in r.getMessage() and other in r.getMessage() for r in caplog.records)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read()) == [(1, "z1"), (2, "x2"), (3, "y3")]
    assert [i.requested_time for i in Timeline.load(storage).pending] == [other]

    table = tidemark.Table.open(str(path), spark=None, options=ENABLED)
    table.rollback_failed_writes()  # the other writer's instant goes (single writer: every pending one)
    assert not Timeline.load(storage).pending
    table.upsert(_batch([4], "w", True))
    _assert_true(path, table)
    assert _ids(table.read()) == [(1, "z1"), (2, "x2"), (3, "y3"), (4, "w4")]
