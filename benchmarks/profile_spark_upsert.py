#!/usr/bin/env python
"""Per-query split of one Spark upsert on a bench_shapes shape (issue 18 profiling aid).

    .venv/bin/python benchmarks/profile_spark_upsert.py --rows 1000000 --shape fmt-p10-narrow

Builds the shape's rows (``bench_shapes.make_data``), bulk-inserts them, then runs the spread
and the narrow upsert (and the raw rewrite of each) and prints, from the Spark event log, the
queries each step ran: their wall time, task counts and summed task time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_shapes import _create, make_data, parse_shape, raw_rewrite  # noqa: E402
from bench_write import LABEL_PROP, print_breakdown, start_spark  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--shape", type=parse_shape, default=parse_shape("fmt-p10-narrow"))
    p.add_argument("--work-dir", default="/tmp/tidemark-profile-spark")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=8)
    p.add_argument("--benches", nargs="+", default=["upsert", "narrow"])
    p.add_argument("--raw", action="store_true", help="also time the raw rewrite")
    p.add_argument("--cprofile", metavar="PREFIX",
                   help="also profile the driver's Python of each upsert (cProfile, PREFIX-<bench>.prof)")
    p.add_argument("--warmup", action="store_true", help="run each upsert once untimed first (JIT, caches)")
    args = p.parse_args()
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    events = os.path.join(args.work_dir, "eventlog")
    spark = start_spark(args, events)
    sc = spark.sparkContext
    steps = []

    def timed(label, fn):  # type: ignore[no-untyped-def]
        sc.setLocalProperty(LABEL_PROP, label)
        t0 = time.time()
        out = fn()
        t1 = time.time()
        sc.setLocalProperty(LABEL_PROP, "untimed")
        steps.append(SimpleNamespace(label=label, start_ms=t0 * 1000, end_ms=t1 * 1000, seconds=t1 - t0))
        print(f"{label}: {t1 - t0:.2f} s", flush=True)
        return out

    try:
        import tidemark

        data = make_data(args.shape, args.rows, 0.10, args.work_dir)
        source = spark.read.parquet(data.base_dir).cache()
        source.count()
        base = os.path.join(args.work_dir, "tm")
        timed("bulk", lambda: _create(base, args.shape, spark).bulk_insert(source))
        for bench in args.benches:
            batch = spark.read.parquet(data.batch_dir if bench == "upsert" else data.narrow_dir).cache()
            batch.count()
            path = os.path.join(args.work_dir, f"tm_{bench}")
            shutil.copytree(base, path)
            if args.warmup:
                warm = os.path.join(args.work_dir, f"warm_{bench}")
                shutil.copytree(base, warm)
                tidemark.Table.open(warm, spark=spark).upsert(batch)
                shutil.rmtree(warm)
            table = tidemark.Table.open(path, spark=spark)
            if args.cprofile:
                import cProfile

                prof = cProfile.Profile()
                out = timed(bench, lambda t=table, b=batch, pr=prof: pr.runcall(t.upsert, b))
                prof.dump_stats(f"{args.cprofile}-{bench}.prof")
            else:
                out = timed(bench, lambda t=table, b=batch: t.upsert(b))
            print(f"  files {out.num_files}", flush=True)
            if args.raw:
                raw_base = os.path.join(args.work_dir, "raw")
                if not os.path.exists(raw_base):
                    (source.write.partitionBy("region") if args.shape.partitions else source.write).parquet(raw_base)
                out_dir = os.path.join(args.work_dir, f"raw_{bench}")
                timed(f"raw-{bench}", lambda b=batch, o=out_dir, r=raw_base: raw_rewrite(spark, r, b, o, args.shape))
    finally:
        spark.stop()
    print_breakdown(steps, events)
    shutil.rmtree(args.work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
