#!/usr/bin/env python
"""One Spark upsert of a bench_shapes shape, repeated in one JVM on fresh copies of one table
(issue 18 A/B aid: run it from two checkouts in turn, ``PYTHONPATH=<checkout>/src``).

    .venv/bin/python benchmarks/repeat_spark_upsert.py --repeat 10 --bench narrow

The first upsert is untimed (a cold JVM's JIT takes 1.5-2x as long); prints each timed one, the
median, and the Spark event log's per-query split of the last two.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_shapes import _create, make_data, parse_shape  # noqa: E402
from bench_write import LABEL_PROP, print_breakdown, start_spark  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--shape", type=parse_shape, default=parse_shape("fmt-p10-narrow"))
    p.add_argument("--bench", choices=["upsert", "narrow"], default="narrow")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--work-dir", default="/tmp/tidemark-repeat-upsert")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=8)
    args = p.parse_args()
    data_dir = os.path.join(args.work_dir, f"{args.shape.name}-{args.rows}")
    events = os.path.join(args.work_dir, f"eventlog-{os.getpid()}")
    spark = start_spark(args, events)
    sc = spark.sparkContext
    steps = []
    try:
        import tidemark

        os.makedirs(data_dir, exist_ok=True)
        data = make_data(args.shape, args.rows, 0.10, data_dir)
        base = os.path.join(data_dir, "table")
        if not os.path.exists(base):  # kept for the other checkout's run
            _create(base, args.shape, spark).bulk_insert(spark.read.parquet(data.base_dir))
        batch = spark.read.parquet(data.narrow_dir if args.bench == "narrow" else data.batch_dir).cache()
        batch.count()
        for i in range(args.repeat + 1):
            copy = os.path.join(args.work_dir, "copy")
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(base, copy)
            table = tidemark.Table.open(copy, spark=spark)
            sc.setLocalProperty(LABEL_PROP, f"rep{i}")
            start = time.time()
            table.upsert(batch)
            end = time.time()
            sc.setLocalProperty(LABEL_PROP, "untimed")
            if i:
                steps.append(SimpleNamespace(label=f"rep{i}", start_ms=start * 1000, end_ms=end * 1000,
                                             seconds=end - start))
    finally:
        spark.stop()
    times = [s.seconds for s in steps]
    print("seconds", [round(t, 3) for t in times], "median", round(statistics.median(times), 3))
    print_breakdown(steps[-2:], events)
    shutil.rmtree(events, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
