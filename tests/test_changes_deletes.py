"""Incremental reads see deletes: a mirror fed only by read_changes stays equal to the table.

The consumer applies each batch's rows (upserts) and deletes in _hoodie_commit_time order,
as a downstream job would, and after every step its mirror must equal a snapshot read and
hudi-rs. Deletes, upserts carrying deletes, stale deletes (which delete nothing), overwrites
and partition deletes, on copy-on-write and merge-on-read tables, with compaction between.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read


def _rows(ids: list[int], part: str, ts: int, v: str = "x") -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "ts": [ts] * len(ids), "v": [v] * len(ids)})


class Mirror:
    """What a downstream consumer keeps: (partition, key) -> row, fed only by read_changes."""

    def __init__(self, table: tidemark.Table) -> None:
        self.table = table
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.checkpoint: str | None = None
        self.deleted_seen = 0

    def catch_up(self) -> None:
        changes = self.table.read_changes(start=self.checkpoint)
        events = [(r["_hoodie_commit_time"], 1, r) for r in changes.rows.to_pylist()]
        events += [(r["_hoodie_commit_time"], 0, r) for r in changes.deletes.to_pylist()]
        for _, is_upsert, r in sorted(events, key=lambda e: (e[0], e[1])):
            key = (r["_hoodie_partition_path"], r["_hoodie_record_key"])
            if is_upsert:
                self.rows[key] = {c: r[c] for c in ("id", "part", "ts", "v")}
            else:
                assert r["_hoodie_operation"] == "delete"
                assert key in self.rows, f"a delete of {key}, which the mirror never had"
                del self.rows[key]
                self.deleted_seen += 1
        self.checkpoint = changes.checkpoint

    def check(self) -> None:
        self.catch_up()
        expected = sorted(self.rows.values(), key=lambda r: (r["part"], r["id"]))
        snapshot = self.table.read().select(["id", "part", "ts", "v"]).sort_by([("part", "ascending"),
                                                                               ("id", "ascending")])
        assert snapshot.to_pylist() == expected
        rs = hudi_rs_read(self.table.path).select(["id", "part", "ts", "v"]).sort_by([("part", "ascending"),
                                                                                      ("id", "ascending")])
        assert rs.to_pylist() == expected


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_mirror_fed_by_read_changes_sees_every_delete(tmp_path: Path, table_type: str) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", table_type=table_type)
    mirror = Mirror(table)
    table.bulk_insert(pa.concat_tables([_rows(list(range(0, 20)), "a", 10), _rows(list(range(20, 40)), "b", 10)]))
    mirror.check()
    table.delete(_rows([1, 2, 3], "a", 15))
    mirror.check()
    assert mirror.deleted_seen == 3
    table.delete(_rows([4], "a", 5))  # stale: older than the stored record, deletes nothing
    mirror.check()
    assert mirror.deleted_seen == 3
    table.upsert(_rows([5, 6], "a", 17, "u"))
    table.delete(_rows([21, 22], "b", 19))  # two commits before the consumer catches up
    mirror.check()
    assert mirror.deleted_seen == 5
    table.delete(_rows([1], "a", 20))  # deleted already: nothing to delete
    table.upsert(_rows([1], "a", 21, "back"))  # and inserted again
    mirror.check()
    if table_type == "MERGE_ON_READ":
        assert table.compact() is not None  # a service: changes no record, reports no delete
        mirror.check()
        assert mirror.deleted_seen == 5
    table.insert_overwrite(_rows([30, 31], "b", 22, "over"))  # every other row of b is gone
    mirror.check()
    table.delete_partitions(["part=a"])
    mirror.check()
    assert mirror.rows and all(part == "part=b" for part, _ in mirror.rows)


@pytest.mark.spark
def test_deletes_come_back_as_a_dataframe_with_spark(spark: Any, tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts")
    table.bulk_insert(spark.createDataFrame(_rows(list(range(10)), "a", 1)))
    start = table.read_changes().checkpoint
    table.delete(spark.createDataFrame(_rows([3, 4], "a", 2)))
    changes = table.read_changes(start=start)
    deleted = sorted(r["id"] for r in changes.deletes.collect())
    assert deleted == [3, 4]
    assert {r["_hoodie_operation"] for r in changes.deletes.collect()} == {"delete"}
    assert changes.rows.count() == 0
