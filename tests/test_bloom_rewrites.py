"""A rewritten base file's bloom filter: carried over from the file it replaces, hashing only the
keys the write adds, or built anew; either way byte for byte the filter of the file's keys.

Hudi's bloom index trusts the filter to hold every key of the file: a filter missing one key
would make the next upsert of that key a duplicate. So after every kind of rewrite (updates,
inserts within and past the file's filter sizing, deletes, stale updates, files past one
filter row; both engines) each file's footer must equal the filter built from the keys it
holds, and the table must equal a model.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from tidemark.format.bloom import FOOTER_KEY, BloomFilter, footer_entries
from tidemark.fsview import FileSystemView
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.write.footer import FooterKeys

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string())])


def _rows(keys: list[int], ts: int) -> pa.Table:
    return pa.table({"id": [f"k{k:07d}" for k in keys], "ts": [ts] * len(keys), "v": [f"v{k}-{ts}" for k in keys]},
                    schema=SCHEMA)


def _check_footers(path: Path) -> int:
    """Assert every latest base file's filter is the one built from its keys; the file count."""
    storage = LocalStorage(str(path))
    files = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    for f in files:
        stored = pq.ParquetFile(path / f.path)
        keys = stored.read(columns=["_hoodie_record_key"]).column(0).combine_chunks()
        footer = stored.metadata.metadata[FOOTER_KEY.encode()].decode()
        expected = BloomFilter.build(keys, num_entries=footer_entries(len(keys))).serialize()
        assert footer == expected, f"{f.path}: the filter is not the one of its {len(keys)} keys"
    return len(files)


class _Carries:
    """Records, for each rewrite that had a stored filter, whether it carried it (False: built anew)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.results: list[bool] = []
        real = FooterKeys._carried

        def recorded(keys: FooterKeys) -> BloomFilter | None:
            out = real(keys)
            self.results.append(out is not None)
            return out

        monkeypatch.setattr(FooterKeys, "_carried", recorded)

    def take(self) -> list[bool]:
        out, self.results = self.results, []
        return out


# (base keys, then the batch: updates of stored keys, new keys, deletes, stale updates), and
# whether the rewrite carries the stored filter.
CASES: dict[str, tuple[int, dict[str, Any], bool]] = {
    "updates only": (5_000, {"update": 700}, True),
    "inserts within the sizing": (5_000, {"update": 300, "insert": 400}, True),  # 5,400 <= 5,956
    "inserts past the sizing": (5_000, {"update": 300, "insert": 1_500}, False),  # 6,500 > 5,956
    "deletes": (5_000, {"update": 300, "delete": 50}, False),
    "stale updates": (5_000, {"stale": 400}, True),
    "a tiny file": (10, {"update": 3, "insert": 5}, True),  # 1,000 keys' sizing
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_arrow_rewrite_carries_or_rebuilds_the_filter_of_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    base_count, batch, carries = CASES[case]
    carried = _Carries(monkeypatch)
    table = tidemark.Table.create(str(tmp_path), spark=None, record_key="id", ordering_field="ts")
    table.bulk_insert(_rows(list(range(base_count)), ts=10))
    model = {r["id"]: r for r in _rows(list(range(base_count)), ts=10).to_pylist()}
    assert carried.take() == []  # a new file has nothing to carry
    rng = random.Random(case)
    stored = rng.sample(range(base_count), batch.get("update", 0) + batch.get("stale", 0) + batch.get("delete", 0))
    updates, rest = stored[: batch.get("update", 0)], stored[batch.get("update", 0):]
    stale, deletes = rest[: batch.get("stale", 0)], rest[batch.get("stale", 0):]
    new = list(range(base_count, base_count + batch.get("insert", 0)))
    upsert = pa.concat_tables([_rows(updates, ts=20), _rows(new, ts=20), _rows(stale, ts=5)])
    table.upsert(upsert)
    for r in upsert.to_pylist():
        if r["id"] not in model or model[r["id"]]["ts"] <= r["ts"]:
            model[r["id"]] = r
    if deletes:  # the upsert kept every key (carried); the delete's rewrite did not
        assert carried.take() == [True]
        gone = _rows(deletes, ts=30)
        table.delete(gone)
        for r in gone.to_pylist():
            model.pop(r["id"])
    assert _check_footers(tmp_path) == 1
    assert carried.take() == [carries]
    rows = table.read().select(["id", "ts", "v"]).to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == sorted(model.values(), key=lambda r: r["id"])
    # The index finds every stored key through the filter: a second upsert of all of them
    # updates (no duplicate), and the footers still hold.
    every = _rows(sorted(int(k[1:]) for k in model), ts=40)
    result = table.upsert(every)
    assert (result.num_inserts, result.num_updates) == (0, every.num_rows)
    assert table.read().num_rows == len(model)
    _check_footers(tmp_path)


def test_random_rewrites_keep_every_files_filter_the_one_of_its_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many files (four partitions, small files), rounds of mixed upserts and deletes: every
    footer equals its keys' filter after every round, both outcomes happen, the table is the model."""
    carried = _Carries(monkeypatch)
    schema = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64())])
    table = tidemark.Table.create(str(tmp_path), spark=None, record_key="id", ordering_field="ts", partition_by="p",
                                  options={"hoodie.parquet.max.file.size": str(64 << 10),
                                           "hoodie.parquet.small.file.limit": str(32 << 10)})
    rng = random.Random(7)
    model: dict[str, dict[str, Any]] = {}
    next_key = 0
    outcomes: list[bool] = []
    for round_no in range(8):
        ids = rng.sample(sorted(model), min(len(model), rng.randint(0, 900)))
        fresh = [f"k{next_key + i:07d}" for i in range(rng.randint(1, 2_500))]
        next_key += len(fresh)
        rows: list[dict[str, Any]] = [
            {"id": k, "p": f"p{int(k[1:]) % 4}", "ts": round_no * 10 + rng.randint(-15, 5)} for k in ids + fresh]
        batch = pa.Table.from_pylist(rows, schema=schema)
        table.upsert(batch)
        for r in rows:
            if r["id"] not in model or model[r["id"]]["ts"] <= r["ts"]:
                model[r["id"]] = r
        if round_no % 3 == 2 and model:
            gone = rng.sample(sorted(model), min(len(model), 40))
            table.delete(pa.Table.from_pylist([{**model[k], "ts": 10_000} for k in gone], schema=schema))
            for k in gone:
                model.pop(k)
        assert _check_footers(tmp_path) > 1
        outcomes.extend(carried.take())
    assert True in outcomes and False in outcomes
    got = table.read().select(["id", "p", "ts"]).to_pylist()
    assert sorted(got, key=lambda r: r["id"]) == sorted(model.values(), key=lambda r: r["id"])


def test_a_spark_rewrite_carries_the_filter_of_its_keys(spark: Any, tmp_path: Path) -> None:
    """The Spark engine's write tasks rewrite files the same way: footers and rows hold."""
    def frame(rows: pa.Table) -> Any:
        return spark.createDataFrame(rows.to_pylist(), "id string, ts long, v string")

    table = tidemark.Table.create(str(tmp_path), spark=spark, record_key="id", ordering_field="ts")
    table.bulk_insert(frame(_rows(list(range(3_000)), ts=10)))
    batch = pa.concat_tables([_rows(list(range(0, 3_000, 7)), ts=20), _rows(list(range(3_000, 3_200)), ts=20)])
    result = table.upsert(frame(batch))
    assert (result.num_inserts, result.num_updates) == (200, len(range(0, 3_000, 7)))
    _check_footers(tmp_path)
    again = table.upsert(frame(_rows(list(range(3_200)), ts=30)))
    assert (again.num_inserts, again.num_updates) == (0, 3_200)
    assert table.read().count() == 3_200
    _check_footers(tmp_path)


def _file_keys(path: Path) -> tuple[pq.ParquetFile, list[str]]:
    storage = LocalStorage(str(path))
    (f,) = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    stored = pq.ParquetFile(path / f.path)
    return stored, stored.read(columns=["_hoodie_record_key"]).column(0).to_pylist()


def _footer_filter(stored: pq.ParquetFile) -> str:
    return stored.metadata.metadata[FOOTER_KEY.encode()].decode()


def test_a_large_files_rewrite_hashes_only_its_new_keys_onto_the_stored_filter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file past one filter row (70,000 keys): its rewrite hashes only the keys it adds, and
    the filter is Hudi's for the stored keys in their order, then the new ones. A delete leaves
    a filter that still holds the deleted keys (never one that misses a key); the next rewrite
    of that file builds its filter anew, from the keys it holds."""
    hashed: list[int] = []
    real_hash = FooterKeys._hash

    def counted(keys: FooterKeys, piece: pa.Array) -> None:
        hashed.append(len(piece))
        real_hash(keys, piece)

    monkeypatch.setattr(FooterKeys, "_hash", counted)
    base = 70_000
    table = tidemark.Table.create(str(tmp_path), spark=None, record_key="id", ordering_field="ts")
    table.bulk_insert(_rows(list(range(base)), ts=10))
    model = {r["id"]: r for r in _rows(list(range(base)), ts=10).to_pylist()}
    before, stored_keys = _file_keys(tmp_path)
    assert len(stored_keys) == base and len(BloomFilter.parse(_footer_filter(before)).rows) == 2
    hashed.clear()

    rng = random.Random(3)
    touched = rng.sample(range(base), 4_000)
    updates, stale = touched[:3_000], touched[3_000:]
    new = list(range(base, base + 2_000))
    batch = pa.concat_tables([_rows(updates, ts=20), _rows(new, ts=20), _rows(stale, ts=5)])
    result = table.upsert(batch)
    assert (result.num_inserts, result.num_updates) == (2_000, 3_000)
    for r in batch.to_pylist():
        if r["id"] not in model or model[r["id"]]["ts"] <= r["ts"]:
            model[r["id"]] = r
    assert sum(hashed) == 2_000  # only the new keys were hashed
    after, keys = _file_keys(tmp_path)
    assert sorted(keys) == sorted(model)
    known = set(stored_keys)
    added = [k for k in keys if k not in known]
    assert _footer_filter(after) == BloomFilter.build(stored_keys + added).serialize()
    assert BloomFilter.parse(_footer_filter(after)).might_contain(keys).all()

    # A delete: the filter keeps every key it had (a superset), none is missed.
    gone = rng.sample(sorted(model), 500)
    table.delete(_rows([int(k[1:]) for k in gone], ts=30))
    for k in gone:
        model.pop(k)
    deleted, keys = _file_keys(tmp_path)
    assert sorted(keys) == sorted(model)
    assert _footer_filter(deleted) == _footer_filter(after)
    assert BloomFilter.parse(_footer_filter(deleted)).might_contain(keys).all()

    # The next rewrite of that file builds anew: the filter is the one of its keys in file order.
    hashed.clear()
    again = table.upsert(_rows([int(k[1:]) for k in rng.sample(sorted(model), 100)], ts=40))
    assert (again.num_inserts, again.num_updates) == (0, 100)
    assert sum(hashed) == len(model)
    assert _check_footers(tmp_path) == 1
    every = _rows(sorted(int(k[1:]) for k in model), ts=50)
    final = table.upsert(every)
    assert (final.num_inserts, final.num_updates) == (0, every.num_rows)
    got = table.read().select(["id"]).column(0).to_pylist()
    assert sorted(got) == sorted(model)
