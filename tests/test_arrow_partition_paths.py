"""The Arrow engine's vectorised helpers against plain models: partition paths computed once per
distinct value (``partition_paths``), the column-parallel take (``take_columns``) and the byte
scan that spares the ``,`` check of multi-field keys (``may_hold_byte``)."""

from __future__ import annotations

import datetime
import decimal
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tidemark.engines.arrow import keys
from tidemark.engines.arrow.keys import may_hold_byte, partition_path_array, partition_paths
from tidemark.engines.arrow.take import take_columns
from tidemark.format.names import DEFAULT_PARTITION
from tidemark.format.partition_path import escape_value


def _text(value: object) -> str | None:
    """Spark's text of one partition value, as the Arrow engine casts it (one scalar at a time)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return pc.cast(pa.array([value]), pa.string())[0].as_py()


def _model_paths(columns: dict[str, list[object]], *, hive_style: bool, url_encode: bool) -> list[str]:
    """Each row's partition path, built row by row from Hudi's rules."""
    n = len(next(iter(columns.values())))
    paths = []
    for row in range(n):
        parts = []
        for name, values in columns.items():
            text = _text(values[row]) or DEFAULT_PARTITION  # null and empty: Hudi's default partition
            if url_encode:
                text = escape_value(text)
            parts.append(f"{name}={text}" if hive_style else text)
        paths.append("/".join(parts))
    return paths


def _random_values(rng: random.Random, kind: str, n: int) -> list[object]:
    pools: dict[str, list[object]] = {
        "text": ["a", "b/c", "", None, "née ✓", "x y", "100%", "a", "p%2F"],
        "int": [1, 2, None, -7, 2**40],
        "bool": [True, False, None],
        "date": [datetime.date(2024, 1, 1), datetime.date(1999, 12, 31), None],
        "decimal": [decimal.Decimal("1.20"), decimal.Decimal("-0.50"), None],
    }
    return [rng.choice(pools[kind]) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("hive_style", [False, True])
@pytest.mark.parametrize("url_encode", [False, True])
def test_partition_paths_equal_the_row_by_row_model(seed: int, hive_style: bool, url_encode: bool) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 400)
    kinds = rng.sample(["text", "int", "bool", "date", "decimal"], rng.randint(1, 3))
    columns = {f"f{i}": _random_values(rng, kind, n) for i, kind in enumerate(kinds)}
    arrays = {}
    for name, values in columns.items():
        array = pa.array(values)
        if seed % 3 == 1 and pa.types.is_string(array.type):
            array = array.dictionary_encode()  # a dictionary column, as pandas categoricals arrive
        # In chunks, as a table read from several files is.
        cut = n // 2
        arrays[name] = pa.chunked_array([array.slice(0, cut), array.slice(cut)], type=array.type)
    table = pa.table(arrays)
    want = _model_paths(columns, hive_style=hive_style, url_encode=url_encode)
    got = partition_paths(table, list(columns), hive_style=hive_style, url_encode=url_encode)
    assert got.array().to_pylist() == want
    assert partition_path_array(table, list(columns), hive_style=hive_style, url_encode=url_encode).to_pylist() == want
    # The codes name distinct paths: one code per path, every path used.
    paths = got.paths.to_pylist()
    assert len(set(paths)) == len(paths)
    assert sorted(set(got.codes.tolist())) == list(range(len(paths)))


def test_null_and_empty_values_share_one_default_partition_code() -> None:
    table = pa.table({"p": pa.array(["", None, "x", None, ""]), "q": pa.array([1, 1, 1, 1, 1])})
    got = partition_paths(table, ["p", "q"], hive_style=False)
    assert got.array().to_pylist() == [f"{DEFAULT_PARTITION}/1"] * 2 + ["x/1"] + [f"{DEFAULT_PARTITION}/1"] * 2
    assert len(got.paths) == 2
    assert got.codes[0] == got.codes[1] == got.codes[3] == got.codes[4] != got.codes[2]


def test_partition_paths_of_a_sliced_table_and_of_no_fields() -> None:
    table = pa.table({"p": pa.array(["a", "b", "c", None])}).slice(1, 2)
    assert partition_paths(table, ["p"], hive_style=True).array().to_pylist() == ["p=b", "p=c"]
    assert partition_paths(table, [], hive_style=True).array().to_pylist() == ["", ""]
    all_null = pa.table({"p": pa.nulls(3)})
    assert partition_paths(all_null, ["p"], hive_style=False).array().to_pylist() == [DEFAULT_PARTITION] * 3


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_take_columns_equals_take(threads: int) -> None:
    rng = np.random.default_rng(threads)
    n = 5_000
    table = pa.table({
        "id": pa.array(np.arange(n)),
        "text": pa.array([None if i % 7 == 0 else f"v{i}" for i in range(n)]),
        "nested": pa.array([{"a": i, "b": [i, i + 1]} for i in range(n)]),
        "flag": pa.array([i % 3 == 0 for i in range(n)]),
    })
    table = pa.concat_tables([table.slice(0, 1_000), table.slice(1_000)])  # two chunks
    indices = pa.array(rng.permutation(n)[: n // 2])
    got = take_columns(table, indices, threads)
    assert got.schema == table.schema
    assert got.equals(table.take(indices))


@pytest.mark.parametrize("array", [
    pa.array(["ab", "c,d", None, "e"]),
    pa.array(["ab", "cd", "x,"]).slice(2),
    pa.chunked_array([["ab"], ["cd", ",", None]]),
    pa.array(["a,b"], pa.large_string()),
])
def test_may_hold_byte_finds_every_comma(array: pa.Array | pa.ChunkedArray) -> None:
    assert may_hold_byte(array, ord(","))


def test_may_hold_byte_rules_out_what_no_value_holds() -> None:
    assert not may_hold_byte(pa.array(["ab", "cd", None, ""]), ord(","))
    # The slice leaves out the only value with a comma.
    assert not may_hold_byte(pa.array(["x,", "ab", "cd"]).slice(1), ord(","))
    assert not may_hold_byte(pa.chunked_array([[], ["ab"]], pa.string()), ord(","))


def test_take_columns_takes_a_shared_column_once_and_keeps_it_shared() -> None:
    # A string record key is its key field's column (the same buffers): one take serves both.
    key = pa.chunked_array([pa.array([f"k{i}" for i in range(100)])])
    table = pa.table({"key": key, "_hoodie_record_key": pc.cast(key, pa.string()),
                      "copy": pa.array([f"k{i}" for i in range(100)]), "n": pa.array(range(100))})
    indices = pa.array(np.arange(99, -1, -3))
    got = take_columns(table, indices, 2)
    assert got.equals(table.take(indices))
    taken_key, taken_record_key, taken_copy = (got.column(c).chunk(0) for c in ("key", "_hoodie_record_key", "copy"))
    assert taken_key.buffers()[2].address == taken_record_key.buffers()[2].address
    assert taken_key.buffers()[2].address != taken_copy.buffers()[2].address


@pytest.mark.parametrize("array", [
    pa.array(np.arange(-5_000, 5_001, dtype=np.int64)),
    pa.chunked_array([pa.array([1.5, None, -0.0] * 1_000), pa.array([2.25] * 4_003)]),
    pa.array([datetime.date(2020, 1, 1) + datetime.timedelta(days=i) for i in range(10_001)]),
    pa.array([decimal.Decimal(i) / 100 for i in range(10_001)], pa.decimal128(10, 2)),
])
def test_keys_cast_to_text_on_threads_equal_one_cast(monkeypatch: pytest.MonkeyPatch, array: pa.Array) -> None:
    monkeypatch.setattr(keys, "PARALLEL_CAST_ROWS", 1_000)  # several pieces on any machine of 2+ cores
    table = pa.table({"k": array})
    text = keys.record_key_array(table, ["k"])
    assert text.type == pa.string()
    assert text.to_pylist() == pc.cast(array, pa.string()).to_pylist()
    composite = keys.record_key_array(table.append_column("j", array), ["k", "j"]).to_pylist()
    texts = ["__null__" if v is None else v for v in pc.cast(array, pa.string()).to_pylist()]  # format/record_key.py
    assert composite == [f"k:{v},j:{v}" for v in texts]
