"""Reading one data file: the direct path (no pyarrow.dataset) gives what pyarrow's dataset
read gives, and ``import tidemark`` does not load pandas."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tidemark.errors import CorruptDataFileError
from tidemark.format.parquet_file import read_data_file


@pytest.fixture()
def data_file(tmp_path):
    path = str(tmp_path / "f.parquet")
    pq.write_table(pa.table({"k": ["a", "b", "c"], "n": pa.array([1, 2, 3], pa.int32())}), path)
    return path


def test_reads_all_and_selected_columns(data_file):
    assert read_data_file(data_file).to_pydict() == {"k": ["a", "b", "c"], "n": [1, 2, 3]}
    assert read_data_file(data_file, columns=["n"]).column_names == ["n"]


def test_schema_fills_absent_columns_and_casts_evolved_types(data_file):
    wider = pa.schema([("k", pa.string()), ("n", pa.int32()), ("extra", pa.float64())])
    rows = read_data_file(data_file, schema=wider)
    assert rows.schema == wider
    assert rows.column("extra").null_count == 3
    evolved = pa.schema([("k", pa.string()), ("n", pa.int64())])  # int -> long, as schema evolution allows
    rows = read_data_file(data_file, schema=evolved, columns=["n"])
    assert rows.schema == pa.schema([("n", pa.int64())])
    assert rows.column("n").to_pylist() == [1, 2, 3]
    # The same through pyarrow's dataset layer, which the direct path stands in for.
    assert read_data_file(data_file, schema=wider).equals(pq.read_table(data_file, schema=wider))


def test_a_column_the_file_lacks_is_an_error_without_a_schema(data_file):
    with pytest.raises(CorruptDataFileError):
        read_data_file(data_file, columns=["nope"])


def test_a_file_object_is_read_the_same(data_file):
    with pa.OSFile(data_file) as source:
        assert read_data_file(source, schema=pa.schema([("k", pa.string()), ("n", pa.int64())])).num_rows == 3


def test_importing_tidemark_does_not_load_pandas():
    code = "import sys, tidemark, tidemark.table; print('pandas' in sys.modules, 'pyarrow.dataset' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "False"]


def test_base_files_say_their_own_types_though_the_file_name_is_written_from_a_dictionary(tmp_path):
    """The per-file constant meta columns (file name; a write's commit time and partition path)
    go to the writer as dictionaries (no million copies of a value); the file's ARROW:schema is
    still the one pyarrow writes for the plain rows, so pyarrow and hudi-rs read string
    columns, and the values are the file's name, its partition and each row's commit."""
    import base64

    import tidemark
    from conftest import hudi_rs_read

    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="p")
    rows = pa.table({"id": list(range(50)), "p": ["a", "b"] * 25, "v": [f"v{i}" for i in range(50)]})
    bulk_time = table.bulk_insert(rows).instant_time
    update = pa.table({"id": [1, 2, 99], "p": ["b", "a", "a"], "v": ["u1", "u2", "n99"]})
    upsert_time = table.upsert(update).instant_time
    files = sorted((tmp_path / "t").glob("*/*.parquet"))
    assert len(files) == 4
    for f in files:
        stored = pq.read_table(f)
        assert stored.schema.field("_hoodie_file_name").type == pa.string()
        assert set(stored.column("_hoodie_file_name").to_pylist()) == {f.name}
        entry = pq.ParquetFile(f).metadata.metadata[b"ARROW:schema"]
        plain = pa.BufferOutputStream()
        pq.write_table(stored.replace_schema_metadata(None), plain)
        expected = pq.ParquetFile(pa.BufferReader(plain.getvalue())).metadata.metadata[b"ARROW:schema"]
        assert entry == expected
        declared = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(entry)))
        for name in ("_hoodie_file_name", "_hoodie_commit_time", "_hoodie_partition_path"):
            assert declared.field(name).type == pa.string() and stored.schema.field(name).type == pa.string()
        # One partition per file; commit times: the bulk insert's, and the upsert's for its rows.
        assert set(stored.column("_hoodie_partition_path").to_pylist()) == {f.parent.name}
        assert set(stored.column("_hoodie_commit_time").to_pylist()) <= {bulk_time, upsert_time}
        changed = {r["id"] for r in stored.to_pylist() if r["_hoodie_commit_time"] == upsert_time}
        assert changed == ({1, 2, 99} & set(stored.column("id").to_pylist()) if upsert_time in f.name else set())
    assert hudi_rs_read(path).schema.field("_hoodie_file_name").type == pa.string()
    assert sorted(hudi_rs_read(path).column("v").to_pylist()) == sorted(table.read().column("v").to_pylist())


@pytest.mark.parametrize("evolved", [False, True])
def test_streamed_string_columns_come_as_dictionaries_when_asked(data_file, evolved):
    """A rewrite reads a base file's per-file meta columns as dictionaries (no strings decoded);
    a file whose other columns need a cast (the dataset path) reads the same."""
    from tidemark.format.parquet_file import iter_data_file

    text = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema([("k", text), ("n", pa.int64() if evolved else pa.int32()), ("absent", text)])
    pieces = list(iter_data_file(data_file, schema=schema, batch_size=2))
    assert [p.num_rows for p in pieces] == [2, 1]
    rows = pa.concat_tables(pieces)
    assert rows.schema == schema
    assert rows.column("k").to_pylist() == ["a", "b", "c"] and rows.column("n").to_pylist() == [1, 2, 3]
    assert rows.column("absent").null_count == 3
