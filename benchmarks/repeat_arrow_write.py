#!/usr/bin/env python
"""One Arrow-engine write of a ``bench_shapes.py`` shape, repeated in one process: medians of wall
and process CPU seconds (tidemark only; ``profile_arrow.py`` puts delta-rs beside it).

For an A/B, run it from two checkouts in turn (``PYTHONPATH=<checkout>/src``), several times
each, alternating: on a shared 2-core machine runs of the same code differ by several per cent.
``--option`` passes write options (``hoodie.upsert.shuffle.parallelism=1``: one file group at a
time); ``--timeline`` prints, for the last repetition, when each step of the write ran and on
which thread (the write's pipeline steps and its per-file functions wrapped with timers), with
the thread's CPU time, system time and page faults in it (Linux: ``RUSAGE_THREAD``).

    PYTHONPATH=src .venv/bin/python benchmarks/repeat_arrow_write.py --shape fmt-p10-narrow --work upsert --repeat 7
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_shapes as bs  # noqa: E402

# (thread, step, start, end, the thread's CPU seconds in it, its system seconds, its page faults)
Events = list[tuple[str, str, float, float, float, float, int]]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _timed(owner: Any, name: str, events: Events, origin: list[float]) -> None:
    """Wrap ``owner.name`` so each call appends (thread, name, start, end) to ``events``."""
    real: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(real)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began, cpu = time.perf_counter(), time.thread_time()
        usage = resource.getrusage(resource.RUSAGE_THREAD)
        try:
            return real(*args, **kwargs)
        finally:
            after = resource.getrusage(resource.RUSAGE_THREAD)
            events.append((threading.current_thread().name, name, began - origin[0],
                           time.perf_counter() - origin[0], time.thread_time() - cpu,
                           after.ru_stime - usage.ru_stime, after.ru_minflt - usage.ru_minflt))

    setattr(owner, name, timed)


def _watch(events: Events, origin: list[float]) -> None:
    import pyarrow.parquet as pq

    from tidemark.engines.arrow import file_groups, index, writer
    from tidemark.write import file_group, footer

    for name in ("prepare", "dedup", "tag", "route", "write_file_groups", "write_bulk"):
        _timed(writer.ArrowWritePipeline, name, events, origin)
    for name in ("partition_rows", "take_columns", "_write_partition"):
        _timed(writer, name, events, origin)
    _timed(index, "_probe_file", events, origin)
    for name in ("write_file_group", "read_stored", "merge_stored", "write_merged"):
        _timed(file_groups, name, events, origin)
    for name in ("with_meta_columns", "open_base_file"):
        _timed(file_group, name, events, origin)
    _timed(footer.FooterKeys, "add", events, origin)
    _timed(footer.FooterKeys, "footer", events, origin)
    _timed(pq.ParquetWriter, "write_table", events, origin)
    _timed(footer, "open_base_file", events, origin)
    _timed(pq.ParquetWriter, "close", events, origin)
    _timed(pq.ParquetWriter, "__init__", events, origin)
    from tidemark.write import commit as protocol

    _timed(protocol.CommitProtocol, "complete", events, origin)
    # A small rewrite's steps around the encoding (write/small_rewrites.py, write/footer.py).
    from tidemark.write import small_rewrites

    for name in ("with_file_name", "write_fresh", "stored_filter", "read_file_metadata", "merge_touched"):
        _timed(small_rewrites, name, events, origin)
    _timed(footer.BaseFileWriter, "_flush", events, origin)
    _timed(footer, "one_dictionary_each", events, origin)


def _print_timeline(events: Events) -> None:
    spans: dict[tuple[str, str], list[float]] = {}
    for thread, name, began, ended, cpu, system, faults in events:
        calls, total, first, last, cpus, systems, faulted = spans.get(
            (thread, name), [0, 0.0, began, ended, 0.0, 0.0, 0])
        spans[(thread, name)] = [calls + 1, total + ended - began, min(first, began), max(last, ended),
                                 cpus + cpu, systems + system, faulted + faults]
    # summed s: the calls' wall time on their thread; CPU s of it (system s of that), page faults.
    print("thread                 step                    calls  summed s  CPU s  system s  faults  from - to (s)")
    for (thread, name), (calls, total, first, last, cpus, systems, faulted) in sorted(
            spans.items(), key=lambda kv: kv[1][2]):
        print(f"{thread[-22:]:22s} {name:22s} {int(calls):6d} {total:9.3f} {cpus:6.3f} {systems:9.3f} "
              f"{int(faulted):7d}  {first:6.3f} - {last:6.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="fmt-p10-narrow")
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--work", choices=["bulk", "upsert"], default="upsert")
    p.add_argument("--repeat", type=int, default=7, help="measured repetitions (after one warm-up)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--timeline", action="store_true", help="when each step of the last repetition ran")
    p.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "tm-repeat-arrow"),
                   help="where the generated rows and the loaded table are kept between runs")
    args = p.parse_args()

    import pyarrow.dataset as ds

    import tidemark

    shape = bs.parse_shape(args.shape)
    options = dict(o.split("=", 1) for o in args.option)
    root = os.path.join(args.data, f"{shape.name}-{args.rows}")
    base_dir = os.path.join(root, "data", f"{shape.name}-{args.rows}", "base")
    batch_dir = os.path.join(os.path.dirname(base_dir), "batch")
    if not os.path.exists(os.path.join(batch_dir, "b.parquet")):
        bs.make_data(shape, args.rows, 0.10, root)
    source, batch = ds.dataset(base_dir).to_table(), ds.dataset(batch_dir).to_table()
    loaded = os.path.join(root, "loaded")
    if args.work == "upsert" and not os.path.exists(loaded):
        bs._create(loaded, shape, None).bulk_insert(source)
    events: Events = []
    origin = [0.0]
    if args.timeline:
        _watch(events, origin)
    walls, cpus = [], []
    work = tempfile.mkdtemp(prefix="tm-repeat-arrow-run-")
    try:
        for rep in range(args.repeat + 1):
            path = os.path.join(work, str(rep))
            events.clear()
            if args.work == "upsert":
                shutil.copytree(loaded, path)
                table = tidemark.Table.open(path, spark=None, options=options)
                cpu, origin[0] = _cpu(), time.perf_counter()
                table.upsert(batch)
            else:
                cpu, origin[0] = _cpu(), time.perf_counter()
                tidemark.Table.create(path, spark=None, record_key=shape.key_field, options=options,
                                      partition_by=["region"] if shape.partitions else [],
                                      ordering_field="updated_at").bulk_insert(source)
            if rep:  # the first one warms the process up
                walls.append(time.perf_counter() - origin[0])
                cpus.append(_cpu() - cpu)
            shutil.rmtree(path, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    label = " ".join([shape.name, args.work, *args.option])
    print(f"{label}: wall median {statistics.median(walls):.3f} s "
          f"(min {min(walls):.3f}), CPU median {statistics.median(cpus):.3f} s over {len(walls)} runs", flush=True)
    if args.timeline:
        _print_timeline(events)
    return 0


if __name__ == "__main__":
    sys.exit(main())
