"""Every table shape the issue-18 benchmarks measure, written by both engines exactly as the
benchmark writes it (``benchmarks/bench_shapes.py``: the same rows, batches and table
options, at a small size), and checked row by row against a model and hudi-rs.

The speed-ups the benchmarks measure (bloom pruning, the dedup in the write tasks, dictionary
meta columns, the driver-side file listing, ...) must leave every result identical: a bulk
insert, then the spread upsert (half updates over the whole key space, half new keys), then
the narrow one (one partition of ten, or one key range) on the same table.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from conftest import hudi_rs_read

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_shapes import DEFAULT_SHAPES, Shape, _create, make_data, parse_shape, shape_rows  # noqa: E402

ROWS = 6_000


def _comparable(table: pa.Table, columns: list[str], key: str) -> list[dict[str, Any]]:
    """``columns`` of ``table`` as dicts sorted by ``key``, timestamps as epoch microseconds
    (readers differ in the time zone they attach, not in the instant)."""
    arrays = []
    for name in columns:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            column = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
        arrays.append(column)
    rows = pa.table(arrays, names=columns).to_pylist()
    return sorted(rows, key=lambda r: r[key])


def _model(shape: Shape, base: pa.Table, *batches: pa.Table) -> pa.Table:
    """The table after upserting ``batches`` into ``base`` in order: a batch's row replaces the
    stored row of its key unless the stored row's ``updated_at`` is later (event-time order)."""
    key = shape.key_field
    rows = {r[key]: r for r in base.to_pylist()}
    for batch in batches:
        for r in batch.to_pylist():
            stored = rows.get(r[key])
            if stored is None or stored["updated_at"] <= r["updated_at"]:
                rows[r[key]] = r
    return pa.Table.from_pylist(list(rows.values()), schema=base.schema)


def _read(table: Any) -> pa.Table:
    data = table.read()
    return data if isinstance(data, pa.Table) else data.toArrow()


@pytest.mark.parametrize("engine", ["spark", "arrow"])
@pytest.mark.parametrize("shape_name", DEFAULT_SHAPES)
def test_every_benchmark_shape_gives_the_models_rows_in_tidemark_and_hudi_rs(
    spark: Any, tmp_path: Path, shape_name: str, engine: str
) -> None:
    shape = parse_shape(shape_name)
    data = make_data(shape, ROWS, 0.10, str(tmp_path))
    base = ds.dataset(data.base_dir).to_table()
    spread = ds.dataset(data.batch_dir).to_table()
    narrow = ds.dataset(data.narrow_dir).to_table()
    assert base.equals(shape_rows(shape, np.arange(ROWS), 0))  # the benchmark's own rows

    path = str(tmp_path / "table")
    session = spark if engine == "spark" else None
    table = _create(path, shape, session)

    def source(folder: str, rows: pa.Table) -> Any:
        return spark.read.parquet(folder) if engine == "spark" else rows

    key = shape.key_field
    columns = base.column_names
    expected = _model(shape, base)
    table.bulk_insert(source(data.base_dir, base))
    assert _comparable(_read(table), columns, key) == _comparable(expected, columns, key)

    updated = int(pc.sum(pc.is_in(spread.column(key), value_set=base.column(key))).as_py())
    result = table.upsert(source(data.batch_dir, spread))
    assert (result.num_inserts, result.num_updates) == (spread.num_rows - updated, updated)
    expected = _model(shape, base, spread)
    assert _comparable(_read(table), columns, key) == _comparable(expected, columns, key)

    # Every narrow key is stored by now (its new keys came with the spread batch): all updates.
    result = table.upsert(source(data.narrow_dir, narrow))
    assert (result.num_inserts, result.num_updates) == (0, narrow.num_rows)
    expected = _model(shape, base, spread, narrow)
    want = _comparable(expected, columns, key)
    final = _read(table)
    assert _comparable(final, columns, key) == want
    assert _comparable(hudi_rs_read(path), columns, key) == want
    # Hudi's meta columns name each row's key and partition as Hudi's key generator does.
    assert final.column("_hoodie_record_key").equals(pc.cast(final.column(key), pa.string()))
    if shape.partitions:
        assert final.column("_hoodie_partition_path").equals(
            pc.binary_join_element_wise("region=", final.column("region"), ""))
    # The narrow upsert wrote only the one partition that holds its keys.
    if shape.partitions:
        assert result.partitions == ("region=r000",)
