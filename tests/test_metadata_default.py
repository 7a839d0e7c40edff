"""A table tidemark creates has a metadata table (unless ``hoodie.metadata.enable=false``), kept bounded.

``Table.create`` (both engines) and the Spark data source creating a table write one by
default, as Hudi 1.x does (write/table_setup.py), and every action keeps its ``files``
partition true. A table without one gets one when a writer passes
``hoodie.metadata.enable=true`` and nothing is pending (tests/test_metadata_bootstrap.py).
Its own timeline and file slices stay bounded however many commits the table sees: after each
compaction of the files partition (every ``hoodie.metadata.compact.max.delta.commits``) the old
slices are cleaned and the metadata timeline archived into its own LSM history, behind the
data table's active timeline. hudi-rs, which lists files through the metadata table, agrees
with tidemark throughout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from test_metadata_table import _folder_listing, _props
from tidemark.errors import ConfigError
from tidemark.metadata import METADATA_DIR, PARTITIONS_KEY
from tidemark.metadata.files import read_files_partition
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.timeline.history import ArchivedTimeline

MDT_TIMELINE = f"{METADATA_DIR}/.hoodie/timeline"
ENABLED = {"hoodie.metadata.enable": "true"}
DISABLED = {"hoodie.metadata.enable": "false"}


def _ids(rows: Any) -> list[tuple[Any, ...]]:
    rows = rows if isinstance(rows, pa.Table) else rows.toArrow()
    return sorted((r["id"], r["v"]) for r in rows.select(["id", "v"]).to_pylist())


def _assert_true(path: Path, table: tidemark.Table) -> None:
    assert _props(path)[PARTITIONS_KEY] == "files"
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    assert {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())


def _mdt_instants(path: Path, suffix: str = ".deltacommit") -> list[str]:
    return sorted(n.split("_")[0] for n in os.listdir(path / MDT_TIMELINE) if n.endswith(suffix) and "_" in n)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_created_table_has_a_metadata_table_by_default(tmp_path: Path, table_type: str) -> None:
    plain = tidemark.Table.create(str(tmp_path / "plain"), spark=None, record_key="id", table_type=table_type,
                                  options=DISABLED)
    assert not (tmp_path / "plain" / METADATA_DIR).exists()  # only when turned off
    assert not _props(tmp_path / "plain").get(PARTITIONS_KEY)
    plain.close()
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", table_type=table_type)
    assert _props(path)[PARTITIONS_KEY] == "files"
    assert read_files_partition(LocalStorage(str(path))) is not None
    table.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "v": ["x", "y"]}))
    _assert_true(path, table)
    table.delete(pa.table({"id": [1], "p": ["a"]}))
    _assert_true(path, table)
    assert _ids(table.read()) == [(2, "y")]


def test_spark_creates_it_too(spark: Any, tmp_path: Path) -> None:
    """Table.create with a SparkSession and the data source creating a table on its first write."""
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=spark, record_key="id", partition_by="p")
    table.upsert(spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], "id long, p string, v string"))
    _assert_true(path, table)

    written = tmp_path / "ds"
    frame = spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], "id long, p string, v string")
    (frame.write.format("tidemark").option("hoodie.datasource.write.recordkey.field", "id")
     .option("hoodie.datasource.write.partitionpath.field", "p")
     .mode("append").save(str(written)))
    assert _props(written)[PARTITIONS_KEY] == "files"
    _assert_true(written, tidemark.Table.open(str(written), spark=None))


def test_hoodie_metadata_compact_max_delta_commits_is_honoured_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "t"
    options = {**ENABLED, "hoodie.metadata.compact.max.delta.commits": "3", "hoodie.clean.automatic": "false"}
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", options=options)
    for i in range(7):
        table.upsert(pa.table({"id": [i], "p": ["a"], "v": [f"v{i}"]}))
    # Bootstrap + 7 deltacommits: compacted after the 3rd and the 6th log file.
    assert len(_mdt_instants(path, ".commit")) == 2
    _assert_true(path, table)
    with pytest.raises(ConfigError, match="hoodie.metadata.compact.max.delta.commits"):
        tidemark.Table.open(str(path), spark=None, options={"hoodie.metadata.compact.max.delta.commits": "0"})


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_many_commits_keep_the_metadata_table_bounded(tmp_path: Path, table_type: str) -> None:
    """120 commits (with inline cleaning, archival and, merge-on-read, compaction): the metadata
    timeline holds the data table's active window plus about two compactions' worth, the files
    partition about two slices; everything older is in the metadata table's own history."""
    path = tmp_path / "t"
    options = {**ENABLED, "hoodie.keep.min.commits": "5", "hoodie.keep.max.commits": "10",
               "hoodie.clean.commits.retained": "2", "hoodie.metadata.compact.max.delta.commits": "4",
               "hoodie.compact.inline": "true", "hoodie.compact.inline.max.delta.commits": "3"}
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", table_type=table_type,
                                  options=options)
    commits = 120
    for i in range(commits):
        table.upsert(pa.table({"id": [i % 7, 1000 + i], "p": ["a", "b"], "v": [f"v{i}", "n"]}))
        if i in (5, 60):
            _assert_true(path, table)
    _assert_true(path, table)
    data_active = len(table.timeline())
    mdt_active = os.listdir(path / MDT_TIMELINE)
    mdt_instants = {n.split(".")[0].split("_")[0] for n in mdt_active if n[0].isdigit()}
    # Behind the data table's active window, plus at most two compactions' worth of its own.
    assert len(mdt_instants) <= data_active + 2 * (4 + 2) + 2, (len(mdt_instants), data_active)
    files = os.listdir(path / METADATA_DIR / "files")
    assert len([f for f in files if f.endswith(".hfile")]) <= 2
    assert len([f for f in files if ".log." in f]) <= 2 * 4 + 1
    archived = ArchivedTimeline.load(LocalStorage(str(path / METADATA_DIR))).instants
    assert len(archived) > commits // 2  # most of the table's life is in the metadata history
    recorded = {i.requested_time for i in archived} | mdt_instants
    data_times = {i.requested_time for i in Timeline.load(LocalStorage(str(path))).with_history().completed}
    assert data_times <= recorded  # every data instant was mirrored, archived or active
    assert len(_ids(table.read())) == 7 + commits


def test_a_rollback_left_pending_is_finished_and_recorded(tmp_path: Path) -> None:
    """A rollback of a completed instant interrupted after it deleted the instant (as a crash
    leaves it) is finished by the next writer, which records it: the metadata table is kept."""
    from tidemark.format.commit_metadata import write_avro
    from tidemark.timeline import Action, State, instant_file_name, new_instant_time

    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", options=ENABLED)
    table.upsert(pa.table({"id": [1], "p": ["a"], "v": ["x"]}))
    done = table.upsert(pa.table({"id": [2], "p": ["b"], "v": ["y"]}))
    storage = LocalStorage(str(path))
    timeline = Timeline.load(storage)
    instant = timeline.completed_instant(done.instant_time)
    assert instant is not None
    files = [s.path for s in timeline.commit_metadata(instant).write_stats]
    when = new_instant_time(floor=timeline.max_time())
    plan = {"instantToRollback": {"commitTime": done.instant_time, "action": instant.action.value},
            "filesToDelete": files, "version": 1}
    storage.create_if_absent(f".hoodie/timeline/{instant_file_name(when, Action.ROLLBACK, State.REQUESTED)}",
                             write_avro("rollback_plan", plan))
    storage.delete(f".hoodie/timeline/{instant.file_name}")  # the crash: the instant gone, its files not yet
    assert _ids(hudi_rs_read(str(path))) == [(1, "x")]  # readers skip its files already
    table.upsert(pa.table({"id": [3], "p": ["a"], "v": ["z"]}))
    _assert_true(path, table)
    assert when in _mdt_instants(path)
    assert _ids(table.read()) == [(1, "x"), (3, "z")]
