"""What the metadata table (on by default, as in Hudi 1.x) costs a small commit.

Arrow engine, a local copy-on-write table partitioned in two, upserts of 10 rows (5 updates,
5 inserts) one after another; ms per commit with ``hoodie.metadata.enable`` true and false,
the median over ``--commits`` commits after ``--warmup`` (inline cleaning and archival on, as
by default; the metadata table compacts every 10 of its deltacommits).

    PYTHONPATH=src python benchmarks/bench_metadata_table.py --commits 50
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import pyarrow as pa

import tidemark


def run(enabled: bool, commits: int, warmup: int) -> tuple[list[float], list[float]]:
    path = tempfile.mkdtemp(prefix=f"bench-mdt-{'on' if enabled else 'off'}-")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="p",
                                  options={"hoodie.metadata.enable": str(enabled).lower()})
    times, cpu = [], []
    for i in range(warmup + commits):
        ids = [i % 50 + k for k in range(5)] + [100_000 + 5 * i + k for k in range(5)]
        batch = pa.table({"id": ids, "p": ["a" if k % 2 else "b" for k in ids], "v": [float(i)] * 10})
        started, started_cpu = time.perf_counter(), time.process_time()
        table.upsert(batch)
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
            cpu.append((time.process_time() - started_cpu) * 1000)
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="alternate off/on this many times")
    args = parser.parse_args()
    wall: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for enabled in (False, True):
            w, c = run(enabled, args.commits, args.warmup)
            wall[enabled] += w
            cpu[enabled] += c
    for enabled in (False, True):
        ms = wall[enabled]
        print(f"hoodie.metadata.enable={str(enabled).lower():5}  wall median {statistics.median(ms):7.1f} ms  "
              f"p90 {statistics.quantiles(ms, n=10)[-1]:7.1f} ms  cpu median {statistics.median(cpu[enabled]):6.1f} ms"
              f"  ({len(ms)} commits)")
    for name, series in (("wall", wall), ("cpu", cpu)):
        off, on = statistics.median(series[False]), statistics.median(series[True])
        print(f"metadata table costs {on - off:+.1f} ms {name} per commit ({(on / off - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
