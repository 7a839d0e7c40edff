"""Clustering next to writers in real OS processes: ingestion always wins, nothing is lost.

Writer processes loop upserts (and inserts of new keys) on their own partitions
while this process clusters the table again and again and reads it (tidemark and
hudi-rs) in between. Checked: no write ever fails because of a clustering, no
read fails or sees a duplicate or a half-clustered table, the final table equals
the replay of every committed batch, and clusterings did commit meanwhile.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.clustering_plan import CLUSTER_OPERATION
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline

WRITER = str(Path(__file__).with_name("writer_process.py"))
ITERATIONS, KEYS = 40, 60
BASE = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "4",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    "hoodie.parquet.small.file.limit": "0",  # every write adds small files: plenty to cluster
}


@pytest.fixture(params=["filesystem", "zookeeper"])
def options(request: Any) -> dict[str, str]:
    opts = dict(BASE)
    if request.param == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        opts.update(server.lock_options("tidemark-cl"))
    else:
        opts["hoodie.write.lock.provider"] = "filesystem"
    return opts


def _spawn(tmp: Path, path: str, options: dict[str, str], writer: int, inserts_only: bool) -> subprocess.Popen[bytes]:
    spec = {"table": path, "options": options, "loop": True, "writer": writer, "seed": writer,
            "iterations": ITERATIONS, "keys": KEYS, "log": str(tmp / f"w{writer}.log"),
            "own_partition": {"inserts_only": inserts_only}, "pause_s": 0.0}
    spec_path = tmp / f"w{writer}.json"
    spec_path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, WRITER, str(spec_path)])


def _check_read(table: tidemark.Table) -> int:
    ours = table.read().column("id").to_pylist()
    assert len(ours) == len(set(ours)), "duplicate keys in a snapshot read"
    theirs = hudi_rs_read(table.path).column("id").to_pylist()
    assert len(theirs) == len(set(theirs)), "duplicate keys in a hudi-rs read"
    return len(ours)


def test_writers_never_lose_to_clustering_and_no_committed_record_is_lost(
    tmp_path: Path, options: dict[str, str]
) -> None:
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=options)
    seed = [{"id": w * 1_000_000 + k, "part": f"w{w}", "batch": "seed", "v": 0.0}
            for w in range(3) for k in range(KEYS)]
    table.upsert(pa.Table.from_pylist(seed))
    # w0 only inserts new keys (new file groups); w1 and w2 update keys of their partitions
    # and add one new key (a new small file group) each time
    procs = [_spawn(tmp_path, path, options, w, inserts_only=(w == 0)) for w in range(3)]

    committed_clusterings = aborted_clusterings = reads = 0
    last_count = 0
    deadline = time.monotonic() + 300
    round_ = 0
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "writers did not finish"
        round_ += 1
        # Odd rounds cluster only the first partition (w0: inserts only, so the clustering can
        # commit), even rounds the whole table (upserts there make it lose, as it should).
        try:
            result = table.cluster(max_groups=1 if round_ % 2 else None)
            committed_clusterings += result.clustered
        except tidemark.ClusteringAbortedError:
            aborted_clusterings += 1
        count = _check_read(table)
        assert count >= last_count, "a snapshot lost rows"  # writes only add keys
        last_count = count
        reads += 1
    assert [p.returncode for p in procs] == [0, 0, 0]
    running = committed_clusterings
    final = table.cluster()  # with the writers gone a clustering never aborts

    intents: dict[str, list[dict[str, Any]]] = {}
    outcomes: list[dict[str, Any]] = []
    for w in range(3):
        for line in (tmp_path / f"w{w}.log").read_text().splitlines():
            entry = json.loads(line)
            if entry["state"] == "intent":
                intents[entry["batch"]] = entry["rows"]
            else:
                outcomes.append(entry)
    failed = [o for o in outcomes if o["state"] != "committed"]
    assert failed == [], f"writes failed: {failed[:3]}"  # ingestion is never aborted by clustering
    assert len(outcomes) == 3 * ITERATIONS

    # each writer owns its keys: replaying its batches in its own order gives the table
    model = {r["id"]: r for r in seed}
    for w in range(3):
        for i in range(ITERATIONS):
            for row in intents[f"w{w}-{i}"]:
                model[row["id"]] = row
    got = table.read().select(["id", "part", "batch", "v"]).to_pylist()
    assert {r["id"]: r for r in got} == model
    theirs = hudi_rs_read(path).select(["id", "part", "batch", "v"]).to_pylist()
    assert {r["id"]: r for r in theirs} == model

    timeline = Timeline.load(LocalStorage(path)).with_history()  # inline archival moved the older ones
    clusterings = [i for i in timeline.completed if i.action is Action.REPLACE_COMMIT
                   and timeline.commit_metadata(i).operation == CLUSTER_OPERATION]
    assert len(clusterings) == running + final.clustered
    assert running >= 1, f"no clustering committed while the writers ran ({aborted_clusterings} aborted)"
    assert not timeline.pending
    print(f"\n{reads} rounds: {running} clusterings committed, {aborted_clusterings} aborted (ingestion won), "
          f"{sum(o.get('attempts', 1) > 1 for o in outcomes)} writes rerun after a clustering")
    table.close()
