"""Merge-on-read vs copy-on-write: upsert write cost and snapshot read cost.

1. Upsert write cost: one upsert of ``--batch`` updates spread uniformly over a
   table of ``--rows`` rows in ``--partitions`` partitions (one file group each),
   on a fresh copy of the loaded table each repeat. Copy-on-write rewrites every
   touched base file; merge-on-read appends one log file per file group.
2. Snapshot read cost: ``Table.read()`` after k = 1, 5 and 20 such upserts, so every
   merge-on-read file slice has k log files to merge; the copy-on-write table had
   the same k upserts. Read-optimized reads of the merge-on-read table (base files
   only) and the read after a compaction are shown for reference.

Arrow engine (``spark=None``): the write and merge code is the code Spark tasks run,
without the JVM. Run: .venv/bin/python benchmarks/bench_mor.py [--quick] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

import tidemark
from tidemark import Table


def make_rows(ids: np.ndarray, partitions: int, version: int) -> pa.Table:
    n = len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "part": pa.array((ids % partitions).astype(np.int64)),
        "user": pa.array([f"user-{i % 9973}" for i in ids.tolist()], pa.string()),
        "amount": pa.array(ids * 0.01 + version, pa.float64()),
        "score": pa.array((ids % 1000) / 7.0, pa.float64()),
        "note": pa.array([f"note {version} for {i}" for i in ids.tolist()], pa.string()),
        "ts": pa.array(np.full(n, version, dtype=np.int64)),
    })


def create(path: Path, table_type: str, rows: int, partitions: int) -> Table:
    t = Table.create(str(path), spark=None, record_key="id", partition_by="part", ordering_field="ts",
                     table_type=table_type)
    t.bulk_insert(make_rows(np.arange(rows, dtype=np.int64), partitions, 0))
    return t


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def median(values: list[float]) -> float:
    return statistics.median(values)


def update_batch(rng: np.random.Generator, rows: int, batch: int, partitions: int, version: int) -> pa.Table:
    ids = np.sort(rng.choice(rows, size=batch, replace=False)).astype(np.int64)
    return make_rows(ids, partitions, version)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--logs", type=int, nargs="+", default=[1, 5, 20])
    parser.add_argument("--quick", action="store_true", help="100k rows, 2k-row batches, 2 repeats")
    parser.add_argument("--out", help="also write the report (markdown) here")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.batch, args.repeat = 100_000, 2_000, 2
    rng = np.random.default_rng(7)
    work = Path(tempfile.mkdtemp(prefix="bench-mor-"))
    lines = [
        f"rows {args.rows:,} in {args.partitions} partitions (one file group each), update batches of "
        f"{args.batch:,} keys drawn uniformly; Arrow engine; median of {args.repeat}",
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, pyarrow {pa.__version__}, "
        f"tidemark {tidemark.__version__}",
        "",
    ]
    try:
        loaded = {kind: create(work / f"loaded-{kind}", kind, args.rows, args.partitions)
                  for kind in ("COPY_ON_WRITE", "MERGE_ON_READ")}

        # 1. upsert write cost
        lines += ["| upsert of one batch | copy-on-write | merge-on-read | MOR / COW |", "|---|---|---|---|"]
        write_times: dict[str, list[float]] = {"COPY_ON_WRITE": [], "MERGE_ON_READ": []}
        written: dict[str, list[int]] = {"COPY_ON_WRITE": [], "MERGE_ON_READ": []}
        for r in range(args.repeat):
            batch = update_batch(rng, args.rows, args.batch, args.partitions, 1)
            for kind, table in loaded.items():
                copy = work / f"w-{kind}-{r}"
                shutil.copytree(table.path, copy)
                t = Table.open(str(copy), spark=None)
                seconds, result = timed(lambda t=t: t.upsert(batch))
                write_times[kind].append(seconds)
                written[kind].append(result.bytes_written)
                shutil.rmtree(copy)
        cow, mor = median(write_times["COPY_ON_WRITE"]), median(write_times["MERGE_ON_READ"])
        lines.append(f"| wall time | {cow:.3f} s | {mor:.3f} s | {mor / cow:.2f}x |")
        cow_b, mor_b = median([float(b) for b in written["COPY_ON_WRITE"]]), median(
            [float(b) for b in written["MERGE_ON_READ"]])
        lines.append(f"| bytes written | {cow_b / 1e6:.1f} MB | {mor_b / 1e6:.2f} MB | {mor_b / cow_b:.3f}x |")
        lines.append("")

        # 2. snapshot read cost with k logs per slice
        lines += [
            "| logs per slice | COW snapshot | MOR snapshot | MOR / COW | MOR read-optimized | MOR after compaction |",
            "|---|---|---|---|---|---|",
        ]
        base_read: list[float] = []
        for kind, table in loaded.items():
            if kind == "COPY_ON_WRITE":
                base_read = [timed(lambda table=table: table.read())[0] for _ in range(args.repeat)]
        lines.append(f"| 0 (freshly loaded) | {median(base_read):.3f} s | | | | |")
        for k in args.logs:
            tables = {}
            for kind, table in loaded.items():
                copy = work / f"r-{kind}-{k}"
                shutil.copytree(table.path, copy)
                t = Table.open(str(copy), spark=None)
                batch_rng = np.random.default_rng(100 + k)
                for v in range(1, k + 1):
                    t.upsert(update_batch(batch_rng, args.rows, args.batch, args.partitions, v))
                tables[kind] = t
            cow_t, mor_t = tables["COPY_ON_WRITE"], tables["MERGE_ON_READ"]
            cow_s = [timed(cow_t.read)[0] for _ in range(args.repeat)]
            mor_s = [timed(mor_t.read)[0] for _ in range(args.repeat)]
            ro_s = [timed(lambda: mor_t.read(query_type="read_optimized"))[0] for _ in range(args.repeat)]
            a, b = cow_t.read(), mor_t.read()
            assert a.num_rows == b.num_rows == args.rows
            assert abs(sum(a.column("amount").to_pylist()) - sum(b.column("amount").to_pylist())) < 1e-3
            mor_t.compact()
            compacted = [timed(mor_t.read)[0] for _ in range(args.repeat)]
            cm, mm = median(cow_s), median(mor_s)
            lines.append(f"| {k} | {cm:.3f} s | {mm:.3f} s | {mm / cm:.2f}x | {median(ro_s):.3f} s | "
                         f"{median(compacted):.3f} s |")
            for t in tables.values():
                shutil.rmtree(t.path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report = "\n".join(lines)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    sys.exit(main())
