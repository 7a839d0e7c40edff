"""A Spark upsert finds each key's file from the base files' footers alone, where that is certain.

A key lives in at most one base file of its partition, and a file whose footer (key range,
bloom filter) rules a key out surely does not hold it. So a key that exactly one file may hold
is in that file or in none (the file group's rewrite then inserts it), a key that no file may
hold is new, and only a key that several files may hold needs the stored keys read. Checked:
the locator against the files' real keys; end to end, upserts whose keys one file, no file and
several files (a saturated filter) may hold equal a model in tidemark's read and hudi-rs's,
with exact insert and update counts; merge-on-read tables and deletes still read the keys.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.bloom import FOOTER_KEY, BloomFilter
from tidemark.fsview import FileSystemView
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.write.key_pruning import NO_FILE, SEVERAL_FILES, KeyFooter, KeyLocator, read_key_footers

# Every commit adds file groups; no metadata table, so that a test may rewrite a file's footer.
OPTIONS = {"hoodie.parquet.small.file.limit": "0", "hoodie.metadata.enable": "false"}
COLUMNS = ["id", "part", "ts", "v"]


def _table(path: Path, *, table_type: str = "COPY_ON_WRITE") -> tidemark.Table:
    """Two partitions, each with two files whose key ranges interleave (even and odd ids):
    the ranges cannot tell the files apart, only the bloom filters can."""
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", options=OPTIONS, table_type=table_type)
    for parity in (0, 1):
        ids = list(range(parity, 4_000, 2))
        table.bulk_insert(pa.table({"id": [f"k{i:06d}" for i in ids], "part": [f"p{i % 2}" for i in range(len(ids))],
                                    "ts": [1] * len(ids), "v": ["a"] * len(ids)}))
    return table


def _files_and_keys(path: str) -> tuple[LocalStorage, list[Any], dict[str, set[str]]]:
    storage = LocalStorage(path)
    files = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    keys = {f.path: set(pq.read_table(storage.full_path(f.path), columns=["_hoodie_record_key"]).column(0).to_pylist())
            for f in files}
    return storage, files, keys


def test_the_locator_names_the_file_of_every_stored_key_and_none_for_new_keys(tmp_path: Path) -> None:
    storage, files, held = _files_and_keys(_table(tmp_path / "t").path)
    assert len(files) == 4
    locator = KeyLocator(read_key_footers(storage, files))
    home = {(f.partition_path, k): i for i, f in enumerate(files) for k in held[f.path]}
    rng = random.Random(11)
    stored = rng.sample(sorted(home), 1_500)
    fresh = [(f"part=p{rng.randint(0, 1)}", f"k{rng.randint(0, 3_999):06d}x") for _ in range(1_500)]
    batch = stored + fresh + [("part=p0", "zzz"), ("part=p9", "k000001")]  # outside every range; no files
    rng.shuffle(batch)
    found = locator.locate(pa.array([k for _, k in batch]), pa.array([p for p, _ in batch]))
    for (part, key), where in zip(batch, found, strict=True):
        assert where == home.get((part, key), NO_FILE), (part, key)


def _saturated(filter_text: bytes) -> bytes:
    """The same filter with every bit set: it may hold any key (a worst-case false positive)."""
    bloom = BloomFilter.parse(filter_text)
    full = tuple(np.full_like(bits, 0xFF) for bits in bloom.rows)
    return BloomFilter(bloom.vector_size, bloom.hashes, bloom.keys_per_row, bloom.current_row_count,
                       full).serialize().encode()


def test_the_locator_sends_keys_several_files_may_hold_to_the_key_read() -> None:
    keys = pa.array([f"k{i:04d}" for i in range(0, 200, 2)])
    real = BloomFilter.build(keys).serialize().encode()
    footers = [
        KeyFooter("p", "k0000", "k0198", bloom=real, bloom_type="DYNAMIC_V0"),
        KeyFooter("p", "k0100", "k0300", bloom=_saturated(real), bloom_type="DYNAMIC_V0"),
        KeyFooter("q", "k0000", "k9999"),  # no filter: may hold every key in its range
    ]
    probe = ["k0010", "k0150", "k0151", "k0250", "k0011", "k0010", "z0400", None]
    parts = ["p", "p", "p", "p", "p", "q", "q", "p"]
    found = KeyLocator(footers).locate(pa.array(probe, pa.string()), pa.array(parts))
    assert found.tolist() == [0, SEVERAL_FILES, 1, 1, NO_FILE, 2, NO_FILE, NO_FILE]
    ints = KeyLocator([KeyFooter("", int_low=10, int_high=20, bloom=real, bloom_type="DYNAMIC_V0")])
    # Footer tagging weighs how many keys each filter lets through, from its bits.
    assert KeyFooter("p", bloom=real, bloom_type="DYNAMIC_V0").false_positive_rate < 1e-9
    assert KeyFooter("p", "a", "z").false_positive_rate == 1.0  # no filter
    assert KeyFooter("p", bloom=b"bm90IGEgZmlsdGVy", bloom_type="DYNAMIC_V0").false_positive_rate == 1.0
    assert KeyFooter("p", bloom=_saturated(real), bloom_type="DYNAMIC_V0").false_positive_rate == 1.0
    assert ints.locate(pa.array(["k0010", "k0010"]), None, pa.array([15, 25])).tolist() == [0, NO_FILE]


def test_the_false_positive_rate_of_a_filter_filled_past_its_sizing_is_what_its_bits_say() -> None:
    # Two rows sized for 1,000 keys each, filled with 2,500 each (Hudi's files of 250,000 keys
    # are filled so: two rows sized for 60,000 keys, then round-robin).
    grown = BloomFilter.build([f"k{i:07d}" for i in range(0, 10_000, 2)], num_entries=1_000, max_entries=2_000)
    assert len(grown.rows) == 2
    others = pa.array([f"k{i:07d}" for i in range(1, 800_001, 2)])
    measured = grown.might_contain(others).mean()
    assert 0.001 < grown.false_positive_rate < 0.05  # far past the sizing's one in a billion
    assert measured == pytest.approx(grown.false_positive_rate, rel=0.2)


def _model(table: tidemark.Table) -> dict[str, dict[str, Any]]:
    rows = table.read()
    rows = rows if isinstance(rows, pa.Table) else rows.toArrow()
    return {r["id"]: r for r in rows.select(COLUMNS).to_pylist()}


def _hudi_rs(path: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in hudi_rs_read(path).select(COLUMNS).to_pylist()}


def _frame(spark: Any, rows: list[dict[str, Any]]) -> Any:
    return spark.createDataFrame(rows, "id string, part string, ts long, v string")


@pytest.mark.spark
def test_a_spark_upsert_tagged_by_footers_equals_the_model(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tidemark.Table.open(_table(tmp_path / "t").path, spark=spark)
    model = _model(table)
    rng = random.Random(5)
    updates = [{**model[k], "ts": 2, "v": "u"} for k in rng.sample(sorted(model), 600)]
    stale = [{**model[k], "ts": 0, "v": "stale"} for k in rng.sample(sorted(model), 50) if k not in
             {u["id"] for u in updates}]
    fresh = [{"id": f"k{i:06d}x", "part": f"p{i % 2}", "ts": 2, "v": "n"} for i in rng.sample(range(4_000), 400)]
    again = [{**f, "ts": 3, "v": "n2"} for f in fresh[:40]]  # a new key twice in the batch: the later wins
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark"):
        result = table.upsert(_frame(spark, updates + stale + fresh + again))
    assert any("located by the footers of 4 base files" in r.getMessage() for r in caplog.records)
    assert result.num_updates == len(updates) and result.num_inserts == len(fresh)
    model.update({r["id"]: r for r in updates + fresh + again})
    assert _model(table) == model
    assert _hudi_rs(table.path) == model
    # Every new key went to a new file group or a tagged one: no key is in two files.
    _, files, held = _files_and_keys(table.path)
    assert sum(len(k) for k in held.values()) == len(model)


@pytest.mark.spark
@pytest.mark.parametrize("settled", ["on the driver", "by a Spark join"])
def test_keys_several_files_may_hold_are_looked_up_by_reading_keys(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, settled: str
) -> None:
    """One file's filter also says yes to its neighbour's keys: those in its range are then
    held by 'several files', and must be updated where they are, not inserted into the
    file that lets them through; new keys in its range only it may hold, and are inserted into it. A few
    such keys are settled on the driver, many by a Spark join."""
    if settled != "on the driver":
        from tidemark.engines.spark import bloom_index

        monkeypatch.setattr(bloom_index, "SETTLE_ON_DRIVER", 10)
    path = _table(tmp_path / "t").path
    storage, files, held = _files_and_keys(path)
    target = next(f for f in files if f.partition_path == "part=p0")
    full = storage.full_path(target.path)
    rows = pq.read_table(full)
    # The footer's key-value pairs (pyarrow writes its own ARROW:schema again).
    metadata = {k: v for k, v in (pq.read_metadata(full).metadata or {}).items() if k != b"ARROW:schema"}
    neighbour = next(f for f in files if f.partition_path == "part=p0" and f.path != target.path)
    # Its own keys and its neighbour's: false positives for those, few for any other key.
    stored = BloomFilter.parse(metadata[FOOTER_KEY.encode()])
    both = BloomFilter.build(sorted(held[target.path] | held[neighbour.path]), num_entries=stored.keys_per_row)
    assert both.false_positive_rate < 1e-6
    metadata[FOOTER_KEY.encode()] = both.serialize().encode()
    pq.write_table(rows.replace_schema_metadata(metadata), full)

    table = tidemark.Table.open(path, spark=spark)
    model = _model(table)
    rng = random.Random(9)
    updates = [{**model[k], "ts": 2, "v": "u"} for k in rng.sample(sorted(held[neighbour.path]), 300)]
    updates += [{**model[k], "ts": 2, "v": "u"} for k in rng.sample(sorted(held[target.path]), 100)]
    fresh = [{"id": f"k{i:06d}x", "part": "p0", "ts": 2, "v": "n"} for i in rng.sample(range(4_000), 200)]
    elsewhere = [r for r in model.values() if r["part"] == "p1"][:100]  # one file may hold each of these
    updates += [{**r, "ts": 2, "v": "u"} for r in elsewhere]
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark"):
        result = table.upsert(_frame(spark, updates + fresh))
    messages = [r.getMessage() for r in caplog.records]
    low, high = min(held[target.path]), max(held[target.path])
    several = sum(low <= u["id"] <= high for u in updates[:300])  # the neighbour's keys in the target's range
    assert several > 250
    assert any(f"{several} keys that several files' footers may hold" in m for m in messages), messages
    # Only their partition's two files are probed, and read: not partition p1's.
    expected = ("settled on the driver from the keys of 2 base files" if settled == "on the driver"
                else "bloom index: 2 of 2 base files read")
    assert any(expected in m for m in messages), messages
    assert result.num_updates == len(updates) and result.num_inserts == len(fresh)
    model.update({r["id"]: r for r in updates + fresh})
    assert _model(table) == model
    assert _hudi_rs(table.path) == model
    _, _, after = _files_and_keys(table.path)
    assert sum(len(k) for k in after.values()) == len(model)  # no key in two files


@pytest.mark.spark
def test_a_filter_that_lets_many_keys_through_sends_the_upsert_to_the_key_read(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file whose filter says yes to every key (filled far past its sizing) would send most
    of its partition's keys to the several-files path: the keys are joined instead."""
    path = _table(tmp_path / "t").path
    storage, files, _ = _files_and_keys(path)
    target = next(f for f in files if f.partition_path == "part=p1")
    full = storage.full_path(target.path)
    metadata = {k: v for k, v in (pq.read_metadata(full).metadata or {}).items() if k != b"ARROW:schema"}
    metadata[FOOTER_KEY.encode()] = _saturated(metadata[FOOTER_KEY.encode()])
    pq.write_table(pq.read_table(full).replace_schema_metadata(metadata), full)
    table = tidemark.Table.open(path, spark=spark)
    model = _model(table)
    rows = [{**model[k], "ts": 2, "v": "u"} for k in sorted(model)[::11]]
    rows += [{"id": f"k{i:06d}x", "part": f"p{i % 2}", "ts": 2, "v": "n"} for i in range(0, 4_000, 13)]
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark"):
        table.upsert(_frame(spark, rows))
    assert not any("located by the footers" in r.getMessage() for r in caplog.records)
    model.update({r["id"]: r for r in rows})
    assert _model(table) == model
    assert _hudi_rs(table.path) == model


@pytest.mark.spark
@pytest.mark.parametrize("work", ["merge-on-read upsert", "delete"])
def test_merge_on_read_upserts_and_deletes_read_the_keys(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture, work: str
) -> None:
    table_type = "MERGE_ON_READ" if work.startswith("merge") else "COPY_ON_WRITE"
    table = tidemark.Table.open(_table(tmp_path / "t", table_type=table_type).path, spark=spark)
    model = _model(table)
    chosen = sorted(model)[::37]
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark"):
        if work == "delete":
            result = table.delete(_frame(spark, [model[k] for k in chosen]))
            assert result.num_deletes == len(chosen)
            for k in chosen:
                model.pop(k)
        else:
            rows = [{**model[k], "ts": 2, "v": "u"} for k in chosen] + [{"id": "new", "part": "p1", "ts": 2, "v": "n"}]
            table.upsert(_frame(spark, rows))
            model.update({r["id"]: r for r in rows})
    assert not any("located by the footers" in r.getMessage() for r in caplog.records)
    assert _model(table) == model
    assert _hudi_rs(table.path) == model


@pytest.mark.spark
def test_unusual_keys_and_partition_values_are_located_by_footers(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Keys with ',' ':' and non-ASCII text (no usable text range: the filters alone decide),
    partition values with spaces and accents: updated in place, new ones inserted once."""
    ids = [f"clé:{i},é€{i % 7}" for i in range(600)]
    parts = ["São Paulo" if (i // 2) % 2 else "a b" for i in range(600)]
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", options=OPTIONS)
    for half in (0, 1):  # two files per partition
        chosen = range(half, 600, 2)
        table.bulk_insert(pa.table({"id": [ids[i] for i in chosen], "part": [parts[i] for i in chosen],
                                    "ts": [1] * 300, "v": ["a"] * 300}))
    table = tidemark.Table.open(table.path, spark=spark)
    model = _model(table)
    _, files, _ = _files_and_keys(table.path)
    assert len(files) == 4
    rows = [{**model[k], "ts": 2, "v": "u"} for k in ids[::5]]
    rows += [{"id": f"neu:{i},ü", "part": "São Paulo", "ts": 2, "v": "n"} for i in range(30)]
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark"):
        result = table.upsert(_frame(spark, rows))
    assert any("located by the footers of 4 base files" in r.getMessage() for r in caplog.records)
    assert result.num_updates == 120 and result.num_inserts == 30
    model.update({r["id"]: r for r in rows})
    assert _model(table) == model
    assert _hudi_rs(table.path) == model
