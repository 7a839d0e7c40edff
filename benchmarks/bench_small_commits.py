"""Small commits and memory on the Arrow engine (issue 18, parts 3 and 4).

1. **Small commits**: one-row upserts into a local table (Arrow engine, optimistic concurrency
   with the filesystem lock, as multi-writer tables run): the median wall time per commit,
   and what it is made of (one profiled pass, per-commit milliseconds of each stage).
2. **Critical section vs timeline length**: the median time the table lock is held by a
   one-row commit (``CommitTiming.critical_section_ms``) with 10, 1,000 and 10,000 completed
   instants on the active timeline, plus the part of it that lists the timeline folder.
   The older instants are written directly as Hudi's three files per completed commit
   (requested, inflight, completed with empty commit metadata): building 10,000 takes a
   second, where 10,000 real commits would take minutes. Archival is off
   (``hoodie.archive.automatic=false``) so they stay active.
3. **Memory**: peak RSS of an Arrow-engine upsert of a 10 % batch (half updates spread over
   the key space, half new keys) into an N-row table, in a fresh subprocess
   (``resource.getrusage(RUSAGE_SELF).ru_maxrss``), against the bytes of the base files the
   upsert rewrites and the RSS the process had before the upsert.

Usage::

    PYTHONPATH=src python benchmarks/bench_small_commits.py --commits 50 --repeat 3 \\
        --sizes 10 1000 10000 --memory-rows 5000000 --json /tmp/small_commits.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

import tidemark
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time

OPTIONS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.archive.automatic": "false",
}

# Stages of one commit, as (label, file suffix, function name) of the function whose cumulative
# time is the stage. Nested stages are listed under their parent.
STAGES = [
    ("whole commit (Table.upsert)", "tidemark/table.py", "upsert"),
    ("  timeline loads (all)", "timeline/timeline.py", "load"),
    ("  prepare (keys, partition paths, checks)", "engines/arrow/writer.py", "prepare"),
    ("  index lookup (tag)", "engines/arrow/writer.py", "tag"),
    ("  request + inflight instant files", "write/commit.py", "start"),
    ("  file-group write (marker, merge, parquet)", "engines/arrow/writer.py", "write_file_groups"),
    ("    parquet write (pieces)", "write/footer.py", "write"),
    ("    footer + close", "write/footer.py", "close"),
    ("    markers", "markers/writer.py", "open_marker_writer"),
    ("  commit publish (complete)", "write/commit.py", "complete"),
    ("    lock acquire + release", "concurrency/transaction.py", "hold"),
    ("    conflict checks (strategy)", "concurrency/conflict.py", "check"),
    ("    rolled-back base check", "concurrency/conflict.py", "not_built_on_rolled_back"),
    ("    schema reconcile", "concurrency/conflict.py", "reconcile_schema"),
    ("  inline services (clean, archive, ...)", "services/inline.py", "run_after_write"),
]


def synthesize_instants(path: str, count: int, start_ms: int = 0) -> None:
    """Add ``count`` empty completed commits (requested, inflight, completed files), in 2020."""
    timeline = Path(path) / ".hoodie" / "timeline"
    empty = CommitMetadata("UPSERT").to_bytes()
    start = parse_instant_time("20200101000000000")
    for i in range(start_ms, start_ms + count):
        t = format_instant_time(start + timedelta(milliseconds=10 * i))
        c = format_instant_time(start + timedelta(milliseconds=10 * i + 5))
        (timeline / f"{t}.commit.requested").write_bytes(b"")
        (timeline / f"{t}.inflight").write_bytes(b"")
        (timeline / f"{t}_{c}.commit").write_bytes(empty)


def _row(i: int) -> pa.Table:
    return pa.table({"id": [i % 5], "v": [f"x{i}"]})


def bench_small_commits(commits: int, repeat: int) -> dict[str, Any]:
    base = tempfile.mkdtemp(prefix="tm-small-")
    try:
        table = tidemark.Table.create(f"{base}/t", spark=None, record_key="id", options=OPTIONS)
        for i in range(5):  # warm-up: imports, caches, the first file groups
            table.upsert(_row(i))
        walls, held, waits = [], [], []
        for _ in range(repeat):
            for i in range(commits):
                began = time.perf_counter()
                table.upsert(_row(i))
                walls.append((time.perf_counter() - began) * 1000)
                timing = table._protocol().last_commit_timing
                held.append(timing.critical_section_ms)
                waits.append(timing.lock_wait_ms)
        profile = cProfile.Profile()
        profile.enable()
        for i in range(commits):
            table.upsert(_row(i))
        profile.disable()
        stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        breakdown = []
        for label, suffix, name in STAGES:
            cum = sum(v[3] for (fname, _, func), v in stats.items() if fname.endswith(suffix) and func == name)
            breakdown.append({"stage": label, "ms_per_commit": round(cum * 1000 / commits, 2)})
        table.close()
        return {"commits": commits * repeat, "median_ms": round(statistics.median(walls), 2),
                "p90_ms": round(sorted(walls)[int(0.9 * (len(walls) - 1))], 2),
                "lock_held_median_ms": round(statistics.median(held), 2),
                "lock_wait_median_ms": round(statistics.median(waits), 2),
                "profiled_breakdown": breakdown}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def bench_critical_section(
    sizes: list[int], commits: int, repeat: int, archival: bool, archive_every: int = 0, metadata: bool = False
) -> list[dict[str, Any]]:
    """``metadata``: the table has a metadata table (the default of a new table; each commit then
    also writes its metadata deltacommit under the lock), else ``hoodie.metadata.enable=false``.
    ``archival``: Hudi's default (archive above 30 commits): the instants are archived once
    (timed apart) and the commits then run with a bounded active timeline; else all stay active.
    ``archive_every`` (with archival): add the instants in batches of that many, archiving after
    each, as a table reaches that history; else all at once. On ext4 a folder keeps the size of
    the most entries it ever held (deleting files does not shrink it), so 30,000 files added at
    once leave ``.hoodie/timeline`` slower to list for good, which no table with archival on has."""
    from tidemark.storage import LocalStorage

    out = []
    base = tempfile.mkdtemp(prefix="tm-cs-")
    path = f"{base}/t"
    options = {k: v for k, v in OPTIONS.items() if not (archival and k == "hoodie.archive.automatic")}
    if not metadata:
        options["hoodie.metadata.enable"] = "false"
    try:
        table = tidemark.Table.create(path, spark=None, record_key="id", options=options)
        have = 0
        for size in sizes:
            if metadata and have:
                # A fresh table per size: instants synthesized in 2020 after real ones were archived
                # would sit before them on the active timeline, a history no table has, and the
                # metadata table's check would rightly find it out of sync (and remove it).
                table.close()
                shutil.rmtree(path)
                table = tidemark.Table.create(path, spark=None, record_key="id", options=options)
                have = 0
            built_s = archive_s = 0.0
            step = archive_every if archival and archive_every > 0 else size - have
            while have < size:
                batch = min(step, size - have)
                began = time.perf_counter()
                synthesize_instants(path, batch, start_ms=have)
                built_s += time.perf_counter() - began
                have += batch
                began = time.perf_counter()
                if archival:
                    table.archive()
                archive_s += time.perf_counter() - began
            table.upsert(_row(0))  # the first commit after the jump parses the new names once
            held = []
            for _ in range(repeat):
                for i in range(commits):
                    table.upsert(_row(i))
                    held.append(table._protocol().last_commit_timing.critical_section_ms)
            storage = LocalStorage(path)
            listing = []
            for _ in range(20):
                began = time.perf_counter()
                storage.list_names(".hoodie/timeline")
                listing.append((time.perf_counter() - began) * 1000)
            active = len(storage.list_names(".hoodie/timeline"))
            # Synthesized instants are not in the metadata table: a writer finds it behind and
            # removes it, so a row measured "with" one says whether it was still there.
            kept = os.path.isdir(os.path.join(path, ".hoodie", "metadata"))
            out.append({"instants": size, "archival": archival, "metadata_table": kept,
                        "active_timeline_files": active,
                        "archive_once_s": round(archive_s, 2), "commits": len(held),
                        "median_ms": round(statistics.median(held), 2),
                        "p90_ms": round(sorted(held)[int(0.9 * (len(held) - 1))], 2),
                        "list_timeline_ms": round(statistics.median(listing), 2),
                        "synthesize_s": round(built_s, 2)})
            print(json.dumps(out[-1]), flush=True)
        table.close()
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- memory -----------------------------------------------------------------------------------
def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory_child(path: str, batch_path: str) -> None:
    """In a fresh process: open the table, read the batch, upsert it; print the RSS figures."""
    import pyarrow.parquet as pq

    table = tidemark.Table.open(path, spark=None)
    # ParquetFile.read, not pq.read_table: the latter goes through pyarrow.dataset, which loads
    # pandas (~45 MiB) into the process; neither the upsert nor tidemark needs it.
    batch = pq.ParquetFile(batch_path).read()
    before = _current_rss_mb()
    peak_before = _rss_mb()
    began = time.perf_counter()
    result = table.upsert(batch)
    seconds = time.perf_counter() - began
    print(json.dumps({"rss_before_mb": round(before, 1), "peak_before_mb": round(peak_before, 1),
                      "peak_mb": round(_rss_mb(), 1), "seconds": round(seconds, 2),
                      "files_written": result.num_files, "bytes_written": result.bytes_written}))


def bench_memory(rows: int, fraction: float, repeat: int) -> dict[str, Any]:
    import numpy as np
    import pyarrow.parquet as pq

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_shapes import parse_shape, shape_rows

    shape = parse_shape("int-p0-narrow")
    base = tempfile.mkdtemp(prefix="tm-mem-")
    try:
        path = f"{base}/t"
        table = tidemark.Table.create(path, spark=None, record_key=shape.key_field, ordering_field="updated_at")
        step = 1_000_000
        for start in range(0, rows, step):  # loaded in slices: this process's memory is not the subject
            table.bulk_insert(shape_rows(shape, np.arange(start, min(rows, start + step)), 0))
        half = int(rows * fraction) // 2
        rng = np.random.default_rng(7)
        ids = np.concatenate([np.sort(rng.choice(rows, size=half, replace=False)), np.arange(rows, rows + half)])
        batch_path = f"{base}/batch.parquet"
        pq.write_table(shape_rows(shape, ids, 1), batch_path)
        runs = []
        for r in range(repeat):
            copy = f"{base}/run{r}"
            shutil.copytree(path, copy)
            before_files = {p: p.stat().st_size for p in Path(copy).rglob("*.parquet") if ".hoodie" not in p.parts}
            env = dict(os.environ)
            out = subprocess.run([sys.executable, __file__, "--memory-child", copy, batch_path], env=env,
                                 check=True, capture_output=True, text=True).stdout
            child = json.loads(out.strip().splitlines()[-1])
            after = {p for p in Path(copy).rglob("*.parquet") if ".hoodie" not in p.parts}
            # The files the upsert rewrote: file groups that got a new base file.
            rewritten_groups = {p.name.split("_")[0] for p in after - set(before_files)}
            rewritten = sum(size for p, size in before_files.items() if p.name.split("_")[0] in rewritten_groups)
            child.update({"table_bytes": sum(before_files.values()), "rewritten_bytes": rewritten,
                          "peak_over_rewritten": round(child["peak_mb"] * 2**20 / max(rewritten, 1), 2),
                          "growth_over_rewritten": round((child["peak_mb"] - child["rss_before_mb"]) * 2**20
                                                         / max(rewritten, 1), 2)})
            print(json.dumps(child), flush=True)
            runs.append(child)
            shutil.rmtree(copy)
        return {"rows": rows, "batch_rows": len(ids), "runs": runs,
                "median_peak_mb": statistics.median(r["peak_mb"] for r in runs),
                "median_peak_over_rewritten": statistics.median(r["peak_over_rewritten"] for r in runs),
                "median_growth_over_rewritten": statistics.median(r["growth_over_rewritten"] for r in runs)}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commits", type=int, default=50, help="commits per measurement round")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sizes", type=int, nargs="+", default=[10, 1000, 10000])
    p.add_argument("--memory-rows", type=int, default=5_000_000, help="0 skips the memory benchmark")
    p.add_argument("--batch-fraction", type=float, default=0.10)
    p.add_argument("--skip", nargs="*", default=[], choices=["small", "critical", "memory"])
    p.add_argument("--archival", choices=["off", "on", "both"], default="both",
                   help="critical section with archival off (all instants active), on (Hudi's default), or both")
    p.add_argument("--archive-every", type=int, default=0,
                   help="with archival on: add the synthesized instants in batches of this many, archiving "
                        "after each (0: all at once)")
    p.add_argument("--metadata", choices=["off", "on", "both"], default="both",
                   help="critical section without a metadata table, with one (a new table's default), or both")
    p.add_argument("--json")
    p.add_argument("--memory-child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child:
        memory_child(*args.memory_child)
        return 0
    result: dict[str, Any] = {"command": " ".join(sys.argv), "load_before": os.getloadavg()}
    if "small" not in args.skip:
        result["small_commits"] = bench_small_commits(args.commits, args.repeat)
        print(json.dumps(result["small_commits"], indent=1), flush=True)
    if "critical" not in args.skip:
        modes = {"off": [False], "on": [True], "both": [False, True]}
        result["critical_section"] = [
            row for metadata in modes[args.metadata] for archival in modes[args.archival]
            for row in bench_critical_section(args.sizes, args.commits, args.repeat, archival, args.archive_every,
                                              metadata)
        ]
    if "memory" not in args.skip and args.memory_rows:
        result["memory"] = bench_memory(args.memory_rows, args.batch_fraction, args.repeat)
        print(json.dumps({k: v for k, v in result["memory"].items() if k != "runs"}), flush=True)
    result["load_after"] = os.getloadavg()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
