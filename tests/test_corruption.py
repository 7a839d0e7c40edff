"""Damaged tables: a missing data file, a broken instant file or hoodie.properties is refused.

Each case used to be silent: the readers served an older version (or nothing), the next
upsert built on it and made the loss permanent, or a broken file was ignored. Now the read
or write raises a typed CorruptTableError that names the file and says how to repair, and
changes nothing on disk; once repaired as the message says, tidemark and hudi-rs agree.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import (
    CorruptDataFileError,
    CorruptInstantError,
    CorruptPropertiesError,
    CorruptTableError,
    MissingDataFileError,
    Table,
)
from tidemark.format.properties import format_properties, parse_properties, table_checksum

COLS = ["id", "v"]


def _rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": f"p{i % 2}", "ts": 1, "v": v} for i, v in pairs])


def _table(path: Path, **kwargs: Any) -> Table:
    return Table.create(str(path), spark=None, record_key="id", partition_by="part", ordering_field="ts", **kwargs)


def _files_of(table: Table, instant_time: str, suffix: str) -> list[Path]:
    return sorted(p for p in Path(table.path).rglob(f"*{instant_time}*{suffix}") if ".hoodie" not in p.parts)


def _timeline_names(table: Table) -> set[str]:
    return {p.name for p in (Path(table.path) / ".hoodie" / "timeline").iterdir() if p.is_file()}


def _instant_file(table: Table, instant_time: str) -> Path:
    (found,) = (Path(table.path) / ".hoodie" / "timeline").glob(f"{instant_time}_*")
    return found


# -- (a) a data file of the latest version deleted by hand ---------------------------------------


def test_a_deleted_base_file_of_the_latest_commit_is_refused_by_reads_and_writes(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a"), (2, "b")))
    latest = t.upsert(_rows((1, "a2")))
    (lost,) = _files_of(t, latest.instant_time, ".parquet")
    saved = lost.read_bytes()
    lost.unlink()
    before = _timeline_names(t)

    with pytest.raises(MissingDataFileError) as read_error:
        t.read()
    error = read_error.value
    assert isinstance(error, CorruptTableError)
    assert error.path == str(lost.relative_to(t.path)) and error.instant_time == latest.instant_time
    assert latest.instant_time in str(error) and error.path in str(error) and "Restore the file" in str(error)
    with pytest.raises(MissingDataFileError):
        Table.open(t.path, spark=None).read()  # a fresh process-like open sees it too
    with pytest.raises(MissingDataFileError):
        t.read_incremental()
    with pytest.raises(MissingDataFileError):
        t.upsert(_rows((1, "a3")))  # must not make the loss permanent
    assert _timeline_names(t) == before  # the refused write changed nothing

    lost.write_bytes(saved)  # repaired as the message says
    assert rows_of(t.read(), COLS) == [(1, "a2"), (2, "b")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a2"), (2, "b")]


def test_rolling_back_the_commit_whose_file_was_lost_accepts_the_loss(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a"), (2, "b")))
    latest = t.upsert(_rows((1, "a2")))
    for f in _files_of(t, latest.instant_time, ".parquet"):
        f.unlink()
    with pytest.raises(MissingDataFileError):
        t.read()
    t.rollback(latest.instant_time)  # the other remedy the message names
    assert rows_of(t.read(), COLS) == [(1, "a"), (2, "b")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a"), (2, "b")]
    t.upsert(_rows((3, "c")))
    assert rows_of(t.read(), COLS) == [(1, "a"), (2, "b"), (3, "c")]


def test_a_deleted_only_base_file_of_a_file_group_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a")))
    latest = t.upsert(_rows((2, "b")))  # a new file group in partition p0
    (lost,) = _files_of(t, latest.instant_time, ".parquet")
    lost.unlink()
    with pytest.raises(MissingDataFileError) as error:
        t.read()
    assert error.value.path == str(lost.relative_to(t.path))


def test_time_travel_to_a_version_clean_removed_is_not_mistaken_for_loss(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", options={"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
                                        "hoodie.clean.fileversions.retained": "1"})
    first = t.upsert(_rows((1, "a")))
    t.upsert(_rows((1, "a2")))
    t.upsert(_rows((1, "a3")))
    t.clean()
    assert not _files_of(t, first.instant_time, ".parquet")  # older versions legitimately gone
    assert rows_of(t.read(), COLS) == [(1, "a3")]
    t.read(as_of=first.instant_time)  # no MissingDataFileError: a newer version exists
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a3")]


def test_table_services_remove_files_without_tripping_the_check(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", options={"hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2",
                                        "hoodie.keep.max.commits": "3"})
    for n in range(6):
        t.upsert(_rows(*[(i, f"v{n}") for i in range(4)]))
    t.clean()
    t.archive()
    t.cluster()
    t.clean()
    t.insert_overwrite(_rows((0, "over")))
    t.clean()
    expected = [(0, "over"), (1, "v5"), (3, "v5")]
    assert rows_of(t.read(), COLS) == expected
    t.upsert(_rows((5, "new")))
    assert rows_of(t.read(), COLS) == [*expected, (5, "new")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [*expected, (5, "new")]


def test_a_deleted_log_file_of_the_latest_slice_is_refused(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", table_type="MERGE_ON_READ")
    t.upsert(_rows((1, "a"), (2, "b")))
    latest = t.upsert(_rows((1, "a2")))
    logs = _files_of(t, latest.instant_time, "")
    logs = [p for p in logs if ".log." in p.name]
    assert logs, "the update should have written a log file"
    saved = {p: p.read_bytes() for p in logs}
    for p in logs:
        p.unlink()
    with pytest.raises(MissingDataFileError) as error:
        t.read()
    assert error.value.instant_time == latest.instant_time
    # A write into the damaged partition (p1) is refused; writes list only the partitions they
    # touch (no walk of the table on the commit path), so one into p0 alone would not look at p1.
    with pytest.raises(MissingDataFileError):
        t.upsert(_rows((3, "c")))
    for p, data in saved.items():
        p.write_bytes(data)
    assert rows_of(t.read(), COLS) == [(1, "a2"), (2, "b")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a2"), (2, "b")]


def test_spark_reads_and_the_data_source_refuse_a_lost_file(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = Table.create(path, spark=spark, record_key="id", partition_by="part", ordering_field="ts")
    t.upsert(spark.createDataFrame(_rows((1, "a"), (2, "b")).to_pandas()))
    latest = t.upsert(spark.createDataFrame(_rows((1, "a2")).to_pandas()))
    (lost,) = _files_of(t, latest.instant_time, ".parquet")
    lost.unlink()
    with pytest.raises(MissingDataFileError):
        t.read()
    with pytest.raises(MissingDataFileError):
        t.upsert(spark.createDataFrame(_rows((1, "a3")).to_pandas()))
    with pytest.raises(Exception, match="MissingDataFileError") as source_error:
        spark.read.format("tidemark").load(path).collect()
    assert lost.name in str(source_error.value)


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_base_file_is_a_typed_error(tmp_path: Path, damage: str) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a"), (2, "b")))
    latest = t.upsert(_rows((1, "a2")))
    (damaged,) = _files_of(t, latest.instant_time, ".parquet")
    good = damaged.read_bytes()
    damaged.write_bytes(b"not parquet" * 20 if damage == "garbage" else good[: len(good) // 2])
    before = _timeline_names(t)
    for attempt in (t.read, lambda: t.upsert(_rows((1, "a3")))):
        with pytest.raises(CorruptDataFileError) as error:
            attempt()
        assert error.value.path == str(damaged.relative_to(t.path)) and "Restore the file" in str(error.value)
    assert {n for n in _timeline_names(t) if "rollback" not in n} <= before
    damaged.write_bytes(good)
    assert rows_of(t.read(), COLS) == [(1, "a2"), (2, "b")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a2"), (2, "b")]


# -- (b) a completed instant file damaged ----------------------------------------------------------


@pytest.mark.parametrize("damage", ["garbage", "truncated", "emptied"])
def test_a_damaged_completed_commit_file_is_refused(tmp_path: Path, damage: str) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a"), (2, "b")))
    latest = t.upsert(_rows((1, "a2")))
    instant_file = _instant_file(t, latest.instant_time)
    good = instant_file.read_bytes()
    bad = {"garbage": b"this is not avro at all" * 10, "truncated": good[: len(good) // 2], "emptied": b""}[damage]
    instant_file.write_bytes(bad)
    before = _timeline_names(t)

    for attempt in (lambda: Table.open(t.path, spark=None).read(), lambda: t.upsert(_rows((3, "c")))):
        with pytest.raises(CorruptInstantError) as error:
            attempt()
        assert error.value.path == f".hoodie/timeline/{instant_file.name}"
        assert instant_file.name in str(error.value) and "Restore the file" in str(error.value)
    assert _timeline_names(t) == before and instant_file.read_bytes() == bad

    instant_file.write_bytes(good)
    assert rows_of(Table.open(t.path, spark=None).read(), COLS) == [(1, "a2"), (2, "b")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a2"), (2, "b")]


def test_a_damaged_completed_clean_file_is_refused_where_it_is_read(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", options={"hoodie.clean.commits.retained": "1", "hoodie.clean.automatic": "false"})
    for n in range(3):
        t.upsert(_rows((1, f"v{n}")))
    done = t.clean().clean_instant
    assert done is not None
    clean_file = _instant_file(t, done.requested_time)
    clean_file.write_bytes(b"")
    with pytest.raises(CorruptInstantError) as error:
        t.savepoint(t.timeline()[0].requested_time)  # a savepoint checks what the last clean kept
    assert clean_file.name in str(error.value)


# -- (c) hoodie.properties -----------------------------------------------------------------------


def _props_file(t: Table) -> Path:
    return Path(t.path) / ".hoodie" / "hoodie.properties"


def _edit_props(t: Table, **changes: str) -> None:
    props = parse_properties(_props_file(t).read_text())
    props.update(changes)
    _props_file(t).write_text(format_properties(props))


def test_hoodie_properties_checksum_is_verified(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a")))
    _edit_props(t, **{"hoodie.table.name": "renamed"})  # the checksum no longer matches
    with pytest.raises(CorruptPropertiesError) as error:
        Table.open(t.path, spark=None)
    assert error.value.path == ".hoodie/hoodie.properties"
    assert "hoodie.table.checksum" in str(error.value) and "hoodie.properties" in str(error.value)
    _edit_props(t, **{"hoodie.table.checksum": table_checksum("default", "renamed")})
    assert rows_of(Table.open(t.path, spark=None).read(), COLS) == [(1, "a")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "a")]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "emptied", "binary"])
def test_a_damaged_hoodie_properties_says_so(tmp_path: Path, damage: str) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a")))
    good = _props_file(t).read_bytes()
    bad = {
        "garbage": b"lorem ipsum\ndolor sit amet\n",
        "truncated": good[: len(good) // 2],
        "emptied": b"",
        "binary": bytes(range(256)),
    }[damage]
    _props_file(t).write_bytes(bad)
    with pytest.raises(CorruptPropertiesError) as error:
        Table.open(t.path, spark=None)
    message = str(error.value)
    assert "hoodie.properties" in message and "corrupt" in message and "version None" not in message
    assert "backup" in message  # says what to do


def test_a_damaged_hoodie_properties_falls_back_to_its_backup_as_hudi_does(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    t.upsert(_rows((1, "a")))
    props_file = _props_file(t)
    backup = props_file.with_name("hoodie.properties.backup")
    shutil.copy(props_file, backup)  # what Hudi leaves while it rewrites the file
    props_file.write_bytes(props_file.read_bytes()[:40])
    assert rows_of(Table.open(t.path, spark=None).read(), COLS) == [(1, "a")]
    props_file.unlink()
    assert rows_of(Table.open(t.path, spark=None).read(), COLS) == [(1, "a")]
    backup.write_bytes(b"")
    with pytest.raises(CorruptPropertiesError, match="backup"):
        Table.open(t.path, spark=None)


# -- (d) hoodie.properties names a field the table does not have --------------------------------


@pytest.mark.parametrize(
    ("key", "role"),
    [
        ("hoodie.table.recordkey.fields", "record-key"),
        ("hoodie.table.partition.fields", "partition"),
        ("hoodie.table.precombine.field", "ordering"),
    ],
)
def test_a_key_field_that_names_no_column_is_refused_at_open(tmp_path: Path, key: str, role: str) -> None:
    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64()), ("v", pa.string())])
    t = _table(tmp_path / "t", schema=schema)
    t.upsert(_rows((1, "a")))
    changes = {key: "nope"}
    if role == "ordering":
        changes["hoodie.table.ordering.fields"] = "nope"
    _edit_props(t, **changes)
    with pytest.raises(CorruptPropertiesError) as error:
        Table.open(t.path, spark=None)
    assert error.value.field == "nope" and role in str(error.value) and "hoodie.properties" in str(error.value)


def test_a_key_field_that_names_no_column_is_refused_once_the_schema_is_known(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")  # no schema at create: known from the first commit
    t.upsert(_rows((1, "a")))
    _edit_props(t, **{"hoodie.table.recordkey.fields": "nope"})
    reopened = Table.open(t.path, spark=None)
    with pytest.raises(CorruptPropertiesError, match="nope"):
        reopened.read()
    with pytest.raises(CorruptPropertiesError, match="nope"):
        reopened.upsert(_rows((2, "b")))
