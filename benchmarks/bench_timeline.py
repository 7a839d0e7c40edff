"""Commit time as the table's history grows: 100, 1,000 and 10,000 instants, archival on and off.

1. Synthesized history: the table starts with N - 1 completed (empty) commits on its
   timeline, then 40 small upserts are timed (each one wall time of ``Table.upsert``,
   inline cleaning and archival included). With archival on, the first upsert moves the
   old instants into the LSM history (timed separately); the active timeline then stays
   between hoodie.keep.min.commits and .max. With archival off, all N instants stay active.
2. Real history: 1,000 real commits with inline cleaning and archival; the commit time of
   each window of 100 commits (does it stay flat while the history grows?).

Arrow engine, single writer, one-row upserts into 4 partitions. Run:
    .venv/bin/python benchmarks/bench_timeline.py [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import tidemark  # noqa: E402
from tidemark.format.commit_metadata import CommitMetadata  # noqa: E402
from tidemark.timeline import Timeline  # noqa: E402
from tidemark.timeline.history import read_manifest  # noqa: E402
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time  # noqa: E402

SERVICES_ON = {"hoodie.clean.automatic": "true", "hoodie.archive.automatic": "true"}
SERVICES_OFF = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
TIMED = 40


def synthesize(path: str, count: int) -> None:
    """``count`` empty completed commits (requested, inflight and completed files), in 2020."""
    timeline = Path(path) / ".hoodie" / "timeline"
    empty = CommitMetadata("UPSERT").to_bytes()
    start = parse_instant_time("20200101000000000")
    for i in range(count):
        t = format_instant_time(start + timedelta(milliseconds=10 * i))
        c = format_instant_time(start + timedelta(milliseconds=10 * i + 5))
        (timeline / f"{t}.commit.requested").write_bytes(b"")
        (timeline / f"{t}.inflight").write_bytes(b"")
        (timeline / f"{t}_{c}.commit").write_bytes(empty)


def _batch(n: int) -> pa.Table:
    return pa.table({"id": [n % 50], "part": [f"p{n % 4}"], "v": [n]})


def _stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1),
    }


def synthesized(instants: int, archival: bool) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="tidemark-bench-timeline-")
    path = os.path.join(folder, "t")
    try:
        options = SERVICES_ON if archival else SERVICES_OFF
        table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=options)
        synthesize(path, instants - 1)
        started = time.perf_counter()
        table.upsert(_batch(0))  # with archival: moves the old instants into the history
        first = time.perf_counter() - started
        samples = []
        for n in range(1, TIMED + 1):
            started = time.perf_counter()
            table.upsert(_batch(n))
            samples.append(time.perf_counter() - started)
        timeline = Timeline.load(table.storage)
        history = timeline.with_history()
        return {
            "instants": instants,
            "archival": archival,
            "first_commit_ms": round(first * 1000, 1),
            **_stats(samples),
            "active_instants": len(timeline),
            "archived_instants": len(history) - len(timeline),
            "history_files": len(read_manifest(table.storage).files),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def real(commits: int, window: int) -> list[dict[str, Any]]:
    folder = tempfile.mkdtemp(prefix="tidemark-bench-timeline-")
    path = os.path.join(folder, "t")
    try:
        table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=SERVICES_ON)
        rows = []
        samples: list[float] = []
        for n in range(commits):
            started = time.perf_counter()
            table.upsert(_batch(n))
            samples.append(time.perf_counter() - started)
            if (n + 1) % window == 0:
                timeline = Timeline.load(table.storage)
                rows.append({
                    "commits": n + 1,
                    **_stats(samples),
                    "active_instants": len(timeline),
                    "history_files": len(read_manifest(table.storage).files),
                    "data_files": sum(1 for f in table.storage.walk_files("") if f.name.endswith(".parquet")),
                })
                samples = []
        return rows
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100 and 1,000 instants; 300 real commits")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    sizes = (100, 1000) if args.quick else (100, 1000, 10000)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "synthesized": [],
    }
    print("synthesized history: commit time (wall, Table.upsert incl. inline clean + archival)")
    print(f"{'instants':>9} {'archival':>8} {'first':>9} {'median':>8} {'p90':>8} "
          f"{'active':>7} {'archived':>9} {'files':>6}")
    for archival in (True, False):
        for size in sizes:
            row = synthesized(size, archival)
            results["synthesized"].append(row)
            print(f"{size:>9,} {'on' if archival else 'off':>8} {row['first_commit_ms']:>7.1f}ms "
                  f"{row['median_ms']:>6.1f}ms {row['p90_ms']:>6.1f}ms {row['active_instants']:>7} "
                  f"{row['archived_instants']:>9,} {row['history_files']:>6}", flush=True)
    commits = 300 if args.quick else 1000
    print(f"\nreal history: {commits} commits with inline cleaning and archival, per window of 100")
    print(f"{'commits':>8} {'median':>8} {'p90':>8} {'active':>7} {'history files':>14} {'data files':>11}")
    results["real"] = real(commits, 100)
    for row in results["real"]:
        print(f"{row['commits']:>8,} {row['median_ms']:>6.1f}ms {row['p90_ms']:>6.1f}ms {row['active_instants']:>7} "
              f"{row['history_files']:>14} {row['data_files']:>11}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
