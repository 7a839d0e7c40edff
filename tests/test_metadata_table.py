"""The metadata table (``.hoodie/metadata``) of a table Apache Hudi wrote: reading and writing
its files partition, and removing it.

Hudi's readers and hudi-rs list files through it, so a write that left it stale would be
invisible to them (and a deleted row would stay). tidemark keeps its ``files`` partition true
(tests/test_metadata_maintained.py); with ``hoodie.metadata.enable=false``, or when it cannot
keep it, it removes it as Hudi does: ``hoodie.table.metadata.partitions`` emptied first, then
the folder deleted. These tests copy the real table ``v8_trips_8i3u1d`` (its metadata table has
the files, column_stats, partition_stats, record_index and a secondary index partition), write
to it with both engines, and check hudi-rs sees exactly the right rows; and that a crash
between the two steps leaves a readable table whose next write finishes the removal.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.properties import load_properties, properties_problem
from tidemark.metadata import INFLIGHT_PARTITIONS_KEY, METADATA_DIR, PARTITIONS_KEY, metadata_table_present
from tidemark.storage import LocalStorage

REAL_TABLES = next(
    (
        root / "shared" / "reference" / "hudi-format" / "real-tables"
        for root in (Path(__file__).resolve().parents[2], Path("/work"))
        if (root / "shared" / "reference" / "hudi-format" / "real-tables").exists()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "reference" / "hudi-format" / "real-tables",
)
NAME = "v8_trips_8i3u1d"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _copy(tmp_path: Path) -> Path:
    with zipfile.ZipFile(REAL_TABLES / f"{NAME}.zip") as z:
        z.extractall(tmp_path / "x")
    shutil.move(str(tmp_path / "x" / NAME), str(tmp_path / NAME))
    return tmp_path / NAME


def _props(path: Path) -> dict[str, str]:
    props = load_properties(lambda p: (path / p).read_bytes())
    assert props is not None
    return props


def _rows(table: pa.Table) -> dict[str, tuple[Any, ...]]:
    return {r["uuid"]: (r["rider"], r["fare"], r["city"]) for r in table.select(["uuid", "rider", "fare", "city"])
            .to_pylist()}


def _arrow(rows: Any) -> pa.Table:
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


def _assert_no_metadata_table(path: Path) -> None:
    props = _props(path)
    assert props.get(PARTITIONS_KEY, "") == "" and props.get(INFLIGHT_PARTITIONS_KEY, "") == ""
    assert not (path / METADATA_DIR).exists()
    assert properties_problem((path / ".hoodie/hoodie.properties").read_bytes()) is None  # checksum intact


def _upsert_and_delete(path: Path, spark: Any) -> None:
    before = hudi_rs_read(str(path))
    expected = _rows(before)
    user = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")])
    fresh = user.slice(0, 1)
    fresh = fresh.set_column(fresh.schema.get_field_index("uuid"), "uuid", pa.array(["new-key"]))
    fresh = fresh.set_column(fresh.schema.get_field_index("rider"), "rider", pa.array(["rider-new"]))
    # Deletes by key only: hudi-rs 0.5 cannot decode a delete block whose ordering value is a
    # long above 2**31 (tidemark writes the row's ts there when the frame has it), see the report.
    gone = user.slice(1, 1).select(["uuid", "city"])
    frame = (lambda t: t) if spark is None else spark.createDataFrame

    table = tidemark.Table.open(str(path), spark=spark, options={"hoodie.metadata.enable": "false"})
    table.upsert(frame(fresh))
    _assert_no_metadata_table(path)
    expected.update(_rows(fresh))
    assert _rows(hudi_rs_read(str(path))) == expected
    table.delete(frame(gone))
    expected.pop(gone.column("uuid")[0].as_py())
    assert _rows(hudi_rs_read(str(path))) == expected
    assert _rows(_arrow(table.read())) == expected
    _assert_no_metadata_table(path)


def test_the_real_table_lists_its_files_through_the_metadata_table(tmp_path: Path) -> None:
    """The premise: hudi-rs trusts the metadata table's file listing (a file it does not list is
    not read), so one left stale by a writer hides that writer's files."""
    path = _copy(tmp_path)
    assert set(_props(path)[PARTITIONS_KEY].split(",")) >= {"files", "record_index", "column_stats"}
    assert metadata_table_present(LocalStorage(str(path)))
    rows = _rows(hudi_rs_read(str(path)))
    # A base file the metadata table does not know: listed by the folders, not by hudi-rs.
    newest = max((path / "city=san_francisco").glob("*.parquet"), key=lambda p: p.name)
    shutil.copy(newest, newest.with_name(newest.name.replace("036ded81", "0badf11e")))
    assert _rows(hudi_rs_read(str(path))) == rows


def test_an_arrow_write_with_it_disabled_removes_it_so_hudi_rs_sees_it(tmp_path: Path) -> None:
    _upsert_and_delete(_copy(tmp_path), None)


@pytest.mark.spark
def test_a_spark_write_with_it_disabled_removes_it_so_hudi_rs_sees_it(spark: Any, tmp_path: Path) -> None:
    _upsert_and_delete(_copy(tmp_path), spark)


def _crash_after(path: Path, step: str) -> None:
    """A real process runs the removal up to ``step`` and is killed there (SIGKILL to itself)."""
    code = textwrap.dedent(f"""
        import os, signal
        from tidemark.metadata import disable
        from tidemark.storage import LocalStorage
        storage = LocalStorage({str(path)!r})
        disable.forget_partitions(storage)
        if {step!r} == "half-deleted":
            # the delete got as far as the files partition
            storage.delete_tree(disable.METADATA_DIR + "/files")
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, check=False)
    assert proc.returncode == -9


@pytest.mark.parametrize("step", ["properties", "half-deleted"])
def test_a_crash_during_the_removal_leaves_a_readable_table_and_the_next_write_finishes_it(
    tmp_path: Path, step: str
) -> None:
    path = _copy(tmp_path)
    expected = _rows(hudi_rs_read(str(path)))
    _crash_after(path, step)
    assert _props(path)[PARTITIONS_KEY] == ""  # no reader trusts what is left of the folder
    assert (path / METADATA_DIR).exists()
    assert _rows(hudi_rs_read(str(path))) == expected
    assert metadata_table_present(LocalStorage(str(path)))

    user = hudi_rs_read(str(path))
    gone = user.slice(0, 1).select(["uuid", "city"])
    table = tidemark.Table.open(str(path), spark=None)
    table.delete(gone)
    expected.pop(gone.column("uuid")[0].as_py())
    _assert_no_metadata_table(path)
    assert _rows(hudi_rs_read(str(path))) == expected


def test_table_services_remove_it_too_when_disabled(tmp_path: Path) -> None:
    """A compaction (or clean, rollback, clustering) changes the listing as much as a write."""
    path = _copy(tmp_path)
    expected = _rows(hudi_rs_read(str(path)))
    table = tidemark.Table.open(str(path), spark=None, options={"hoodie.metadata.enable": "false"})
    table.compact()
    _assert_no_metadata_table(path)
    assert _rows(hudi_rs_read(str(path))) == expected


def test_a_table_without_a_metadata_table_is_left_alone(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    storage = LocalStorage(str(path))
    from tidemark.metadata import drop_metadata_table

    assert drop_metadata_table(storage)
    before = (path / ".hoodie/hoodie.properties").read_bytes()
    assert not drop_metadata_table(storage)  # idempotent: nothing left to do, nothing rewritten
    assert (path / ".hoodie/hoodie.properties").read_bytes() == before


def test_hoodie_metadata_enable_is_hudis_key_and_validated(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    table = tidemark.Table.open(str(path), spark=None, options={"hoodie.metadata.enable": "false"})
    user = hudi_rs_read(str(path))
    table.delete(user.slice(0, 1).select(["uuid", "city"]))
    _assert_no_metadata_table(path)
    with pytest.raises(tidemark.TidemarkError):
        tidemark.Table.open(str(path), spark=None, options={"hoodie.metadata.enable": "maybe"})


# -- reading the files partition --------------------------------------------------------------
def _folder_listing(path: Path) -> dict[str, dict[str, int]]:
    out = {}
    for partition in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        out[partition.name] = {f.name: f.stat().st_size for f in partition.iterdir()
                               if f.name != ".hoodie_partition_metadata"}
    return out


def test_the_files_partition_of_the_real_table_lists_exactly_the_files_in_its_folders(tmp_path: Path) -> None:
    """tidemark's reading of Hudi's files partition (HFile base file, HFile data blocks in logs,
    Avro HoodieMetadataRecord values, folded as Hudi does) agrees with the folders, size for size."""
    from tidemark.metadata.files import read_files_partition

    path = _copy(tmp_path)
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    folders = _folder_listing(path)
    assert listing.partitions == set(folders)
    assert {p: dict(f) for p, f in listing.files.items()} == folders


def test_a_damaged_hfile_is_named(tmp_path: Path) -> None:
    from tidemark.errors import CorruptDataFileError
    from tidemark.format import hfile

    path = _copy(tmp_path)
    base = max((path / METADATA_DIR / "files").glob("*.hfile"))
    data = base.read_bytes()
    assert [r.key for r in hfile.read_records(data)][0] == "__all_partitions__"
    with pytest.raises(CorruptDataFileError, match="HFile"):
        hfile.read_records(data[:-1], str(base))


def _latest_base(path: Path) -> Path:
    return max((path / METADATA_DIR / "files").glob("*.hfile"), key=lambda p: p.name.rsplit("_", 1)[1])


def test_hfile_checksums_are_crc32c_as_hudi_writes_them(tmp_path: Path) -> None:
    from tidemark.format import hfile

    data = _latest_base(_copy(tmp_path)).read_bytes()
    with_header = int.from_bytes(data[29:33], "big")  # onDiskDataSizeWithHeader of the first block
    stored = int.from_bytes(data[with_header : with_header + 4], "big")
    assert data[24] == 2 and stored == hfile.crc32c(data[:with_header])


def test_hudi_rs_reads_the_files_partition_from_an_hfile_tidemark_wrote(tmp_path: Path) -> None:
    """The oracle for the HFile writer: the real table's files-partition base file rewritten by
    tidemark gives hudi-rs the same rows; rewritten without one partition, hudi-rs loses exactly
    that partition's rows (so it did read tidemark's file)."""
    import io
    import json

    import fastavro

    from tidemark.format import hfile

    path = _copy(tmp_path)
    expected = _rows(hudi_rs_read(str(path)))
    base = _latest_base(path)
    data = base.read_bytes()
    records, info = hfile.read_records(data), hfile.file_info(data)
    keep = {k: v for k, v in info.items() if k in (b"schema", b"minRecordKey", b"maxRecordKey")}
    base.write_bytes(hfile.write_hfile([(r.key, r.value) for r in records], keep))
    assert [(r.key, r.value) for r in hfile.read_records(base.read_bytes())] == [(r.key, r.value) for r in records]
    assert _rows(hudi_rs_read(str(path))) == expected

    schema = fastavro.parse_schema(json.loads(info[b"schema"]))
    without = []
    for record in records:
        value: Any = fastavro.schemaless_reader(io.BytesIO(record.value), schema, None)
        if record.key == "city=chennai":
            continue
        if record.key == "__all_partitions__":
            del value["filesystemMetadata"]["city=chennai"]
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, schema, value)
        without.append((record.key, buf.getvalue()))
    base.write_bytes(hfile.write_hfile(without, keep))
    assert _rows(hudi_rs_read(str(path))) == {k: v for k, v in expected.items() if v[2] != "chennai"}


def test_concurrent_writers_in_real_processes_keep_it_true_and_both_commit(tmp_path: Path) -> None:
    """Two optimistic writers (filesystem lock) start on the table at the same moment: dropping the
    partitions tidemark does not maintain runs under the table lock once, each writer records its
    deltacommit under the lock, and hudi-rs (listing through the files partition) sees both writes."""
    from tidemark.metadata.files import read_files_partition

    path = _copy(tmp_path)
    expected = _rows(hudi_rs_read(str(path)))
    start = tmp_path / "go"
    code = textwrap.dedent("""
        import os, sys, time
        import pyarrow as pa
        import tidemark
        path, key, start = sys.argv[1], sys.argv[2], sys.argv[3]
        opts = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
                "hoodie.write.lock.provider": "filesystem", "hoodie.write.num.retries.on.conflict.failures": "3"}
        table = tidemark.Table.open(path, spark=None, options=opts)
        rows = pa.table({"ts": pa.array([1], pa.int64()), "uuid": [key], "rider": ["r-" + key],
                         "driver": ["d"], "fare": [1.5], "city": ["chennai"]})
        while not os.path.exists(start):  # both processes begin together
            time.sleep(0.005)
        table.upsert(rows)
    """)
    env = {**os.environ, "PYTHONPATH": SRC}
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path), key, str(start)], env=env)
             for key in ("writer-a", "writer-b")]
    start.write_text("")
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert _props(path)[PARTITIONS_KEY] == "files"
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None and {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    expected.update({key: ("r-" + key, 1.5, "chennai") for key in ("writer-a", "writer-b")})
    assert _rows(hudi_rs_read(str(path))) == expected


def test_an_instant_recorded_by_tidemark_in_the_files_partition_is_what_hudi_recorded(tmp_path: Path) -> None:
    """Hudi's last metadata deltacommit (the log file its upsert appended in city=sao_paulo) is
    removed, and tidemark records the same data-table instant from its commit metadata: the
    listing equals the folders again and hudi-rs reads the same rows as from Hudi's own."""
    from tidemark.format.commit_metadata import CommitMetadata
    from tidemark.metadata.files import read_files_partition
    from tidemark.metadata.files_writer import TIMELINE, PartitionChange, record_instant

    path = _copy(tmp_path)
    storage = LocalStorage(str(path))
    expected = _rows(hudi_rs_read(str(path)))
    instant = "20251220210130911"
    for stale in [*(path / TIMELINE).glob(f"{instant}*"), *(path / METADATA_DIR).glob(f"*/.*_{instant}.log.*")]:
        stale.unlink()
    listing = read_files_partition(storage)
    assert listing is not None and listing.files != _folder_listing(path)  # the log file is missing
    assert _rows(hudi_rs_read(str(path))) != expected  # and hudi-rs misses its update

    commit = CommitMetadata.from_bytes(next((path / ".hoodie/timeline").glob(f"{instant}_*.deltacommit")).read_bytes())
    changes: dict[str, PartitionChange] = {}
    for stat in commit.write_stats:
        name = stat.path.rsplit("/", 1)[-1]
        changes[stat.partition_path] = PartitionChange(added={name: (path / stat.path).stat().st_size})
    record_instant(storage, instant, changes)

    listing = read_files_partition(storage)
    assert listing is not None and {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert _rows(hudi_rs_read(str(path))) == expected


def test_an_hfile_of_many_blocks_reads_back_in_key_order() -> None:
    from tidemark.format import hfile

    records = [(f"key-{i:06d}", bytes([i % 251]) * 97) for i in range(3000, 0, -1)]
    data = hfile.write_hfile(records, {hfile.SCHEMA_KEY: b"{}"})
    assert data.count(hfile.DATA_MAGIC) > 3  # 64 KB blocks
    back = hfile.read_records(data)
    assert [(r.key, r.value) for r in back] == sorted(records)
    assert hfile.file_info(data)[hfile.SCHEMA_KEY] == b"{}"
    with pytest.raises(ValueError):
        hfile.write_hfile([("a", b"1"), ("a", b"2")], {})
