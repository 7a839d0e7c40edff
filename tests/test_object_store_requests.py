"""What one commit costs on S3 (the moto server, through a counting proxy): constant, and no walk.

Issue 15 item 10's goal: a constant number of requests per commit however long the timeline
grows, and no listing of the whole table or the whole timeline on the commit path. Small
updates into a non-partitioned and a partitioned table, with a metadata table
(``hoodie.metadata.enable=true``: the file-system view lists files through its ``files``
partition) and without (the view lists only the partition folders a write touches). Cleaning
runs after every commit (2 commits retained); archival is off, so the active timeline only
grows. Checked from the requests the server received in commits 6-10 and 21-25: no recursive
listing of the table root, ``.hoodie/``, the timeline or a partition; no data folder listed
when the metadata table lists them; a bounded number of timeline listings per commit; and the
requests of commits 21-25 no more than those of commits 6-10.
"""

from __future__ import annotations

import statistics
import uuid
from collections import Counter
from typing import Any

import pyarrow as pa
import pytest

from counting_proxy import CountingProxy
from tidemark import Table

COMMITS = 25
EARLY, LATE = range(5, 10), range(20, 25)  # commits 6-10 and 21-25


KEYS = 300


def _batch(i: int, partitioned: bool) -> pa.Table:
    """Commit 0 writes every key; each later one updates 10 of them, spread over the partitions:
    every commit touches the same file groups, so only the timeline's length changes."""
    ids = list(range(KEYS)) if i == 0 else [(i * 7 + k * 31) % KEYS for k in range(10)]
    columns: dict[str, Any] = {"id": pa.array(ids, pa.int64()), "v": pa.array([f"r{i}"] * len(ids))}
    if partitioned:
        columns["part"] = pa.array([f"p{n % 3}" for n in ids])  # keys stay in their partition
    return pa.table(columns)


@pytest.mark.parametrize(("metadata", "partitioned"), [("true", False), ("false", True)],
                         ids=["metadata-table-non-partitioned", "no-metadata-table-partitioned"])
def test_a_commit_costs_the_same_at_commit_25_as_at_10_and_walks_nothing(
    moto_server: Any, s3_bucket: str, metadata: str, partitioned: bool
) -> None:
    proxy = CountingProxy(moto_server.port)
    root = f"t-{uuid.uuid4().hex[:6]}"
    options = {"hoodie.metadata.enable": metadata, "hoodie.clean.commits.retained": "2",
               "hoodie.archive.automatic": "false"}
    storage_options = {**moto_server.storage_options(), "aws_endpoint_url": proxy.endpoint}
    try:
        table = Table.create(f"s3://{s3_bucket}/{root}", spark=None, record_key="id", options=options,
                             storage_options=storage_options, partition_by="part" if partitioned else None)
        per_commit: list[Counter[str]] = []
        listed: list[Counter[str]] = []
        try:
            assert table.storage.exists(".hoodie/metadata/files") is (metadata == "true")
            proxy.take()
            for i in range(COMMITS):
                table.upsert(_batch(i, partitioned))
                tally = proxy.take()
                counts, prefixes = tally.kinds, tally.listed
                per_commit.append(counts)
                listed.append(prefixes)
            rows = table.read().num_rows
        finally:
            table.close()
    finally:
        proxy.close()
    assert rows == KEYS

    every = Counter[str]()
    for i in [*EARLY, *LATE]:  # the first clean of a partitioned table without one lists it all, as Hudi's
        every.update(listed[i])
    # Recursive listings are only existence probes of one name (exists(): a HEAD, then a LIST of
    # what is under it) and the markers of the commit's own instant (they nest by partition).
    folders = {f"{root}/", f"{root}/.hoodie/", f"{root}/.hoodie/timeline/", f"{root}/.hoodie/metadata/"}
    folders |= {f"{root}/part=p{n}/" for n in range(3)}
    walks = [p for p in every if p.endswith("(recursive)") and p.split(" ")[0] in folders]
    assert walks == [], f"recursive listings of the table, its timeline or its partitions: {walks}"
    if partitioned:
        assert f"{root}/ (delimited)" not in every  # a partitioned table's root is never listed
    data_lists = [p for p in every if not p.startswith(f"{root}/.hoodie")]
    if metadata == "true":
        assert data_lists == [], f"data folders listed although the metadata table lists them: {data_lists}"
    timeline_lists = [c[f"{root}/.hoodie/timeline/ (delimited)"] for c in listed[EARLY.start:]]
    # The write's snapshot, its start and its commit under the lock; the clean's plan under its
    # lock, its execution, and its completion under the lock (not completed already by another
    # executor of its plan: recovery/clean.py). With a metadata table, its guard under the commit's and the clean's
    # lock (in sync with the timeline?) and its compaction list the timeline too; a compaction of
    # the metadata table (every 10th commit) lists it once more, to archive the metadata timeline
    # only behind the data table's earliest active instant.
    assert max(timeline_lists) <= (6 if metadata == "false" else 10), timeline_lists

    # The cost of a commit does not grow with the timeline: the median of each window (a commit
    # that also compacts the metadata table, every 10th of its deltacommits, and archives its
    # timeline costs a few requests more, whichever window it falls in: periodic, not growing).
    totals = [sum(c.values()) for c in per_commit]
    early, late = [totals[i] for i in EARLY], [totals[i] for i in LATE]
    assert statistics.median(late) <= statistics.median(early), totals
    if metadata == "false":  # nothing periodic here but the clean, in both windows alike
        assert max(late) <= max(early), totals
    lists = [per_commit[i]["LIST"] for i in [*EARLY, *LATE]]
    assert statistics.median(lists[5:]) <= statistics.median(lists[:5]), lists
