"""The floor of ``benchmarks/bench_floor.py`` writes the very files tidemark wrote: the same rows,
the same column encodings and Hudi's footer (key range, a bloom filter holding every key); an
upsert's floor pairs each new base file with the one it replaces. A floor that wrote less than
tidemark's files would not be a floor."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

import tidemark
from tidemark.format.bloom import FOOTER_KEY, MAX_KEY_KEY, MIN_KEY_KEY, TYPE_CODE_KEY, BloomFilter
from tidemark.format.names import RECORD_KEY

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_floor import DICTIONARY_META, HudiFiles, base_files, file_group  # noqa: E402
from bench_shapes import _create, make_data, parse_shape  # noqa: E402


def _encodings(path: str) -> list[tuple[str, tuple[str, ...]]]:
    meta = pq.read_metadata(path)
    return [(meta.schema.column(i).path, tuple(sorted(meta.row_group(0).column(i).encodings)))
            for i in range(meta.num_columns)]


def test_the_floor_writes_tidemarks_files_again(tmp_path: Path) -> None:
    shape = parse_shape("fmt-p10-narrow")
    data = make_data(shape, 4_000, 0.10, str(tmp_path / "data"))
    source, batch = ds.dataset(data.base_dir).to_table(), ds.dataset(data.batch_dir).to_table()
    loaded = str(tmp_path / "tm")
    _create(loaded, shape, None).bulk_insert(source)
    probe = str(tmp_path / "probe")
    shutil.copytree(loaded, probe)
    tidemark.Table.open(probe, spark=None).upsert(batch)
    new = sorted(base_files(probe) - base_files(loaded))
    old = {file_group(p): p for p in base_files(loaded)}
    assert len(new) == len(old) == 10  # the spread upsert rewrote every partition's file group
    files = HudiFiles([os.path.join(probe, p) for p in new], [os.path.join(loaded, old[file_group(p)]) for p in new])
    assert all(file_group(a) == file_group(b) for a, b in zip(new, files.rewritten, strict=True))

    out = tmp_path / "floor"
    files.write(str(out), 2)
    for i, name in enumerate(new):
        ours, floor = os.path.join(probe, name), str(out / f"{i}.parquet")
        want = pq.read_table(ours)
        assert pq.read_table(floor).cast(want.schema).equals(want)  # (its Arrow schema says dictionaries)
        assert _encodings(floor) == _encodings(ours)
        footer = pq.read_metadata(floor).metadata
        keys = pq.read_table(floor, columns=[RECORD_KEY]).column(RECORD_KEY).combine_chunks()
        assert footer[MIN_KEY_KEY.encode()].decode() == min(keys.to_pylist())
        assert footer[MAX_KEY_KEY.encode()].decode() == max(keys.to_pylist())
        bloom = BloomFilter.parse(footer[FOOTER_KEY.encode()], footer[TYPE_CODE_KEY.encode()].decode())
        assert bloom.might_contain(keys).all()
        # The filter carried over from the replaced file, as tidemark's rewrite carries it: the same bytes.
        assert footer[FOOTER_KEY.encode()] == pq.read_metadata(ours).metadata[FOOTER_KEY.encode()]
    # The per-file constant meta columns reach the writer as dictionaries, as tidemark gives them.
    assert all(pa.types.is_dictionary(files.tables[0].schema.field(name).type) for name in DICTIONARY_META)
