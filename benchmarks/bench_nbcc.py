"""Non-blocking vs optimistic concurrency control: N writers upserting overlapping keys.

Every writer is an OS process that runs ``--commits`` upserts of ``--batch`` keys
drawn at random from one shared key space, all writers starting together (a
barrier). The table is the same in both modes: merge-on-read, bucket index
(4 buckets x 2 partitions = 8 file groups), event-time ordering, the filesystem
lock. So every batch touches most file groups and any two overlapping writes
share file groups:

* ``nbcc``: hoodie.write.concurrency.mode=non_blocking_concurrency_control. Writers
  append logs and never conflict.
* ``occ``: optimistic_concurrency_control with up to 20 retries after a lost conflict
  (hoodie.write.num.retries.on.conflict.failures). A lost conflict rolls the write
  back and runs it again.

Measured per mode and writer count: committed batches per second (wall clock from
the barrier to the last writer's exit), aborted attempts (rolled back), writes that
gave up after the retries, and wasted work: rows written by attempts that were
rolled back, and the seconds those attempts took. At the end the table is read
and checked against the model (per key the greatest ordering value).

Writers use the Arrow engine (a JVM per process would measure Spark start-up, not
the protocol). Run: .venv/bin/python benchmarks/bench_nbcc.py [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing as mp
import os
import platform
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import tidemark

KEYS = 4_000
BASE = {
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.lock.wait_time_ms_between_retry": "10",
    "hoodie.client.heartbeat.interval_in_ms": "2000",
}
MODES = {
    "nbcc": {**BASE, "hoodie.write.concurrency.mode": "non_blocking_concurrency_control"},
    "occ": {**BASE, "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "hoodie.write.num.retries.on.conflict.failures": "20"},
}
TABLE = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"}


class _AttemptClock(logging.Handler):
    """Counts the write client's "write conflict; retrying" warnings: one per rolled-back attempt."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.conflicts = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "write conflict" in record.getMessage():
            self.conflicts += 1


def _writer(path: str, options: dict[str, str], writer: int, commits: int, batch: int, start: Any,
            results: Any) -> None:
    clock = _AttemptClock()
    logging.getLogger("tidemark.write.client").addHandler(clock)
    table = tidemark.Table.open(path, spark=None, options=options)
    rng = random.Random(writer)
    out: list[dict[str, Any]] = []
    start.wait()
    for i in range(commits):
        keys = rng.sample(range(KEYS), batch)
        rows = [{"id": k, "part": f"p{k % 2}", "ts": rng.randrange(10**9) * 16 + writer, "w": writer, "i": i}
                for k in keys]
        began = time.perf_counter()
        before = clock.conflicts
        try:
            result = table.upsert(pa.Table.from_pylist(rows))
            attempts, ok = result.attempts, True
        except tidemark.WriteConflictError:
            attempts, ok = clock.conflicts - before + 1, False
        seconds = time.perf_counter() - began
        # The failed attempts' share of this write's time, assuming attempts of equal cost.
        wasted = seconds * (attempts - 1) / attempts if ok else seconds
        out.append({"rows": rows if ok else [], "attempts": attempts, "ok": ok, "seconds": seconds,
                    "wasted_s": wasted, "wasted_rows": batch * (attempts - 1 if ok else attempts)})
    table.close()
    results.put((writer, out))


def run(mode: str, writers: int, commits: int, batch: int) -> dict[str, Any]:
    base = tempfile.mkdtemp(prefix=f"tm-nbcc-{mode}-")
    path = f"{base}/t"
    options = MODES[mode]
    tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", ordering_field="ts",
                          table_type="MERGE_ON_READ", options={**options, **TABLE}).close()
    ctx = mp.get_context("spawn")
    start, results = ctx.Barrier(writers + 1), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, options, w, commits, batch, start, results))
             for w in range(writers)]
    for p in procs:
        p.start()
    start.wait()
    began = time.perf_counter()
    outcomes = [results.get(timeout=1800) for _ in procs]
    elapsed = time.perf_counter() - began
    for p in procs:
        p.join()
    writes = [w for _, ws in outcomes for w in ws]
    committed = [w for w in writes if w["ok"]]
    model: dict[int, dict[str, Any]] = {}
    for w in committed:
        for row in w["rows"]:
            if row["id"] not in model or row["ts"] > model[row["id"]]["ts"]:
                model[row["id"]] = row
    table = tidemark.Table.open(path, spark=None, options=options)
    got = {r["id"]: r for r in table.read().select(["id", "part", "ts", "w", "i"]).to_pylist()}
    table.close()
    shutil.rmtree(base, ignore_errors=True)
    result = {
        "mode": mode, "writers": writers, "commits_tried": len(writes), "committed": len(committed),
        "gave_up": len(writes) - len(committed), "seconds": round(elapsed, 2),
        "commits_per_s": round(len(committed) / elapsed, 2),
        "rows_per_s": round(len(committed) * batch / elapsed),
        "aborted_attempts": sum(w["attempts"] - 1 for w in committed) + sum(w["attempts"] for w in writes
                                                                             if not w["ok"]),
        "wasted_rows": sum(w["wasted_rows"] for w in writes),
        "wasted_s": round(sum(w["wasted_s"] for w in writes), 1),
        "table_matches_model": got == model,
    }
    print(json.dumps(result), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--commits", type=int, default=20, help="upserts per writer (default 20)")
    parser.add_argument("--batch", type=int, default=500, help="keys per upsert (default 500)")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args()
    writer_counts = [1, 2] if args.quick else [1, 2, 4, 8]
    commits = 4 if args.quick else args.commits
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "commits_per_writer": commits, "batch": args.batch, "keys": KEYS, "runs": []}
    for writers in writer_counts:
        for mode in ("nbcc", "occ"):
            results["runs"].append(run(mode, writers, commits, args.batch))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
