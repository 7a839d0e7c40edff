"""tidemark keeps a metadata table's ``files`` partition true (docs/metadata-table.md).

On a copy of the real table ``v8_trips_8i3u1d`` (merge-on-read; its metadata table has the
files, column_stats, partition_stats, record_index and a secondary index partition): the
first change drops the partitions tidemark does not maintain, as Hudi does when one is
disabled, and keeps ``files``; every action after it records its files there before its
data instant completes. After each action hudi-rs (which lists files through the metadata
table) reads exactly what tidemark reads, and the files partition lists exactly the files in
the partition folders, size for size. Crashes between the metadata deltacommit and the data
instant, in real processes, leave nothing a reader trusts and the next writer removes the
metadata table. Restore and the rollback of a completed instant are recorded too (a
deltacommit of their own time deleting the undone files), as Hudi's metadata writer does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from test_metadata_table import _assert_no_metadata_table, _copy, _folder_listing, _props
from tidemark.format.properties import properties_problem
from tidemark.metadata import INFLIGHT_PARTITIONS_KEY, METADATA_DIR, PARTITIONS_KEY
from tidemark.metadata.files import read_files_partition
from tidemark.storage import LocalStorage

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _rows(table: Any) -> list[tuple[Any, ...]]:
    table = table if isinstance(table, pa.Table) else table.toArrow()
    return sorted((r["uuid"], r["rider"], r["fare"], r["city"])
                  for r in table.select(["uuid", "rider", "fare", "city"]).to_pylist())


def _assert_true(path: Path, table: tidemark.Table) -> None:
    """The metadata table is kept (files only), lists the folders, and hudi-rs agrees with tidemark."""
    props = _props(path)
    assert props[PARTITIONS_KEY] == "files" and props.get(INFLIGHT_PARTITIONS_KEY, "") == ""
    assert properties_problem((path / ".hoodie/hoodie.properties").read_bytes()) is None
    assert sorted(p.name for p in (path / METADATA_DIR).iterdir()) == [".hoodie", "files"]
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    assert {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert listing.partitions >= set(_folder_listing(path))
    assert _rows(hudi_rs_read(str(path))) == _rows(table.read())


def _user(path: Path) -> pa.Table:
    rows = hudi_rs_read(str(path))
    return rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])


def _fresh(user: pa.Table, key: str, rider: str) -> pa.Table:
    one = user.slice(0, 1)
    one = one.set_column(one.schema.get_field_index("uuid"), "uuid", pa.array([key]))
    return one.set_column(one.schema.get_field_index("rider"), "rider", pa.array([rider]))


def test_every_action_keeps_the_files_partition_true(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None, options={"hoodie.clean.commits.retained": "1",
                                                                "hoodie.clean.automatic": "false"})
    user = _user(path)
    expected = _rows(hudi_rs_read(str(path)))

    table.upsert(_fresh(user, "new-key", "rider-new"))  # drops the other partitions, records the deltacommit
    _assert_true(path, table)
    assert len(_rows(table.read())) == len(expected) + 1

    table.delete(user.slice(1, 1).select(["uuid", "city"]))
    _assert_true(path, table)
    assert len(_rows(table.read())) == len(expected)

    assert table.compact() is not None
    _assert_true(path, table)

    table.upsert(_fresh(user, "new-key-2", "rider-2"))
    assert table.cluster() is not None
    _assert_true(path, table)

    cleaned = table.clean()
    assert cleaned.deleted_files  # the replaced and compacted file versions go
    _assert_true(path, table)
    assert len(_rows(table.read())) == len(expected) + 1


def _die_in_a_process(path: Path, at: str) -> None:
    """A real process upserts key ``dead-key`` and is killed (SIGKILL) at ``at``: "before" the
    metadata deltacommit completes (a failed write: its deltacommit staged, pending, nothing
    recorded), or "between" it and the data instant."""
    row = path.parent / f"dead-{at}.parquet"
    pq.write_table(_fresh(_user(path), "dead-key", "rider-dead"), row)
    code = textwrap.dedent(f"""
        import os, signal
        import pyarrow as pa
        import tidemark
        import tidemark.write.commit as commit
        real = commit.publish_deltacommit
        def record(*args, **kwargs):
            if {at!r} == "between":
                real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        commit.publish_deltacommit = record
        import pyarrow.parquet as pq
        table = tidemark.Table.open({str(path)!r}, spark=None)
        one = pq.read_table({str(row)!r})
        table.upsert(one)
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, check=False,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr[-2000:]


def test_a_failed_write_rolled_back_keeps_it_true(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None)
    user = _user(path)
    table.upsert(_fresh(user, "new-key", "rider-new"))
    _die_in_a_process(path, "before")
    dead = [i.requested_time for i in table.timeline() if i.requested_time > "2026" and not i.is_completed]
    assert len(dead) == 1
    # Killed after staging its metadata deltacommit (before the lock): pending, with its log file.
    mdt_names = os.listdir(path / METADATA_DIR / ".hoodie/timeline")
    assert {f"{dead[0]}.deltacommit.requested", f"{dead[0]}.deltacommit.inflight"} <= set(mdt_names)
    assert not [n for n in mdt_names if n.startswith(f"{dead[0]}_")]
    assert [n for n in os.listdir(path / METADATA_DIR / "files") if f"_{dead[0]}.log." in n]
    assert "dead-key" not in {r[0] for r in _rows(hudi_rs_read(str(path)))}
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    listed = {(p, n) for p, f in listing.files.items() for n in f}
    on_disk = {(p, n) for p, f in _folder_listing(path).items() for n in f}
    assert len(on_disk - listed) == 1 and listed <= on_disk  # the failed write's file only, never listed
    assert _rows(hudi_rs_read(str(path))) == _rows(table.read())
    rolled = table.rollback_failed_writes(force=True)
    assert rolled and rolled[0].deleted_files
    _assert_true(path, table)
    assert "dead-key" not in {r[0] for r in _rows(table.read())}
    mdt_timeline = {n.split(".")[0].split("_")[0] for n in os.listdir(path / METADATA_DIR / ".hoodie/timeline")}
    assert rolled[0].rollback_instant.requested_time in mdt_timeline  # mirrored, as Hudi does
    # The rollback withdrew the failed write's pending metadata deltacommit and its log file.
    assert dead[0] not in mdt_timeline
    assert not [n for n in os.listdir(path / METADATA_DIR / "files") if f"_{dead[0]}.log." in n]


def test_a_crash_between_the_metadata_deltacommit_and_the_data_instant(tmp_path: Path) -> None:
    """The metadata deltacommit completed, the data instant did not: hudi-rs does not read its
    files (it takes slices of completed data instants only). The next writer rolls the failed
    instant back and records the rollback in the metadata table (the dead file listed as
    deleted, as Hudi's rollback does), so the metadata table is kept and lists the folders
    (never stale)."""
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None)
    expected = _rows(hudi_rs_read(str(path)))
    _die_in_a_process(path, "between")
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None and listing.files == _folder_listing(path)  # it lists the uncommitted file
    assert _rows(hudi_rs_read(str(path))) == expected  # the uncommitted file is ignored
    assert "dead-key" not in {r[0] for r in _rows(hudi_rs_read(str(path)))}
    user = _user(path)
    table.upsert(_fresh(user, "next-key", "rider-next"))
    _assert_true(path, table)
    assert "next-key" in {r[0] for r in _rows(table.read())} and "dead-key" not in {r[0] for r in _rows(table.read())}


def _mdt_times(path: Path) -> set[str]:
    return {n.split(".")[0].split("_")[0] for n in os.listdir(path / METADATA_DIR / ".hoodie/timeline")
            if n.endswith(".deltacommit")}


def test_restore_and_rollback_of_a_completed_instant_are_recorded(tmp_path: Path) -> None:
    """Undoing completed instants is recorded in the metadata table as Hudi does: a deltacommit
    of the restore's (and each rollback's) time deletes the undone files; the table is kept."""
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None)
    user = _user(path)
    first = table.upsert(_fresh(user, "k1", "r1"))
    table.savepoint(first.instant_time)
    _assert_true(path, table)  # a savepoint changes no listing: kept
    table.upsert(_fresh(user, "k2", "r2"))
    restored = table.restore(first.instant_time)
    _assert_true(path, table)
    assert restored.restore_instant.requested_time in _mdt_times(path)
    assert {r.rollback_instant.requested_time for r in restored.rollbacks} <= _mdt_times(path)
    assert "k2" not in {r[0] for r in _rows(table.read())}
    table.upsert(_fresh(user, "k4", "r4"))  # the next writer keeps it: in sync
    _assert_true(path, table)

    path = _copy(tmp_path / "again")
    table = tidemark.Table.open(str(path), spark=None)
    done = table.upsert(_fresh(_user(path), "k3", "r3"))
    _assert_true(path, table)
    rolled = table.rollback(done.instant_time)
    _assert_true(path, table)
    assert rolled.rollback_instant.requested_time in _mdt_times(path)
    assert "k3" not in {r[0] for r in _rows(table.read())}
    table.upsert(_fresh(_user(path), "k5", "r5"))
    _assert_true(path, table)
    assert "k5" in {r[0] for r in _rows(hudi_rs_read(str(path)))}


def test_unmaintained_partitions_are_dropped_properties_first(tmp_path: Path) -> None:
    """The property names only files before any other folder is deleted; a crash in between
    leaves folders nobody trusts, which the next writer deletes."""
    from tidemark.concurrency.writer_settings import properties_mutex, read_properties
    from tidemark.format.properties import PROPERTIES_PATH, format_properties

    path = _copy(tmp_path)
    storage = LocalStorage(str(path))
    with properties_mutex(storage):  # what the first step leaves
        props = read_properties(storage)
        props[PARTITIONS_KEY] = "files"
        storage.write_atomic(PROPERTIES_PATH, format_properties(props).encode())
    assert (path / METADATA_DIR / "record_index").exists()
    expected = _rows(hudi_rs_read(str(path)))
    table = tidemark.Table.open(str(path), spark=None)
    assert _rows(table.read()) == expected
    table.upsert(_fresh(_user(path), "k1", "r1"))
    _assert_true(path, table)


def test_hoodie_metadata_enable_false_removes_it(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None, options={"hoodie.metadata.enable": "false"})
    table.upsert(_fresh(_user(path), "k1", "r1"))
    _assert_no_metadata_table(path)
    assert _rows(hudi_rs_read(str(path))) == _rows(table.read())


@pytest.mark.spark
def test_spark_writes_keep_it_true(spark: Any, tmp_path: Path) -> None:
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=spark)
    user = _user(path)
    table.upsert(spark.createDataFrame(_fresh(user, "new-key", "rider-new")))
    _assert_true(path, table)
    table.delete(spark.createDataFrame(user.slice(1, 1).select(["uuid", "city"])))
    _assert_true(path, table)
    assert table.compact() is not None
    _assert_true(path, table)


# -- a table tidemark creates with a metadata table (hoodie.metadata.enable=true given) ----------
def _created(path: Path, table_type: str) -> tidemark.Table:
    return tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", ordering_field="ts",
                                 table_type=table_type, options={"hoodie.metadata.enable": "true",
                                                                 "hoodie.clean.commits.retained": "1",
                                                                 "hoodie.clean.automatic": "false"})


def _ids(rows: Any) -> list[tuple[Any, ...]]:
    rows = rows if isinstance(rows, pa.Table) else rows.toArrow()
    return sorted((r["id"], r["v"]) for r in rows.select(["id", "v"]).to_pylist())


def _assert_created_true(path: Path, table: tidemark.Table) -> None:
    assert _props(path)[PARTITIONS_KEY] == "files"
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    assert {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_table_tidemark_creates_with_a_metadata_table(tmp_path: Path, table_type: str) -> None:
    path = tmp_path / "t"
    table = _created(path, table_type)
    assert _props(path)[PARTITIONS_KEY] == "files"
    assert read_files_partition(LocalStorage(str(path))) is not None
    assert hudi_rs_read(str(path)).num_rows == 0

    table.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1], "v": ["x", "y", "z"]}))
    _assert_created_true(path, table)
    table.upsert(pa.table({"id": [2, 4], "p": ["a", "b"], "ts": [2, 2], "v": ["y2", "w"]}))
    _assert_created_true(path, table)
    table.delete(pa.table({"id": [1], "p": ["a"], "ts": [3]}))
    _assert_created_true(path, table)
    if table_type == "MERGE_ON_READ":
        assert table.compact() is not None
        _assert_created_true(path, table)
    table.bulk_insert(pa.table({"id": [5], "p": ["b"], "ts": [1], "v": ["v"]}))  # a second small file in p=b
    assert table.cluster().instant_time is not None
    _assert_created_true(path, table)
    assert table.clean().deleted_files
    _assert_created_true(path, table)
    assert _ids(table.read()) == [(2, "y2"), (3, "z"), (4, "w"), (5, "v")]


def test_with_it_disabled_a_created_table_has_none(tmp_path: Path) -> None:
    """By default a created table has one (tests/test_metadata_default.py); false leaves it out."""
    path = tmp_path / "t"
    tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p",
                          options={"hoodie.metadata.enable": "false"})
    assert _props(path).get(PARTITIONS_KEY, "") == "" and not (path / METADATA_DIR).exists()


def test_the_files_partition_is_compacted_as_hudi_does(tmp_path: Path) -> None:
    """Every ten deltacommits a compaction on the metadata timeline folds the slice into a new
    HFile base file, so readers read at most ten log files; the listing stays the folders'."""
    from tidemark.metadata.files import latest_slice

    path = tmp_path / "t"
    table = _created(path, "MERGE_ON_READ")
    storage = LocalStorage(str(path))
    for i in range(23):
        table.upsert(pa.table({"id": [i % 5, 100 + i], "p": ["a", "b"], "ts": [i, i], "v": [f"v{i}", "n"]}))
        file_slice = latest_slice(storage)
        assert file_slice is not None and len(file_slice.log_names) < 10
    compactions = sorted((path / METADATA_DIR / ".hoodie/timeline").glob("*.commit"))
    assert len(compactions) == 2
    _assert_created_true(path, table)
    # Hudi's own real table: its compacted slice, plus ours.
    real = _copy(tmp_path / "real")
    table = tidemark.Table.open(str(real), spark=None)
    user = _user(real)
    for i in range(11):
        table.upsert(_fresh(user, f"k{i}", f"r{i}"))
    assert len(list((real / METADATA_DIR / ".hoodie/timeline").glob("*.commit"))) == 2
    _assert_true(real, table)


def test_a_cleaner_killed_after_recording_is_finished_and_it_stays_true(tmp_path: Path) -> None:
    """A cleaner records its deletions (after deleting) before it completes, outside the lock; killed
    in between, its clean stays pending with the metadata deltacommit completed: a consistent state
    (the listing drops only files already gone). The next writer finishes the clean and keeps it."""
    path = tmp_path / "t"
    table = _created(path, "COPY_ON_WRITE")
    for i in range(3):
        table.upsert(pa.table({"id": [1, 2], "p": ["a", "b"], "ts": [i, i], "v": [f"v{i}", "w"]}))
    code = textwrap.dedent(f"""
        import os, signal
        import tidemark
        import tidemark.recovery.clean as clean
        real = clean.record_if_maintained
        def record(*args, **kwargs):
            real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        clean.record_if_maintained = record
        tidemark.Table.open({str(path)!r}, spark=None, options={{"hoodie.clean.commits.retained": "1"}}).clean()
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, check=False,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr[-2000:]
    assert any(i.action.value == "clean" and not i.is_completed for i in table.timeline())
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None and {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())
    table.upsert(pa.table({"id": [3], "p": ["a"], "ts": [9], "v": ["new"]}))
    assert all(i.is_completed for i in table.timeline())  # the clean was finished
    _assert_created_true(path, table)


def test_bucket_index_and_insert_overwrite_keep_it_true(tmp_path: Path) -> None:
    """File groups created in an instant of their own (bucket index), and a replacecommit whose
    replaced file groups stay listed until clean deletes them (as Hudi's writer leaves them)."""
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", ordering_field="ts",
                                  options={"hoodie.metadata.enable": "true", "hoodie.index.type": "BUCKET",
                                           "hoodie.bucket.index.num.buckets": "2",
                                           "hoodie.clean.commits.retained": "1", "hoodie.clean.automatic": "false"})
    table.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1], "v": ["x", "y", "z"]}))
    _assert_created_true(path, table)
    table.upsert(pa.table({"id": [2, 4], "p": ["a", "b"], "ts": [2, 2], "v": ["y2", "w"]}))
    _assert_created_true(path, table)
    table.insert_overwrite(pa.table({"id": [7], "p": ["a"], "ts": [3], "v": ["only"]}))
    _assert_created_true(path, table)
    assert _ids(table.read()) == [(3, "z"), (4, "w"), (7, "only")]
    table.clean()
    _assert_created_true(path, table)


def test_non_blocking_writers_create_file_groups_and_keep_it_true(tmp_path: Path) -> None:
    """Non-blocking concurrency control creates new buckets' file groups in an instant of their
    own (create_file_groups), then appends logs: both recorded."""
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", ordering_field="ts",
                                  table_type="MERGE_ON_READ",
                                  options={"hoodie.metadata.enable": "true", "hoodie.index.type": "BUCKET",
                                           "hoodie.bucket.index.num.buckets": "2",
                                           "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
                                           "hoodie.write.lock.provider": "filesystem"})
    table.upsert(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "ts": [1, 1, 1], "v": ["x", "y", "z"]}))
    assert len([i for i in table.timeline() if i.is_completed]) == 2  # the file groups' instant, then the write
    _assert_created_true(path, table)
    table.upsert(pa.table({"id": [2, 4], "p": ["a", "c"], "ts": [2, 2], "v": ["y2", "w"]}))
    _assert_created_true(path, table)
    assert _ids(table.read()) == [(1, "x"), (2, "y2"), (3, "z"), (4, "w")]
