"""What the table lock costs a commit, per lock provider (uncontended, one writer).

Two measurements per provider, ``--n`` times each, medians and 95th percentiles in ms:

* **lock**: ``acquire`` and ``release`` of the provider alone, plus the fence
  (``assert_held``, which on the lease-based providers is a clock check unless the lease runs
  low): the lock's own share of every critical section.
* **commit**: the commit critical section of a real one-row upsert (Arrow engine, the commit
  protocol's ``CommitTiming``: lock wait, then lock held for the timeline reload, conflict
  checks, fence, publish and release).

Providers: ``filesystem`` (reference), ``storage`` on a local table, ``storage`` on a table in
S3 (the moto server; only where tidemark has object-store tables), ``dynamodb`` (the moto
server) and ``zookeeper`` (a local server), all on 127.0.0.1: network latency is the
loopback's, so these are the providers' own costs, not a cloud's round trips.

Run: ``PYTHONPATH=src:tests python benchmarks/bench_locks.py [--n 30] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pyarrow as pa  # noqa: E402

import tidemark  # noqa: E402
from tidemark.concurrency.locks.base import LockSettings  # noqa: E402
from tidemark.concurrency.locks.registry import create_lock_provider  # noqa: E402
from tidemark.config import resolve_write_config  # noqa: E402
from tidemark.errors import TidemarkError  # noqa: E402
from tidemark.storage.location import open_storage  # noqa: E402


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {"median": round(statistics.median(ordered), 2), "p95": round(p95, 2)}


def measure_lock(settings: LockSettings, uri: str, storage: Any, n: int) -> dict[str, Any]:
    provider = create_lock_provider(settings, uri, storage)
    acquire, release, total = [], [], []
    try:
        for _ in range(n + 2):
            t0 = time.perf_counter()
            assert provider.try_acquire(30)
            t1 = time.perf_counter()
            fence = getattr(provider, "assert_held", None)
            if fence is not None:
                fence()
            t2 = time.perf_counter()
            provider.release()
            t3 = time.perf_counter()
            acquire.append((t1 - t0) * 1000)
            release.append((t3 - t2) * 1000)
            total.append((t3 - t0) * 1000)
    finally:
        provider.close()
    warm = slice(2, None)  # the first two include connecting and creating the lock record
    return {"acquire": _stats(acquire[warm]), "release": _stats(release[warm]), "acquire+fence+release":
            _stats(total[warm])}


def measure_commit(options: dict[str, str], uri: str, storage_options: dict[str, str], n: int) -> dict[str, Any]:
    opts = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.clean.automatic": "false",
            "hoodie.archive.automatic": "false", **options}
    kwargs = {"storage_options": storage_options} if storage_options else {}
    table = tidemark.Table.create(uri, spark=None, record_key="id", options=opts, **kwargs)
    waits, sections = [], []
    try:
        for i in range(n + 2):
            table.upsert(pa.Table.from_pylist([{"id": i % 7, "v": f"r{i}"}]))
            timing = table._protocol().last_commit_timing
            assert timing is not None
            waits.append(timing.lock_wait_ms)
            sections.append(timing.critical_section_ms)
    finally:
        table.close()
    return {"lock wait": _stats(waits[2:]), "critical section (held)": _stats(sections[2:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from moto_server import ACCESS_KEY, SECRET_KEY, MotoServer
    from zookeeper import ZooKeeperServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    moto = MotoServer().start()
    zk = ZooKeeperServer()
    zk.start()
    work = tempfile.mkdtemp(prefix="bench-locks-")
    results: dict[str, Any] = {}
    try:
        bucket = moto.create_bucket(f"bench-{uuid.uuid4().hex[:8]}")
        ddb_key = f"bench-{uuid.uuid4().hex[:8]}"
        zk_options = zk.lock_options(f"bench-{uuid.uuid4().hex[:8]}")
        cases: dict[str, tuple[dict[str, str], Callable[[str], str], dict[str, str]]] = {
            "filesystem (local)": ({"hoodie.write.lock.provider": "filesystem"}, lambda n: f"{work}/{n}", {}),
            "storage (local)": ({"hoodie.write.lock.provider": "storage"}, lambda n: f"{work}/{n}", {}),
            "storage (S3, moto)": ({"hoodie.write.lock.provider": "storage"}, lambda n: f"s3://{bucket}/{n}",
                                   moto.storage_options()),
            "dynamodb (moto)": ({"hoodie.write.lock.provider": "dynamodb",
                                 "hoodie.write.lock.dynamodb.endpoint_url": moto.endpoint,
                                 "hoodie.write.lock.dynamodb.region": "us-east-1",
                                 "hoodie.write.lock.dynamodb.partition_key": ddb_key}, lambda n: f"{work}/{n}", {}),
            "zookeeper (local server)": (zk_options, lambda n: f"{work}/{n}", {}),
        }
        for name, (options, where, storage_options) in cases.items():
            lock_uri, commit_uri = where("lock-" + uuid.uuid4().hex[:6]), where("commit-" + uuid.uuid4().hex[:6])
            try:
                storage = open_storage(lock_uri, storage_options)
            except TidemarkError as exc:
                results[name] = {"skipped": str(exc)}
                print(f"{name}: skipped ({exc})", flush=True)
                continue
            settings = resolve_write_config(options).lock
            lock = measure_lock(settings, lock_uri, storage, args.n)
            commit = measure_commit(options, commit_uri, storage_options, args.n)
            results[name] = {"lock": lock, "commit": commit}
            print(f"{name}: {json.dumps(results[name])}", flush=True)
    finally:
        zk.stop()
        moto.stop()
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| provider | acquire | release | acquire+fence+release | commit: lock wait | commit: critical section |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        if "skipped" in r:
            print(f"| {name} | skipped: object-store tables not on this branch | | | | |")
            continue
        cells = [r["lock"]["acquire"], r["lock"]["release"], r["lock"]["acquire+fence+release"],
                 r["commit"]["lock wait"], r["commit"]["critical section (held)"]]
        print(f"| {name} | " + " | ".join(f"{c['median']:.1f} / {c['p95']:.1f}" for c in cells) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"n": args.n, "results": results}, indent=2))


if __name__ == "__main__":
    main()
