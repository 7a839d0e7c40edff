#!/usr/bin/env python
"""Would bulk_insert be faster if the JVM wrote the base files? A lower bound, measured.

The idea (BENCHMARKS.md, problem 3): skip the JVM -> Python hand-off of ``mapInArrow`` by
computing the five Hudi meta columns as Spark expressions and writing the files with Spark's
own parquet writer into a staging folder; the driver then moves them into the table. This
script times that write *without* the commit protocol (no markers, no timeline), so it is a
lower bound for such a bulk_insert, next to the real tidemark bulk_insert and the raw write.
Same SparkSession settings and the same cached input as ``bench_write.py``:

* ``raw``      ``df.write.parquet`` (the target's yardstick)
* ``jvm+2``    the JVM write with only ``_hoodie_record_key`` and ``_hoodie_partition_path`` added
* ``jvm+meta`` the JVM write with all five meta columns, as a native bulk_insert would write
               them (commit time, ``<instant>_<task>_<row>`` seqno, key, partition path, the
               final file name with an md5-derived file id; TIMESTAMP_MICROS; into
               ``.hoodie/.temp/<instant>/`` and then renamed into the table by the driver,
               reading each footer for the row count and file name)
* ``jvm+meta0`` the same with the cheapest expressions that could do: no md5 per row (a random
               per-write prefix plus the task number as file id), no nullability wrappers
* ``tidemark`` ``Table.bulk_insert`` (pyarrow files written in ``mapInArrow`` tasks)

The steps alternate their order from round to round; medians are reported, with the CPU time
of the whole process tree (driver, JVM, Python workers) and the 1-minute load average.

    .venv/bin/python benchmarks/profile_native_bulk.py --rows 1000000 5000000
"""

from __future__ import annotations

import glob
import os
import shutil
import statistics
import sys
import uuid
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_write as bw  # noqa: E402

INSTANT = "20250101000000000"


def jvm_meta_write(source, table_dir: str, *, all_meta: bool, cheapest: bool = False) -> int:  # type: ignore[no-untyped-def]
    """Write ``source`` with Hudi meta columns by the JVM; move the files into ``table_dir``.

    ``cheapest``: the file id is a per-write random prefix plus the task number (no md5 per
    row) and the meta columns keep Spark's nullability (the pyarrow files' differs).
    """
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    pid = F.spark_partition_id()
    key = F.col("id").cast("string").alias("_hoodie_record_key")
    path = F.lit("").alias("_hoodie_partition_path")
    if not all_meta:
        source.select(key, path, *source.columns).write.parquet(table_dir)
        return len(glob.glob(os.path.join(table_dir, "*.parquet")))

    def nullable(c):  # type: ignore[no-untyped-def]  # the pyarrow files have nullable meta columns
        return c if cheapest else F.when(pid >= 0, c)

    row = F.monotonically_increasing_id().bitwiseAND(F.lit((1 << 33) - 1))
    if cheapest:
        prefix = str(uuid.uuid4())[:24]
        file_id = F.concat(F.lit(prefix), F.lpad(F.hex(pid), 12, "0"), F.lit("-0"))
    else:
        h = F.md5(F.concat_ws("|", F.lit(INSTANT), pid.cast("string"), F.lit("")))
        file_id = F.concat_ws("-", h.substr(1, 8), h.substr(9, 4), h.substr(13, 4), h.substr(17, 4),
                              h.substr(21, 12), F.lit("0"))
    name = F.concat(file_id, F.lit("_"), pid.cast("string"), F.lit(f"-0-0_{INSTANT}.parquet"))
    out = source.select(
        nullable(F.lit(INSTANT)).alias("_hoodie_commit_time"),
        nullable(F.concat_ws("_", F.lit(INSTANT), pid.cast("string"), row.cast("string"))).alias(
            "_hoodie_commit_seqno"
        ),
        nullable(key).alias("_hoodie_record_key"),
        nullable(path).alias("_hoodie_partition_path"),
        nullable(name).alias("_hoodie_file_name"),
        *source.columns,
    )
    spark = source.sparkSession
    staging = os.path.join(table_dir, ".hoodie", ".temp", INSTANT, "staging")
    saved = spark.conf.get("spark.sql.parquet.outputTimestampType")
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    try:
        out.write.option("compression", "snappy").option("maxRecordsPerFile", 0).parquet("file://" + staging)
    finally:
        spark.conf.set("spark.sql.parquet.outputTimestampType", saved)
    moved = 0
    for staged in glob.glob(os.path.join(staging, "*.parquet")):
        meta = pq.read_metadata(staged)
        stats = meta.row_group(0).column(4).statistics
        os.rename(staged, os.path.join(table_dir, stats.min))
        moved += meta.num_rows > 0
    shutil.rmtree(os.path.join(table_dir, ".hoodie", ".temp", INSTANT))
    return moved


def main() -> int:
    args = bw.profile_parser(__doc__, rows=[1_000_000, 5_000_000], repeat=3,
                             work_dir="/tmp/tidemark-bench-native").parse_args()
    with bw.profile_session(args) as spark:
        import tidemark

        out_dir = os.path.join(args.work_dir, "out")
        for n in args.rows:
            source = bw.cached_rows(spark, n, args.rows_per_file)

            def tm_bulk() -> None:
                tidemark.Table.create(out_dir, spark=spark, record_key="id", ordering_field="updated_at") \
                    .bulk_insert(source)  # noqa: B023

            steps: dict[str, Callable[[], object]] = {
                "raw": lambda: source.write.parquet(out_dir),  # noqa: B023
                "jvm+2": lambda: jvm_meta_write(source, out_dir, all_meta=False),  # noqa: B023
                "jvm+meta": lambda: jvm_meta_write(source, out_dir, all_meta=True),  # noqa: B023
                "jvm+meta0": lambda: jvm_meta_write(source, out_dir, all_meta=True, cheapest=True),  # noqa: B023
                "tidemark": tm_bulk,
            }
            walls: dict[str, list[float]] = {k: [] for k in steps}
            cpus: dict[str, list[float]] = {k: [] for k in steps}
            sizes: dict[str, int] = {}
            loads = []
            for round_ in range(args.repeat + 1):  # round 0: warm-up, not counted
                order = list(steps) if round_ % 2 else list(reversed(steps))
                for name in order:
                    shutil.rmtree(out_dir, ignore_errors=True)
                    wall, cpu = bw.timed_call(steps[name])
                    if round_:
                        walls[name].append(wall)
                        cpus[name].append(cpu)
                    sizes[name] = sum(os.path.getsize(f) for f in glob.glob(os.path.join(out_dir, "*.parquet")))
                loads.append(os.getloadavg()[0])
            source.unpersist()
            raw = statistics.median(walls["raw"])
            files = -(-n // args.rows_per_file)
            print(f"\n{n:,} rows in {files} cached partitions; median of {args.repeat}; load avg "
                  f"{min(loads):.1f}-{max(loads):.1f}")
            print(f"{'step':<10} {'wall s':>7} {'/raw':>6} {'CPU s':>7} {'MB':>6}   runs")
            for name in steps:
                wall = statistics.median(walls[name])
                print(f"{name:<10} {wall:7.2f} {wall / raw:5.2f}x {statistics.median(cpus[name]):7.1f} "
                      f"{sizes[name] / 1e6:6.0f}   " + ", ".join(f"{w:.2f}" for w in walls[name]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
