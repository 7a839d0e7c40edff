#!/usr/bin/env python
"""What a table layout's folders and empty files cost the file system, per write of P new
partitions (one data file each): Delta's (a folder and a data file per partition) against
Hudi's with direct markers, as tidemark writes it (the partition's folder, its marker folder
under ``.hoodie/.temp/<instant>/``, the marker, the partition metafile written atomically,
the data file; the marker folders removed at commit).

With ``--existing`` the partitions are there already (an upsert's rewrites): Delta creates the
data file, Hudi the marker folder, the marker and the data file. Only the creations are timed,
no bytes are encoded: this is the part of a write of many
small files that no encoder can make up for (issue 18's fmt-p100 shape: 100 partitions).
Process CPU (user + system) and wall seconds, medians of ``--repeat``; the partitions are
split between ``--threads`` threads as tidemark's tasks split them.

    .venv/bin/python benchmarks/bench_layout_ops.py --partitions 100 --repeat 9
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _create(path: str, data: bytes = b"") -> None:
    fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    try:
        if data:
            os.write(fd, data)
    finally:
        os.close(fd)


def delta_partition(root: str, partition: str) -> None:
    folder = os.path.join(root, partition)
    os.makedirs(folder, exist_ok=True)
    _create(os.path.join(folder, f"part-{uuid.uuid4().hex}.parquet"))


def hudi_partition(root: str, partition: str) -> None:
    instant = "20260101000000000"
    name = f"{uuid.uuid4()}-0_0-0-0_{instant}.parquet"
    markers = os.path.join(root, ".hoodie", ".temp", instant, partition)
    os.makedirs(markers, exist_ok=True)
    _create(os.path.join(markers, f"{name}.marker.CREATE"))
    folder = os.path.join(root, partition)
    os.makedirs(folder, exist_ok=True)
    metafile = os.path.join(folder, ".hoodie_partition_metadata")
    if os.path.exists(metafile):  # the partition's first write made it
        _create(os.path.join(folder, name))
        return
    temporary = os.path.join(folder, f"..hoodie_partition_metadata.{uuid.uuid4().hex}.tmp")
    _create(temporary, b"#partition metadata\ncommitTime=20260101000000000\npartitionDepth=1\n")
    os.link(temporary, metafile)
    os.unlink(temporary)
    _create(os.path.join(folder, name))


def hudi_commit(root: str) -> None:
    shutil.rmtree(os.path.join(root, ".hoodie", ".temp"))


def measure(layout: Callable[[str, str], None], finish: Callable[[str], None] | None, partitions: int,
            threads: int, parent: str, existing: bool) -> tuple[float, float]:
    root = tempfile.mkdtemp(dir=parent)
    names = [f"region=r{i:03d}" for i in range(partitions)]
    if existing:  # made before the clock starts, as a table's earlier writes made them
        for name in names:
            os.makedirs(os.path.join(root, name))
            _create(os.path.join(root, name, ".hoodie_partition_metadata"), b"partitionDepth=1\n")
    cpu, began = _cpu(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(lambda name: layout(root, name), names))
    if finish is not None:
        finish(root)
    wall, used = time.perf_counter() - began, _cpu() - cpu
    shutil.rmtree(root)
    return wall, used


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--partitions", type=int, default=100)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--existing", action="store_true", help="the partitions exist (an upsert's rewrites)")
    p.add_argument("--dir", default=None, help="where to create the folders (default: the system's temporary folder)")
    args = p.parse_args()
    parent = tempfile.mkdtemp(prefix="tm-layout-", dir=args.dir)
    sides: dict[str, tuple[Callable[[str, str], None], Callable[[str], None] | None]] = {
        "delta": (delta_partition, None), "hudi (direct markers)": (hudi_partition, hudi_commit)}
    results: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    try:
        for rep in range(args.repeat):
            order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
            for side in order:
                results[side].append(measure(*sides[side], args.partitions, args.threads, parent,
                                               args.existing))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    which = "existing" if args.existing else "new"
    print(f"{args.partitions} {which} partitions, one file each, {args.threads} threads, medians of {args.repeat}")
    print("| layout | wall ms | CPU ms | CPU ms per partition |")
    print("|---|---:|---:|---:|")
    for side, runs in results.items():
        wall = statistics.median(w for w, _ in runs) * 1000
        cpu = statistics.median(c for _, c in runs) * 1000
        print(f"| {side} | {wall:.1f} | {cpu:.1f} | {cpu / args.partitions:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
