#!/usr/bin/env python
"""Where an Arrow-engine write's time goes, beside delta-rs on the same rows (issue 18).

One shape of ``bench_shapes.py`` (``int-p0-narrow``, ``fmt-p100-narrow``, ...), its bulk_insert
or its 10 % upsert, ``--repeat`` times each side; wall and process CPU seconds per run. With
``--serial`` tidemark writes on one thread (Hudi's shuffle parallelism options set to 1), so that
``--cprofile`` (the last tidemark run) sees every file's work on the calling thread.

    .venv/bin/python benchmarks/profile_arrow.py --shape fmt-p100-narrow --work upsert --serial --cprofile
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_shapes as bs  # noqa: E402


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="int-p0-narrow")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--work", choices=["bulk", "upsert"], default="bulk")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--serial", action="store_true", help="tidemark on one thread")
    p.add_argument("--cprofile", action="store_true", help="profile the last tidemark run")
    p.add_argument("--callees", metavar="FUNCTION", help="with --cprofile: what FUNCTION spent its time in")
    p.add_argument("--top", type=int, default=30, help="rows of the profile, by own time")
    p.add_argument("--side", choices=["both", "tidemark", "delta-rs"], default="both",
                   help="run one side only (for `perf record` of one writer's process)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a write option of tidemark's side (repeatable): hoodie.parquet.bloom.filter.enabled=false")
    args = p.parse_args()

    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake

    import tidemark

    shape = bs.parse_shape(args.shape)
    root = tempfile.mkdtemp(prefix="tm-profile-arrow-")
    try:
        data = bs.make_data(shape, args.rows, 0.10, os.path.join(root, "data"))
        source, batch = ds.dataset(data.base_dir).to_table(), ds.dataset(data.batch_dir).to_table()
        options = ({"hoodie.bulkinsert.shuffle.parallelism": "1", "hoodie.upsert.shuffle.parallelism": "1"}
                   if args.serial else {})
        options.update(dict(o.split("=", 1) for o in args.option))
        partition_by = ["region"] if shape.partitions else []
        key = shape.key_field

        def create(path: str) -> tidemark.Table:
            return tidemark.Table.create(path, spark=None, record_key=key, options=options,
                                         partition_by=partition_by, ordering_field="updated_at")

        if args.work == "upsert":  # one loaded table per side, copied for every run
            create(os.path.join(root, "tm")).bulk_insert(source)
            write_deltalake(os.path.join(root, "delta"), source, partition_by=partition_by or None)

        def prepare(side: str, path: str) -> None:
            """An upsert's loaded table, copied before the clock starts (as bench_shapes.py)."""
            if args.work == "upsert":
                shutil.copytree(os.path.join(root, "tm" if side == "tidemark" else "delta"), path)

        def tidemark_run(path: str) -> None:
            if args.work == "bulk":
                create(path).bulk_insert(source)
            else:
                tidemark.Table.open(path, spark=None, options=options).upsert(batch)

        def delta_run(path: str) -> None:
            if args.work == "bulk":
                write_deltalake(path, source, partition_by=partition_by or None)
            else:
                (DeltaTable(path).merge(source=batch, predicate=f"t.{key} = s.{key}", source_alias="s",
                                        target_alias="t")
                 .when_matched_update_all().when_not_matched_insert_all().execute())

        profile = cProfile.Profile()
        for rep in range(args.repeat):
            sides: list[tuple[str, Callable[[str], None]]] = [
                (side, run) for side, run in (("tidemark", tidemark_run), ("delta-rs", delta_run))
                if args.side in ("both", side)]
            for side, run in sides:
                path = os.path.join(root, f"{side}-{rep}")
                profiled = args.cprofile and side == "tidemark" and rep == args.repeat - 1
                prepare(side, path)
                cpu, began = _cpu(), time.perf_counter()
                if profiled:
                    profile.enable()
                run(path)
                if profiled:
                    profile.disable()
                print(f"{side:9s} {args.work} rep {rep}: wall {time.perf_counter() - began:6.3f} s  "
                      f"cpu {_cpu() - cpu:6.3f} s", flush=True)
                shutil.rmtree(path, ignore_errors=True)
        if args.cprofile:
            stats = pstats.Stats(profile)
            stats.sort_stats("tottime").print_stats(args.top)
            if os.environ.get("PROFILE_CALLERS"):
                stats.print_callers(os.environ["PROFILE_CALLERS"])
            if args.callees:
                stats.sort_stats("cumulative").print_callees(args.callees)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
