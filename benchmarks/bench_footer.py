"""What Hudi's base-file footer costs: building the record-key bloom filter, and its size.

Every base file tidemark writes carries Hudi's bloom filter of its record keys
(``format/bloom.py``). This measures, for formatted-id and UUID keys, the CPU time to
build and serialize the filter of one file and to probe it, and the footer's size,
against the time pyarrow takes to write the same keys as a parquet file (the floor of
any base-file write). Run: ``python benchmarks/bench_footer.py [--rows N ...]``.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 250_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
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
