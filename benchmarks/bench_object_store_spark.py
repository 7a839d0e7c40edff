"""Spark-engine writes to S3 (the local moto server): bulk_insert and upsert of 1M rows vs plain parquet.

A classic ``local[2]`` session. tidemark's Spark engine writes through obstore from the Python
workers (no Hadoop S3 jars). Spark's own ``df.write.parquet("s3a://...")`` cannot run here: the
pyspark package has no ``hadoop-aws`` jar, and the task is to need none. So the plain-parquet side
is pyarrow's S3 writer on the same rows, twice:

* **Spark tasks + pyarrow**: a ``mapInArrow`` job whose tasks each write their partition as one
  parquet file with ``pyarrow.parquet.write_table`` on pyarrow's ``S3FileSystem`` (what
  ``df.write.parquet`` would do with an S3 connector: same parallelism, same file layout as
  tidemark's bulk_insert);
* **one pyarrow write** of the whole table from the driver (the rows collected first, untimed).

The rows are bench_write.py's: ``spark.range(0, N, 1, N / 250_000)`` with 8 columns computed
from ``id``, cached and counted before anything is timed; the upsert batch is every tenth key
(spread over the key space, new values), also cached. An untimed warm-up round of 10,000 rows
runs both writers first; then each step ``--repeat`` times on a fresh table / folder, median
reported. At the end hudi-rs reads the first table: every row once, the upserted ones updated.

Run: ``PYTHONPATH=src:tests:benchmarks python benchmarks/bench_object_store_spark.py [--rows 1000000]
[--repeat 3] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_write import spark_rows  # noqa: E402

import tidemark  # noqa: E402

ROWS_PER_FILE = 250_000


def _timed(fn: Callable[[], Any]) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def _s3fs(options: dict[str, str]) -> Any:
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(access_key=options["aws_access_key_id"], secret_key=options["aws_secret_access_key"],
                             region=options["aws_region"],
                             endpoint_override=options["aws_endpoint_url"].removeprefix("http://"), scheme="http")


def spark_parquet_write(df: Any, options: dict[str, str], folder: str) -> None:
    """Each Spark task writes its partition as one parquet file through pyarrow's S3 filesystem."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = pa.Table.from_batches(list(batches))
        name = f"{folder}/part-{uuid.uuid4().hex}.parquet"
        pq.write_table(table, name, filesystem=_s3fs(options), compression="snappy")
        yield pa.RecordBatch.from_pydict({"rows": [table.num_rows]})

    written = df.mapInArrow(write, "rows long").groupBy().sum("rows").collect()[0][0]
    assert written == df.count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from moto_server import MotoServer

    spark = (SparkSession.builder.master("local[2]").appName("bench-object-store-spark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").config("spark.default.parallelism", "4")
             .config("spark.sql.session.timeZone", "UTC").config("spark.driver.memory", "4g")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    moto = MotoServer().start()
    results: dict[str, Any] = {"rows": args.rows, "repeat": args.repeat, "load at start": os.getloadavg()}
    try:
        options = moto.storage_options()
        bucket = moto.create_bucket(f"bench-{uuid.uuid4().hex[:8]}")
        source = spark_rows(spark.range(0, args.rows, 1, -(-args.rows // ROWS_PER_FILE)), 0).cache()
        source.count()
        batch = spark_rows(spark.range(0, args.rows, 1, -(-args.rows // ROWS_PER_FILE)).where(F.col("id") % 10 == 3),
                           1).cache()
        results["upsert rows"] = batch.count()
        arrow_source = source.toArrow()  # the driver-side pyarrow write's input (untimed)
        fs = _s3fs(options)
        times: dict[str, list[float]] = {}

        def run(name: str, fn: Callable[[], Any]) -> None:
            seconds = _timed(fn)
            times.setdefault(name, []).append(seconds)
            print(f"{name}: {seconds:.2f} s (load {os.getloadavg()[0]:.1f})", flush=True)

        # Warm-up, untimed: Python workers started, modules imported, connections opened.
        small = source.limit(10_000)
        warm = tidemark.Table.create(f"s3://{bucket}/warm-up", spark=spark, record_key="id",
                                     ordering_field="updated_at", storage_options=options)
        warm.bulk_insert(small)
        warm.upsert(small)
        warm.close()
        spark_parquet_write(small, options, f"{bucket}/warm-up-plain")
        for rep in range(args.repeat):
            uri = f"s3://{bucket}/tidemark-{rep}"
            table = tidemark.Table.create(uri, spark=spark, record_key="id", ordering_field="updated_at",
                                          storage_options=options)
            try:
                run("tidemark bulk_insert", lambda table=table: table.bulk_insert(source))
                run("tidemark upsert 10%", lambda table=table: table.upsert(batch))
            finally:
                table.close()
            run("spark tasks + pyarrow, full",
                lambda rep=rep: spark_parquet_write(source, options, f"{bucket}/plain-{rep}"))
            run("spark tasks + pyarrow, 10%",
                lambda rep=rep: spark_parquet_write(batch, options, f"{bucket}/batch-{rep}"))
            run("one pyarrow write, full",
                lambda rep=rep: pq.write_table(arrow_source, f"{bucket}/one-{rep}/full.parquet", filesystem=fs))
        # The table is right: every row once, every tenth with the upsert's values (hudi-rs checks).
        from conftest import hudi_rs_read

        read = hudi_rs_read(f"s3://{bucket}/tidemark-0", storage_options=options)
        assert read.num_rows == args.rows, read.num_rows
        updated = sum(1 for note in read.column("note").to_pylist() if note.startswith("v1-"))
        assert updated == results["upsert rows"], updated
        results["median s"] = {k: round(statistics.median(v), 2) for k, v in times.items()}
        results["runs s"] = {k: [round(x, 2) for x in v] for k, v in times.items()}
        results["load at end"] = os.getloadavg()
        print(json.dumps(results, indent=1), flush=True)
    finally:
        moto.stop()
        spark.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
