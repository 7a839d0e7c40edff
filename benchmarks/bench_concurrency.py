"""Multi-writer benchmarks: the commit critical section and commit throughput.

1. Critical section (lock held: reload timeline, conflict checks, publish), median
   and p99 over small commits, with the file-system lock and with ZooKeeper, as the
   active timeline grows to 100, 1,000 and 10,000 instants (the older instants are
   synthesized as empty completed commits, which is what readers and writers list).
2. Commits per second sustained by 1, 2, 4 and 8 writer processes, each committing
   small batches to its own partition (disjoint file groups).

Writers use the Arrow engine (no JVM per process); the protocol is the one Spark
writers use. Run: .venv/bin/python benchmarks/bench_concurrency.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import tidemark  # noqa: E402
from tidemark.format.commit_metadata import CommitMetadata  # noqa: E402
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time  # noqa: E402

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
       "hoodie.write.lock.wait_time_ms_between_retry": "10"}


def lock_options(provider: str, zk: Any) -> dict[str, str]:
    opts = dict(OCC, **{"hoodie.write.lock.provider": provider})
    if provider == "zookeeper":
        opts.update({"hoodie.write.lock.zookeeper.url": zk.url, "hoodie.write.lock.zookeeper.port": str(zk.port),
                     "hoodie.write.lock.zookeeper.base_path": f"/bench/{os.getpid()}-{time.time_ns()}"})
    return opts


def synthesize_instants(path: str, count: int) -> None:
    """Add ``count`` empty completed commits (requested, inflight, completed files) to the timeline."""
    timeline = Path(path) / ".hoodie" / "timeline"
    empty = CommitMetadata("UPSERT").to_bytes()
    from datetime import timedelta

    start = parse_instant_time("20200101000000000")
    for i in range(count):
        t = format_instant_time(start + timedelta(milliseconds=10 * i))
        c = format_instant_time(start + timedelta(milliseconds=10 * i + 5))
        (timeline / f"{t}.commit.requested").write_bytes(b"")
        (timeline / f"{t}.inflight").write_bytes(b"")
        (timeline / f"{t}_{c}.commit").write_bytes(empty)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_critical_section(provider: str, zk: Any, sizes: list[int], commits: int) -> list[dict[str, Any]]:
    out = []
    base = tempfile.mkdtemp(prefix=f"tm-cs-{provider}-")
    path = f"{base}/t"
    table = tidemark.Table.create(path, spark=None, record_key="id", options=lock_options(provider, zk))
    have = 0
    for size in sizes:
        synthesize_instants(path, size - have)
        have = size
        timings = []
        for i in range(commits):
            table.upsert(pa.table({"id": [i], "v": [f"x{i}"]}))
            timing = table._protocol().last_commit_timing
            timings.append(timing.critical_section_ms)
        out.append({"provider": provider, "instants": size, "commits": commits,
                    "median_ms": statistics.median(timings), "p99_ms": percentile(timings, 0.99)})
        print(json.dumps(out[-1]), flush=True)
    table.close()
    shutil.rmtree(base, ignore_errors=True)
    return out


def _writer(path: str, options: dict[str, str], partition: str, commits: int, start: Any, done: Any) -> None:
    table = tidemark.Table.open(path, spark=None, options=options)
    start.wait()
    for i in range(commits):
        table.upsert(pa.table({"id": [i], "part": [partition], "v": [str(i)]}))
    table.close()
    done.put(partition)


def bench_throughput(provider: str, zk: Any, writer_counts: list[int], commits: int) -> list[dict[str, Any]]:
    out = []
    for writers in writer_counts:
        base = tempfile.mkdtemp(prefix=f"tm-tp-{provider}-")
        path = f"{base}/t"
        options = lock_options(provider, zk)
        tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=options).close()
        ctx = mp.get_context("spawn")
        start, done = ctx.Barrier(writers + 1), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(path, options, f"p{w}", commits, start, done))
                 for w in range(writers)]
        for p in procs:
            p.start()
        start.wait()
        began = time.perf_counter()
        for _ in procs:
            done.get(timeout=600)
        elapsed = time.perf_counter() - began
        for p in procs:
            p.join()
        total = writers * commits
        out.append({"provider": provider, "writers": writers, "commits": total, "seconds": round(elapsed, 2),
                    "commits_per_s": round(total / elapsed, 1)})
        print(json.dumps(out[-1]), flush=True)
        shutil.rmtree(base, ignore_errors=True)
    return out


def bench_key_conflicts(pairs: int, keys_per_writer: int) -> list[dict[str, Any]]:
    """Two overlapping writers insert new keys into the same partition, ``pairs`` times.

    Disjoint keys must both commit (an abort would be a false conflict); the same
    keys must abort the later one (else a duplicate). Compared with Hudi's
    file-group-only strategy (``simple``).
    """
    from tidemark.config import resolve_write_config
    from tidemark.format.names import META_COLUMNS, PARTITION_PATH, RECORD_KEY, new_file_id
    from tidemark.format.schema import avro_schema_json
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Action, Timeline
    from tidemark.write.commit import CommitProtocol
    from tidemark.write.file_group import OP_COLUMN, WriteSpec, write_file_group

    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + [pa.field("id", pa.int64())])
    schema_json = avro_schema_json(pa.schema([("id", pa.int64())]), "t")
    out = []
    for strategy in ("tidemark", "simple"):
        for overlap in (False, True):
            base = tempfile.mkdtemp(prefix="tm-keys-")
            path = f"{base}/t"
            tidemark.Table.create(path, spark=None, record_key="id").close()
            storage = LocalStorage(path)
            options = {**OCC, "hoodie.write.lock.provider": "in_process",
                       "hoodie.write.lock.conflict.resolution.strategy": strategy}
            protocol = CommitProtocol(storage, resolve_write_config(options))
            aborted = 0
            check_ms = []
            for pair in range(pairs):
                first = pair * 2 * keys_per_writer
                ranges = [range(first, first + keys_per_writer)] * 2 if overlap else [
                    range(first, first + keys_per_writer), range(first + keys_per_writer, first + 2 * keys_per_writer)]
                pendings = []
                for keys in ranges:
                    pending = protocol.start("INSERT", Action.COMMIT)
                    pending.seen = frozenset(i.requested_time for i in Timeline.load(storage).completed)
                    spec = WriteSpec(path, pending.instant_time, schema, (), "snappy", 1 << 27)
                    batch = pa.table({"id": list(keys), RECORD_KEY: [str(k) for k in keys],
                                      PARTITION_PATH: [""] * len(keys), OP_COLUMN: ["U"] * len(keys)})
                    stat = write_file_group(spec, batch, partition_path="", file_id=new_file_id(), base_file=None,
                                            token="0-0-0", task_partition=0)
                    pendings.append((pending, stat))
                for pending, stat in pendings:
                    began = time.perf_counter()
                    try:
                        protocol.complete(pending, [stat], schema_json=schema_json)
                    except tidemark.WriteConflictError:
                        aborted += 1
                    check_ms.append((time.perf_counter() - began) * 1000)
            rows = tidemark.Table.open(path, spark=None).read()
            ids = rows.column("id").to_pylist()
            out.append({"strategy": strategy, "same_keys": overlap, "pairs": pairs, "keys_per_writer": keys_per_writer,
                        "aborted": aborted, "abort_rate": round(aborted / pairs, 3),
                        "duplicate_keys": len(ids) - len(set(ids)),
                        "commit_median_ms": round(statistics.median(check_ms), 2)})
            print(json.dumps(out[-1]), flush=True)
            protocol.close()
            shutil.rmtree(base, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", help="write the results here as JSON")
    args = parser.parse_args()
    sizes = [100, 1000] if args.quick else [100, 1000, 10000]
    cs_commits = 10 if args.quick else 100
    writer_counts = [1, 2] if args.quick else [1, 2, 4, 8]
    tp_commits = 5 if args.quick else 40
    from zookeeper import ZooKeeperServer

    zk = ZooKeeperServer()
    zk.start()
    try:
        results: dict[str, Any] = {
            "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
            "critical_section": [], "throughput": []}
        for provider in ("filesystem", "zookeeper"):
            results["critical_section"] += bench_critical_section(provider, zk, sizes, cs_commits)
        for provider in ("filesystem", "zookeeper"):
            results["throughput"] += bench_throughput(provider, zk, writer_counts, tp_commits)
        results["key_conflicts"] = bench_key_conflicts(10 if args.quick else 100, 1000)
    finally:
        zk.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
