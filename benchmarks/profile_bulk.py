#!/usr/bin/env python
"""Where bulk_insert's time goes on Spark: the JVM -> Python hand-off vs the writing itself.

Same SparkSession settings and the same cached input as ``bench_write.py``; each
step runs ``--repeat`` times, median reported:

* ``noop``            ``df.write.format("noop")``: reading the cached input, nothing written
* ``arrow drain``     ``mapInArrow`` that only counts rows: the JVM -> Arrow -> Python hand-off,
                      with Spark's default per-row check of the batch's bytes, and without it
                      (``maxBytesPerBatch`` = Int.MaxValue, as tidemark sets it while it writes)
* ``arrow drain+key`` the same with the two key columns tidemark adds before the hand-off
* ``pyarrow write``   ``mapInArrow`` writing each task's rows with ``pq.ParquetWriter``, no byte
                      check: the floor for any writer that runs in Python tasks
* ``raw parquet``     ``df.write.parquet`` (the JVM writer)
* ``tidemark``        ``Table.bulk_insert``

    .venv/bin/python benchmarks/profile_bulk.py --rows 5000000 [--tidemark-ref HEAD]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from collections.abc import Callable, Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_write as bw  # noqa: E402


def main() -> int:
    args = bw.profile_parser(__doc__, rows=5_000_000, repeat=3, work_dir="/tmp/tidemark-bench-bulk").parse_args()
    with bw.profile_session(args) as spark:
        import pyarrow as pa
        import pyarrow.parquet as pq
        from pyspark.sql import functions as F

        import tidemark

        n, files = args.rows, -(-args.rows // args.rows_per_file)
        source = bw.cached_rows(spark, n, args.rows_per_file)
        keyed = source.withColumn("_hoodie_record_key", F.col("id").cast("string")) \
            .withColumn("_hoodie_partition_path", F.lit(""))
        out_dir = os.path.join(args.work_dir, "out")

        def drain(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            rows = sum(b.num_rows for b in batches)
            yield pa.record_batch([pa.array([rows], pa.int64())], names=["n"])

        def pyarrow_write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            from pyspark import TaskContext

            writer, rows = None, 0
            path = os.path.join(out_dir, f"part-{TaskContext.get().partitionId()}.parquet")
            for b in batches:
                if writer is None:
                    writer = pq.ParquetWriter(path, b.schema, compression="snappy")
                writer.write_batch(b)
                rows += b.num_rows
            if writer is not None:
                writer.close()
            yield pa.record_batch([pa.array([rows], pa.int64())], names=["n"])

        def tm_bulk() -> None:
            tidemark.Table.create(out_dir, spark=spark, record_key="id", ordering_field="updated_at") \
                .bulk_insert(source)

        def prepared_dir() -> None:
            os.makedirs(out_dir, exist_ok=True)

        def unchecked(fn: Callable[[], object]) -> Callable[[], None]:
            def run() -> None:
                from tidemark.engines.spark.session import write_session

                with write_session(spark):
                    fn()
            return run

        steps: list[tuple[str, Callable[[], object]]] = [
            ("noop (read the cached input)", lambda: source.write.format("noop").mode("overwrite").save()),
            ("arrow drain (JVM -> Python)", lambda: source.mapInArrow(drain, "n long").collect()),
            ("arrow drain, no byte check", unchecked(lambda: source.mapInArrow(drain, "n long").collect())),
            ("arrow drain + 2 key columns", lambda: keyed.mapInArrow(drain, "n long").collect()),
            ("pyarrow write, no byte check", unchecked(lambda: (prepared_dir(), source.mapInArrow(
                pyarrow_write, "n long").collect()))),
            ("raw df.write.parquet", lambda: source.write.parquet(out_dir)),
            ("tidemark bulk_insert", tm_bulk),
        ]
        print(f"{n:,} rows in {files} cached partitions; median of {args.repeat}; CPU = this process tree")
        print(f"{'step':<32} {'wall s':>7} {'CPU s':>7}   runs")
        for name, fn in steps:
            walls, cpus = [], []
            for _ in range(args.repeat):
                shutil.rmtree(out_dir, ignore_errors=True)
                wall, cpu = bw.timed_call(fn)
                walls.append(wall)
                cpus.append(cpu)
            print(f"{name:<32} {statistics.median(walls):7.2f} {statistics.median(cpus):7.1f}   "
                  + ", ".join(f"{w:.2f}" for w in walls), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
