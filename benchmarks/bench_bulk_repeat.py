#!/usr/bin/env python
"""bulk_insert vs ``df.write.parquet``, many alternating runs: the bulk ratio with less noise.

``bench_write.py`` runs each step 3 times; on a shared 2-core machine one slow
run moves that median a lot. This script runs only the bulk step, ``--repeat``
times per size, tidemark and raw alternating which goes first, with the same
SparkSession settings and the same cached input as ``bench_write.py``. The
first (warm-up) run of each side is dropped; medians of the rest are reported,
wall time and the CPU time of the benchmark's process tree.

    .venv/bin/python benchmarks/bench_bulk_repeat.py --rows 1000000 5000000 --repeat 9
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_write as bw  # noqa: E402


def main() -> int:
    args = bw.profile_parser(__doc__, rows=[1_000_000, 5_000_000], repeat=9, work_dir="/tmp/tidemark-bench-bulk-repeat",
                             repeat_help="runs per side and size, the first one dropped").parse_args()
    with bw.profile_session(args) as spark:
        import tidemark

        print(f"{'rows':>10} {'side':<9} {'wall s':>7} {'CPU s':>7}   runs (first dropped)")
        for n in args.rows:
            run_size(spark, tidemark, n, args)
    return 0


def run_size(spark, tidemark, n: int, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    source = bw.cached_rows(spark, n, args.rows_per_file)
    tm_dir, raw_dir = os.path.join(args.work_dir, "tm"), os.path.join(args.work_dir, "raw")

    def tm() -> None:
        shutil.rmtree(tm_dir, ignore_errors=True)
        tidemark.Table.create(tm_dir, spark=spark, record_key="id", ordering_field="updated_at").bulk_insert(source)

    def raw() -> None:
        shutil.rmtree(raw_dir, ignore_errors=True)
        source.write.parquet(raw_dir)

    sides: dict[str, Callable[[], None]] = {"tidemark": tm, "raw": raw}
    walls: dict[str, list[float]] = {s: [] for s in sides}
    cpus: dict[str, list[float]] = {s: [] for s in sides}
    for rep in range(args.repeat):
        for side in (["tidemark", "raw"] if rep % 2 == 0 else ["raw", "tidemark"]):
            wall, cpu = bw.timed_call(sides[side])
            walls[side].append(wall)
            cpus[side].append(cpu)
    med = {s: (statistics.median(walls[s][1:]), statistics.median(cpus[s][1:])) for s in sides}
    for side in sides:
        print(f"{n:>10,} {side:<9} {med[side][0]:7.2f} {med[side][1]:7.1f}   "
              + ", ".join(f"{w:.2f}" for w in walls[side]), flush=True)
    wall_ratio, cpu_ratio = med["tidemark"][0] / med["raw"][0], med["tidemark"][1] / med["raw"][1]
    load = os.getloadavg()[0]
    print(f"{n:>10,} ratio     {wall_ratio:6.2f}× {cpu_ratio:6.2f}×   load average {load:.1f}", flush=True)
    source.unpersist()


if __name__ == "__main__":
    sys.exit(main())
