#!/usr/bin/env python
"""One Arrow-engine write of a ``bench_shapes.py`` shape, for counting its instructions.

Wall time on a shared 2-core machine moves by several per cent between runs of the same code;
valgrind's instruction count repeats within 0.1 %, so a change of a few per cent in a write's
work shows. Run it twice under callgrind, with the write and without (``--setup-only``: the same
imports, data and table, no write), and subtract; the write runs on one thread
(Hudi's parallelism options set to 1), as valgrind runs threads one at a time anyway:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/callgrind_write.py --shape fmt-p100-narrow --work upsert
    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/callgrind_write.py --shape fmt-p100-narrow --work upsert --setup-only

(``Collected :`` in each run's last lines; about two minutes each. With a callgrind output file,
``callgrind_annotate --inclusive=yes`` shows where the instructions go.)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_shapes as bs  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="fmt-p100-narrow")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--work", choices=["bulk", "upsert"], default="upsert")
    p.add_argument("--setup-only", action="store_true", help="everything but the write")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "tm-callgrind"),
                   help="where the generated rows and the loaded table are kept between runs")
    args = p.parse_args()

    import pyarrow as pa
    import pyarrow.dataset as ds

    import tidemark

    shape = bs.parse_shape(args.shape)
    root = os.path.join(args.data, f"{shape.name}-{args.rows}")
    base_dir = os.path.join(root, "data", f"{shape.name}-{args.rows}", "base")
    batch_dir = os.path.join(os.path.dirname(base_dir), "batch")
    if not os.path.exists(os.path.join(batch_dir, "b.parquet")):  # generated once, outside the counted runs
        bs.make_data(shape, args.rows, 0.10, root)
    source, batch = ds.dataset(base_dir).to_table(), ds.dataset(batch_dir).to_table()
    serial = {"hoodie.bulkinsert.shuffle.parallelism": "1", "hoodie.upsert.shuffle.parallelism": "1"}
    loaded = os.path.join(root, "loaded")
    if args.work == "upsert" and not os.path.exists(loaded):  # made once, outside the counted runs
        bs._create(loaded, shape, None).bulk_insert(source)
    work = tempfile.mkdtemp(prefix="tm-callgrind-run-")
    try:
        path = os.path.join(work, "t")
        pa.array([1])  # pyarrow's first conversion imports pandas: in both runs, not in the difference
        if args.work == "upsert":
            shutil.copytree(loaded, path)
            table = tidemark.Table.open(path, spark=None, options=serial)
            if not args.setup_only:
                table.upsert(batch)
        else:
            table = tidemark.Table.create(path, spark=None, record_key=shape.key_field, options=serial,
                                          partition_by=["region"] if shape.partitions else [],
                                          ordering_field="updated_at")
            if not args.setup_only:
                table.bulk_insert(source)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
