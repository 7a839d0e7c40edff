"""How the Arrow engine lays a bulk_insert's rows out in files, and which columns get a dictionary.

A batch of many partitions is put in partition order by one take (``BULK_REORDER_BYTES``) or
taken partition by partition: either way each file holds its partition's rows in arrival order,
with the same sequence numbers. A large batch of one partition is written as a file per core,
each a run of the batch in arrival order (one file per task: Hudi's bulk_insert layout).
A small file's rewrite is one row group. The dictionary columns
are chosen once per write from the batch's first rows: a column of few values gets a dictionary
in every file, a column of distinct values none, and the partition path (one value per file)
always one.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.engines.arrow import writer as arrow_writer
from tidemark.engines.arrow.tasks import write_threads
from tidemark.format.commit_metadata import CommitMetadata

PARTS = 7


def batch(n: int) -> pa.Table:
    keys = [(i * 7919) % n for i in range(n)]  # n is not a multiple of 7919: every key once
    return pa.table({
        "id": pa.array([f"k{k:06d}" for k in keys], pa.string()),
        "part": pa.array([f"p{k % PARTS}" for k in keys], pa.string()),
        "colour": pa.array([("red", "green", "blue")[i % 3] for i in range(n)], pa.string()),
        "note": pa.array([f"note-{i}" for i in range(n)], pa.string()),
        "n": pa.array(range(n), pa.int64()),
    })


def files_in_order(path: Path) -> dict[str, list[str]]:
    """Each partition's keys as its base file stores them, in file order."""
    out: dict[str, list[str]] = {}
    for f in sorted(path.glob("part=*/*.parquet")):
        out.setdefault(f.parent.name, []).extend(pq.read_table(f, columns=["id"]).column("id").to_pylist())
    return out


@pytest.mark.parametrize("reorder_bytes", [0, arrow_writer.BULK_REORDER_BYTES])
def test_every_file_holds_its_partitions_rows_in_arrival_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reorder_bytes: int
) -> None:
    monkeypatch.setattr(arrow_writer, "BULK_REORDER_BYTES", reorder_bytes)
    rows = batch(3_000)
    # Chunks that split partitions across batches: a take must gather from each of them.
    rows = pa.Table.from_batches(rows.to_batches(max_chunksize=500))
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="n")
    table.bulk_insert(rows)
    expected: dict[str, list[str]] = {}
    for key, part in zip(rows.column("id").to_pylist(), rows.column("part").to_pylist(), strict=True):
        expected.setdefault(f"part={part}", []).append(key)
    assert files_in_order(tmp_path / "t") == expected
    for f in (tmp_path / "t").glob("part=*/*.parquet"):  # sequence numbers follow the file order
        seq = pq.read_table(f, columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
        assert [int(s.rsplit("_", 1)[1]) for s in seq] == list(range(len(seq)))
    read = hudi_rs_read(str(tmp_path / "t"))
    assert sorted(read.column("id").to_pylist()) == sorted(rows.column("id").to_pylist())


def one_partition_files(path: Path, instant: str) -> list[list[str]]:
    """The keys of each base file ``instant`` wrote, in file order, files in task order (the
    task number leads the write token of the file's name: ``<file id>_<task>-0-<task>_<instant>``)."""
    meta = CommitMetadata.from_bytes(next((path / ".hoodie/timeline").glob(f"{instant}_*.commit")).read_bytes())
    def task(p: str) -> int:
        return int(p.rsplit("/", 1)[-1].split("_")[1].split("-")[0])

    paths = sorted((s.path for s in meta.write_stats), key=task)
    return [pq.read_table(path / p, columns=["id"]).column("id").to_pylist() for p in paths]


@pytest.mark.parametrize("parallelism", ["2", "1"])
def test_a_large_one_partition_bulk_insert_is_a_file_per_core_in_arrival_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, parallelism: str
) -> None:
    rows = batch(3_001).drop_columns(["part"])
    monkeypatch.setattr(arrow_writer, "BULK_SPLIT_BYTES", rows.nbytes // 3)  # as if it were large
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", ordering_field="n",
                                  options={"hoodie.bulkinsert.shuffle.parallelism": parallelism})
    written = table.bulk_insert(pa.Table.from_batches(rows.to_batches(max_chunksize=700)))
    files = one_partition_files(path, written.instant_time)
    assert len(files) == write_threads(int(parallelism), 2)  # two on two cores; one with parallelism 1
    assert [k for keys in files for k in keys] == rows.column("id").to_pylist()  # runs of the batch, in order
    assert max(map(len, files)) - min(map(len, files)) <= 1  # split evenly
    for f in path.glob("*.parquet"):  # each file's sequence numbers count its own rows
        seq = pq.read_table(f, columns=["_hoodie_commit_seqno"]).column(0).to_pylist()
        assert [int(s.rsplit("_", 1)[1]) for s in seq] == list(range(len(seq)))
    # An upsert across the files finds every stored key (no duplicate), and hudi-rs reads the same.
    update = rows.filter(pa.array([i % 5 == 0 for i in range(3_001)]))
    newer = pa.array([10_000 + i for i in range(update.num_rows)], pa.int64())
    update = update.set_column(update.schema.get_field_index("n"), "n", newer)
    table.upsert(update)
    expected = dict(zip(rows.column("id").to_pylist(), rows.column("n").to_pylist(), strict=True))
    expected.update(zip(update.column("id").to_pylist(), update.column("n").to_pylist(), strict=True))
    for read in (table.read(), hudi_rs_read(str(path))):
        assert read.num_rows == len(expected)
        assert dict(zip(read.column("id").to_pylist(), read.column("n").to_pylist(), strict=True)) == expected


def test_a_small_one_partition_bulk_insert_stays_one_file(tmp_path: Path) -> None:
    rows = batch(3_001).drop_columns(["part"])
    assert rows.nbytes < 2 * arrow_writer.BULK_SPLIT_BYTES
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", ordering_field="n")
    written = table.bulk_insert(rows)
    assert one_partition_files(path, written.instant_time) == [rows.column("id").to_pylist()]


def test_dictionary_columns_are_chosen_once_for_the_write(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="n")
    table.bulk_insert(batch(20_000))
    table.upsert(batch(2_000))
    files = sorted((tmp_path / "t").glob("part=*/*.parquet"))
    assert len(files) >= 2 * PARTS

    def dictionary(meta: pq.FileMetaData, name: str) -> bool:
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        column = meta.row_group(0).column(names.index(name))
        return "PLAIN_DICTIONARY" in column.encodings or "RLE_DICTIONARY" in column.encodings

    for f in files:
        meta = pq.read_metadata(f)
        assert dictionary(meta, "colour"), f
        assert dictionary(meta, "_hoodie_partition_path"), f
        assert not dictionary(meta, "note"), f
        assert not dictionary(meta, "_hoodie_record_key"), f
    assert table.read().num_rows == 20_000
    # The upsert's rewrites: kept, merged and new rows of a small file in one row group.
    latest = max(f.name.rsplit("_", 1)[1] for f in files)
    rewritten = [f for f in files if f.name.endswith(latest)]
    assert len(rewritten) == PARTS
    assert all(pq.read_metadata(f).num_row_groups == 1 for f in rewritten)
    read = hudi_rs_read(str(tmp_path / "t"))
    assert read.num_rows == 20_000 and sorted(read.column("id").to_pylist()) == sorted(batch(20_000)["id"].to_pylist())


def test_the_partition_path_keeps_its_dictionary_however_many_partitions_the_sample_has() -> None:
    from tidemark.format.schema import with_meta_columns
    from tidemark.write.column_encoding import dictionary_columns

    sample = pa.table({
        "_hoodie_partition_path": pa.array([f"part=p{i}" for i in range(1_000)]),  # distinct per row
        "colour": pa.array(["red", "blue"] * 500),
        "note": pa.array([f"note-{i}" for i in range(1_000)]),
    })
    schema = with_meta_columns(pa.schema([("id", pa.string()), ("colour", pa.string()), ("note", pa.string())]))
    chosen = dictionary_columns(schema, sample)
    assert "_hoodie_partition_path" in chosen and "colour" in chosen and "id" in chosen
    assert "note" not in chosen and "_hoodie_record_key" not in chosen and "_hoodie_commit_seqno" not in chosen


def test_inserts_go_to_the_small_file_an_upsert_rewrites_anyway(tmp_path: Path) -> None:
    rows = batch(3_000).drop_columns(["part"])
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", ordering_field="n")
    table.bulk_insert(rows.slice(0, 1_000))
    second = table.bulk_insert(rows.slice(1_000))  # the larger of two small files
    (larger,) = one_partition_files(path, second.instant_time)
    # Updates of keys of the larger file only, and new keys: the smallest small file is not
    # where the new keys go, the one rewritten anyway is (one base file written, not two).
    updated = larger[:50]
    update = rows.filter(pc.is_in(rows.column("id"), value_set=pa.array(updated)))
    new = pa.table({"id": [f"n{i:04d}" for i in range(40)], "colour": ["red"] * 40, "note": ["new"] * 40,
                    "n": pa.array(range(40), pa.int64())})
    upsert = pa.concat_tables([update.set_column(3, "n", pa.array([70_000] * update.num_rows, pa.int64())), new])
    result = table.upsert(upsert)
    meta = CommitMetadata.from_bytes(
        next((path / ".hoodie/timeline").glob(f"{result.instant_time}_*.commit")).read_bytes())
    assert [(s.num_updates, s.num_inserts, s.prev_commit is not None) for s in meta.write_stats] == [(50, 40, True)]
    expected = dict(zip(rows.column("id").to_pylist(), rows.column("n").to_pylist(), strict=True))
    expected.update({k: 70_000 for k in updated})
    expected.update({f"n{i:04d}": i for i in range(40)})
    for read in (table.read(), hudi_rs_read(str(path))):
        assert dict(zip(read.column("id").to_pylist(), read.column("n").to_pylist(), strict=True)) == expected
