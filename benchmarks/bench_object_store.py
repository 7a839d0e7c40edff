"""Tables on S3 (the local moto server): requests per commit, and bulk writes against plain parquet.

Two measurements, Arrow engine (``spark=None``), all on 127.0.0.1:

* **requests per commit**: a counting HTTP proxy sits between tidemark and moto and tallies every
  request by kind (LIST = a GET with ``list-type=2``; GET, PUT, HEAD, DELETE, POST). A table takes
  ``--commits`` small upserts (``--batch`` rows, keys spread over the table); the requests of the
  ``--window`` commits ending at each checkpoint (10, 50, 200 ...) are averaged, so the numbers
  show how a commit's cost grows with the active timeline. Run for archival as configured by
  default and with ``hoodie.archive.automatic=false`` (the timeline grows unbounded)
  (``--archival``), each with a metadata table (``hoodie.metadata.enable=true``) and without
  (``--metadata``). The
  prefixes listed during the last window are recorded too (a listing of the table root or the
  whole timeline would show there).
* **bulk writes**: ``bulk_insert`` of ``--rows`` rows into a fresh s3:// table, then an upsert of
  10% of them (existing keys, new values), against the same rows written as one plain parquet
  file to the same server (``pyarrow.parquet.write_table`` on pyarrow's S3 filesystem), both the
  full ``--rows`` and the 10% batch. No proxy here (it would slow both sides).

Run: ``PYTHONPATH=src:tests python benchmarks/bench_object_store.py [--commits 200] [--rows 1000000]
[--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.fs as pafs  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import tidemark  # noqa: E402
from counting_proxy import KINDS, CountingProxy  # noqa: E402


def requests_per_commit(moto: Any, bucket: str, options: dict[str, str], commits: int, checkpoints: list[int],
                        window: int, batch: int) -> dict[str, Any]:
    proxy = CountingProxy(moto.port)
    opts = {**moto.storage_options(), "aws_endpoint_url": proxy.endpoint}
    uri = f"s3://{bucket}/req-{uuid.uuid4().hex[:6]}"
    table = tidemark.Table.create(uri, spark=None, record_key="id", options=options, storage_options=opts)
    per_commit: list[Counter[str]] = []
    listed_by_commit: list[Counter[str]] = []
    seconds: list[float] = []
    rng = np.random.default_rng(7)
    try:
        proxy.take()
        for i in range(commits):
            ids = rng.integers(0, 10_000, batch)
            data = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([f"r{i}"] * batch)})
            t0 = time.perf_counter()
            table.upsert(data)
            seconds.append(time.perf_counter() - t0)
            tally = proxy.take()
            counts, listed = tally.kinds, tally.listed
            per_commit.append(counts)
            listed_by_commit.append(listed)
        timeline = len([p for p in _list(table, moto, uri) if "/.hoodie/timeline/" in p
                        and "/history/" not in p])
    finally:
        table.close()
        proxy.close()
    out: dict[str, Any] = {"options": options, "checkpoints": {}, "active timeline files at end": timeline}
    for point in checkpoints:
        if point > commits:
            continue
        chunk = per_commit[point - window:point]
        row = {kind: round(sum(c[kind] for c in chunk) / len(chunk), 1) for kind in KINDS}
        row["total"] = round(sum(row.values()), 1)
        row["max total"] = max(sum(c.values()) for c in chunk)
        row["median ms"] = round(1000 * statistics.median(seconds[point - window:point]), 1)
        listed: Counter[str] = Counter()
        for c in listed_by_commit[point - window:point]:
            listed.update(c)
        row["listed prefixes"] = {k: round(v / len(chunk), 1) for k, v in listed.items()}
        out["checkpoints"][str(point)] = row
    return out


def _list(table: Any, moto: Any, uri: str) -> list[str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = moto.boto3_client("s3")
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/"):
        keys.extend(o["Key"] for o in page.get("Contents", []))
    return keys


def bulk(moto: Any, bucket: str, rows: int) -> dict[str, Any]:
    rng = np.random.default_rng(11)
    data = pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "name": pa.array([f"name-{i % 100_000}" for i in range(rows)]),
        "amount": pa.array(rng.random(rows)),
        "qty": pa.array(rng.integers(0, 1000, rows, dtype=np.int64)),
    })
    update_ids = np.sort(rng.choice(rows, rows // 10, replace=False)).astype(np.int64)
    updates = pa.table({
        "id": pa.array(update_ids),
        "name": pa.array([f"upd-{i}" for i in update_ids]),
        "amount": pa.array(rng.random(len(update_ids))),
        "qty": pa.array(rng.integers(0, 1000, len(update_ids), dtype=np.int64)),
    })
    fs = pafs.S3FileSystem(access_key=moto.storage_options()["aws_access_key_id"],
                           secret_key=moto.storage_options()["aws_secret_access_key"],
                           region="us-east-1", endpoint_override=f"127.0.0.1:{moto.port}", scheme="http")
    out: dict[str, Any] = {"rows": rows, "update rows": len(update_ids)}

    t0 = time.perf_counter()
    pq.write_table(data, f"{bucket}/plain-{uuid.uuid4().hex[:6]}/full.parquet", filesystem=fs)
    out["parquet full s"] = round(time.perf_counter() - t0, 2)
    t0 = time.perf_counter()
    pq.write_table(updates, f"{bucket}/plain-{uuid.uuid4().hex[:6]}/batch.parquet", filesystem=fs)
    out["parquet 10% s"] = round(time.perf_counter() - t0, 2)

    uri = f"s3://{bucket}/bulk-{uuid.uuid4().hex[:6]}"
    table = tidemark.Table.create(uri, spark=None, record_key="id", storage_options=moto.storage_options())
    try:
        t0 = time.perf_counter()
        table.bulk_insert(data)
        out["bulk_insert s"] = round(time.perf_counter() - t0, 2)
        t0 = time.perf_counter()
        table.upsert(updates)
        out["upsert 10% s"] = round(time.perf_counter() - t0, 2)
    finally:
        table.close()
    files = [k for k in _list(table, moto, uri) if k.endswith(".parquet")]
    out["tidemark parquet files"] = len(files)
    out["bulk_insert / parquet full"] = round(out["bulk_insert s"] / out["parquet full s"], 2)
    out["upsert 10% / parquet full"] = round(out["upsert 10% s"] / out["parquet full s"], 2)
    out["upsert 10% / parquet 10%"] = round(out["upsert 10% s"] / out["parquet 10% s"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--checkpoints", default="10,50,200")
    parser.add_argument("--window", type=int, default=5)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--skip", choices=("requests", "bulk"), default=None)
    parser.add_argument("--archival", choices=("both", "default", "off"), default="both")
    parser.add_argument("--metadata", choices=("both", "on", "off"), default="both",
                        help="tables with a metadata table (hoodie.metadata.enable=true) and/or without")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()

    from moto_server import MotoServer

    moto = MotoServer().start()
    results: dict[str, Any] = {}
    try:
        bucket = moto.create_bucket(f"bench-{uuid.uuid4().hex[:8]}")
        checkpoints = [int(p) for p in args.checkpoints.split(",")]
        if args.skip != "requests":
            for archival, archive_options in (("default", {}), ("off", {"hoodie.archive.automatic": "false"})):
                if args.archival not in ("both", archival):
                    continue
                for metadata in ("on", "off"):
                    if args.metadata not in ("both", metadata):
                        continue
                    name = f"archival {archival}, metadata table {metadata}"
                    options = {**archive_options, "hoodie.metadata.enable": "true" if metadata == "on" else "false"}
                    results[name] = requests_per_commit(moto, bucket, options, args.commits, checkpoints,
                                                        args.window, args.batch)
                    print(name, json.dumps(results[name], indent=1), flush=True)
        if args.skip != "bulk":
            results["bulk"] = bulk(moto, bucket, args.rows)
            print("bulk", json.dumps(results["bulk"], indent=1), flush=True)
    finally:
        moto.stop()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
