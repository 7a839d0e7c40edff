"""Randomized history check: many writer processes, overlapping keys, random crashes.

The final table must equal the replay, in completion-time order, of exactly the
batches that committed: no duplicate keys, nothing from aborted or crashed
writes, and hudi-rs must agree.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import tidemark
from conftest import hudi_rs_read
from tidemark.storage import LocalStorage, Storage
from tidemark.timeline import Timeline

WRITER = str(Path(__file__).with_name("writer_process.py"))
WRITERS, ITERATIONS, KEYS, PARTITIONS, KILLS = 4, 110, 96, 24, 3
OPTIONS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "3",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
    # Archival runs inline (small bounds: conflict checks must still see every instant that
    # completed since a writer's snapshot); cleaning is off because the check below reads each
    # commit's own files to learn its batch.
    "hoodie.clean.automatic": "false",
    "hoodie.keep.min.commits": "12",
    "hoodie.keep.max.commits": "16",
}


def _spawn(tmp: Path, table: str, writer: str, seed: int, iterations: int, options: dict[str, str] | None = None,
           storage_options: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    spec = {"table": table, "options": options or OPTIONS, "loop": True, "writer": writer, "seed": seed,
            "iterations": iterations, "keys": KEYS, "partitions": PARTITIONS, "log": str(tmp / f"{writer}.log"),
            "storage_options": storage_options or {}}
    path = tmp / f"{writer}.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, WRITER, str(path)])


def _batch_of_instant(storage: Storage, timeline: Timeline, instant: Any) -> str | None:
    """Which batch an instant wrote, from the rows carrying its commit time (old versions stay on disk)."""
    for stat in timeline.commit_metadata(instant).write_stats:
        data = pq.read_table(pa.BufferReader(storage.read_bytes(stat.path)), columns=["_hoodie_commit_time", "batch"])
        mine = data.filter(pc.equal(data.column("_hoodie_commit_time"), instant.requested_time))
        if mine.num_rows:
            return str(mine.column("batch")[0].as_py())
    return None


def run_random_history(tmp: Path, path: str, options: dict[str, str], *, storage: Storage,
                       storage_options: dict[str, str] | None = None, writers: int = WRITERS,
                       iterations: int = ITERATIONS, kills: int = KILLS, min_commits: int = 200,
                       read: Callable[[], pa.Table] | None = None) -> int:
    """Writer processes upsert overlapping keys while some are SIGKILLed; then the table must equal
    the serial replay of exactly the committed batches (hudi-rs too, via ``read``). Returns the
    number of commits checked. ``path``/``storage``: the table (local or on an object store)."""
    open_kwargs: dict[str, Any] = {"storage_options": storage_options} if storage_options else {}
    tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=options,
                          **open_kwargs).close()
    rng = random.Random(11)
    procs = {f"w{i}": _spawn(tmp, path, f"w{i}", i, iterations, options, storage_options) for i in range(writers)}
    killed = 0
    deadline = time.monotonic() + 900
    while any(p.poll() is None for p in procs.values()):
        assert time.monotonic() < deadline, "writers did not finish"
        time.sleep(rng.uniform(0.5, 2.0))
        alive = [name for name, p in procs.items() if p.poll() is None]
        if killed < kills and alive:
            victim = rng.choice(alive)
            os.kill(procs[victim].pid, signal.SIGKILL)
            procs[victim].wait()
            killed += 1
            replacement = f"{victim}r{killed}"
            procs[replacement] = _spawn(tmp, path, replacement, 100 + killed, iterations // 3, options,
                                        storage_options)
    assert all(p.returncode in (0, -signal.SIGKILL) for p in procs.values())

    table = tidemark.Table.open(path, spark=None, options=options, **open_kwargs)
    deadline = time.monotonic() + 60
    while Timeline.load(storage).pending:  # crashed writes: rolled back once their heartbeats expire
        assert time.monotonic() < deadline, "failed writes were never cleaned"
        # Only the rollbacks: a clean would also delete old file versions, which the check below
        # reads to learn each commit's batch.
        table.rollback_failed_writes()
        time.sleep(0.2)

    intents: dict[str, list[dict[str, Any]]] = {}
    outcomes: dict[str, int] = {}
    for log in tmp.glob("*.log"):
        for line in log.read_text().splitlines():
            entry = json.loads(line)
            if entry["state"] == "intent":
                intents[entry["batch"]] = entry["rows"]
            else:
                kind = entry["state"] if entry["state"] != "error" else entry.get("error", "error")
                outcomes[kind] = outcomes.get(kind, 0) + 1
    timeline = Timeline.load(storage).with_history()
    assert timeline.has_history, "archival never ran"
    committed = []
    for inst in timeline.completed_data_instants:
        batch = _batch_of_instant(storage, timeline, inst)
        if batch is not None:  # the seed commit has no batch column value
            committed.append((inst.completion_time, batch))
    committed.sort()
    assert len(committed) >= min_commits, f"only {len(committed)} commits; the writers' outcomes: {outcomes}"

    model: dict[int, dict[str, Any]] = {}
    for _, batch in committed:
        for row in intents[batch]:
            model[row["id"]] = row
    got = table.read().select(["id", "part", "batch", "v"]).to_pylist()
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)), "duplicate keys"
    assert {r["id"]: r for r in got} == model
    committed_batches = {b for _, b in committed}
    assert {r["batch"] for r in got} <= committed_batches, "rows of an aborted or crashed write are visible"
    theirs = (read or (lambda: hudi_rs_read(path)))().select(["id", "part", "batch", "v"]).to_pylist()
    assert {r["id"]: r for r in theirs} == model
    table.close()
    return len(committed)


def test_random_concurrent_history_equals_the_serial_replay(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    run_random_history(tmp_path, path, OPTIONS, storage=LocalStorage(path))
