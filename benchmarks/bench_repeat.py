#!/usr/bin/env python
"""One step of ``bench_write.py`` at a time, many alternating runs: its ratio with less noise.

``bench_write.py`` runs each step 3 times; on a shared 2-core machine one slow
run moves that median a lot. This script runs the chosen steps ``--repeat``
times per size, tidemark and its raw Spark counterpart alternating which goes
first, with the same SparkSession settings, the same cached input and the same
upsert batches as ``bench_write.py``:

* ``bulk``    ``Table.bulk_insert`` into a new table vs ``df.write.parquet``
* ``spread``  ``Table.upsert`` of the spread batch (on a fresh copy of the loaded
              table each run) vs the raw full-outer-join rewrite
* ``narrow``  the same with the narrow batch

The first (warm-up) run of each side is dropped; medians of the rest are
reported, wall time and the CPU time of the benchmark's process tree.

    .venv/bin/python benchmarks/bench_repeat.py --rows 1000000 5000000 --repeat 9
    .venv/bin/python benchmarks/bench_repeat.py --rows 1000000 --steps spread narrow --repeat 9
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

STEPS = ("bulk", "spread", "narrow")


def main() -> int:
    parser = bw.profile_parser(__doc__, rows=[1_000_000, 5_000_000], repeat=9, work_dir="/tmp/tidemark-bench-repeat",
                               repeat_help="runs per side, step and size, the first one dropped")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=["bulk"], help="the steps to run (default: bulk)")
    parser.add_argument("--batch-rows", type=int, default=100_000, help="upsert batch size (half updates, half new)")
    args = parser.parse_args()
    with bw.profile_session(args) as spark:
        import tidemark

        print(f"{'rows':>10} {'step':<7} {'side':<9} {'wall s':>7} {'CPU s':>7}   runs (first dropped)")
        for n in args.rows:
            run_size(spark, tidemark, n, args)
    return 0


def run_size(spark, tidemark, n: int, args: argparse.Namespace) -> None:  # type: ignore[no-untyped-def]
    source = bw.cached_rows(spark, n, args.rows_per_file)
    root = os.path.join(args.work_dir, f"n{n}")
    tm_base, raw_base = os.path.join(root, "tm_base"), os.path.join(root, "raw_base")
    tm_out, raw_out = os.path.join(root, "tm"), os.path.join(root, "raw")

    def load(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)
        tidemark.Table.create(path, spark=spark, record_key="id", ordering_field="updated_at").bulk_insert(source)

    def write_raw(path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)
        source.write.parquet(path)

    steps: dict[str, dict[str, Callable[[], None]]] = {
        "bulk": {"tidemark": lambda: load(tm_out), "raw": lambda: write_raw(raw_out)},
    }
    batches = []
    if set(args.steps) - {"bulk"}:
        load(tm_base)
        write_raw(raw_base)
        for batch in bw.make_batches(n, args.batch_rows, args.rows_per_file):
            step = "spread" if batch.kind == "random" else batch.kind
            if step not in args.steps:
                continue
            batch_df = bw.spark_batch(spark, batch).cache()
            batch_df.count()
            batches.append(batch_df)
            steps[step] = {"tidemark": _upsert(tidemark, spark, tm_base, tm_out, batch_df),
                           "raw": _raw_upsert(spark, raw_base, raw_out, batch_df)}
    for step in args.steps:
        run_step(n, step, steps[step], args.repeat)
    for batch_df in batches:
        batch_df.unpersist()
    source.unpersist()
    shutil.rmtree(root, ignore_errors=True)


def _upsert(tidemark, spark, base: str, out: str, batch_df) -> Callable[[], None]:  # type: ignore[no-untyped-def]
    """An upsert of ``batch_df`` into a fresh copy of the loaded table; the copy is made untimed."""
    def run() -> None:
        tidemark.Table.open(out, spark=spark).upsert(batch_df)

    def prepare() -> None:
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(base, out)

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


def _raw_upsert(spark, base: str, out: str, batch_df) -> Callable[[], None]:  # type: ignore[no-untyped-def]
    def run() -> None:
        bw.raw_rewrite(spark, base, batch_df, out)

    run.prepare = lambda: shutil.rmtree(out, ignore_errors=True)  # type: ignore[attr-defined]
    return run


def run_step(n: int, step: str, sides: dict[str, Callable[[], None]], repeat: int) -> None:
    walls: dict[str, list[float]] = {s: [] for s in sides}
    cpus: dict[str, list[float]] = {s: [] for s in sides}
    for rep in range(repeat):
        for side in (["tidemark", "raw"] if rep % 2 == 0 else ["raw", "tidemark"]):
            prepare = getattr(sides[side], "prepare", None)
            if prepare is not None:
                prepare()
            wall, cpu = bw.timed_call(sides[side])
            walls[side].append(wall)
            cpus[side].append(cpu)
    med = {s: (statistics.median(walls[s][1:]), statistics.median(cpus[s][1:])) for s in sides}
    for side in sides:
        print(f"{n:>10,} {step:<7} {side:<9} {med[side][0]:7.2f} {med[side][1]:7.1f}   "
              + ", ".join(f"{w:.2f}" for w in walls[side]), flush=True)
    wall_ratio, cpu_ratio = med["tidemark"][0] / med["raw"][0], med["tidemark"][1] / med["raw"][1]
    load = os.getloadavg()[0]
    print(f"{n:>10,} {step:<7} ratio     {wall_ratio:6.2f}× {cpu_ratio:6.2f}×   load average {load:.1f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
