"""A record's key is the text Hudi's key generators write (format/record_key.py): both engines
write it alike, so a record written by one is updated, not duplicated, by the other (and by Hudi).

* a key of several fields writes a null value as ``__null__`` and an empty one as ``__empty__``;
  a record whose every key field is null or empty has no key and is refused;
* a key of one field that is null or empty is refused (Hudi's simple key generator does too);
* the bucket index hashes a key's parts as they stand in the key.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.errors import NullRecordKeyError
from tidemark.format.names import RECORD_KEY
from tidemark.write.bucket import bucket_of_file_id

SCHEMA = pa.schema([("tenant", pa.string()), ("code", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def _rows(tenants: list[str | None], codes: list[int | None], ts: int, tag: str) -> pa.Table:
    return pa.table({"tenant": tenants, "code": codes, "ts": [ts] * len(codes), "v": [tag] * len(codes)}, SCHEMA)


def _open(path: Path, spark: Any, engine: str) -> tidemark.Table:
    return tidemark.Table.open(str(path), spark=spark if engine == "spark" else None)


def _write(table: tidemark.Table, spark: Any, engine: str, rows: pa.Table, operation: str = "upsert") -> None:
    data = spark.createDataFrame(rows.to_pandas(), "tenant string, code long, ts long, v string") \
        if engine == "spark" else rows
    getattr(table, operation)(data)


def _keys(path: Path) -> dict[str, str]:
    read = hudi_rs_read(str(path))
    return dict(zip(read.column(RECORD_KEY).to_pylist(), read.column("v").to_pylist(), strict=True))


@pytest.mark.spark
@pytest.mark.parametrize(("first", "second"), [("arrow", "spark"), ("spark", "arrow")])
def test_a_key_of_several_fields_writes_nulls_and_empties_as_hudi_does(
    spark: Any, tmp_path: Path, first: str, second: str
) -> None:
    path = tmp_path / "t"
    tidemark.Table.create(str(path), spark=None, record_key=["tenant", "code"], ordering_field="ts", schema=SCHEMA)
    tenants: list[str | None] = [None, "", "acme", "acme", None]
    codes: list[int | None] = [1, 1, None, 2, 2]
    _write(_open(path, spark, first), spark, first, _rows(tenants, codes, 1, "first"), "bulk_insert")
    expected = {"tenant:__null__,code:1", "tenant:__empty__,code:1", "tenant:acme,code:__null__",
                "tenant:acme,code:2", "tenant:__null__,code:2"}
    assert set(_keys(path)) == expected
    # The other engine updates the same records (the same keys), it does not add them again.
    _write(_open(path, spark, second), spark, second, _rows(tenants, codes, 2, "second"))
    assert _keys(path) == dict.fromkeys(expected, "second")
    assert _open(path, spark, "arrow").read().num_rows == 5


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["arrow", "spark"])
@pytest.mark.parametrize("operation", ["bulk_insert", "upsert", "delete"])
def test_a_record_without_a_key_is_refused_and_changes_nothing(
    spark: Any, tmp_path: Path, engine: str, operation: str
) -> None:
    single, several = tmp_path / "single", tmp_path / "several"
    tidemark.Table.create(str(single), spark=None, record_key="tenant", ordering_field="ts", schema=SCHEMA)
    tidemark.Table.create(str(several), spark=None, record_key=["tenant", "code"], ordering_field="ts", schema=SCHEMA)
    for path in (single, several):
        _write(_open(path, spark, "arrow"), spark, "arrow", _rows(["a", "b"], [1, 2], 1, "kept"), "bulk_insert")
    before = {path: _keys(path) for path in (single, several)}
    # One field empty (or null); several fields all null or empty: Hudi refuses such records too.
    refused = [(single, _rows(["c", ""], [3, 4], 2, "new"), 1),
               (single, _rows([None, "", "d"], [3, 4, 5], 2, "new"), 2),
               (several, _rows(["", None, "e", ""], [None, None, 6, 7], 2, "new"), 2)]
    for path, rows, count in refused:
        with pytest.raises(NullRecordKeyError) as info:
            _write(_open(path, spark, engine), spark, engine, rows, operation)
        assert info.value.count == count, (path.name, rows.to_pylist())
        assert _keys(path) == before[path]


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_the_bucket_index_hashes_a_keys_parts_as_they_stand_in_the_key(spark: Any, tmp_path: Path, engine: str) -> None:
    path = tmp_path / "t"
    buckets = 16
    tidemark.Table.create(str(path), spark=None, record_key=["tenant", "code"], ordering_field="ts", schema=SCHEMA,
                          options={"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": str(buckets)})
    tenants: list[str | None] = [None, "", "acme", "beta", None, ""]
    codes: list[int | None] = [1, 1, None, 7, 9, 3]
    _write(_open(path, spark, engine), spark, engine, _rows(tenants, codes, 1, "x"))
    read = hudi_rs_read(str(path))
    placed = dict(zip(read.column(RECORD_KEY).to_pylist(),
                      (bucket_of_file_id(f) for f in read.column("_hoodie_file_name").to_pylist()), strict=True))
    assert len(placed) == len(tenants)
    for key, bucket in placed.items():
        # Hudi's BucketIdentifier reads the values back from the key (KeyGenUtils.extractRecordKeysByFields:
        # __null__ is null, __empty__ is ""), then takes java.util.List.hashCode of them.
        values = [{"__null__": None, "__empty__": ""}.get(v, v) for v in (p.split(":", 1)[1] for p in key.split(","))]
        assert bucket == (_java_list_hash(values) & 0x7FFFFFFF) % buckets, key


def _java_list_hash(values: list[str | None]) -> int:
    """java.util.List.hashCode of strings (a null element adds 0), written out from the JDK's definition."""
    h = 1
    for value in values:
        code = 0
        for unit in (value or "").encode("utf-16-be").hex(" ", 2).split():
            code = (31 * code + int(unit, 16)) & 0xFFFFFFFF
        h = (31 * h + code) & 0xFFFFFFFF
    return h


@pytest.mark.spark
def test_a_spark_bulk_insert_checks_empty_keys_of_a_column_that_cannot_be_null(spark: Any, tmp_path: Path) -> None:
    """Spark's schema says the key cannot be null: an empty text key is still no key."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=spark, record_key="tenant", ordering_field="ts", schema=SCHEMA)
    schema = StructType([StructField("tenant", StringType(), False), StructField("code", LongType(), True),
                         StructField("ts", LongType(), False), StructField("v", StringType(), True)])
    with pytest.raises(NullRecordKeyError) as info:
        table.bulk_insert(spark.createDataFrame([("a", 1, 1, "x"), ("", 2, 1, "y")], schema))
    assert info.value.count == 1
    assert not [i for i in table.timeline() if i.action.value == "commit"]


_TYPED_KEYS = {
    # key type: (Arrow type, Spark DDL type, values, their key text)
    "timestamp": (pa.timestamp("us", tz="UTC"), "timestamp_ltz",
                  [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
                   dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc)],
                  ["1704067200000000", "-1"]),
    "timestamp_ntz": (pa.timestamp("us"), "timestamp_ntz",
                      [dt.datetime(2024, 3, 10, 2, 30), dt.datetime(2024, 5, 6, 7, 8, 9, 123456)],
                      ["1710037800000000", "1714979289123456"]),
    "date": (pa.date32(), "date", [dt.date(2024, 1, 2), dt.date(1969, 12, 31)], ["2024-01-02", "1969-12-31"]),
    "decimal": (pa.decimal128(10, 2), "decimal(10,2)", [decimal.Decimal("12.30"), decimal.Decimal("-0.05")],
                ["12.30", "-0.05"]),
}


@pytest.mark.spark
@pytest.mark.parametrize("key_type", sorted(_TYPED_KEYS))
def test_both_engines_write_one_key_text_for_every_key_type_in_any_session_time_zone(
    spark: Any, tmp_path: Path, key_type: str
) -> None:
    """Hudi's text of each type (format/record_key.py): written by the Arrow engine, then by the
    Spark engine in a session whose time zone is not UTC (and whose default timestamp type is
    TIMESTAMP_NTZ), the records are updated, not added."""
    arrow_type, spark_type, values, texts = _TYPED_KEYS[key_type]
    # hudi-rs (0.x) cannot read zone-less timestamps at all (tests/test_input_safety.py): tidemark reads those.
    keys = _keys if arrow_type != pa.timestamp("us") else _tidemark_keys
    schema = pa.schema([("k", arrow_type), ("v", pa.string())])
    path = str(tmp_path / "t")
    tidemark.Table.create(path, spark=None, record_key="k", schema=schema)
    tidemark.Table.open(path, spark=None).bulk_insert(pa.table({"k": values, "v": ["arrow"] * len(values)}, schema))
    assert sorted(keys(tmp_path / "t")) == sorted(texts)
    settings = {"spark.sql.session.timeZone": "America/New_York", "spark.sql.timestampType": "TIMESTAMP_NTZ"}
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        frame = spark.createDataFrame([(value, "spark") for value in values], f"k {spark_type}, v string")
        tidemark.Table.open(path, spark=spark).upsert(frame)
    finally:
        for key, value in before.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    assert keys(tmp_path / "t") == dict.fromkeys(texts, "spark")


def _tidemark_keys(path: Path) -> dict[str, str]:
    read = tidemark.Table.open(str(path), spark=None).read()
    return dict(zip(read.column(RECORD_KEY).to_pylist(), read.column("v").to_pylist(), strict=True))


@pytest.mark.spark
@pytest.mark.parametrize("engine", ["arrow", "spark"])
def test_a_floating_point_key_is_refused(spark: Any, tmp_path: Path, engine: str) -> None:
    """Java's text of a double (Hudi's and Spark's key) changed with Java 19 and is not Arrow's:
    one record would be stored under two keys."""
    from tidemark.errors import InvalidRecordKeyError

    schema = pa.schema([("k", pa.float64()), ("v", pa.string())])
    with pytest.raises(InvalidRecordKeyError, match="floating point"):
        tidemark.Table.create(str(tmp_path / "declared"), spark=None, record_key="k", schema=schema)
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=spark if engine == "spark" else None, record_key="k")
    rows = pa.table({"k": [1.5, 2.0], "v": ["a", "b"]}, schema)
    with pytest.raises(InvalidRecordKeyError, match="floating point"):
        table.upsert(spark.createDataFrame(rows.to_pandas()) if engine == "spark" else rows)
    assert not [i for i in table.timeline() if i.action.value == "commit"]
