"""The bloom index's pruning: base files ruled out by their footers never hold a batch key.

The property checked: for any batch, every file that really holds one of the batch's keys is
kept (no false negatives), and files whose key range or bloom filter excludes all of the
batch's keys are dropped. End to end, upserts on a pruned table agree with a model and hudi-rs.
"""

from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.fsview import FileSystemView
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.write.key_pruning import files_that_may_hold

SMALL_FILES = {"hoodie.parquet.small.file.limit": "0"}  # every commit adds new file groups


def _table(path: Path) -> tidemark.Table:
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", options=SMALL_FILES)
    for batch in range(6):  # key ranges that do not overlap across files: range pruning bites
        ids = [f"k{batch:02d}{i:04d}" for i in range(200)]
        table.bulk_insert(pa.table({"id": ids, "part": [f"p{i % 2}" for i in range(200)],
                                    "ts": [1] * 200, "v": ["a"] * 200}))
    return table


def test_pruned_files_never_hold_a_batch_key(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    storage = LocalStorage(table.path)
    files = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    held = {f.path: set(pq.read_table(storage.full_path(f.path), columns=["_hoodie_record_key"])
                        .column(0).to_pylist()) for f in files}
    assert len(files) == 12
    rng = random.Random(7)
    everything = sorted(set().union(*held.values()))
    for trial in range(30):
        chosen = rng.sample(everything, rng.randint(1, 5)) + [f"absent{trial}"]
        by_partition = {p: pa.array(chosen) for p in ("part=p0", "part=p1")}
        kept, stats = files_that_may_hold(storage, files, by_partition)
        must = {f.path for f in files if held[f.path] & set(chosen)}
        assert must <= {f.path for f in kept}  # no file that holds a key is ever ruled out
        assert stats.candidates == 12 and stats.read == len(kept)
        assert len(kept) <= 2 * len({c[:3] for c in chosen if c.startswith("k")})  # ranges rule the rest out
    outside = {"part=p0": pa.array(["k0000001x"]), "part=p1": pa.array(["zzz"])}
    none, stats = files_that_may_hold(storage, files, outside)
    assert none == [] and stats.by_range + stats.by_bloom == 12


def test_upserts_on_a_pruned_table_agree_with_the_model_and_hudi_rs(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    model = {r["id"]: r for r in table.read().select(["id", "part", "ts", "v"]).to_pylist()}
    updates = [{"id": f"k03{i:04d}", "part": f"p{i % 2}", "ts": 2, "v": "u"} for i in range(0, 200, 9)]
    fresh = [{"id": f"n{i}", "part": "p1", "ts": 2, "v": "n"} for i in range(5)]
    result = table.upsert(pa.Table.from_pylist(updates + fresh))
    assert result.num_updates == len(updates) and result.num_inserts == len(fresh)
    model.update({r["id"]: r for r in updates + fresh})
    got = {r["id"]: r for r in table.read().select(["id", "part", "ts", "v"]).to_pylist()}
    assert got == model
    rs = {r["id"]: r for r in hudi_rs_read(table.path).select(["id", "part", "ts", "v"]).to_pylist()}
    assert rs == model


@pytest.mark.spark
def test_the_spark_engine_prunes_by_footer_and_loses_no_match(
    spark: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tidemark.Table.open(_table(tmp_path / "t").path, spark=spark)
    columns = ["id", "part", "ts", "v"]
    model = {r["id"]: r for r in _arrow(table.read()).select(columns).to_pylist()}
    updates = [{"id": f"k03{i:04d}", "part": f"p{i % 2}", "ts": 2, "v": "u"} for i in range(0, 200, 7)]
    fresh = [{"id": "z-new", "part": "p0", "ts": 2, "v": "n"}]  # above every file's key range
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark.bloom_index"):
        result = table.upsert(spark.createDataFrame(pa.Table.from_pylist(updates + fresh).to_pandas()))
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bloom index")]
    # An upsert needs no stored key: each key's one possible file comes from the footers.
    assert reports == ["bloom index: keys located by the footers of 12 base files, no stored key read"]
    assert result.num_updates == len(updates) and result.num_inserts == len(fresh)
    model.update({r["id"]: r for r in updates + fresh})
    assert {r["id"]: r for r in _arrow(table.read()).select(columns).to_pylist()} == model
    assert {r["id"]: r for r in hudi_rs_read(table.path).select(columns).to_pylist()} == model
    gone = [{"id": "k050004", "part": "p0", "ts": 3, "v": "x"}]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="tidemark.engines.spark.bloom_index"):
        deleted = table.delete(spark.createDataFrame(pa.Table.from_pylist(gone).to_pandas()))
    reports = [r.getMessage() for r in caplog.records if r.getMessage().startswith("bloom index")]
    # A delete reads the keys of the files that may hold them: in partition p0, batch 5's file only.
    assert reports and reports[0].startswith("bloom index: 1 of 6 base files read")
    assert deleted.num_deletes == 1
    model.pop("k050004")
    assert {r["id"]: r for r in hudi_rs_read(table.path).select(columns).to_pylist()} == model


def _arrow(rows: Any) -> pa.Table:
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


def test_the_task_probe_keeps_every_file_that_holds_a_key(tmp_path: Path) -> None:
    """KeyProbe (what a Spark task runs over chunks of the batch) never rules out a file that
    holds a probed key; integer keys are ranged by the files' column statistics."""
    from tidemark.write.key_pruning import MAY_HOLD, KeyProbe, read_key_footers

    table = tidemark.Table.create(str(tmp_path / "ints"), spark=None, record_key="id", ordering_field="ts",
                                  options=SMALL_FILES)
    for batch in range(5):  # ids batch*1000 .. batch*1000+99: text order would interleave them
        table.bulk_insert(pa.table({"id": [batch * 1000 + i for i in range(100)], "ts": [1] * 100}))
    storage = LocalStorage(table.path)
    files = FileSystemView(storage, Timeline.load(storage)).latest_base_files()
    held = {f.path: set(pq.read_table(storage.full_path(f.path), columns=["id"]).column(0).to_pylist())
            for f in files}
    footers = read_key_footers(storage, files, "id")
    assert all(f.int_low is not None for f in footers)
    rng = random.Random(3)
    everything = sorted(set().union(*held.values()))
    for _ in range(20):
        chosen = rng.sample(everything, rng.randint(1, 4)) + [rng.randint(10_000, 20_000)]
        probe = KeyProbe(footers)
        for chunk in (chosen[:2], chosen[2:]):  # verdicts accumulate over a task's chunks
            probe.add(None, None, pa.array(chunk, pa.int64()))
        kept = {f.path for f, v in zip(files, probe.verdicts, strict=True) if v == MAY_HOLD}
        must = {path for path, ids in held.items() if ids & set(chosen)}
        assert must <= kept
        assert len(kept) <= len(must) + 1  # the ranges rule the rest out (a bloom false positive at most)
