"""A long run: 1,000 small commits with inline cleaning and archival (Arrow engine).

The active timeline and the file count stay within their bounds the whole way;
at the end the table equals the model, time travel to an early savepoint and
incremental reads that start among archived instants are still right, and
hudi-rs reads the same table.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.timeline import Action, Timeline

COMMITS, KEYS, PARTITIONS, SAVEPOINT_AT, INCREMENTAL_FROM = 1000, 60, 4, 100, 300
RETAINED, MIN_COMMITS, MAX_COMMITS = 4, 8, 12
OPTIONS = {
    "hoodie.clean.automatic": "true",
    "hoodie.clean.commits.retained": str(RETAINED),
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": str(MIN_COMMITS),
    "hoodie.keep.max.commits": str(MAX_COMMITS),
    "hoodie.archive.beyond.savepoint": "true",
    "hoodie.timeline.compaction.batch.size": "5",
}
COLUMNS = ["id", "v"]


def _data_files(path: str) -> int:
    return sum(
        1
        for root, dirs, files in os.walk(path)
        if "/.hoodie" not in root + "/"
        for f in files
        if f.endswith(".parquet")
    )


def test_a_thousand_commits_with_inline_cleaning_and_archival(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id", partition_by="part", options=OPTIONS)
    rng = random.Random(7)
    model: dict[int, int] = {}
    last_writer: dict[int, int] = {}  # key -> index of the commit that last wrote it
    commits: list[Any] = []
    saved_rows: list[tuple[Any, ...]] = []
    max_active = max_files = 0
    for n in range(COMMITS):
        keys = rng.sample(range(KEYS), 3)
        batch = pa.table({"id": keys, "part": [f"p{k % PARTITIONS}" for k in keys], "v": [n] * 3})
        commits.append(table.upsert(batch))
        for k in keys:
            model[k] = n
            last_writer[k] = n
        if n == SAVEPOINT_AT:
            table.savepoint(commits[n].instant_time)
            saved_rows = sorted(model.items())
        if n % 50 == 49:
            timeline = Timeline.load(table.storage)
            max_active = max(max_active, len(timeline.completed_data_instants))
            max_files = max(max_files, _data_files(path))
            # the active timeline: at most max commits, plus one clean per commit and a savepoint
            assert len(timeline.completed_data_instants) <= MAX_COMMITS
            assert len(timeline) <= 2 * MAX_COMMITS + 2
    # files: each file group keeps what the retained commits need, plus the savepoint's files
    groups = {g for c in commits for g in c.file_groups}
    assert max_files <= len(groups) * (RETAINED + 1) + len(saved_rows)
    assert max_active <= MAX_COMMITS

    expected = sorted(model.items())
    assert rows_of(table.read(), COLUMNS) == expected
    assert rows_of(hudi_rs_read(path), COLUMNS) == expected

    # time travel to the savepoint, far behind the archived part of the timeline
    as_of = commits[SAVEPOINT_AT].instant_time
    assert Timeline.load(table.storage).is_archived(as_of)
    assert rows_of(table.read(as_of=as_of), COLUMNS) == saved_rows
    assert rows_of(hudi_rs_read(path, as_of=as_of), COLUMNS) == saved_rows

    # incremental reads that start among archived instants
    start = commits[INCREMENTAL_FROM].completion_time
    changes = table.read_changes(start=start)
    assert [i.requested_time for i in changes.instants] == [c.instant_time for c in commits[INCREMENTAL_FROM + 1:]]
    changed = sorted((k, v) for k, v in model.items() if last_writer[k] > INCREMENTAL_FROM)
    assert rows_of(changes.rows, COLUMNS) == changed
    assert rows_of(table.read_incremental(), COLUMNS) == expected
    # where hudi-rs can follow (it reads the active timeline only), it agrees
    recent = commits[-5].completion_time
    assert rows_of(table.read_incremental(start=recent), COLUMNS) == rows_of(
        hudi_rs_read(path, start=recent), COLUMNS)

    everything = [i for i in table.timeline(include_archived=True) if i.action is Action.COMMIT]
    assert [i.requested_time for i in everything] == [c.instant_time for c in commits]
    table.close()
