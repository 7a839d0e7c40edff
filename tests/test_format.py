"""The v8 on-disk format: instant names, commit metadata, properties, schemas."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from tidemark.format.commit_metadata import CommitMetadata, WriteStat
from tidemark.format.names import base_file_name, parse_base_file_name
from tidemark.format.properties import TableConfig, format_properties, parse_properties, table_checksum
from tidemark.format.schema import arrow_schema_from_avro, avro_schema_json
from tidemark.timeline import Action, Instant, State
from tidemark.timeline.instant import parse_instant_file_name

REAL_TABLES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "hudi-format" / "real-tables"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("20250713011315930.commit.requested", Instant("20250713011315930", Action.COMMIT, State.REQUESTED)),
        ("20250713011315930.inflight", Instant("20250713011315930", Action.COMMIT, State.INFLIGHT)),
        (
            "20250713011315930_20250713011316231.commit",
            Instant("20250713011315930", Action.COMMIT, State.COMPLETED, "20250713011316231"),
        ),
        (
            "20250713011315930.replacecommit.inflight",
            Instant("20250713011315930", Action.REPLACE_COMMIT, State.INFLIGHT),
        ),
        (
            "20250713011315930_20250713011316231.rollback",
            Instant("20250713011315930", Action.ROLLBACK, State.COMPLETED, "20250713011316231"),
        ),
    ],
)
def test_instant_file_names_round_trip(name: str, expected: Instant) -> None:
    parsed = parse_instant_file_name(name)
    assert parsed == expected
    assert parsed.file_name == name


@pytest.mark.parametrize(
    "name", ["hoodie.properties", "20250713.commit", "x_y.commit", "20250713011315930.unknown.requested"]
)
def test_non_instant_files_are_ignored(name: str) -> None:
    assert parse_instant_file_name(name) is None


def test_base_file_name_round_trip() -> None:
    name = base_file_name("7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0", "1-115-169", "20250713011315930")
    assert name == "7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0_1-115-169_20250713011315930.parquet"
    parsed = parse_base_file_name(name)
    assert parsed is not None
    assert (parsed.file_id, parsed.write_token, parsed.instant_time) == (
        "7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0",
        "1-115-169",
        "20250713011315930",
    )
    assert parse_base_file_name(".hoodie_partition_metadata") is None


def test_commit_metadata_round_trip_keeps_every_stat() -> None:
    stats = (
        WriteStat("city=sf", "f1-0", "city=sf/f1-0_0-1-2_20250101000000000.parquet", None, 10, 10, 0, 0, 1234),
        WriteStat(
            "city=sf",
            "f2-0",
            "city=sf/f2-0_0-1-2_20250101000000000.parquet",
            "20240101000000000",
            8,
            1,
            3,
            2,
            999,
            prev_base_file="f2-0_0-1-1_20240101000000000.parquet",
        ),
    )
    meta = CommitMetadata("UPSERT", stats, {"schema": "{}"})
    back = CommitMetadata.from_bytes(meta.to_bytes())
    assert back.operation == "UPSERT"
    assert {s.file_id: s for s in back.write_stats} == {s.file_id: s for s in stats}
    assert back.extra == {"schema": "{}"}
    assert not back.is_replace


def test_replace_metadata_keeps_replaced_file_ids() -> None:
    meta = CommitMetadata("INSERT_OVERWRITE", (), {}, {"p=1": ("a-0", "b-0")}, is_replace=True)
    back = CommitMetadata.from_bytes(meta.to_bytes())
    assert back.is_replace
    assert back.replaced_file_ids == {"p=1": ("a-0", "b-0")}
    assert back.file_groups() == {("p=1", "a-0"), ("p=1", "b-0")}


@pytest.mark.skipif(not REAL_TABLES.exists(), reason="shared/reference not beside the checkout")
def test_reads_commit_metadata_written_by_real_hudi(tmp_path: Path) -> None:
    with zipfile.ZipFile(REAL_TABLES / "v8_simplekeygen_nonhivestyle.zip") as z:
        z.extractall(tmp_path)
    timeline = tmp_path / "v8_simplekeygen_nonhivestyle" / ".hoodie" / "timeline"
    completed = timeline / "20250713011316909_20250713011317225.commit"
    meta = CommitMetadata.from_bytes(completed.read_bytes())
    assert meta.operation == "UPSERT"
    by_id = {s.file_id: s for s in meta.write_stats}
    update = by_id["7b0ea4f9-3768-4e87-b12c-8d33efd22b55-0"]
    assert update.prev_commit == "20250713011315930"
    assert update.num_updates == 1
    assert update.path.startswith("10/")
    props = parse_properties((timeline.parent / "hoodie.properties").read_text())
    config = TableConfig.from_properties(props)
    assert config.record_key_fields == ("id",)
    assert config.partition_fields == ("byteField",)
    assert config.ordering_fields == ("longField",)
    assert not config.hive_style_partitioning
    assert props["hoodie.table.checksum"] == table_checksum("default", "v8_simplekeygen_nonhivestyle")
    schema = arrow_schema_from_avro(props["hoodie.table.create.schema"])
    assert schema.field("decimalField").type == pa.decimal128(10, 5)


def test_properties_escape_and_round_trip() -> None:
    props = {"hoodie.table.create.schema": '{"type":"record","a:b":"c=d"}', "k": "v"}
    assert parse_properties(format_properties(props)) == props


def test_table_config_writes_what_hudi_readers_need() -> None:
    config = TableConfig("t", "COPY_ON_WRITE", ("id",), ("city",), ("ts",), True)
    props = config.to_properties()
    assert props["hoodie.table.version"] == "8"
    assert props["hoodie.timeline.layout.version"] == "2"
    assert props["hoodie.table.partition.fields"] == "city"
    assert props["hoodie.datasource.write.hive_style_partitioning"] == "true"
    assert props["hoodie.record.merge.mode"] == "EVENT_TIME_ORDERING"
    assert TableConfig.from_properties(props).partition_fields == ("city",)


def test_avro_schema_round_trips_common_types() -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("n", pa.int32()),
            ("name", pa.string()),
            ("ok", pa.bool_()),
            ("x", pa.float64()),
            ("f", pa.float32()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("amount", pa.decimal128(12, 2)),
            ("tags", pa.list_(pa.string())),
            ("attrs", pa.map_(pa.string(), pa.int64())),
            ("nested", pa.struct([("a", pa.int32()), ("b", pa.string())])),
            ("raw", pa.binary()),
        ]
    )
    back = arrow_schema_from_avro(avro_schema_json(schema, "t"))
    assert back.names == schema.names
    for field in schema:
        got = back.field(field.name).type
        if pa.types.is_list(field.type):
            assert got.value_type == field.type.value_type
        elif pa.types.is_map(field.type):
            assert got.item_type == field.type.item_type
        else:
            assert got == field.type, field.name
