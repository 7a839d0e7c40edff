"""What Hudi's base-file footer costs: building the record-key bloom filter, and its size.

Every base file tidemark writes carries Hudi's bloom filter of its record keys
(``format/bloom.py``). This measures, for formatted-id and UUID keys, the CPU time to
build and serialize the filter of one file and to probe it, and the footer's size,
against the time pyarrow takes to write the same keys as a parquet file (the floor of
any base-file write). Run: ``python benchmarks/bench_footer.py [--rows N ...]``.

``--pipeline N`` measures the filter inside the real pipeline instead: Spark ``bulk_insert``
of N rows (the shape of ``bench_write.py``) with ``hoodie.parquet.bloom.filter.enabled``
true and false, alternating, ``--repeat`` runs each, in one SparkSession.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.format.bloom import footer_metadata


def _cpu(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()  # type: ignore[operator]
        times.append(time.process_time() - start)
    return statistics.median(times)


def pipeline(rows: int, repeat: int) -> None:
    import shutil
    import tempfile

    import tidemark
    from tidemark.engines.spark.session import start_spark

    scratch = tempfile.mkdtemp(prefix="bench-footer-spark-")
    spark, _ = start_spark(scratch, app_name="bench-footer")
    df = spark.range(rows, numPartitions=max(1, rows // 250_000)).selectExpr(
        "id", "concat('k', lpad(cast(id as string), 9, '0')) as key", "rand() * 100 as fare",
        "cast(id % 1000 as int) as rider", "current_timestamp() as updated_at",
    ).cache()
    df.count()
    times: dict[bool, list[float]] = {True: [], False: []}
    work = tempfile.mkdtemp(prefix="bench-footer-")
    try:
        for run in range(repeat):
            for enabled in (True, False):
                path = f"{work}/t{run}{int(enabled)}"
                table = tidemark.Table.create(path, spark=spark, record_key="key", options={
                    "hoodie.parquet.bloom.filter.enabled": str(enabled).lower()})
                start = time.perf_counter()
                table.bulk_insert(df)
                times[enabled].append(time.perf_counter() - start)
                shutil.rmtree(path)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        spark.stop()
    on, off = statistics.median(times[True]), statistics.median(times[False])
    print(f"| bulk_insert of {rows:,} rows (Spark, local[2]) | with filter {on:.2f} s | without {off:.2f} s "
          f"| {on / off:.2f}x | runs {', '.join(f'{t:.2f}' for t in times[True])} "
          f"· {', '.join(f'{t:.2f}' for t in times[False])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 250_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--pipeline", type=int, default=None, metavar="N")
    args = parser.parse_args()
    if args.pipeline:
        pipeline(args.pipeline, args.repeat)
        return
    print("| keys | rows | footer build (CPU s) | parquet write of the keys alone (CPU s) | ratio | footer bytes |")
    print("|---|---:|---:|---:|---:|---:|")
    for kind in ("k%09d", "uuid"):
        for n in args.rows:
            keys = pa.array([str(uuid.uuid4()) for _ in range(n)] if kind == "uuid" else [kind % i for i in range(n)])
            build = _cpu(lambda keys=keys: footer_metadata(keys), args.repeat)
            table = pa.table({"_hoodie_record_key": keys})
            write = _cpu(lambda table=table: pq.write_table(table, io.BytesIO()), args.repeat)
            size = sum(len(v) for v in footer_metadata(keys).values())
            name = "uuid" if kind == "uuid" else "k000000123"
            print(f"| {name} | {n:,} | {build:.3f} | {write:.3f} | {build / write:.2f}x | {size:,} |")


if __name__ == "__main__":
    main()
