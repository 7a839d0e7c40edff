"""Input that used to damage tables (issue 13): partition values as paths, nanosecond timestamps,
colliding composite keys, a first write that froze the schema. Each is now either stored so that
every reader reads it back, or refused with a typed error before anything is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import (
    ConfigError,
    InvalidInputError,
    InvalidPartitionValueError,
    InvalidRecordKeyError,
    MissingColumnError,
    SchemaMismatchError,
    Table,
    UnsupportedTypeError,
)

ENGINES = ["spark", "arrow"]
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("route", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
DDL = "id long, route string, ts long, v string"
URLENCODE = {"hoodie.datasource.write.partitionpath.urlencode": "true"}


def _disk(path: Path) -> dict[str, int]:
    """Every file under ``path`` (the test's folder, so files written outside the table count too)."""
    out = {}
    for root, _, files in os.walk(path):
        for name in files:
            full = os.path.join(root, name)
            out[os.path.relpath(full, path)] = os.path.getsize(full)
    return out


def _batch(engine: str, spark: Any, rows: list[tuple[Any, ...]], schema: pa.Schema = ARROW_SCHEMA) -> Any:
    if engine == "arrow":
        return pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema=schema)
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame(rows, from_arrow_schema(schema))


def _create(engine: str, spark: Any, path: Path, **kwargs: Any) -> Table:
    return Table.create(str(path), spark=spark if engine == "spark" else None, **kwargs)


def _rows(table: Table, columns: list[str]) -> list[tuple[Any, ...]]:
    return rows_of(table.read(), columns)


# -- partition values ------------------------------------------------------------------------

BAD_PARTITION_VALUES = {
    "traversal": ("x/../../outside", True),
    "traversal without hive": ("../outside", False),
    "metadata folder": (".hoodie", False),
    "slash": ("SFO/JFK", True),
    "tab": ("a\tb", True),
    "newline": ("a\nb", False),
    "dot-dot alone": ("..", False),
    "too long": ("x" * 300, True),
}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", sorted(BAD_PARTITION_VALUES))
@pytest.mark.parametrize("operation", ["upsert", "bulk_insert"])
def test_unsafe_partition_values_are_refused_before_anything_is_written(
    spark: Any, tmp_path: Path, engine: str, case: str, operation: str
) -> None:
    value, hive = BAD_PARTITION_VALUES[case]
    options = {"hoodie.datasource.write.hive_style_partitioning": str(hive).lower()}
    t = _create(engine, spark, tmp_path / "t", record_key="id", partition_by="route", ordering_field="ts",
                options=options)
    t.upsert(_batch(engine, spark, [(1, "sf", 1, "a")]))
    before, instants = _disk(tmp_path), len(t.timeline())
    with pytest.raises(InvalidPartitionValueError) as info:
        getattr(t, operation)(_batch(engine, spark, [(2, value, 1, "b"), (3, "nyc", 1, "c")]))
    assert isinstance(info.value, InvalidInputError)
    assert "Nothing was written" in str(info.value)
    assert _disk(tmp_path) == before  # nothing inside the table, nothing outside it
    assert len(t.timeline()) == instants
    assert _rows(t, ["id", "route"]) == [(1, "sf")]
    assert sorted(hudi_rs_read(t.path).column("id").to_pylist()) == [1]


@pytest.mark.parametrize("engine", ENGINES)
def test_slash_without_urlencode_says_to_enable_it(spark: Any, tmp_path: Path, engine: str) -> None:
    t = _create(engine, spark, tmp_path / "t", record_key="id", partition_by="route")
    with pytest.raises(InvalidPartitionValueError, match="partitionpath.urlencode=true"):
        t.upsert(_batch(engine, spark, [(1, "SFO/JFK", 1, "a")]))
    assert t.timeline() == []


ODD_VALUES = ["SFO/JFK", "a:b", "50%", "x=y", "tab\there", "x/../up", "q?#*'\"", "back\\slash", "ü/ß", "[x]{y}^"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("hive", [True, False])
def test_urlencode_stores_any_value_and_filters_give_the_right_rows(
    spark: Any, tmp_path: Path, engine: str, hive: bool
) -> None:
    options = {**URLENCODE, "hoodie.datasource.write.hive_style_partitioning": str(hive).lower()}
    t = _create(engine, spark, tmp_path / "t", record_key="id", partition_by="route", options=options)
    rows = [(i, v, 1, f"r{i}") for i, v in enumerate(ODD_VALUES)] + [(100, "plain", 1, "p")]
    t.upsert(_batch(engine, spark, rows[:5]))
    t.bulk_insert(_batch(engine, spark, rows[5:]))
    props = (Path(t.path) / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.datasource.write.partitionpath.urlencode=true" in props
    folders = {p.name for p in Path(t.path).iterdir() if p.is_dir() and p.name != ".hoodie"}
    prefix = "route=" if hive else ""
    assert f"{prefix}SFO%2FJFK" in folders and f"{prefix}x%3Dy" in folders and f"{prefix}50%25" in folders
    assert f"{prefix}tab%09here" in folders and f"{prefix}x%2F..%2Fup" in folders
    assert not (Path(t.path).parent / "up").exists()
    everything = sorted((i, v) for i, v, _, _ in rows)
    assert _rows(t, ["id", "route"]) == everything
    assert rows_of(hudi_rs_read(t.path), ["id", "route"]) == everything
    for value in ODD_VALUES:
        assert _rows_filtered(t, "=", value) == [value]
        others = _rows_filtered(t, "!=", value)
        assert value not in others and len(others) == len(rows) - 1
    assert _rows_filtered(t, "in", ["SFO/JFK", "a:b"]) == ["SFO/JFK", "a:b"]
    assert _rows_filtered(t, "<", "50%") == sorted(v for _, v, _, _ in rows if v < "50%")


def _rows_filtered(t: Table, op: str, value: Any) -> list[str]:
    got = rows_of(t.read(filters=[("route", op, value)]), ["route"])
    return sorted(r[0] for r in got) if op != "in" else [v for v in value if (v,) in got]


@pytest.mark.parametrize("engine", ENGINES)
def test_urlencode_still_refuses_dot_dot_and_hidden_folders(spark: Any, tmp_path: Path, engine: str) -> None:
    t = _create(engine, spark, tmp_path / "t", record_key="id", partition_by="route",
                options={**URLENCODE, "hoodie.datasource.write.hive_style_partitioning": "false"})
    for value in ("..", ".hoodie", "x" * 90 + "/" * 60):  # the last: 270 bytes once encoded
        with pytest.raises(InvalidPartitionValueError):
            t.upsert(_batch(engine, spark, [(1, value, 1, "a")]))
    assert t.timeline() == []
    assert [p.name for p in Path(t.path).iterdir()] == [".hoodie"]


def test_null_and_empty_partition_values_go_to_hives_default_partition(spark: Any, tmp_path: Path) -> None:
    t = _create("spark", spark, tmp_path / "t", record_key="id", partition_by="route",
                options={"hoodie.datasource.write.hive_style_partitioning": "false"})
    t.upsert(_batch("spark", spark, [(1, None, 1, "a"), (2, "", 1, "b"), (3, "sf", 1, "c")]))
    folders = sorted(p.name for p in Path(t.path).iterdir() if p.name != ".hoodie")
    assert folders == ["__HIVE_DEFAULT_PARTITION__", "sf"]
    assert sorted(hudi_rs_read(t.path).column("id").to_pylist()) == [1, 2, 3]
    assert sorted(r[0] for r in _rows(t, ["id"])) == [1, 2, 3]


def test_the_spark_data_source_prunes_by_decoded_values(spark: Any, tmp_path: Path) -> None:
    t = _create("spark", spark, tmp_path / "t", record_key="id", partition_by="route", options=URLENCODE)
    t.upsert(_batch("spark", spark, [(1, "SFO/JFK", 1, "a"), (2, "sf", 1, "b")]))
    from tidemark.engines.spark.datasource import TidemarkPushdownDataSource

    spark.dataSource.register(TidemarkPushdownDataSource)
    try:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        df = spark.read.format("tidemark").load(t.path)
        assert [r.id for r in df.filter("route = 'SFO/JFK'").collect()] == [1]
        assert sorted(r.id for r in df.filter("route in ('SFO/JFK', 'sf')").collect()) == [1, 2]
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        from tidemark import register

        register(spark)


def test_urlencode_is_fixed_when_the_table_is_created(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="route")
    with pytest.raises(ConfigError, match="partitionpath.urlencode"):
        Table.open(t.path, spark=None, options=URLENCODE)
    Table.open(t.path, spark=None, options={"hoodie.datasource.write.partitionpath.urlencode": "false"})


@pytest.mark.parametrize("hive", [True, False])
@pytest.mark.parametrize("encode", [True, False])
def test_arrow_and_spark_compute_the_same_encoded_partition_paths(spark: Any, hive: bool, encode: bool) -> None:
    from tidemark.engines.arrow.keys import partition_path_array
    from tidemark.engines.spark.keys import partition_path_column
    from tidemark.format.partition_path import ESCAPED, escape_value, unescape_value

    values = ["".join(ESCAPED), "a%2Fb", "ü/ß", "plain", "", None, "x\x00y", "%", "%%41"]
    rows = [(v, str(i)) for i, v in enumerate(values)]
    df = spark.createDataFrame(rows, "a string, b string")
    by_spark = [r[0] for r in df.select(partition_path_column(["a", "b"], hive_style=hive, url_encode=encode))
                .collect()]
    by_arrow = partition_path_array(df.toArrow(), ["a", "b"], hive_style=hive, url_encode=encode).to_pylist()
    assert by_arrow == by_spark
    if encode:
        assert escape_value("".join(ESCAPED)).count("%") == len(ESCAPED)
        for v in values:
            if v:
                assert unescape_value(escape_value(v)) == v


# -- timestamps and other types --------------------------------------------------------------


def _ts_table(values: list[int], tz: str | None = "UTC") -> pa.Table:
    return pa.table({"id": pa.array(range(len(values)), pa.int64()), "t": pa.array(values, pa.timestamp("ns", tz=tz))})


@pytest.mark.parametrize("tz", ["UTC", None])
def test_nanosecond_timestamps_without_sub_microsecond_digits_are_stored_as_microseconds(
    spark: Any, tmp_path: Path, tz: str | None
) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    t.upsert(_ts_table([1_700_000_000_123_456_000, 1_000], tz))
    files = list(Path(t.path).glob("*.parquet"))
    assert pq.read_schema(files[0]).field("t").type == pa.timestamp("us", tz=tz)
    expected = pa.array([1_700_000_000_123_456, 1], pa.timestamp("us", tz=tz)).to_pylist()
    assert t.read().sort_by("id").column("t").to_pylist() == expected
    if tz is not None:  # hudi-rs (0.x) cannot read zone-less timestamps at all, of any unit
        assert hudi_rs_read(t.path).sort_by("id").column("t").to_pylist() == expected
    spark_rows = Table.open(t.path, spark=spark).read().orderBy("id").collect()
    assert len(spark_rows) == 2 and spark_rows[1].t is not None
    t.upsert(_ts_table([2_000], tz))  # a later write in nanoseconds fits the table too
    assert t.read().num_rows == 2


def test_nanosecond_timestamps_with_sub_microsecond_digits_are_refused(tmp_path: Path) -> None:
    import pandas as pd

    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    t.upsert(_ts_table([1_000], None))
    before, instants = _disk(tmp_path), len(t.timeline())
    frame = pd.DataFrame({"id": [5], "t": [pd.Timestamp("2024-01-01 00:00:00.000000001")]})
    with pytest.raises(UnsupportedTypeError, match="'t'.*microseconds") as info:
        t.upsert(frame)
    assert isinstance(info.value, SchemaMismatchError) and info.value.column == "t"
    assert _disk(tmp_path) == before and len(t.timeline()) == instants
    fresh = Table.create(str(tmp_path / "fresh"), spark=None, record_key="id")
    with pytest.raises(UnsupportedTypeError):
        fresh.bulk_insert(frame)
    assert fresh.timeline() == [] and fresh.schema is None


def test_types_no_hudi_reader_reads_are_converted_or_refused(spark: Any, tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    t.upsert(pa.table({
        "id": pa.array([1, 2], pa.uint32()),
        "small": pa.array([1, 255], pa.uint8()),
        "big": pa.array([1, 2**63 - 1], pa.uint64()),
        "cat": pa.array(["a", "b"]).dictionary_encode(),
    }))
    assert t.schema is not None
    assert [t.schema.field(c).type for c in ("id", "small", "big", "cat")] == [
        pa.int64(), pa.int32(), pa.int64(), pa.string()  # as recorded (Avro has no int16)
    ]
    assert sorted(hudi_rs_read(t.path).column("big").to_pylist()) == [1, 2**63 - 1]
    assert Table.open(t.path, spark=spark).read().count() == 2
    other = Table.create(str(tmp_path / "o"), spark=None, record_key="id")
    before = _disk(tmp_path)
    with pytest.raises(UnsupportedTypeError, match="'big'"):
        t.upsert(pa.table({"id": pa.array([3], pa.uint32()), "small": pa.array([1], pa.uint8()),
                           "big": pa.array([2**64 - 1], pa.uint64()), "cat": pa.array(["c"])}))
    for column in (pa.array([1], pa.time64("us")), pa.array([1], pa.duration("s")), pa.nulls(1)):
        with pytest.raises(UnsupportedTypeError, match="'x'"):
            other.upsert(pa.table({"id": [1], "x": column}))
    assert other.timeline() == []
    assert _disk(tmp_path) == before


# -- composite record keys -------------------------------------------------------------------

KEY_SCHEMA = pa.schema([("a", pa.string()), ("b", pa.string()), ("v", pa.int64())])


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("operation", ["upsert", "insert", "bulk_insert", "delete"])
@pytest.mark.parametrize("partitioned", [True, False])
def test_composite_key_values_that_could_collide_are_refused(
    spark: Any, tmp_path: Path, engine: str, operation: str, partitioned: bool
) -> None:
    schema = pa.schema([*KEY_SCHEMA, ("p", pa.string())])
    t = _create(engine, spark, tmp_path / "t", record_key=["a", "b"], partition_by="p" if partitioned else ())
    t.upsert(_batch(engine, spark, [("x", "y", 1, "p1")], schema))
    before, instants = _disk(tmp_path), len(t.timeline())
    collide = [("1,b:2", "3", 1, "p1"), ("1", "2,b:3", 2, "p1")]
    with pytest.raises(InvalidRecordKeyError, match="','") as info:
        getattr(t, operation)(_batch(engine, spark, collide, schema))
    assert info.value.field == "a" and info.value.value == "1,b:2"
    assert _disk(tmp_path) == before and len(t.timeline()) == instants
    assert _rows(t, ["a", "b", "v"]) == [("x", "y", 1)]
    # ':' alone is unambiguous (each value ends at the next ','): kept, both rows
    t.upsert(_batch(engine, spark, [("1:b", "2", 1, "p1"), ("1", "b:2", 2, "p1")], schema))
    assert len(hudi_rs_read(t.path)) == 3 and len(_rows(t, ["a"])) == 3


@pytest.mark.parametrize("engine", ENGINES)
def test_nested_record_key_types_are_refused(spark: Any, tmp_path: Path, engine: str) -> None:
    schema = pa.schema([("k", pa.struct([("x", pa.int64())])), ("v", pa.int64())])
    with pytest.raises(InvalidRecordKeyError, match="'k'"):
        Table.create(str(tmp_path / "c"), spark=None, record_key="k", schema=schema)
    assert not (tmp_path / "c" / ".hoodie").exists()
    t = _create(engine, spark, tmp_path / "t", record_key="k")
    with pytest.raises(InvalidRecordKeyError, match="'k'"):
        t.upsert(_batch(engine, spark, [({"x": 1}, 1)], schema))
    assert t.timeline() == [] and t.schema is None
    p = _create(engine, spark, tmp_path / "p", record_key="v", partition_by="k")
    with pytest.raises(InvalidPartitionValueError):
        p.upsert(_batch(engine, spark, [({"x": 1}, 1)], schema))
    assert p.timeline() == []


# -- the first write and the table's schema --------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("first", ["delete", "empty upsert"])
def test_a_delete_or_empty_first_write_does_not_fix_the_schema(
    spark: Any, tmp_path: Path, engine: str, first: str
) -> None:
    t = _create(engine, spark, tmp_path / "t", record_key="id", partition_by="route", ordering_field="ts")
    if first == "delete":
        keys = pa.schema([("id", pa.int64()), ("route", pa.string())])
        t.delete(_batch(engine, spark, [(1, "sf")], keys))
    else:
        t.upsert(_batch(engine, spark, [], pa.schema([("id", pa.int64()), ("route", pa.string()),
                                                       ("ts", pa.int64())])))
    assert t.schema is None and Table.open(t.path, spark=None).schema is None
    t.upsert(_batch(engine, spark, [(1, "sf", 1, "a"), (2, "nyc", 1, "b")]))
    t.upsert(_batch(engine, spark, [(2, "nyc", 2, "c")]))
    assert _rows(t, ["id", "v"]) == [(1, "a"), (2, "c")]
    assert rows_of(hudi_rs_read(t.path), ["id", "v"]) == [(1, "a"), (2, "c")]
    assert Table.open(t.path, spark=None).schema == t.schema


# -- messages --------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_schema_messages_say_what_to_do(spark: Any, tmp_path: Path, engine: str) -> None:
    t = _create(engine, spark, tmp_path / "t", record_key="id", ordering_field="ts")
    t.upsert(_batch(engine, spark, [(1, "sf", 1, "a")]))
    numbers = pa.schema([*list(ARROW_SCHEMA)[:3], ("v", pa.int64())])
    with pytest.raises(SchemaMismatchError, match="allowed: adding nullable columns") as info:
        t.upsert(_batch(engine, spark, [(2, "sf", 1, 5)], numbers))
    assert "'v'" in str(info.value) or "v:" in str(info.value)
    no_ts = pa.schema([f for f in ARROW_SCHEMA if f.name != "ts"])
    with pytest.raises(MissingColumnError, match="ordering") as missing:
        t.upsert(_batch(engine, spark, [(2, "sf", "b")], no_ts))
    assert "set.null.for.missing.columns" not in str(missing.value)
    assert len(t.timeline()) == 1
