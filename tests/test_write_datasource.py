"""``df.write.format("tidemark")`` (and ``format("hudi")``) with Hudi's datasource keys.

Real Spark (the shared local[2] session); tables checked with tidemark's reader and hudi-rs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline

# A Hudi job's options, as they are written for format("hudi").
HUDI_OPTIONS = {
    "hoodie.table.name": "trips",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "city",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.datasource.write.operation": "upsert",
    "hoodie.datasource.write.table.type": "COPY_ON_WRITE",
    "hoodie.datasource.write.hive_style_partitioning": "true",
    "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "hoodie.upsert.shuffle.parallelism": "2",
}
SCHEMA = "id long, city string, ts long, v string"


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    tidemark.register(spark)
    return spark


def _df(spark: Any, rows: list[tuple[int, str, int, str]]) -> Any:
    return spark.createDataFrame(rows, SCHEMA)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    cols = [table.column(c).to_pylist() for c in ("id", "city", "ts", "v")]
    return sorted(zip(*cols, strict=True))


def _tidemark_rows(path: str) -> list[tuple[Any, ...]]:
    return _rows(tidemark.Table.open(path, spark=None).read())


def _instants(path: str) -> list[Any]:
    return Timeline.load(LocalStorage(path)).by_completion_time()


def _staging_left(path: str) -> list[str]:
    return [n for n in os.listdir(os.path.join(path, ".hoodie", ".temp")) if n.startswith("datasource-")]


def test_first_write_creates_the_table_and_upserts_merge_by_precombine(session: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "trips")
    rows = [(i, "sf" if i % 2 else "nyc", 1, "a") for i in range(20)]
    _df(session, rows + [(3, "sf", 0, "older duplicate")]).write.format("tidemark").options(
        **HUDI_OPTIONS).mode("append").save(path)
    table = tidemark.Table.open(path, spark=None)
    assert table.config.record_key_fields == ("id",) and table.config.partition_fields == ("city",)
    assert table.config.ordering_fields == ("ts",) and table.config.name == "trips"
    assert _tidemark_rows(path) == sorted(rows)  # the duplicate key kept the greater ts
    # An update with a newer ts wins; one with an older ts does not (EVENT_TIME_ORDERING).
    _df(session, [(1, "sf", 5, "new"), (2, "nyc", 0, "stale")]).write.format("tidemark").options(
        **HUDI_OPTIONS).mode("append").save(path)
    expected = sorted([r for r in rows if r[0] != 1] + [(1, "sf", 5, "new")])
    assert _tidemark_rows(path) == expected
    assert _rows(hudi_rs_read(path)) == expected
    assert [i.action for i in _instants(path)] == [Action.COMMIT, Action.COMMIT]
    assert _staging_left(path) == []


def test_format_hudi_is_the_same_source_without_a_hudi_bundle(session: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    options = {**HUDI_OPTIONS, "hoodie.datasource.write.table.type": "MERGE_ON_READ"}
    _df(session, [(1, "sf", 1, "a"), (2, "la", 1, "b")]).write.format("hudi").options(**options).mode(
        "append").save(path)
    _df(session, [(1, "sf", 2, "a2")]).write.format("hudi").options(**options).mode("append").save(path)
    assert tidemark.Table.open(path, spark=None).config.table_type == "MERGE_ON_READ"
    assert [i.action for i in _instants(path)] == [Action.DELTA_COMMIT, Action.DELTA_COMMIT]
    got = session.read.format("hudi").load(path).select("id", "city", "ts", "v").toArrow()
    assert _rows(got) == [(1, "sf", 2, "a2"), (2, "la", 1, "b")]
    assert _rows(hudi_rs_read(path)) == [(1, "sf", 2, "a2"), (2, "la", 1, "b")]


def test_every_operation_through_the_data_source(session: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "ops")

    def write(rows: list[tuple[int, str, int, str]], operation: str, mode: str = "append", **extra: str) -> None:
        options = {**HUDI_OPTIONS, "hoodie.datasource.write.operation": operation, **extra}
        _df(session, rows).write.format("tidemark").options(**options).mode(mode).save(path)

    write([(i, c, 1, "bulk") for i, c in enumerate(["sf", "la", "nyc"] * 3)], "bulk_insert")
    write([(100, "sf", 1, "ins")], "insert")
    write([(0, "sf", 2, "x")], "delete")
    assert [r[0] for r in _tidemark_rows(path)] == [1, 2, 3, 4, 5, 6, 7, 8, 100]
    write([(200, "la", 1, "over")], "insert_overwrite")  # replaces partition la only
    assert {r[1] for r in _tidemark_rows(path)} == {"sf", "la", "nyc"}
    assert [r for r in _tidemark_rows(path) if r[1] == "la"] == [(200, "la", 1, "over")]
    write([], "delete_partition", **{"hoodie.datasource.write.partitions.to.delete": "city=nyc"})
    assert {r[1] for r in _tidemark_rows(path)} == {"sf", "la"}
    write([(0, "la", 0, "")], "delete_partition")  # the rows' partitions
    assert {r[1] for r in _tidemark_rows(path)} == {"sf"}
    # mode("overwrite") replaces the whole table, as Hudi's Overwrite save mode does.
    write([(300, "nyc", 1, "all new")], "upsert", mode="overwrite")
    assert _tidemark_rows(path) == [(300, "nyc", 1, "all new")]
    assert _rows(hudi_rs_read(path)) == [(300, "nyc", 1, "all new")]
    ops = [Timeline.load(LocalStorage(path)).commit_metadata(i).operation for i in _instants(path)]
    assert ops == ["BULK_INSERT", "INSERT", "DELETE", "INSERT_OVERWRITE", "DELETE_PARTITION", "DELETE_PARTITION",
                   "INSERT_OVERWRITE_TABLE"]
    assert _staging_left(path) == []


def _error_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    return str(excinfo.value)


def test_bad_options_raise_tidemark_errors_and_write_nothing(session: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "bad")
    df = _df(session, [(1, "sf", 1, "a")])
    no_key = {k: v for k, v in HUDI_OPTIONS.items() if k != "hoodie.datasource.write.recordkey.field"}
    with pytest.raises(Exception) as missing:
        df.write.format("tidemark").options(**no_key).mode("append").save(path)
    assert "tidemark.errors.ConfigError" in _error_text(missing)
    assert "hoodie.datasource.write.recordkey.field" in _error_text(missing)
    assert not os.path.exists(path)
    with pytest.raises(Exception) as unknown:
        df.write.format("tidemark").options(**HUDI_OPTIONS, **{"hoodie.upsert.shufle.parallelism": "2"}).mode(
            "append").save(path)
    assert "UnknownOptionError" in _error_text(unknown) and "hoodie.upsert.shuffle.parallelism" in _error_text(unknown)
    with pytest.raises(Exception) as operation:
        df.write.format("tidemark").options(**{**HUDI_OPTIONS, "hoodie.datasource.write.operation": "merge"}).mode(
            "append").save(path)
    assert "hoodie.datasource.write.operation" in _error_text(operation)
    with pytest.raises(Exception) as keygen:
        custom = {**HUDI_OPTIONS, "hoodie.datasource.write.keygenerator.class":
                  "org.apache.hudi.keygen.CustomKeyGenerator"}
        df.write.format("tidemark").options(**custom).mode("append").save(path)
    assert "CustomKeyGenerator" in _error_text(keygen)

    df.write.format("tidemark").options(**HUDI_OPTIONS).mode("append").save(path)
    with pytest.raises(Exception) as other_key:
        df.write.format("tidemark").options(**{**HUDI_OPTIONS, "hoodie.datasource.write.recordkey.field": "v"}).mode(
            "append").save(path)
    assert "ConfigError" in _error_text(other_key) and "fixed when the table is created" in _error_text(other_key)
    # Bad rows fail in the commit step: a typed error in Spark's exception, the table unchanged, no staging left.
    before = _instants(path)
    with pytest.raises(Exception) as null_key:
        session.createDataFrame([(None, "sf", 1, "no key")], SCHEMA).write.format("tidemark").options(
            **HUDI_OPTIONS).mode("append").save(path)
    assert "NullRecordKeyError" in _error_text(null_key)
    assert [i.requested_time for i in _instants(path)] == [i.requested_time for i in before]
    assert _tidemark_rows(path) == [(1, "sf", 1, "a")]
    assert _staging_left(path) == []


def test_concurrent_batch_jobs_under_occ_both_land(session: Any, tmp_path: Path) -> None:
    """Two df.write jobs at once (threads of one session) on one table under OCC: both commit."""
    path = str(tmp_path / "occ")
    occ = {**HUDI_OPTIONS, "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.write.num.retries.on.conflict.failures": "5"}
    _df(session, [(0, "sf", 0, "seed")]).write.format("tidemark").options(**occ).mode("append").save(path)
    errors: list[BaseException] = []

    def job(offset: int) -> None:
        try:
            rows = [(offset + i, "sf", 1, f"job{offset}") for i in range(10)] + [(0, "sf", offset, "shared")]
            _df(session, rows).write.format("tidemark").options(**occ).mode("append").save(path)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=job, args=(n,)) for n in (100, 200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, [str(e)[-3000:] for e in errors]
    ids = [r[0] for r in _tidemark_rows(path)]
    assert ids == [0, *range(100, 110), *range(200, 210)]
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == ids
    assert len(_instants(path)) == 3
