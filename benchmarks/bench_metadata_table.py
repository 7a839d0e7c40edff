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


def run(enabled: bool, commits: int, warmup: int) -> list[float]:
    path = tempfile.mkdtemp(prefix=f"bench-mdt-{'on' if enabled else 'off'}-")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="p",
                                  options={"hoodie.metadata.enable": str(enabled).lower()})
    times = []
    for i in range(warmup + commits):
        ids = [i % 50 + k for k in range(5)] + [100_000 + 5 * i + k for k in range(5)]
        batch = pa.table({"id": ids, "p": ["a" if k % 2 else "b" for k in ids], "v": [float(i)] * 10})
        started = time.perf_counter()
        table.upsert(batch)
        if i >= warmup:
            times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2, help="alternate off/on this many times")
    args = parser.parse_args()
    results: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for enabled in (False, True):
            results[enabled] += run(enabled, args.commits, args.warmup)
    for enabled in (False, True):
        ms = results[enabled]
        print(f"hoodie.metadata.enable={str(enabled).lower():5}  median {statistics.median(ms):7.1f} ms  "
              f"p90 {statistics.quantiles(ms, n=10)[-1]:7.1f} ms  ({len(ms)} commits)")
    off, on = statistics.median(results[False]), statistics.median(results[True])
    print(f"metadata table costs {on - off:+.1f} ms per commit ({(on / off - 1) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
