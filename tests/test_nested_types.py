"""Nested columns (struct, list, list of struct, map) through every write and service, both engines.

Each test keeps a model (a dict from key to row) next to the table and compares after every
step, with tidemark's reader and with hudi-rs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("point", pa.struct([pa.field("x", pa.float64()), pa.field("label", pa.string())])),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("events", pa.list_(pa.struct([pa.field("kind", pa.string()), pa.field("n", pa.int32())]))),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
    ]
)


def _row(i: int, ts: int, salt: str = "") -> dict[str, Any]:
    return {
        "id": i,
        "ts": ts,
        "point": {"x": i / 2, "label": f"p{i}{salt}"},
        "tags": [f"t{i}", salt] if i % 3 else [],
        "events": [{"kind": f"k{salt}", "n": i}, {"kind": "z", "n": -i}] if i % 2 else None,
        "attrs": [("a", i), ("b", ts)],
    }


def _batch(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _as_model(table: pa.Table) -> dict[int, dict[str, Any]]:
    rows = table.select(SCHEMA.names).to_pylist()
    for r in rows:  # maps come back as lists of pairs
        r["attrs"] = sorted(tuple(p) if not isinstance(p, dict) else (p["key"], p["value"]) for p in r["attrs"] or [])
    return {r["id"]: r for r in rows}


def _model_of(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return _as_model(_batch(rows))


def _check(table: tidemark.Table, model: dict[int, dict[str, Any]]) -> None:
    got = table.read()
    got = got if isinstance(got, pa.Table) else got.toArrow()
    assert _as_model(got) == model
    assert _as_model(hudi_rs_read(table.path)) == model


def _steps(table: tidemark.Table, to_frame: Any) -> None:
    model = _model_of([_row(i, 1) for i in range(40)])
    table.bulk_insert(to_frame([_row(i, 1) for i in range(40)]))
    _check(table, model)

    updates = [_row(i, 2, "u") for i in range(0, 40, 3)] + [_row(i, 2, "new") for i in range(40, 45)]
    table.upsert(to_frame(updates))
    model.update(_model_of(updates))
    _check(table, model)

    gone = [_row(i, 3) for i in range(1, 40, 7)]
    table.delete(to_frame(gone))
    for r in gone:
        model.pop(r["id"])
    _check(table, model)

    stale = [_row(i, 0, "stale") for i in range(0, 10) if i in model]  # older ordering values: must lose
    table.upsert(to_frame(stale))
    _check(table, model)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_nested_columns_with_the_arrow_engine(tmp_path: Path, table_type: str) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts",
                                  table_type=table_type, schema=SCHEMA)
    _steps(table, _batch)
    expected = _as_model(hudi_rs_read(table.path))
    if table_type == "MERGE_ON_READ":
        assert table.compact() is not None
        _check(table, expected)
    table.cluster()
    _check(table, expected)


@pytest.mark.spark
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_nested_columns_with_spark(spark: Any, tmp_path: Path, table_type: str) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts",
                                  table_type=table_type, schema=SCHEMA)

    def to_frame(rows: list[dict[str, Any]]) -> Any:
        return spark.createDataFrame(_batch(rows))

    _steps(table, to_frame)
    expected = _as_model(hudi_rs_read(table.path))
    if table_type == "MERGE_ON_READ":
        assert table.compact() is not None
        _check(table, expected)
