"""Snapshot reads of a table of many small files, before and after clustering.

1. A copy-on-write table of ``--rows`` rows in ``--files`` small base files: a Spark
   bulk_insert of a DataFrame with one input partition per ``files / cities`` files,
   4 partition folders (``city``), the way many small ingestion batches leave a table.
2. Snapshot reads, each timed ``--repeat`` times after one warm-up (median reported):
   * Spark full scan: ``table.read().agg(sum(amount), max(note), count)``;
   * Spark point query: ``table.read().where(user == X).count()`` (sorted files let
     parquet statistics skip most of the data);
   * hudi-rs: the whole table into Arrow (``HudiTable.read``), the independent reader;
   * tidemark's Arrow engine: ``Table.open(spark=None).read()``.
3. ``Table.cluster(sort_by=["user"], target_file_size=...)`` on Spark (timed), then the
   same reads again.

Run: .venv/bin/python benchmarks/bench_clustering.py [--quick] [--json out.json]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tidemark  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    fn()  # warm-up: JVM code paths, OS page cache
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def spark_session(driver_memory: str) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidemark-bench-clustering")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.memory", driver_memory)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def build_table(spark: Any, path: str, rows: int, files: int) -> tidemark.Table:
    from pyspark.sql import functions as F

    cities = 4
    df = (
        spark.range(0, rows, 1, max(1, files // cities))
        .withColumn("city", F.concat(F.lit("c"), (F.col("id") % cities).cast("string")))
        .withColumn("user", (F.col("id") * 7919 % 100_003).cast("long"))
        .withColumn("amount", (F.col("id") % 1000) / 10.0)
        .withColumn("note", F.concat(F.lit("note-"), (F.col("id") % 977).cast("string")))
        .withColumn("ts", F.col("id"))
    )
    table = tidemark.Table.create(path, spark=spark, record_key="id", partition_by="city", ordering_field="ts")
    table.bulk_insert(df)
    return table


def reads(spark: Any, table: tidemark.Table, repeat: int, user: int) -> dict[str, float]:
    from pyspark.sql import functions as F

    from conftest import hudi_rs_read

    arrow_table = tidemark.Table.open(table.path, spark=None)
    out: dict[str, float] = {}
    out["spark_full_scan_s"], full = timed(
        lambda: table.read().agg(F.sum("amount"), F.max("note"), F.count(F.lit(1))).collect(), repeat)
    out["spark_point_query_s"], hits = timed(lambda: table.read().where(F.col("user") == user).count(), repeat)
    out["hudi_rs_read_s"], theirs = timed(lambda: hudi_rs_read(table.path).num_rows, repeat)
    out["arrow_read_s"], mine = timed(lambda: arrow_table.read().num_rows, repeat)
    count = full[0][2]
    assert count == theirs == mine, (count, theirs, mine)
    out["rows"] = count
    out["point_query_hits"] = hits
    out["files"] = len(table.read_plan().files)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--target-mb", type=int, default=32, help="target file size of the clustering")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--quick", action="store_true", help="400k rows in 400 files, 2 repeats")
    parser.add_argument("--json", help="write the results here too")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.files, args.repeat = 400_000, 400, 2

    spark = spark_session(args.driver_memory)
    scratch = tempfile.mkdtemp(prefix="tidemark-bench-clustering-")
    try:
        started = time.perf_counter()
        table = build_table(spark, os.path.join(scratch, "t"), args.rows, args.files)
        build_s = time.perf_counter() - started
        user = 4242
        before = reads(spark, table, args.repeat, user)
        started = time.perf_counter()
        result = table.cluster(sort_by=["user"], target_file_size=args.target_mb * 1024 * 1024)
        cluster_s = time.perf_counter() - started
        after = reads(spark, table, args.repeat, user)
        assert before["rows"] == after["rows"] and before["point_query_hits"] == after["point_query_hits"]
        report = {
            "args": vars(args),
            "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                        "os": f"{platform.system()} {platform.release()}"},
            "build_s": round(build_s, 2),
            "cluster_s": round(cluster_s, 2),
            "clustering": {"files_before": result.files_before, "files_after": result.files_after,
                           "bytes_before": result.bytes_before, "bytes_after": result.bytes_after,
                           "groups": result.groups},
            "before": before,
            "after": after,
        }
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    print(json.dumps(report, indent=2))
    print()
    print("| read | before (s) | after (s) | speed-up |")
    print("|---|---:|---:|---:|")
    for key, label in (("spark_full_scan_s", "Spark full scan (sum, max, count)"),
                       ("spark_point_query_s", "Spark point query (user = X)"),
                       ("hudi_rs_read_s", "hudi-rs read of the whole table"),
                       ("arrow_read_s", "tidemark Arrow read of the whole table")):
        b, a = before[key], after[key]
        print(f"| {label} | {b:.2f} | {a:.2f} | {b / a:.1f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
