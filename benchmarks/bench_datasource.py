"""``df.write.format("tidemark")`` against ``Table(spark=...)``: the cost of the staged commit step.

The data source stages the rows as Parquet and runs the write in Spark's commit step with the
Arrow engine (one process); ``Table(spark=...)`` runs the Spark pipeline. Both bulk-insert N rows
(id, part of 8 values, ts, a 50-character string) into a new table, then upsert N/10 of them.
Run: ``python benchmarks/bench_datasource.py [--rows N] [--repeat R]`` (the first repetition
includes Spark's and the Python workers' warm-up).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

from pyspark.sql import SparkSession

import tidemark


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    tidemark.register(spark)
    n = args.rows
    rows = spark.range(n).selectExpr("id", "cast(id % 8 as string) as part", "id as ts", "repeat('x', 50) as v")
    rows = rows.cache()
    rows.count()
    updates = spark.range(0, n, 10).selectExpr("id", "cast(id % 8 as string) as part", "id + 1 as ts", "'u' as v")
    updates = updates.cache()
    updates.count()
    options = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "part",
               "hoodie.datasource.write.precombine.field": "ts"}
    root = tempfile.mkdtemp(prefix="bench-datasource-")
    try:
        for rep in range(args.repeat):
            for how in ("datasource", "table"):
                path = os.path.join(root, how)
                shutil.rmtree(path, ignore_errors=True)
                start = time.perf_counter()
                if how == "datasource":
                    rows.write.format("tidemark").options(
                        **options, **{"hoodie.datasource.write.operation": "bulk_insert"}).mode("append").save(path)
                else:
                    table = tidemark.Table.create(path, spark=spark, record_key="id", partition_by="part",
                                                  ordering_field="ts")
                    table.bulk_insert(rows)
                loaded = time.perf_counter()
                if how == "datasource":
                    updates.write.format("tidemark").options(**options).mode("append").save(path)
                else:
                    table.upsert(updates)
                done = time.perf_counter()
                print(f"run {rep} {how:10s}: bulk_insert {n} rows {loaded - start:6.1f} s, "
                      f"upsert {n // 10} rows {done - loaded:6.1f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()


if __name__ == "__main__":
    main()
