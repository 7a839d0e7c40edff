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
