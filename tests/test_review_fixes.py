"""Cases found in review of the merged safety and interoperability work.

* a compaction is published once, and only while its plan is still pending;
* non-blocking writers cannot delete partitions (a replacecommit would drop their logs);
* a write reads hoodie.properties as Hudi does: from its backup while Hudi rewrites it;
* a damaged plan of a dead cleaner does not block every later write;
* read_changes finds deleted records only when asked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from tidemark.format.properties import BACKUP_PATH, PROPERTIES_PATH
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline

NBCC = {
    "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
}


def _rows(ids: list[int], part: str, ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "part": [part] * len(ids), "ts": [ts] * len(ids), "v": ["x"] * len(ids)})


def test_a_compaction_is_published_once_and_only_while_pending(tmp_path: Path) -> None:
    from tidemark.services import compaction

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts",
                                  table_type="MERGE_ON_READ")
    table.bulk_insert(_rows(list(range(10)), "a"))
    table.upsert(_rows([1, 2], "a", 2))
    done = table.compact()
    assert done is not None
    storage = LocalStorage(table.path)
    plan = compaction.load_plan(storage, done.instant.requested_time)
    before = sorted(os.listdir(Path(table.path, ".hoodie", "timeline")))
    with pytest.raises(tidemark.CommitError, match="no longer pending"):  # a second runner of the same plan
        compaction.complete(storage, plan, done.stats, user_schema=table.schema, table_name="t")
    assert sorted(os.listdir(Path(table.path, ".hoodie", "timeline"))) == before


def test_non_blocking_writers_cannot_delete_partitions(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="ts", table_type="MERGE_ON_READ",
                                  options={**NBCC, "hoodie.index.type": "BUCKET",
                                           "hoodie.bucket.index.num.buckets": "2"})
    table.upsert(_rows([1, 2], "a"))
    instants = Timeline.load(LocalStorage(table.path)).instants
    for partitions in (["part=a"], _rows([1], "a")):
        with pytest.raises(tidemark.ConfigError, match="non_blocking_concurrency_control"):
            table.delete_partitions(partitions)
    assert Timeline.load(LocalStorage(table.path)).instants == instants


def test_a_write_reads_the_properties_backup_while_hudi_rewrites_the_file(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options={
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "filesystem"})
    table.upsert(_rows([1], "a"))
    main = Path(table.path, PROPERTIES_PATH)
    Path(table.path, BACKUP_PATH).write_bytes(main.read_bytes())
    main.unlink()  # Hudi's rewrite: the backup stands in until the new file is there
    table.upsert(_rows([2], "a"))
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]


def test_a_damaged_plan_of_a_dead_cleaner_does_not_block_writes(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    table.upsert(_rows([1], "a"))
    Path(table.path, ".hoodie", "timeline", "20000101000000000.clean.requested").write_bytes(b"garbage")
    table.upsert(_rows([2], "a"))  # single writer: pending work is finished first; this plan cannot be
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]


def test_read_changes_finds_deletes_only_when_asked(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    table.upsert(_rows([1, 2, 3], "a"))
    table.delete(_rows([2], "a", 5))
    asked: list[int] = []
    changes = table.read_changes()
    real = changes.find_deletes
    assert real is not None
    object.__setattr__(changes, "find_deletes", lambda: asked.append(1) or real())
    assert not asked
    assert changes.deletes.column("id").to_pylist() == [2]
    assert changes.deletes.column("id").to_pylist() == [2] and asked == [1]  # found once
