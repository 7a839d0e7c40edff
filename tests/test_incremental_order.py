"""Incremental reads follow completion time: a commit that finishes late is never missed."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from test_protocol import _write
from tidemark import Table
from tidemark.config import resolve_write_config
from tidemark.read.plan import incremental_plan
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline
from tidemark.write.commit import CommitProtocol


def _rows(storage: LocalStorage, plan) -> list[int]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out: list[int] = []
    for f in plan.files:
        table = pq.read_table(storage.full_path(f.path))
        keep = table.filter(pc.is_in(table.column("_hoodie_commit_time"), pa.array(sorted(plan.commit_times))))
        out += keep.column("id").to_pylist()
    return sorted(out)


def test_late_completing_commit_is_read_after_the_checkpoint(tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    storage = LocalStorage(str(tmp_path / "t"))
    # LAZY-style: a second writer must not roll back the first (this is what multi-writer does)
    protocol = CommitProtocol(storage, resolve_write_config({"hoodie.clean.failed.writes.policy": "NEVER"}))

    slow = protocol.start("UPSERT", Action.COMMIT)  # starts first...
    fast = protocol.start("UPSERT", Action.COMMIT)
    stat_fast = _write(storage, fast.instant_time, [2], "fast", file_id="b-0")
    done_fast = protocol.complete(fast, [stat_fast], schema_json=None)

    # a consumer reads now and keeps its checkpoint
    first = incremental_plan(storage, Timeline.load(storage), start=None, end=None)
    assert _rows(storage, first) == [2]

    stat_slow = _write(storage, slow.instant_time, [1], "slow", file_id="a-0")
    done_slow = protocol.complete(slow, [stat_slow], schema_json=None)  # ...and finishes last
    assert done_slow.requested_time < done_fast.requested_time
    assert done_slow.completion_time > done_fast.completion_time

    second = incremental_plan(storage, Timeline.load(storage), start=first.end, end=None)
    assert _rows(storage, second) == [1]  # by requested time it would have been skipped
    assert [i.requested_time for i in second.instants] == [slow.instant_time]
    third = incremental_plan(storage, Timeline.load(storage), start=second.end, end=None)
    assert _rows(storage, third) == []
