"""The Arrow engine's upsert kernels that keep one copy of the batch (issue 18): each agrees with
a plain model of what it computes, and randomized upserts, inserts and deletes through them
leave the table a dict model and hudi-rs agree on."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import hudi_rs_read
from tidemark import Table
from tidemark.engines.arrow.index import _found_in_file
from tidemark.format.names import META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.format.parquet_file import iter_data_file
from tidemark.fsview import FileSystemView
from tidemark.merge import OP_COLUMN
from tidemark.storage.local import LocalStorage
from tidemark.timeline import Timeline
from tidemark.write.file_group import WriteSpec, write_file_group


@pytest.mark.parametrize("seed", range(6))
def test_found_in_file_gives_every_batch_position_and_file_row_of_a_stored_key(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    stored = [f"k{rng.randrange(3000)}" for _ in range(rng.choice([0, 1, 500, 2000]))]  # repeats: a damaged file
    pq.write_table(pa.table({RECORD_KEY: pa.array(stored, pa.string())}), tmp_path / "f.parquet")
    probe = [f"k{rng.randrange(3000)}" for _ in range(rng.choice([1, 300, 1500]))]  # repeats: no dedup
    view = SimpleNamespace(storage=LocalStorage(str(tmp_path)))
    positions, rows, keys = _found_in_file(view, "f.parquet", pa.array(probe, pa.string()))  # type: ignore[arg-type]
    held = set(stored)
    asked = set(probe)
    assert positions.tolist() == [i for i, k in enumerate(probe) if k in held]
    assert rows.tolist() == [i for i, k in enumerate(stored) if k in asked]
    assert keys.to_pylist() == stored  # every stored key, in file order: a rewrite may take them


def test_iter_data_file_reads_as_the_schema_says(tmp_path: Path) -> None:
    """The buffered-page path gives what the dataset scanner gives: absent columns null, and a
    file whose column type was evolved (int32 stored, int64 asked) read by the scanner's cast."""
    n = 10_000
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"a": pa.array(range(n), pa.int32()), "b": [str(i) for i in range(n)]}), path,
                   row_group_size=3000)
    same = pa.schema([("b", pa.string()), ("a", pa.int32()), ("c", pa.float64())])
    pieces = list(iter_data_file(path, schema=same, batch_size=4096))
    assert all(p.num_rows <= 4096 for p in pieces) and sum(p.num_rows for p in pieces) == n
    whole = pa.concat_tables(pieces)
    assert whole.schema == same
    assert whole.column("a").to_pylist() == list(range(n))
    assert whole.column("b").to_pylist() == [str(i) for i in range(n)]
    assert whole.column("c").null_count == n
    evolved = pa.schema([("a", pa.int64()), ("b", pa.string())])
    cast = pa.concat_tables(iter_data_file(path, schema=evolved, batch_size=4096))
    assert cast.schema == evolved and cast.column("a").to_pylist() == list(range(n))


def _rows(ids: list[int], version: int) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "region": pa.array([f"r{i % 3}" for i in ids], pa.string()),
        "value": pa.array([f"v{version}-{i}" for i in ids], pa.string()),
        "ts": pa.array([version] * len(ids), pa.int64()),
    })


@pytest.mark.parametrize("partitioned", [False, True])
def test_random_writes_through_the_arrow_engine_match_a_model_and_hudi_rs(tmp_path: Path, partitioned: bool) -> None:
    """Upserts (updates spread over the file groups plus new keys), inserts that drop existing
    keys, deletes: after each the table reads as the dict model says; hudi-rs agrees at the end."""
    rng = random.Random(11 + partitioned)
    path = str(tmp_path / "t")
    # Small files: several file groups per partition, so a batch touches some and routes inserts.
    options = {"hoodie.parquet.max.file.size": 40_000, "hoodie.parquet.small.file.limit": 20_000,
               "hoodie.datasource.insert.dup.policy": "drop"}
    table = Table.create(path, spark=None, record_key="id", ordering_field="ts",
                         partition_by=["region"] if partitioned else [], options=options)
    model: dict[int, tuple[str, str, int]] = {}

    def apply(ids: list[int], version: int, *, keep_existing: bool = False) -> None:
        for i in ids:
            if not (keep_existing and i in model):
                model[i] = (f"r{i % 3}", f"v{version}-{i}", version)

    first = list(range(3000))
    table.bulk_insert(_rows(first, 0))
    apply(first, 0)
    next_id = 3000
    for version in range(1, 7):
        kind = ["upsert", "upsert", "insert", "delete"][version % 4]
        existing = rng.sample(sorted(model), min(len(model), rng.choice([1, 200, 900])))
        fresh = list(range(next_id, next_id + rng.choice([0, 50, 700])))
        next_id += len(fresh)
        if kind == "delete":
            gone = existing + [next_id + 10_000]  # a key never written: nothing to delete
            table.delete(_rows(gone, version))
            for i in existing:
                model.pop(i)
        else:
            batch = existing + fresh
            rng.shuffle(batch)
            getattr(table, kind)(_rows(batch, version))
            apply(batch, version, keep_existing=kind == "insert")
        got = table.read()
        picked = got.select(["id", "region", "value", "ts"]).to_pylist()
        rows = {r["id"]: (r["region"], r["value"], r["ts"]) for r in picked}
        assert got.num_rows == len(rows) == len(model), kind
        assert rows == model, kind
    rs = hudi_rs_read(path).select(["id", "value"]).to_pylist()
    assert {r["id"]: r["value"] for r in rs} == {i: v[1] for i, v in model.items()}
    assert len(rs) == len(model)


def test_upsert_keeps_stored_key_order_and_writes_new_keys_sorted(tmp_path: Path) -> None:
    """The rewrite keeps every untouched stored row in its place and appends the updates, then the
    new keys, each in key order (the order the sorted dedup used to give), whatever the batch's order."""
    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id", ordering_field="ts", partition_by=[])
    table.bulk_insert(_rows(list(range(100)), 0))
    batch = [57, 3, 120, 101, 9, 150]
    table.upsert(_rows(batch, 1))
    files = [p for p in Path(path).glob("*.parquet")]
    newest = max(files, key=lambda p: p.name.rsplit("_", 1)[-1])
    keys: list[Any] = pq.read_table(newest, columns=[RECORD_KEY]).column(RECORD_KEY).to_pylist()
    untouched = [str(i) for i in range(100) if i not in (3, 9, 57)]
    assert keys == untouched + sorted(str(i) for i in batch if i < 100) + sorted(str(i) for i in batch if i >= 100)
    assert np.all(np.diff([int(k) for k in keys[:len(untouched)]]) > 0)


def _file_group_rows(ids: list[int], v: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [f"{v}{i}" for i in ids],
                     RECORD_KEY: [str(i) for i in ids], PARTITION_PATH: [""] * len(ids), OP_COLUMN: ["U"] * len(ids)})


def _record_key_column_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """For each stored file a rewrite streams from now on: whether it reads the record-key column."""
    reads: list[bool] = []
    real_iter = iter_data_file

    def recorded(*args: Any, **kwargs: Any) -> Any:
        reads.append(RECORD_KEY in kwargs["schema"].names)
        return real_iter(*args, **kwargs)

    monkeypatch.setattr("tidemark.write.file_group.iter_data_file", recorded)
    return reads


@pytest.mark.parametrize("extra", [0, 3, 1])
@pytest.mark.parametrize("keys", ["kept", "none", "stale"])
def test_a_rewrite_given_the_touched_rows_writes_what_a_probing_rewrite_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: int, keys: str
) -> None:
    """``touched_rows`` may name more stored rows than the batch holds keys of (every third row,
    every row): those stay as they are, written after the other untouched rows; the records
    written are the probing rewrite's, and in its order when the positions are exact. Given the
    stored keys as well, the rewrite does not decode the key column and writes the same; keys
    that are not the file's (another count) are not used."""
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + [("id", pa.int64()), ("v", pa.string())])
    stored_ids = list(range(0, 400_000, 2))  # more than one streamed slice
    all_keys = pa.array([str(i) for i in stored_ids], pa.string())
    given = {"kept": all_keys, "none": None, "stale": all_keys.slice(1)}[keys]
    read_key_column = _record_key_column_reads(monkeypatch)
    outputs = []
    for touched in (False, True):
        base = tmp_path / str(touched)
        first = write_file_group(WriteSpec(str(base), "20260101000000000", schema, (), "snappy", 1 << 30),
                                 _file_group_rows(stored_ids, "a"), partition_path="", file_id="fg",
                                 base_file=None, token="0-0-0", task_partition=0)
        batch = [4, 150_000, 399_998, 7, 1_001]  # three stored keys (one in the second slice), two new
        positions = np.array(sorted(stored_ids.index(i) for i in batch if i % 2 == 0), dtype=np.int64)
        if extra:
            positions = np.union1d(positions, np.arange(0, len(stored_ids), extra))
        stat = write_file_group(WriteSpec(str(base), "20260101000000001", schema, (), "snappy", 1 << 30),
                                _file_group_rows(batch, "b"), partition_path="", file_id="fg", base_file=first.path,
                                token="0-0-0", task_partition=0, touched_rows=positions if touched else None,
                                stored_keys=given if touched else None)
        assert (stat.num_updates, stat.num_inserts, stat.num_writes) == (3, 2, len(stored_ids) + 2)
        outputs.append(pq.read_table(base / stat.path))
    assert read_key_column == [True, keys != "kept"]
    if extra:  # the same records; the extra stored rows come after the streamed ones
        outputs = [o.sort_by(RECORD_KEY) for o in outputs]
    assert outputs[0].equals(outputs[1])
    values = dict(zip(outputs[1].column("id").to_pylist(), outputs[1].column("v").to_pylist(), strict=True))
    assert values[4] == "b4" and values[6] == "a6" and values[1_001] == "b1001"


def test_the_index_lookup_hands_the_keys_it_read_to_the_rewrites_within_a_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keys the lookup decoded (and the footer it read) go to the rewrites of the files they
    came from (no second decoding) while they fit the budget; past it the rewrite decodes them.
    Either way the table is the model and hudi-rs agrees. (No file is small: each partition's
    keys are looked up, as they are where small files are not topped up.)"""
    from tidemark.engines.arrow import index

    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id", ordering_field="ts", partition_by=["region"],
                         options={"hoodie.parquet.small.file.limit": "0"})
    table.bulk_insert(_rows(list(range(3000)), 0))
    model = {i: f"v0-{i}" for i in range(3000)}
    read_key_column = _record_key_column_reads(monkeypatch)
    for version, budget in ((1, index.KEPT_KEY_BYTES), (2, -1), (3, 0)):
        if budget < 0:  # room for what the lookup keeps of the largest latest file: its keys and footer
            storage = LocalStorage(path)
            latest = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
            budget = max(pq.read_table(Path(path) / f.path, columns=[RECORD_KEY]).column(0).combine_chunks().nbytes
                         + pq.read_metadata(Path(path) / f.path).serialized_size for f in latest)
        monkeypatch.setattr(index, "KEPT_KEY_BYTES", budget)
        read_key_column.clear()
        batch = list(range(version, 3000, 7)) + [5000 + version]
        table.upsert(_rows(batch, version))
        model.update({i: f"v{version}-{i}" for i in batch})
        assert sorted(read_key_column) == {1: [False] * 3, 2: [False, True, True], 3: [True] * 3}[version]
        got = table.read().select(["id", "value"]).to_pylist()
        assert len(got) == len(model) and {r["id"]: r["value"] for r in got} == model
    rs = hudi_rs_read(path).select(["id", "value"]).to_pylist()
    assert len(rs) == len(model) and {r["id"]: r["value"] for r in rs} == model
