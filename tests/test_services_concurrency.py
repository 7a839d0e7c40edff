"""Table services next to concurrent writers, all in separate OS processes.

Three writers upsert overlapping keys (each also cleans and archives inline
after its commits), a service process cleans and archives (and clusters) in a
loop, and a reader keeps reading. Nothing may be lost: the final table equals the replay of
the committed batches in completion-time order; no read fails or sees a
duplicate key; no writer fails for anything but a write-write conflict; and
hudi-rs reads the same table.
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
from conftest import hudi_rs_read, reader_views
from signals import write_atomically
from tidemark.timeline import Action, Timeline

HERE = Path(__file__).parent
WRITERS, ITERATIONS, KEYS, PARTITIONS = 3, 40, 40, 6
OPTIONS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "3",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    "hoodie.clean.commits.retained": "6",
    "hoodie.keep.min.commits": "8",
    "hoodie.keep.max.commits": "11",
    "hoodie.timeline.compaction.batch.size": "3",
}


def _spawn(script: str, spec_path: Path, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    spec_path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, str(HERE / script), str(spec_path)])


@pytest.mark.parametrize("cluster", [False, True], ids=["clean+archive", "clean+archive+cluster"])
def test_services_alongside_concurrent_writers_lose_nothing(tmp_path: Path, cluster: bool) -> None:
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OPTIONS)
    # Three bulk loads leave three small file groups per partition: work for clustering from the start.
    seed = [{"id": 1000 + i, "part": f"p{i % PARTITIONS}", "batch": "seed", "v": 0.0} for i in range(3 * PARTITIONS)]
    for load in range(3):
        table.bulk_insert(pa.Table.from_pylist(seed[load * PARTITIONS:(load + 1) * PARTITIONS]))
    table.close()
    writers = [
        _spawn("writer_process.py", tmp_path / f"w{i}.json", {
            "table": path, "options": OPTIONS, "loop": True, "writer": f"w{i}", "seed": i,
            "iterations": ITERATIONS, "keys": KEYS, "partitions": PARTITIONS, "log": str(tmp_path / f"w{i}.log"),
        })
        for i in range(WRITERS)
    ]
    stop, service_result = tmp_path / "stop", tmp_path / "service.json"
    service = _spawn("service_process.py", tmp_path / "service_spec.json", {
        "table": path, "options": OPTIONS, "stop": str(stop), "result": str(service_result), "cluster": cluster,
    })

    reader = tidemark.Table.open(path, spark=None, options=OPTIONS)
    reads = 0
    deadline = time.monotonic() + 600
    while any(w.poll() is None for w in writers):
        assert time.monotonic() < deadline, "writers did not finish"
        snapshot = reader.read()  # raises if a file vanished under the reader
        ids = snapshot.column("id").to_pylist() if "id" in snapshot.column_names else []  # empty at first
        assert len(ids) == len(set(ids)), "a reader saw a duplicate key"
        reads += 1
    write_atomically(stop, "stop")
    assert service.wait(timeout=120) == 0
    assert [w.returncode for w in writers] == [0] * WRITERS, "a writer failed (not by a write conflict)"
    outcome = json.loads(service_result.read_text())
    assert outcome["status"] == "ok", outcome
    assert reads > 0

    intents: dict[str, list[dict[str, Any]]] = {}
    committed: list[tuple[str, str]] = []
    for log in tmp_path.glob("w*.log"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry["state"] == "intent":
                intents[entry["batch"]] = entry["rows"]
            elif entry["state"] == "committed":
                committed.append((entry["completion"], entry["batch"]))
    committed.sort()
    assert len(committed) >= WRITERS * ITERATIONS // 3
    lost_to_services = [json.loads(line) for log in tmp_path.glob("w*.log") for line in log.read_text().splitlines()
                        if json.loads(line).get("error") in ("ClusteringConflictError", "ClusteringAbortedError")]
    assert lost_to_services == [], "a write was failed by a table service"
    if cluster:
        assert outcome["clustered"] + outcome["cluster_aborts"] > 0, outcome
    model: dict[int, dict[str, Any]] = {row["id"]: row for row in seed}
    for _, batch in committed:
        for row in intents[batch]:
            model[row["id"]] = row

    table = tidemark.Table.open(path, spark=None, options=OPTIONS)
    got = table.read().select(["id", "part", "batch", "v"]).to_pylist()
    assert len(got) == len({r["id"] for r in got}), "duplicate keys"
    assert {r["id"]: r for r in got} == model
    theirs = hudi_rs_read(path).select(["id", "part", "batch", "v"]).to_pylist()
    assert len(theirs) == len({r["id"] for r in theirs}), f"hudi-rs reads duplicate keys\n{reader_views(path)}"
    differ = {k: (r, model.get(k)) for k, r in {r["id"]: r for r in theirs}.items() if r != model.get(k)}
    missing = sorted(set(model) - {r["id"] for r in theirs})
    assert not differ and not missing, f"hudi-rs differs {differ}, lacks {missing}\n{reader_views(path)}"

    # the services did run: versions were cleaned and instants archived, and every committed
    # write is still on the (active or archived) timeline
    timeline = Timeline.load(table.storage)
    assert timeline.archived_before is not None
    assert len(timeline.completed_data_instants) <= int(OPTIONS["hoodie.keep.max.commits"]) + WRITERS
    full = timeline.with_history()
    assert any(i.action is Action.CLEAN for i in full.completed), "nothing was ever cleaned"
    everything = {i.requested_time for i in full.completed_data_instants}
    logged = set()
    for log in tmp_path.glob("w*.log"):
        logged |= {json.loads(line).get("instant") for line in log.read_text().splitlines()}
    assert logged - {None} <= everything
    table.close()
    reader.close()
