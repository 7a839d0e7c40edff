"""Base files leave the codec off the columns it barely shrinks (random ids: UUIDs, hashes),
chosen from a sample of the rows; every other column keeps the table's codec, and the files
read back the same, in tidemark and in hudi-rs."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.names import RECORD_KEY
from tidemark.format.schema import with_meta_columns
from tidemark.write.column_encoding import (
    MIN_SAMPLE_BYTES,
    dictionary_columns,
    parquet_options,
    uncompressed_columns,
)
from tidemark.write.spec import WriteSpec

N = 20_000


def _rows(n: int = N, seed: int = 5) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = [str(uuid.UUID(bytes=rng.bytes(16))) for _ in range(n)]
    return pa.table({
        "id": ids,
        "seq": pa.array([f"k{i:09d}" for i in range(n)]),  # formatted ids: they compress
        "noise": pa.array(rng.random(n)),  # random doubles: they do not
        "day": pa.array(np.arange(n) // 1000, pa.int64()),  # repeating: a dictionary
        "digest": pa.array([rng.bytes(20) for _ in range(n)], pa.binary()),
        "tags": pa.array([["a", "b"]] * n, pa.list_(pa.string())),  # nested: never judged
        RECORD_KEY: ids,
    })


def _schema(rows: pa.Table) -> pa.Schema:
    return with_meta_columns(rows.drop_columns([RECORD_KEY]).schema)


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_fast_codecs_are_left_off_random_ids_and_kept_on_the_rest(codec: str) -> None:
    rows = _rows()
    schema = _schema(rows)
    chosen = dictionary_columns(schema, rows)
    assert set(uncompressed_columns(schema, codec, chosen, rows)) == {"id", RECORD_KEY, "noise", "digest"}


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_entropy_codecs_keep_every_text_column(codec: str) -> None:
    """gzip and zstd shrink hex text by half: UUIDs keep them (random doubles still do not shrink)."""
    rows = _rows()
    schema = _schema(rows)
    plain = set(uncompressed_columns(schema, codec, dictionary_columns(schema, rows), rows))
    assert not plain & {"id", RECORD_KEY, "seq"}


def test_no_sample_no_codec_or_a_dictionary_column_means_the_codec_everywhere() -> None:
    rows = _rows()
    schema = _schema(rows)
    assert uncompressed_columns(schema, "snappy", (), None) == ()
    assert uncompressed_columns(schema, "none", (), rows) == ()
    assert uncompressed_columns(schema, "uncompressed", (), rows) == ()
    # A column written with a dictionary keeps the codec (its pages are indices), whatever its values.
    assert "id" not in uncompressed_columns(schema, "snappy", ("id",), rows)
    # Too few bytes sampled to judge: the codec stays.
    few = rows.slice(0, MIN_SAMPLE_BYTES // 64)
    assert "id" not in uncompressed_columns(schema, "snappy", (), few)


def test_a_base_file_has_each_column_as_chosen_and_reads_back_the_same(tmp_path: Path) -> None:
    rows = _rows()
    schema = _schema(rows)
    spec = WriteSpec(base_path=str(tmp_path), instant_time="20260101000000000", schema=schema,
                     ordering_fields=(), compression="snappy", max_file_size=1 << 30)
    options = parquet_options(spec, rows)
    user = rows.drop_columns([RECORD_KEY])
    meta = {c: pa.array(["x"] * N) for c in schema.names if c not in user.column_names}
    meta[RECORD_KEY] = rows.column(RECORD_KEY).combine_chunks()
    table = pa.Table.from_arrays([meta[n] if n in meta else user.column(n) for n in schema.names], schema=schema)
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **options)  # type: ignore[arg-type]
    group = pq.ParquetFile(path).metadata.row_group(0)
    codecs = {group.column(i).path_in_schema: group.column(i).compression for i in range(group.num_columns)}
    assert codecs["id"] == codecs[RECORD_KEY] == codecs["noise"] == codecs["digest"] == "UNCOMPRESSED"
    assert codecs["seq"] == codecs["day"] == codecs["_hoodie_commit_seqno"] == codecs["tags.list.element"] == "SNAPPY"
    assert pq.read_table(path).equals(table)


def test_a_table_of_uuid_keys_is_written_so_and_every_reader_reads_it(tmp_path: Path) -> None:
    """Through the Arrow engine (the choice made once per write) and after an upsert's rewrite."""
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="day",
                                  options={"hoodie.parquet.compression.codec": "snappy"})
    first = _rows().drop_columns([RECORD_KEY, "tags"])
    table.bulk_insert(first)
    changed = _rows(n=2_000, seed=6).drop_columns([RECORD_KEY, "tags"])
    changed = pa.concat_tables([first.slice(0, 1_000), changed.slice(1_000)])  # 1,000 updates, 1,000 new keys
    table.upsert(changed)
    files = sorted(Path(path).glob("*.parquet"))
    assert files
    for f in files:
        group = pq.ParquetFile(f).metadata.row_group(0)
        codecs = {group.column(i).path_in_schema: group.column(i).compression for i in range(group.num_columns)}
        assert codecs["id"] == codecs[RECORD_KEY] == "UNCOMPRESSED", f
        assert codecs["seq"] == codecs["_hoodie_commit_seqno"] == "SNAPPY", f
    want = sorted(set(first.column("id").to_pylist()) | set(changed.column("id").to_pylist()))
    assert sorted(table.read().column("id").to_pylist()) == want
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == want


def test_leaf_paths_name_the_parquet_columns_pyarrow_writes(tmp_path: Path) -> None:
    from tidemark.write.column_encoding import leaf_paths

    schema = pa.schema([
        ("a", pa.list_(pa.field("item", pa.string()))),
        ("b", pa.struct([("x", pa.int64()), ("y", pa.map_(pa.string(), pa.list_(pa.int32())))])),
        ("c", pa.dictionary(pa.int32(), pa.string())),
        ("d", pa.large_list(pa.struct([("p", pa.float64()), ("q", pa.large_string())]))),
        ("e", pa.list_(pa.int8(), 3)),
        ("f", pa.timestamp("us", tz="UTC")),
    ])
    pq.write_table(schema.empty_table(), tmp_path / "f.parquet")
    meta = pq.read_metadata(tmp_path / "f.parquet")
    assert [p for f in schema for p in leaf_paths(f)] == [meta.schema.column(i).path for i in range(meta.num_columns)]
