"""Hudi's record-key bloom filter: read out of real Hudi files, rebuilt byte for byte, probed.

Three independent checks: the filters in the base files Apache Hudi wrote (the reference
tables), Hadoop's own BloomFilter class in Spark's JVM (the class Hudi builds on), and the
filter's behaviour (no false negatives, a low false-positive rate while under its bound).
"""

from __future__ import annotations

import glob
import os
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidemark.format import murmur
from tidemark.format.bloom import (
    FOOTER_KEY,
    MAX_KEY_KEY,
    MIN_KEY_KEY,
    TYPE_CODE_KEY,
    BloomFilter,
    BloomFilterError,
    PackedFilter,
    footer_metadata,
    hash_chains,
    probe_chunks,
)

# shared/ sits beside the checkout (CI's fresh clone); /work/shared on a developer's machine.
REAL_TABLES = next(
    (
        root / "shared" / "reference" / "hudi-format" / "real-tables"
        for root in (Path(__file__).resolve().parents[2], Path("/work"))
        if (root / "shared" / "reference" / "hudi-format" / "real-tables").exists()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "reference" / "hudi-format" / "real-tables",
)


@pytest.fixture(params=["numpy", "compiled"])
def hashing(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test with this fixture runs with both implementations of the Murmur hashing: numpy's,
    and the compiled one (``_murmur.c``, built by the install: it must be there)."""
    if request.param == "numpy":
        monkeypatch.setattr(murmur, "kernels", lambda: None)
    elif murmur.kernels() is None:
        pytest.fail("tidemark.format._murmur was not built (pip install -e . builds it; a C compiler is needed)")
    return str(request.param)


@pytest.fixture(scope="module")
def real_base_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    zips = sorted(glob.glob(str(REAL_TABLES / "*.zip")))
    if not zips:
        pytest.fail(f"the reference tables are missing from {REAL_TABLES}")
    root = tmp_path_factory.mktemp("real")
    for z in zips:
        with zipfile.ZipFile(z) as archive:
            archive.extractall(root)
    files = [
        f for f in glob.glob(str(root / "v*" / "**" / "*.parquet"), recursive=True) if "/.hoodie/" not in f
    ]
    assert len(files) >= 10
    return files


def test_hudis_own_filters_hold_every_key_of_their_file_and_rebuild_byte_for_byte(
    real_base_files: list[str], hashing: str
) -> None:
    for path in real_base_files:
        footer = pq.read_metadata(path).metadata
        assert footer[TYPE_CODE_KEY.encode()] == b"DYNAMIC_V0", path
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0).combine_chunks()
        hudis = BloomFilter.parse(footer[FOOTER_KEY.encode()])
        assert hudis.might_contain(keys).all(), os.path.basename(path)
        # The same keys in file order give exactly Hudi's serialized filter.
        assert BloomFilter.build(keys).serialize().encode() == footer[FOOTER_KEY.encode()], os.path.basename(path)
        mine = footer_metadata(keys)
        assert mine[MIN_KEY_KEY].encode() == footer[MIN_KEY_KEY.encode()]
        assert mine[MAX_KEY_KEY].encode() == footer[MAX_KEY_KEY.encode()]


def _hadoop_row_bytes(spark: Any, keys: list[str], vector_size: int, hashes: int) -> bytes:
    """One row as Hadoop's org.apache.hadoop.util.bloom.BloomFilter writes it (Hudi's building block)."""
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.util.bloom.BloomFilter(vector_size, hashes, 1)  # 1: Murmur
    for key in keys:
        hadoop.add(jvm.org.apache.hadoop.util.bloom.Key(bytearray(key.encode("utf-8"))))
    sink = jvm.java.io.ByteArrayOutputStream()
    hadoop.write(jvm.java.io.DataOutputStream(sink))
    return bytes(sink.toByteArray())


@pytest.mark.spark
def test_rows_equal_hadoops_bloom_filter_for_unicode_and_odd_lengths(spark: Any, hashing: str) -> None:
    import base64

    # Every tail length (0-3 bytes past the last 4-byte block), non-ASCII bytes (signed in Java)
    # and keys of many lengths in one batch. (Hadoop refuses an empty key, as Hudi refuses empty record keys.)
    keys = ["a", "ab", "abc", "abcd", "é", "日本", "ключ-7", "k000000123", "🚀x", "a,b:c", "\t\n"]
    keys += [f"id-{i}-{'ü' * (i % 5)}" for i in range(300)]
    mine = BloomFilter.build(keys)
    raw = base64.b64decode(mine.serialize())
    row = raw[25:]  # after the dynamic filter's own header: one row, as Hadoop writes a filter
    assert row == _hadoop_row_bytes(spark, keys, mine.vector_size, mine.hashes)


def test_no_false_negatives_few_false_positives_and_round_trip() -> None:
    keys = pa.array([f"k{i:09d}" for i in range(50_000)])
    bloom = BloomFilter.build(keys)
    assert len(bloom.rows) == 1
    assert bloom.might_contain(keys).all()
    others = pa.array([f"x{i:09d}" for i in range(50_000)])
    assert bloom.might_contain(others).sum() <= 5  # fpp 1e-9 under the bound
    again = BloomFilter.parse(bloom.serialize())
    assert again.serialize() == bloom.serialize()
    assert again.might_contain(keys).all()


def test_past_its_bound_keys_spread_over_rows_as_hudi_places_them(hashing: str) -> None:
    keys = pa.array([f"k{i:07d}" for i in range(130_000)])  # past 2 rows x 60,000: round-robin
    bloom = BloomFilter.build(keys)
    assert len(bloom.rows) == 2
    assert bloom.current_row_count == 130_000 - 60_000
    assert bloom.might_contain(keys).all()


@pytest.mark.parametrize(
    "text",
    ["not base64!", "AAAA", BloomFilter.build(["a"]).serialize()[:-8]],
)
def test_a_corrupt_filter_is_a_typed_error(text: str) -> None:
    with pytest.raises(BloomFilterError):
        BloomFilter.parse(text)


def test_an_unknown_filter_type_is_a_typed_error() -> None:
    with pytest.raises(BloomFilterError, match="SIMPLE"):
        BloomFilter.parse(BloomFilter.build(["a"]).serialize(), "SIMPLE")


def _assert_hudi_footers(path: str) -> int:
    """Every live parquet base file under ``path`` carries Hudi's footer, true to its contents."""
    import json

    files = [f for f in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True) if "/.hoodie/" not in f]
    assert files
    for f in files:
        footer = {k.decode(): v.decode() for k, v in (pq.read_metadata(f).metadata or {}).items()}
        keys = pq.read_table(f, columns=["_hoodie_record_key"]).column(0).combine_chunks()
        if len(keys) == 0:
            continue
        assert footer[TYPE_CODE_KEY] == "DYNAMIC_V0"
        assert BloomFilter.parse(footer[FOOTER_KEY]).might_contain(keys).all(), f
        assert footer[MIN_KEY_KEY] == min(keys.to_pylist()) and footer[MAX_KEY_KEY] == max(keys.to_pylist())
        avro = json.loads(footer["parquet.avro.schema"])
        assert [field["name"] for field in avro["fields"]] == pq.read_schema(f).names
        assert all(field["type"][0] == "null" for field in avro["fields"])
    return len(files)


def test_every_base_file_the_arrow_engine_writes_has_hudis_footer(tmp_path: Path) -> None:
    import tidemark

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key=["id", "part"],
                                  partition_by="part", ordering_field="ts")
    rows = pa.table({"id": list(range(200)), "part": [f"p{i % 3}" for i in range(200)],
                     "ts": [1] * 200, "v": [f"é{i}" for i in range(200)]})
    table.bulk_insert(rows)
    table.upsert(rows.slice(0, 50).set_column(2, "ts", pa.array([2] * 50)))
    table.delete(rows.slice(60, 5).select(["id", "part", "ts"]))
    table.cluster()
    assert _assert_hudi_footers(table.path) >= 3


@pytest.mark.spark
def test_every_base_file_spark_writes_has_hudis_footer_including_compaction(spark: Any, tmp_path: Path) -> None:
    import tidemark

    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="part",
                                  ordering_field="ts", table_type="MERGE_ON_READ")
    df = spark.createDataFrame([(i, f"p{i % 2}", 1, f"v{i}") for i in range(100)],
                               "id long, part string, ts long, v string")
    table.bulk_insert(df)
    table.upsert(spark.createDataFrame([(i, f"p{i % 2}", 2, "new") for i in range(0, 100, 7)], df.schema))
    assert table.compact() is not None
    assert _assert_hudi_footers(table.path) >= 2
    from conftest import hudi_rs_read

    assert hudi_rs_read(table.path).num_rows == 100


def test_the_filter_can_be_left_out_as_in_hudi(tmp_path: Path) -> None:
    import tidemark

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id",
                                  options={"hoodie.parquet.bloom.filter.enabled": "false"})
    table.bulk_insert(pa.table({"id": list(range(100)), "v": ["a"] * 100}))
    table.upsert(pa.table({"id": [5, 500], "v": ["b", "c"]}))
    for f in glob.glob(os.path.join(table.path, "*.parquet")):
        footer = pq.read_metadata(f).metadata or {}
        assert FOOTER_KEY.encode() not in footer and TYPE_CODE_KEY.encode() not in footer
        assert MIN_KEY_KEY.encode() in footer and b"parquet.avro.schema" in footer
    assert sorted(table.read().column("id").to_pylist()) == sorted([*range(100), 500])


@pytest.mark.parametrize(("count", "pieces"), [(500, 3), (59_999, 4), (60_001, 2), (250_000, 7)])
def test_a_filter_built_in_pieces_equals_the_one_built_at_once(count: int, pieces: int, hashing: str) -> None:
    """Files written in row groups hash their keys piece by piece; the bytes must not change
    across the sizing boundary (60,000 keys) or the round-robin spill past 100,000 keys."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from tidemark.format.bloom import BloomBuilder, footer_entries

    keys = pc.cast(pa.array(np.random.default_rng(count).permutation(count * 3)[:count]), pa.string())
    builder = BloomBuilder()
    for part in np.array_split(np.arange(count), pieces):
        builder.add(keys.take(pa.array(part)))
    at_once = BloomFilter.build(keys, num_entries=footer_entries(count))
    assert builder.build().serialize() == at_once.serialize()
    assert at_once.might_contain(keys).all()


def _hadoop_murmur(data: bytes, seed: int) -> int:
    """Hadoop's ``MurmurHash.hash`` in plain Python, written from its Java source's behaviour:
    little-endian 4-byte blocks, then the tail with its first byte highest (Java's signed bytes)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = (seed ^ len(data)) & mask
    blocks = len(data) // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[4 * blocks :]
    if tail:
        for j, byte in enumerate(tail):
            signed = byte - 256 if byte > 127 else byte
            h ^= (signed << (8 * (len(tail) - 1 - j))) & mask
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h


def _reference_contains(bloom: BloomFilter, key: str) -> bool:
    """Hadoop's membership test, key by key: every one of the chained hashes' bits set in some row."""
    data, seed, where = key.encode(), 0, []
    for _ in range(bloom.hashes):
        seed = _hadoop_murmur(data, seed)
        signed = seed - 2**32 if seed >= 2**31 else seed
        remainder = abs(signed) % bloom.vector_size if signed != -(2**31) else 2**31 % bloom.vector_size
        where.append(remainder)
    return any(all((bits[p // 8] >> (p % 8)) & 1 for p in where) for bits in bloom.rows)


@pytest.mark.parametrize(("stored", "entries"), [(3_000, 60_000), (5_000, 1_000)])
def test_probing_agrees_with_hadoops_membership_test_key_by_key(stored: int, entries: int, hashing: str) -> None:
    """The chunked probe (a key dropped at its first clear bit) answers as Hadoop's test does,
    for keys of every length and for a saturated filter where most keys look present."""
    import numpy as np

    rng = np.random.default_rng(stored)
    alphabet = list("abcdefgh0123456789-é€")
    def words(n: int) -> list[str]:
        return ["".join(rng.choice(alphabet, size=int(rng.integers(0, 23)))) for _ in range(n)]

    held = words(stored)
    bloom = BloomFilter.build(held, num_entries=entries, max_entries=entries)
    probe = held[:200] + words(600)
    answers = bloom.might_contain(probe)
    expected = [_reference_contains(bloom, key) for key in probe]
    assert answers.tolist() == expected
    assert answers[:200].all()
    if entries < stored:  # saturated: a good share of strangers look present, exercising every path
        assert 0 < sum(expected[200:]) < 600
    for start in range(200, 800, 50):
        part = probe[start : start + 50]
        assert bloom.holds_any(part) == any(expected[start : start + 50])
    assert bloom.holds_any(probe[:1]) and not bloom.holds_any([])
    # Keys hashed once for many filters (a chain longer than the filter needs), bits kept packed.
    chains = hash_chains(pa.array(probe, pa.string()), bloom.hashes + 7)
    assert PackedFilter.of(bloom).holds_hashed(chains).tolist() == expected


@pytest.mark.parametrize("count", [0, 1, 63, 64, 65, 400, 20_000, 100_000])
def test_holds_any_passes_cover_every_key_once_growing_from_a_few(count: int) -> None:
    chunks = probe_chunks(count)
    assert [start for start, _ in chunks] == [sum(n for _, n in chunks[:i]) for i in range(len(chunks))]
    assert sum(n for _, n in chunks) == count
    if count:
        assert chunks[0][1] == min(count, 64)
        assert all(n <= 16_384 for _, n in chunks)


@pytest.mark.parametrize("held_at", [0, 63, 64, 5_000, 39_999])
def test_holds_any_finds_a_held_key_wherever_it_stands_among_strangers(held_at: int, hashing: str) -> None:
    """The growing passes stop at the first one with a key the filter may hold; a held key in
    any pass (the first, across a pass boundary, the last) is found, by both filter forms."""
    held = [f"held-{i:05d}" for i in range(1_000)]
    bloom = BloomFilter.build(held, num_entries=1_000)
    strangers = [f"stranger-{i:06d}" for i in range(40_000)]
    assert not bloom.might_contain(strangers).any()  # none a false positive: the test means something
    probe = strangers[:held_at] + [held[500]] + strangers[held_at + 1:]
    packed = PackedFilter.of(bloom)
    assert bloom.holds_any(probe) and packed.holds_any(pa.array(probe, pa.string()))
    assert not bloom.holds_any(strangers) and not packed.holds_any(pa.array(strangers, pa.string()))


def test_packed_filters_of_several_rows_answer_as_hadoop_does(hashing: str) -> None:
    held = [f"key-{i}" for i in range(5_000)]
    bloom = BloomFilter.build(held, num_entries=1_000, max_entries=5_000)
    assert len(bloom.rows) == 5
    probe = held[::7] + [f"other-{i}" for i in range(2_000)]
    chains = hash_chains(pa.array(probe), bloom.hashes)
    answers = PackedFilter.of(bloom).holds_hashed(chains)
    assert answers.tolist() == [_reference_contains(bloom, key) for key in probe]
    assert answers[: len(held[::7])].all()
    with pytest.raises(ValueError):
        PackedFilter.of(bloom).holds_hashed(chains[:, :3])


@pytest.mark.parametrize("count", [5_000, 70_000, 180_000])
def test_a_footer_hashed_on_two_threads_equals_one_hashed_on_one(count: int, hashing: str) -> None:
    """A write with a core to spare hashes each piece's keys in halves side by side; the key's
    place in the filter (its row past 60,000 and 100,000 keys) must not depend on which half
    finished first."""
    import numpy as np
    import pyarrow.compute as pc

    from tidemark.format.bloom import footer_entries
    from tidemark.format.schema import with_meta_columns
    from tidemark.write.footer import FooterKeys
    from tidemark.write.spec import WriteSpec

    keys = pc.cast(pa.array(np.random.default_rng(count).permutation(count * 2)[:count]), pa.string())
    schema = with_meta_columns(pa.schema([("id", pa.string())]))
    footers = []
    for threads in (1, 2):
        spec = WriteSpec(base_path="/nowhere/t", instant_time="1", schema=schema, ordering_fields=(),
                         compression="snappy", max_file_size=1 << 30, hash_threads=threads)
        collected = FooterKeys(spec)
        for part in np.array_split(np.arange(count), 3):
            collected.add(pa.table({"_hoodie_record_key": keys.take(pa.array(part))}))
        footers.append(collected.footer(schema))
    assert footers[0][FOOTER_KEY] == footers[1][FOOTER_KEY]
    assert footers[0][FOOTER_KEY] == BloomFilter.build(keys, num_entries=footer_entries(count)).serialize()


@pytest.mark.parametrize(("first", "count", "per_row", "max_entries"), [
    (0, 1, 60_000, 100_000), (0, 250_000, 60_000, 100_000), (59_999, 2, 60_000, 100_000),
    (119_999, 10, 60_000, 100_000), (120_000, 5, 60_000, 100_000), (7, 40, 3, 10), (0, 0, 5, 20),
])
def test_each_key_lands_in_the_row_of_its_place_in_insertion_order(
    first: int, count: int, per_row: int, max_entries: int
) -> None:
    """Rows fill in turn up to the bound (rows x keys per row); past it keys go round-robin,
    the first one to row 0 (Hudi's dynamic filter). Checked key by key against that rule."""
    from tidemark.format.bloom import _fill_rows, _rows_of

    rows = _fill_rows(per_row, max_entries)
    bound = rows * per_row

    def row(position: int) -> int:
        if position < bound:
            return position // per_row
        spill = position - bound
        return 0 if spill == 0 else (spill - 1) % rows

    got = _rows_of(first, count, per_row, max_entries)
    assert got.dtype.name == "int64"
    assert got.tolist() == [row(p) for p in range(first, first + count)]
