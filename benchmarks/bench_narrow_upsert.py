"""A narrow Arrow-engine upsert, repeated: how long it takes and how many base files it writes.

The ``narrow`` batch of ``bench_shapes.py`` (updates confined to one key range or one partition,
plus as many new keys) upserted into a table loaded by one ``bulk_insert`` of the shape's rows,
each repetition on a fresh copy of that table; the first repetition is a warm-up. Inserts go
to a small file group the upsert rewrites anyway (``write/plan.py``), so a narrow upsert writes
as few base files as its updates touch.

For an A/B, run it from two checkouts in turn (``PYTHONPATH=<checkout>/src``), each with its
own ``--data`` folder (the loaded table is kept there and reflects the checkout that loaded it):

    PYTHONPATH=src .venv/bin/python benchmarks/bench_narrow_upsert.py --shape int-p0-narrow --repeat 8
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow.dataset as ds
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_shapes as bs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="int-p0-narrow")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=8, help="repetitions, the first a warm-up")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "tm-narrow-upsert"),
                   help="where the generated rows and the loaded table are kept between runs")
    args = p.parse_args()

    import tidemark

    shape = bs.parse_shape(args.shape)
    root = os.path.join(args.data, f"{shape.name}-{args.rows}")
    data = os.path.join(root, "data", f"{shape.name}-{args.rows}")
    if not os.path.exists(data):
        bs.make_data(shape, args.rows, 0.10, root)
    narrow = pq.read_table(os.path.join(data, "narrow", "b.parquet"))
    loaded = os.path.join(root, "loaded")
    if not os.path.exists(loaded):
        bs._create(loaded, shape, None).bulk_insert(ds.dataset(os.path.join(data, "base")).to_table())
    seconds, files = [], 0
    for r in range(max(2, args.repeat)):
        copy = os.path.join(root, f"run{r}")
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(loaded, copy)
        table = tidemark.Table.open(copy, spark=None)
        began = time.perf_counter()
        result = table.upsert(narrow)
        seconds.append(time.perf_counter() - began)
        files = result.num_files
        shutil.rmtree(copy)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(f"{shape.name} narrow upsert of {narrow.num_rows:,} rows into {args.rows:,}: "
          f"median {statistics.median(seconds[1:]):.3f} s over {len(seconds) - 1} runs, {files} base file(s) written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
