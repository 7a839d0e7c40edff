"""insert_overwrite_table and delete_partition: Hudi's two whole-partition operations.

Both are replacecommits: the replaced file groups vanish from the latest snapshot at once,
stay readable by time travel, and are checked with tidemark's reader and hudi-rs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline


def _rows(ids: range, part: str, v: str = "x") -> pa.Table:
    return pa.table({"id": list(ids), "part": [part] * len(ids), "ts": [1] * len(ids), "v": [v] * len(ids)})


def _ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def _arrow(table: tidemark.Table, **kwargs: Any) -> pa.Table:
    got = table.read(**kwargs)
    return got if isinstance(got, pa.Table) else got.toArrow()


def _three_partitions(path: Path, table_type: str = "COPY_ON_WRITE") -> tidemark.Table:
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", table_type=table_type)
    table.bulk_insert(pa.concat_tables([_rows(range(0, 10), "a"), _rows(range(10, 20), "b"),
                                        _rows(range(20, 30), "c")]))
    table.upsert(_rows(range(15, 25), "b", "updated").slice(0, 5))  # a second slice in b
    return table


def _last_instant(path: str) -> Any:
    return Timeline.load(LocalStorage(path)).by_completion_time()[-1]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_insert_overwrite_table_replaces_every_partition(tmp_path: Path, table_type: str) -> None:
    table = _three_partitions(tmp_path / "t", table_type)
    before = _last_instant(table.path).requested_time
    result = table.insert_overwrite_table(_rows(range(100, 105), "a", "new"))
    assert result.operation == "INSERT_OVERWRITE_TABLE" and result.num_inserts == 5
    last = _last_instant(table.path)
    assert last.action is Action.REPLACE_COMMIT
    assert _ids(_arrow(table)) == list(range(100, 105))  # partitions b and c are gone too
    assert _ids(hudi_rs_read(table.path)) == list(range(100, 105))
    assert _ids(_arrow(table, as_of=before)) == list(range(30))  # time travel still sees the old rows
    table.upsert(_rows(range(105, 107), "b", "again"))
    assert _ids(_arrow(table)) == list(range(100, 107))
    assert _ids(hudi_rs_read(table.path)) == list(range(100, 107))


def test_insert_overwrite_table_with_an_empty_batch_empties_the_table(tmp_path: Path) -> None:
    table = _three_partitions(tmp_path / "t")
    table.insert_overwrite_table(_rows(range(1), "a").slice(0, 0))  # no rows, typed columns
    assert _arrow(table).num_rows == 0
    assert hudi_rs_read(table.path).num_rows == 0


def test_delete_partitions_by_path_and_by_batch(tmp_path: Path) -> None:
    table = _three_partitions(tmp_path / "t")
    result = table.delete_partitions(["part=b"])
    assert result.operation == "DELETE_PARTITION" and result.num_files == 0
    assert _last_instant(table.path).action is Action.REPLACE_COMMIT
    assert _ids(_arrow(table)) == list(range(0, 10)) + list(range(20, 30))
    assert _ids(hudi_rs_read(table.path)) == list(range(0, 10)) + list(range(20, 30))

    table.delete_partitions(_rows(range(1), "c"))  # the partitions of a batch's rows
    assert _ids(_arrow(table)) == list(range(0, 10))
    assert _ids(hudi_rs_read(table.path)) == list(range(0, 10))
    table.upsert(_rows(range(40, 42), "b"))  # a deleted partition can be written again
    assert _ids(hudi_rs_read(table.path)) == [*range(0, 10), 40, 41]


def test_delete_partitions_refuses_unknown_partitions_and_unpartitioned_tables(tmp_path: Path) -> None:
    table = _three_partitions(tmp_path / "t")
    instants = Timeline.load(LocalStorage(table.path)).instants
    with pytest.raises(tidemark.InvalidInputError, match="'part=zz'.*part=a"):
        table.delete_partitions(["part=a", "part=zz"])
    with pytest.raises(tidemark.InvalidInputError, match="no partition"):
        table.delete_partitions([])
    assert Timeline.load(LocalStorage(table.path)).instants == instants  # nothing written
    assert _arrow(table).num_rows == 30

    flat = tidemark.Table.create(str(tmp_path / "flat"), spark=None, record_key="id")
    flat.upsert(_rows(range(3), "a"))
    with pytest.raises(tidemark.InvalidInputError, match="insert_overwrite_table"):
        flat.delete_partitions(["a"])


def test_an_unknown_operation_name_is_a_config_error() -> None:
    from tidemark.write.operation import WriteOperation

    assert WriteOperation.parse("INSERT_OVERWRITE_TABLE") is WriteOperation.INSERT_OVERWRITE_TABLE
    with pytest.raises(tidemark.ConfigError, match="delete_partition"):
        WriteOperation.parse("upsrt")


@pytest.mark.spark
def test_whole_partition_operations_with_spark(spark: Any, tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="part",
                                  ordering_field="ts")
    df = spark.createDataFrame(
        pa.concat_tables([_rows(range(0, 10), "a"), _rows(range(10, 20), "b"), _rows(range(20, 30), "c")])
    )
    table.bulk_insert(df)
    table.delete_partitions(["part=a"])
    assert _ids(hudi_rs_read(table.path)) == list(range(10, 30))
    table.insert_overwrite_table(spark.createDataFrame(_rows(range(50, 53), "c")))
    assert _ids(_arrow(table)) == [50, 51, 52]
    assert _ids(hudi_rs_read(table.path)) == [50, 51, 52]
    table.insert_overwrite_table(spark.createDataFrame(_rows(range(1), "c").slice(0, 0)))
    assert hudi_rs_read(table.path).num_rows == 0
