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


KINDS = {  # name: (table type, writer options)
    "COW": ("COPY_ON_WRITE", {}),
    "MOR": ("MERGE_ON_READ", {}),
    "MOR-parquet": ("MERGE_ON_READ", {"hoodie.logfile.data.block.format": "parquet"}),
}


def create(path: Path, kind: str, rows: int, partitions: int) -> Table:
    table_type, options = KINDS[kind]
    t = Table.create(str(path), spark=None, record_key="id", partition_by="part", ordering_field="ts",
                     table_type=table_type, options=options)
    t.bulk_insert(make_rows(np.arange(rows, dtype=np.int64), partitions, 0))
    return t


def reopen(path: Path, kind: str) -> Table:
    return Table.open(str(path), spark=None, options=KINDS[kind][1])


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
        loaded = {kind: create(work / f"loaded-{kind}", kind, args.rows, args.partitions) for kind in KINDS}

        # 1. upsert write cost
        lines += ["| upsert of one batch | COW | MOR (Avro blocks) | MOR (parquet blocks) | MOR / COW |",
                  "|---|---|---|---|---|"]
        write_times: dict[str, list[float]] = {kind: [] for kind in KINDS}
        written: dict[str, list[float]] = {kind: [] for kind in KINDS}
        for r in range(args.repeat):
            batch = update_batch(rng, args.rows, args.batch, args.partitions, 1)
            for kind, table in loaded.items():
                copy = work / f"w-{kind}-{r}"
                shutil.copytree(table.path, copy)
                t = reopen(copy, kind)
                seconds, result = timed(lambda t=t, batch=batch: t.upsert(batch))
                write_times[kind].append(seconds)
                written[kind].append(float(result.bytes_written))
                shutil.rmtree(copy)
        w = {kind: median(v) for kind, v in write_times.items()}
        b = {kind: median(v) for kind, v in written.items()}
        lines.append(f"| wall time | {w['COW']:.3f} s | {w['MOR']:.3f} s | {w['MOR-parquet']:.3f} s | "
                     f"{w['MOR'] / w['COW']:.2f}x / {w['MOR-parquet'] / w['COW']:.2f}x |")
        lines.append(f"| bytes written | {b['COW'] / 1e6:.1f} MB | {b['MOR'] / 1e6:.2f} MB | "
                     f"{b['MOR-parquet'] / 1e6:.2f} MB | "
                     f"{b['MOR'] / b['COW']:.3f}x / {b['MOR-parquet'] / b['COW']:.3f}x |")
        lines.append("")

        # 2. snapshot read cost with k logs per slice
        lines += [
            "| logs per slice | COW snapshot | MOR snapshot (Avro) | MOR snapshot (parquet) | MOR / COW | "
            "MOR read-optimized | MOR after compaction |",
            "|---|---|---|---|---|---|---|",
        ]
        base_read = [timed(loaded["COW"].read)[0] for _ in range(args.repeat)]
        lines.append(f"| 0 (freshly loaded) | {median(base_read):.3f} s | | | | | |")
        for k in args.logs:
            tables = {}
            for kind, table in loaded.items():
                copy = work / f"r-{kind}-{k}"
                shutil.copytree(table.path, copy)
                t = reopen(copy, kind)
                batch_rng = np.random.default_rng(100 + k)
                for v in range(1, k + 1):
                    t.upsert(update_batch(batch_rng, args.rows, args.batch, args.partitions, v))
                tables[kind] = t
            reads = {kind: median([timed(t.read)[0] for _ in range(args.repeat)]) for kind, t in tables.items()}
            mor_t = tables["MOR"]
            ro = median([timed(lambda t=mor_t: t.read(query_type="read_optimized"))[0] for _ in range(args.repeat)])
            expected = tables["COW"].read()
            for kind in ("MOR", "MOR-parquet"):
                got = tables[kind].read()
                assert got.num_rows == expected.num_rows == args.rows
                assert abs(sum(got.column("amount").to_pylist()) - sum(expected.column("amount").to_pylist())) < 1e-3
            mor_t.compact()
            compacted = median([timed(mor_t.read)[0] for _ in range(args.repeat)])
            cm = reads["COW"]
            lines.append(f"| {k} | {cm:.3f} s | {reads['MOR']:.3f} s | {reads['MOR-parquet']:.3f} s | "
                         f"{reads['MOR'] / cm:.2f}x / {reads['MOR-parquet'] / cm:.2f}x | {ro:.3f} s | "
                         f"{compacted:.3f} s |")
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
