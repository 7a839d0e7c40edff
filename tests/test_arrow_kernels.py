"""The Arrow engine's vectorised kernels give exactly what the row-by-row rules give."""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tidemark.engines.arrow.keys import crc32_of_keys
from tidemark.engines.arrow.writer import ArrowWritePipeline
from tidemark.format.bloom import CHUNK_KEYS, BloomBuilder, BloomFilter
from tidemark.write.engine import FILE_ID_COLUMN
from tidemark.write.meta_columns import constant, sequence_numbers
from tidemark.write.plan import InsertBucket

KEYS = [str(i) for i in range(0, 400_000, 7)] + ["", "é", "k000000123", "名前", "a" * 41]


def test_crc32_of_keys_is_zlibs() -> None:
    want = np.array([zlib.crc32(k.encode()) for k in KEYS], dtype=np.uint32)
    assert (crc32_of_keys(pa.array(KEYS)) == want).all()
    assert (crc32_of_keys(pa.chunked_array([KEYS[:10], KEYS[10:]])) == want).all()


def test_inserts_are_routed_by_the_first_bucket_holding_the_key_hash() -> None:
    buckets = [
        InsertBucket("a", "a0", None, 0, 0.0, 0.25),
        InsertBucket("a", "a1", None, 0, 0.25, 0.7),
        InsertBucket("a", "a2", None, 0, 0.8, 1.0),  # [0.7, 0.8) held by none: the last bucket takes it
        InsertBucket("b", "b0", None, 0, 0.0, 1.0),
    ]
    keys = KEYS[:5000]
    parts = ["a" if i % 3 else "b" for i in range(len(keys))]
    inserts = pa.table({"_hoodie_record_key": keys, "_hoodie_partition_path": parts,
                        FILE_ID_COLUMN: pa.nulls(len(keys), pa.string())})
    routed = ArrowWritePipeline(None, pa.schema([])).route_inserts(inserts, buckets)  # type: ignore[arg-type]

    def rule(key: str, part: str) -> str:
        mine = [b for b in buckets if b.partition_path == part]
        position = zlib.crc32(key.encode()) / 2**32
        return next((b.file_id for b in mine if b.low <= position < b.high), mine[-1].file_id)

    assert routed.column(FILE_ID_COLUMN).to_pylist() == [rule(k, p) for k, p in zip(keys, parts, strict=True)]
    assert {"a0", "a1", "a2", "b0"} == set(routed.column(FILE_ID_COLUMN).to_pylist())


@pytest.mark.parametrize("start,n", [(0, 0), (0, 1), (7, 5), (95, 20), (99_990, 30), (123_456, 70_000), (0, 131_072),
                                     (9_995, 10), (10_000, 3), (8_765, 1_234), (999_999, 2), (5, 1)])
def test_sequence_numbers_are_prefix_and_number(start: int, n: int) -> None:
    got = sequence_numbers("20260101000000000_3", start, n)
    got.validate(full=True)
    assert got.to_pylist() == [f"20260101000000000_3_{i}" for i in range(start, start + n)]


@pytest.mark.parametrize("value,n", [("20260101000000000", 5), ("", 3), ("x", 0), ("名", 2)])
def test_constant_repeats_the_value(value: str, n: int) -> None:
    got = constant(value, n)
    got.validate(full=True)
    assert got.type == pa.string() and got.to_pylist() == [value] * n


def test_bloom_built_in_pieces_and_chunks_equals_one_build() -> None:
    """Pieces of every size, crossing the chunk size and the filter's row boundaries, give Hudi's bytes."""
    keys = pc.cast(pa.array(np.arange(3 * CHUNK_KEYS + 70_000)), pa.string())
    whole = BloomFilter.build(keys)
    builder = BloomBuilder(num_entries=60_000)
    for start, end in [(0, 10), (10, 50_000), (50_000, 61_000), (61_000, len(keys))]:
        builder.add(keys.slice(start, end - start))
    built = builder.build()
    assert built.serialize() == whole.serialize()
    assert built.might_contain(keys.slice(0, 1000)).all()


def test_an_upsert_streams_the_stored_file_in_slices_with_the_same_result(tmp_path: Any, monkeypatch: Any) -> None:
    """Slices of 7 rows: kept, updated, deleted and new rows come out as a whole-file rewrite
    gives them, and hudi-rs reads the same table."""
    import tidemark
    from tidemark.write import file_group

    monkeypatch.setattr(file_group, "STREAM_ROWS", 7)
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts")
    table.bulk_insert(pa.table({"id": list(range(50)), "v": [f"a{i}" for i in range(50)], "ts": [1] * 50}))
    table.upsert(pa.table({"id": [3, 20, 49, 50, 51], "v": ["b3", "b20", "b49", "b50", "b51"], "ts": [2] * 5}))
    table.delete(pa.table({"id": [0, 21]}))
    table.upsert(pa.table({"id": [4], "v": ["stale"], "ts": [0]}))  # older ordering value: kept as stored
    want = {i: f"a{i}" for i in range(50)} | {3: "b3", 20: "b20", 49: "b49", 50: "b50", 51: "b51"}
    del want[0], want[21]
    got = table.read()
    assert dict(zip(got.column("id").to_pylist(), got.column("v").to_pylist(), strict=True)) == want
    assert len(set(got.column("_hoodie_file_name").to_pylist())) == 1
    from conftest import hudi_rs_read

    rs = hudi_rs_read(str(tmp_path / "t"))
    assert dict(zip(rs.column("id").to_pylist(), rs.column("v").to_pylist(), strict=True)) == want


def test_each_file_group_gets_only_its_own_rows(tmp_path: Any) -> None:
    """An upsert touching many file groups in partitions whose text sort differs from their
    first appearance (p5 after p15): every file written holds only rows of its own partition,
    and no key is stored twice (the runs of the sorted batch, not group_by's order)."""
    from pathlib import Path

    import pyarrow.parquet as pq

    from tidemark import Table

    path = Path(tmp_path) / "t"
    table = Table.create(str(path), spark=None, record_key="id", partition_by="part")
    ids = list(range(60))
    for start in (0, 20, 40):  # a few commits, so partitions get several file groups' history
        chunk = ids[start:start + 20]
        table.upsert(pa.table({"id": chunk, "part": [f"p{i % 17}" for i in chunk], "v": ["a"] * len(chunk)}))
    # A batch of several chunks, updates and new keys mixed, as writers' batches come.
    pieces = [pa.table({"id": chunk, "part": [f"p{i % 17}" for i in chunk], "v": ["b"] * len(chunk)})
              for chunk in (ids[::-1][:25], list(range(60, 90)), ids[::-1][25:])]
    table.upsert(pa.concat_tables(pieces))
    ids = list(range(90))
    for f in path.rglob("*.parquet"):
        parts = set(pq.read_table(f, columns=["_hoodie_partition_path"]).column(0).to_pylist())
        assert parts == {f.parent.name}, (f, parts)
    got = table.read().select(["id", "v"]).to_pylist()
    assert sorted(r["id"] for r in got) == ids and {r["v"] for r in got} == {"b"}


def test_file_groups_in_order_then_keys_in_order_is_a_sort_of_the_three_columns() -> None:
    """Random batches (partitions whose text order differs from their numeric order, null file
    ids, keys held twice, several chunks, a dictionary-typed partition column): the groups of
    file_group_order, each put in key order by in_key_order, are exactly a stable sort of the
    rows by partition path, file id and record key (nulls last), and every run holds one
    (partition, file id) pair."""
    import random

    from tidemark.engines.arrow.file_groups import file_group_order, in_key_order
    from tidemark.format.names import PARTITION_PATH, RECORD_KEY

    rng = random.Random(1)
    for trial in range(300):
        n = rng.randint(1, 80)
        frame = pa.table({
            PARTITION_PATH: [f"part=p{rng.randint(0, 20)}" for _ in range(n)],
            FILE_ID_COLUMN: pa.array([rng.choice(["a", "b", "c", None]) for _ in range(n)], pa.string()),
            RECORD_KEY: [f"k{rng.randint(0, 30)}" for _ in range(n)],
        })
        if trial % 3 == 0:
            frame = frame.set_column(0, PARTITION_PATH, pc.dictionary_encode(frame.column(PARTITION_PATH)))
        if n > 1:
            frame = pa.concat_tables([frame.slice(0, n // 2), frame.slice(n // 2)])
        runs, positions = file_group_order(frame.select([PARTITION_PATH, FILE_ID_COLUMN]))
        keys = frame.column(RECORD_KEY).combine_chunks()
        order = np.concatenate([in_key_order(keys, positions[start:start + count]) for *_, start, count in runs])
        plain = frame.set_column(0, PARTITION_PATH, frame.column(PARTITION_PATH).cast(pa.string()))
        expected = pc.sort_indices(plain, sort_keys=[(PARTITION_PATH, "ascending"), (FILE_ID_COLUMN, "ascending"),
                                                     (RECORD_KEY, "ascending")]).to_numpy()
        assert order.tolist() == expected.tolist()
        for partition, file_id, start, count in runs:
            rows = plain.take(pa.array(positions[start:start + count]))
            assert set(zip(rows.column(PARTITION_PATH).to_pylist(), rows.column(FILE_ID_COLUMN).to_pylist(),
                           strict=True)) == {(partition, file_id)}
    assert file_group_order(frame.slice(0, 0).select([PARTITION_PATH, FILE_ID_COLUMN]))[0] == []


# The head of the scripts below, each run in a process of its own: ``writer(min_rows)`` opens a
# BaseFileWriter on the path given first, ``pieces(out, count)`` writes it ``count`` rows, 1,000 at a time.
_PIECES = """
    import gc, os, resource, signal, sys, threading
    import numpy as np, pyarrow as pa, pyarrow.compute as pc
    from tidemark.format.schema import with_meta_columns
    from tidemark.write.column_encoding import parquet_options
    from tidemark.write.footer import BaseFileWriter
    from tidemark.write.meta_columns import constant, with_meta_columns as stored_rows
    from tidemark.write.spec import WriteSpec

    schema = with_meta_columns(pa.schema([("id", pa.int64()), ("v", pa.string())]))
    spec = WriteSpec(base_path="/nowhere/t", instant_time="1", schema=schema, ordering_fields=(),
                     compression="none", max_file_size=1 << 30)

    def writer(min_rows):
        return BaseFileWriter(sys.argv[1], spec, lambda rows: parquet_options(spec, rows), min_rows=min_rows)

    def pieces(out, count):
        for start in range(0, count, 1_000):
            ids = np.arange(start, start + 1_000)
            text = pc.cast(pa.array(ids), pa.string())
            rows = pa.table({"id": ids, "v": text, "_hoodie_record_key": text,
                             "_hoodie_partition_path": constant("", len(ids))})
            out.write(stored_rows(rows, out.schema, "1", "f.parquet", "1_0", start))
"""


def _run_pieces(script: str, path: Any, argument: int) -> Any:
    """``_PIECES`` then ``script`` in a process of their own, given ``path`` and ``argument``."""
    import subprocess
    import sys
    import textwrap

    return subprocess.run([sys.executable, "-c", textwrap.dedent(_PIECES + script), str(path), str(argument)],
                          capture_output=True, text=True, timeout=120)


_FILE_TOO_LARGE = """
    limit = int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        with writer(2_000) as out:
            pieces(out, 40_000)
            out.close()
        print("no error")
    except OSError as error:
        print("raised:", error)
    print("encoders left:", [t.name for t in threading.enumerate() if t.name.startswith("tidemark-encode")])
"""


@pytest.mark.parametrize("limit", [20_000, 400_000])
def test_a_base_file_whose_disk_fails_mid_file_raises_and_leaves_no_encoder_running(tmp_path: Any, limit: int) -> None:
    """Row groups after the first are encoded on a thread while the caller prepares the next: a
    write failing under one of them (here the file-size limit of the process, as a full disk
    fails) must raise from the writer, not vanish with the thread, and no encoding may still
    run once the writer is left. (In a process of its own: the limit is the process's.)"""
    result = _run_pieces(_FILE_TOO_LARGE, tmp_path / "f.parquet", limit)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("raised:") and "too large" in lines[0].lower(), lines
    assert lines[1] == "encoders left: []"


_ABANDONED = """
    fds = len(os.listdir("/proc/self/fd"))
    try:
        with writer(int(sys.argv[2])) as out:
            pieces(out, 5_000)
            raise RuntimeError("the merge failed")
    except RuntimeError as error:
        print("raised:", error)
    print("open files left:", len(os.listdir("/proc/self/fd")) - fds)
    del out
    gc.collect()
"""


@pytest.mark.parametrize("min_rows", [2_000, 100_000])  # row groups handed to the encoder, or none written yet
def test_a_base_file_left_by_an_exception_is_closed_and_nothing_fails_after(tmp_path: Any, min_rows: int) -> None:
    result = _run_pieces(_ABANDONED, tmp_path / "f.parquet", min_rows)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["raised: the merge failed", "open files left: 0"]
    assert "Exception ignored" not in result.stderr, result.stderr


@pytest.mark.parametrize("distinct", [1, 2, 255, 256, 257, 65_536, 65_537, 200_000])
def test_the_partition_order_is_a_stable_sort_for_any_number_of_partitions(distinct: int) -> None:
    from tidemark.engines.arrow.keys import stable_order

    codes = np.random.default_rng(distinct).integers(0, distinct, size=300_000).astype(np.int32)
    codes[:3] = distinct - 1  # the highest code present, whatever the draw
    assert (stable_order(codes, distinct) == np.argsort(codes, kind="stable")).all()
