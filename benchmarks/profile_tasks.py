#!/usr/bin/env python
"""Profile what one tidemark Spark task does, without Spark: pure pyarrow, one core.

Companion to ``bench_write.py``: it explains the task time that the Spark event
log attributes to tidemark's write stages by running the same library functions
(``tidemark.write.file_group``) on one file's worth of rows, next to the plain
pyarrow floor for the same bytes.

* bulk task:   ``write_new_files`` over Arrow batches of 10,000 rows (what
               ``mapInArrow`` hands a task) vs one ``pq.write_table`` of the same rows.
* merge task:  ``write_file_group`` of one base file with a slice of an upsert batch
               vs ``pq.read_table`` + ``pq.write_table`` of that file.

    .venv/bin/python benchmarks/profile_tasks.py --rows-per-file 250000
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_write import arrow_rows  # noqa: E402


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, value = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def profile(fn: Callable[[], Any], top: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    lines = [line for line in out.getvalue().splitlines() if line.strip()]
    start = next(i for i, line in enumerate(lines) if "ncalls" in line)
    return "\n".join(lines[start:start + top + 1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows-per-file", type=int, default=250_000)
    p.add_argument("--arrow-batch", type=int, default=10_000, help="spark.sql.execution.arrow.maxRecordsPerBatch")
    p.add_argument("--updates", type=int, default=2_500, help="updated keys that fall in this file")
    p.add_argument("--inserts", type=int, default=50_000, help="new keys routed to this file")
    p.add_argument("--repeat", type=int, default=3, help="best of")
    p.add_argument("--top", type=int, default=12, help="profile lines to print")
    args = p.parse_args()

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tidemark.format.names import META_COLUMNS, PARTITION_PATH, RECORD_KEY
    from tidemark.write.file_group import OP_COLUMN, OP_UPSERT, WriteSpec, write_file_group, write_new_files

    n = args.rows_per_file
    user = arrow_rows(np.arange(n, dtype=np.int64), 0)
    prepared = user.append_column(RECORD_KEY, pc.cast(user["id"], pa.string())) \
        .append_column(PARTITION_PATH, pa.array([""] * n, pa.string()))
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(user.schema))
    root = tempfile.mkdtemp(prefix="tidemark-profile-")
    spec = WriteSpec(base_path=root, instant_time="20260101000000000", schema=schema,
                     ordering_fields=("updated_at",), compression="snappy", max_file_size=120 * 1024 * 1024)
    batches = prepared.to_batches(max_chunksize=args.arrow_batch)
    print(f"one file: {n:,} rows, {len(user.schema)} user columns, Arrow batches of {args.arrow_batch:,} rows "
          f"({len(batches)} batches); pyarrow {pa.__version__}, Python {sys.version.split()[0]}")
    print()

    # -- bulk task -------------------------------------------------------------------------
    counter = iter(range(10**9))

    def tidemark_bulk() -> Any:
        return list(write_new_files(spec, iter(batches), token=f"0-0-{next(counter)}", task_partition=0))

    def plain_bulk() -> None:
        pq.write_table(user, os.path.join(root, "plain.parquet"), compression="snappy")

    def plain_bulk_meta() -> None:
        # The same five meta columns, built with vectorised Arrow calls, one write.
        seq = pc.binary_join_element_wise("20260101000000000_0_",
                                          pc.cast(pa.array(np.arange(n)), pa.string()), "")
        cols = {"_hoodie_commit_time": pa.repeat("20260101000000000", n),
                "_hoodie_commit_seqno": seq, "_hoodie_record_key": prepared[RECORD_KEY],
                "_hoodie_partition_path": prepared[PARTITION_PATH],
                "_hoodie_file_name": pa.repeat("x.parquet", n)}
        table = pa.table({**cols, **{c: user[c] for c in user.column_names}}, schema=schema)
        pq.write_table(table, os.path.join(root, "plain_meta.parquet"), compression="snappy")

    t_tm, stats = timed(tidemark_bulk, args.repeat)
    t_plain, _ = timed(plain_bulk, args.repeat)
    t_meta, _ = timed(plain_bulk_meta, args.repeat)
    bulk_file = os.path.join(root, stats[0].path)
    meta = pq.ParquetFile(bulk_file).metadata
    plain_meta = pq.ParquetFile(os.path.join(root, "plain_meta.parquet")).metadata
    print("bulk task (one file):")
    print(f"  tidemark write_new_files          {t_tm:6.3f} s   {os.path.getsize(bulk_file) / 1e6:6.1f} MB, "
          f"{meta.num_row_groups} row groups")
    print(f"  pq.write_table, user columns only {t_plain:6.3f} s   "
          f"{os.path.getsize(os.path.join(root, 'plain.parquet')) / 1e6:6.1f} MB")
    print(f"  pq.write_table, + meta columns    {t_meta:6.3f} s   "
          f"{os.path.getsize(os.path.join(root, 'plain_meta.parquet')) / 1e6:6.1f} MB, "
          f"{plain_meta.num_row_groups} row group(s); meta columns built vectorised")
    print()
    print("  profile of write_new_files (by own time):")
    print("  " + profile(tidemark_bulk, args.top).replace("\n", "\n  "))
    print()

    # -- merge task ------------------------------------------------------------------------
    rng = np.random.default_rng(7)
    upd = np.sort(rng.choice(n, size=min(args.updates, n), replace=False)).astype(np.int64)
    new = np.arange(10**9, 10**9 + args.inserts, dtype=np.int64)
    batch = arrow_rows(np.concatenate([upd, new]), 1)
    incoming = batch.append_column(RECORD_KEY, pc.cast(batch["id"], pa.string())) \
        .append_column(PARTITION_PATH, pa.array([""] * batch.num_rows, pa.string())) \
        .append_column(OP_COLUMN, pa.array([OP_UPSERT] * batch.num_rows, pa.string()))
    base_rel = stats[0].path
    file_id = stats[0].file_id
    spec2 = WriteSpec(**{**spec.__dict__, "instant_time": "20260102000000000"})

    def tidemark_merge() -> Any:
        return write_file_group(spec2, incoming, partition_path="", file_id=file_id, base_file=base_rel,
                                token=f"0-1-{next(counter)}", task_partition=0)

    def plain_merge() -> None:
        pq.write_table(pq.read_table(bulk_file), os.path.join(root, "plain_merge.parquet"), compression="snappy")

    t_tm2, stat = timed(tidemark_merge, args.repeat)
    t_plain2, _ = timed(plain_merge, args.repeat)
    print(f"merge task (one base file of {n:,} rows; {len(upd):,} updates + {len(new):,} inserts):")
    print(f"  tidemark write_file_group         {t_tm2:6.3f} s   {stat.num_writes:,} rows written")
    print(f"  pq.read_table + pq.write_table    {t_plain2:6.3f} s   (the floor: the base file read and written)")
    print()
    print("  profile of write_file_group (by own time):")
    print("  " + profile(tidemark_merge, args.top).replace("\n", "\n  "))
    shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
