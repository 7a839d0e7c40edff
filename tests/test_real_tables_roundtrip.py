"""Tables Apache Hudi wrote, written by tidemark and read back: both engines, hudi-rs agreeing.

The reference tables (shared/reference/hudi-format/real-tables) carry nested columns
(list of struct, map of struct, struct in struct), decimals, dates, binary and timestamps.
Each is copied, then upserted (an update of a stored key and a new key) and deleted
from, with the Arrow engine and with Spark; after every step tidemark's read and hudi-rs
must agree with a model of the rows. (v8_trips_8i3u1d has a metadata table, which
tidemark does not maintain yet, so hudi-rs would list stale files there: not covered.)
"""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read

REAL_TABLES = next(
    (
        root / "shared" / "reference" / "hudi-format" / "real-tables"
        for root in (Path(__file__).resolve().parents[2], Path("/work"))
        if (root / "shared" / "reference" / "hudi-format" / "real-tables").exists()
    ),
    Path(__file__).resolve().parents[2] / "shared" / "reference" / "hudi-format" / "real-tables",
)
TABLES = ["v8_nonpartitioned", "v8_simplekeygen_nonhivestyle"]
COLUMNS = ["id", "name", "longField", "arrayField", "mapField", "structField"]


def _copy(name: str, tmp_path: Path) -> str:
    archive = REAL_TABLES / f"{name}.zip"
    if not archive.exists():
        pytest.fail(f"the reference table {archive} is missing")
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path / "x")
    shutil.move(str(tmp_path / "x" / name), str(tmp_path / name))
    return str(tmp_path / name)


def _model(rows: pa.Table) -> dict[int, dict[str, Any]]:
    out = {}
    for r in rows.select(COLUMNS).to_pylist():
        r["mapField"] = sorted((k, tuple(sorted(v.items())) if v else None) for k, v in (r["mapField"] or []))
        out[r["id"]] = r
    return out


def _arrow(rows: Any) -> pa.Table:
    return rows if isinstance(rows, pa.Table) else rows.toArrow()


def _roundtrip(table: tidemark.Table, to_frame: Any) -> None:
    before = _arrow(table.read())
    model = _model(before)
    assert _model(hudi_rs_read(table.path)) == model
    user = before.drop_columns([c for c in before.column_names if c.startswith("_hoodie_")])
    first = user.slice(0, 1)
    changed = first.set_column(first.schema.get_field_index("name"), "name", pa.array(["changed"]))
    changed = changed.set_column(changed.schema.get_field_index("longField"), "longField",
                                 pa.array([first.column("longField")[0].as_py() + 1000], pa.int64()))
    fresh = first.set_column(first.schema.get_field_index("id"), "id", pa.array([999], first.schema.field("id").type))
    table.upsert(to_frame(pa.concat_tables([changed, fresh])))
    model.update(_model(pa.concat_tables([changed, fresh])))
    assert _model(_arrow(table.read())) == model
    assert _model(hudi_rs_read(table.path)) == model

    gone = user.slice(1, 1)
    table.delete(to_frame(gone))
    model.pop(gone.column("id")[0].as_py())
    assert _model(_arrow(table.read())) == model
    assert _model(hudi_rs_read(table.path)) == model


@pytest.mark.parametrize("name", TABLES)
def test_real_hudi_tables_written_by_the_arrow_engine(tmp_path: Path, name: str) -> None:
    _roundtrip(tidemark.Table.open(_copy(name, tmp_path), spark=None), lambda rows: rows)


@pytest.mark.spark
@pytest.mark.parametrize("name", TABLES)
def test_real_hudi_tables_written_by_spark(spark: Any, tmp_path: Path, name: str) -> None:
    _roundtrip(tidemark.Table.open(_copy(name, tmp_path), spark=spark), lambda rows: spark.createDataFrame(rows))
