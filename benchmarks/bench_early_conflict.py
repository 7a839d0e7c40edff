"""Early conflict detection benchmarks (issue 4), all in one run.

1. The seeds' scenario: a large Spark upsert L (many file groups) is writing when
   a small writer S (another process, 100x less data) commits to one of L's file
   groups F. L was first, so S is not held up; L is doomed. Measured per
   detection setting (off, simple_direct, transactional_direct, async_timeline_server,
   all with the commit-conflict check): L's time until it gives up, the time from
   S's commit to L's abort, and the bytes L had written, against L's full run
   without interference.
2. Marker-check latency with 1,500 markers of three older concurrent writers
   (direct and server-based): one direct pre-marker check, one transactional
   check-and-create, and one full asynchronous check of 500 own markers
   (RFC-56 measured 179 ms for the latter on a local file system).
3. Direct vs server-based markers for a Spark bulk_insert of >= 1,000 files:
   write time, marker files created, time to read the markers back.

Run: .venv/bin/python benchmarks/bench_early_conflict.py [--quick] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import tidemark  # noqa: E402
from tidemark.config import resolve_write_config  # noqa: E402
from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings  # noqa: E402
from tidemark.format.names import marker_dir  # noqa: E402
from tidemark.markers import IOType, Marker, MarkerSpec, open_marker_writer, read_markers  # noqa: E402
from tidemark.markers.direct import DirectMarkerWriter  # noqa: E402
from tidemark.markers.early_conflict import AsyncConflictChecker, ConflictDetector  # noqa: E402
from tidemark.markers.server import MarkerServer, MarkerServerClient  # noqa: E402
from tidemark.recovery import rollback as rollback_module  # noqa: E402
from tidemark.storage import LocalStorage  # noqa: E402
from tidemark.timeline import Action  # noqa: E402
from tidemark.write.commit import CommitProtocol  # noqa: E402

WRITER = str(ROOT / "tests" / "writer_process.py")
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
}
SETTINGS: dict[str, dict[str, str]] = {
    "off": {},
    "simple_direct": {"hoodie.write.concurrency.early.conflict.detection.strategy": "simple_direct"},
    "transactional_direct": {"hoodie.write.concurrency.early.conflict.detection.strategy": "transactional_direct"},
    "async_timeline_server": {
        "hoodie.write.concurrency.early.conflict.detection.strategy": "async_timeline_server",
        "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
        "hoodie.write.concurrency.async.conflict.detector.period_ms": "1000",
    },
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def spark_session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "6g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


# -- 1. the scenario ---------------------------------------------------------------------------------


def _rows(ids: range, groups: int, tag: str) -> pa.Table:
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "part": [f"p{i % groups:03d}" for i in ids],
        "v": [tag] * len(ids),
        "payload": [f"{tag}-{i:012d}-" + "x" * 60 for i in ids],
    })


def seed_table(path: str, groups: int, rows_per_group: int) -> None:
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OCC)
    table.upsert(_rows(range(groups * rows_per_group), groups, "seed"))
    table.close()


class _BytesRolledBack:
    """Records the bytes of the files each rollback deletes (what the doomed write had written)."""

    def __init__(self) -> None:
        self.bytes = 0
        self.files = 0
        self._original = rollback_module._execute

    def __enter__(self) -> _BytesRolledBack:
        def measured(storage: Any, rollback_time: str, instant: Any, files: list[str], started: float) -> Any:
            for f in files:
                try:
                    self.bytes += os.path.getsize(storage.full_path(f))
                    self.files += 1
                except FileNotFoundError:
                    pass
            return self._original(storage, rollback_time, instant, files, started)

        rollback_module._execute = measured  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        rollback_module._execute = self._original  # type: ignore[assignment]


def _start_small_writer(path: str, workdir: Path, groups: int, rows: int) -> tuple[subprocess.Popen[bytes], Path]:
    result = workdir / "small.result"
    spec = {"table": path, "options": OCC, "operation": "upsert", "result": str(result),
            "rows": _rows(range(0, rows * groups, groups), groups, "small").to_pylist()}  # all in partition p000
    (workdir / "small.json").write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, WRITER, str(workdir / "small.json")]), result


def bench_scenario(spark: Any, groups: int, rows_per_group: int, small_rows: int) -> list[dict[str, Any]]:
    work = Path(tempfile.mkdtemp(prefix="tm-early-"))
    template = str(work / "template")
    seed_table(template, groups, rows_per_group)
    total = groups * rows_per_group
    big = spark.createDataFrame(_rows(range(total), groups, "large").to_pandas()).cache()
    big.count()
    out = []
    for setting in ["baseline", *SETTINGS]:
        path = str(work / setting)
        shutil.copytree(template, path)
        opts = {**OCC}
        if setting not in ("baseline", "off"):
            opts.update({"hoodie.write.concurrency.early.conflict.detection.enable": "true",
                         "hoodie.write.concurrency.early.conflict.check.commit.conflict": "true",
                         **SETTINGS[setting]})
        table = tidemark.Table.open(path, spark=spark, options=opts)
        small: dict[str, Any] = {}
        watcher = None
        if setting != "baseline":
            def start_small_once_large_writes(table_path: str = path, small: dict[str, Any] = small) -> None:
                before = set(Path(table_path).rglob("*.parquet"))
                while not set(Path(table_path).rglob("*.parquet")) - before:  # L's tasks are writing
                    time.sleep(0.01)
                proc, result = _start_small_writer(table_path, work, groups, small_rows)
                proc.wait()
                small["committed_at"] = time.perf_counter()
                small["outcome"] = json.loads(result.read_text())

            watcher = threading.Thread(target=start_small_once_large_writes, daemon=True)
            watcher.start()
        began = time.perf_counter()
        with _BytesRolledBack() as rolled_back:
            try:
                result = table.upsert(big)
                outcome, written = "committed", result.bytes_written
            except tidemark.WriteConflictError as error:
                outcome, written = type(error).__name__, rolled_back.bytes
        elapsed = time.perf_counter() - began
        ended = began + elapsed
        if watcher is not None:
            watcher.join(timeout=120)
        row: dict[str, Any] = {"setting": setting, "large_outcome": outcome, "seconds": round(elapsed, 2),
                               "bytes_written": written, "small_outcome": small.get("outcome", {}).get("status")}
        if "committed_at" in small:
            row["abort_after_small_commit_s"] = round(ended - small["committed_at"], 2)
        out.append(row)
        print(json.dumps(row), flush=True)
        table.close()
        shutil.rmtree(path, ignore_errors=True)
    big.unpersist()
    full = next(r for r in out if r["setting"] == "baseline")
    for row in out:
        row["share_of_full_run_time"] = round(row["seconds"] / full["seconds"], 3)
        row["share_of_full_run_bytes"] = round(row["bytes_written"] / max(1, full["bytes_written"]), 3)
    shutil.rmtree(work, ignore_errors=True)
    return out


# -- 2. marker-check latency ---------------------------------------------------------------------------


def _pending_writer(path: str) -> Any:
    protocol = CommitProtocol(LocalStorage(path), resolve_write_config(OCC))
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    return protocol, pending


def bench_check_latency(writers: int, markers_per_writer: int, partitions: int, repeats: int) -> list[dict[str, Any]]:
    out = []
    for kind in ("direct", "server"):
        base = tempfile.mkdtemp(prefix="tm-latency-")
        path = f"{base}/t"
        tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OCC).close()
        storage = LocalStorage(path)
        others = [_pending_writer(path) for _ in range(writers)]
        rng = random.Random(7)
        for _protocol, pending in others:
            files = [
                f"part=p{rng.randrange(partitions):03d}/{rng.getrandbits(64):016x}-0_0-1-{i}_{pending.instant_time}"
                ".parquet" for i in range(markers_per_writer)
            ]
            if kind == "direct":
                writer = DirectMarkerWriter(storage, pending.instant_time)
                for f in files:
                    writer.create(f, IOType.MERGE)
            else:
                with MarkerServer(storage, pending.instant_time, batch_interval_ms=5) as server:
                    threads = [threading.Thread(target=_send, args=(server.url, pending.instant_time, files[i::8]))
                               for i in range(8)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
        held = sum(len(read_markers(storage, p.instant_time)) for _, p in others)
        mine_protocol, mine = _pending_writer(path)
        own_groups = [(f"part=p{rng.randrange(partitions):03d}", f"{rng.getrandbits(64):016x}-0")
                      for _ in range(markers_per_writer)]
        settings = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT, check_commit_conflict=True).for_write(
            mine.instant_time, frozenset())
        detector = ConflictDetector(storage, settings)
        single = []
        for partition, file_id in own_groups[:repeats]:
            started = time.perf_counter()
            detector.find([(partition, file_id)])
            single.append((time.perf_counter() - started) * 1000)
        transactional = []
        if kind == "direct":
            tx = EarlyConflictSettings(DetectionStrategy.TRANSACTIONAL_DIRECT).for_write(mine.instant_time, frozenset())
            writer = open_marker_writer(storage, mine.instant_time, MarkerSpec(early_conflict=tx))
            for n, (partition, file_id) in enumerate(own_groups[:repeats]):
                started = time.perf_counter()
                writer.create(f"{partition}/{file_id}_0-2-{n}_{mine.instant_time}.parquet", IOType.MERGE)
                transactional.append((time.perf_counter() - started) * 1000)
        own = [Marker(f"{p}/{f}_0-3-0_{mine.instant_time}.parquet", IOType.MERGE) for p, f in own_groups]
        checker = AsyncConflictChecker(ConflictDetector(storage, settings), own.copy, lambda c: None)
        full = []
        for _ in range(20):
            started = time.perf_counter()
            checker.check_now()
            full.append((time.perf_counter() - started) * 1000)
        row = {"markers": kind, "other_writers": writers, "markers_held_by_others": held,
               "own_markers": len(own),
               "pre_marker_check_median_ms": round(statistics.median(single), 2),
               "pre_marker_check_p99_ms": round(percentile(single, 0.99), 2),
               "async_full_check_median_ms": round(statistics.median(full), 1),
               "async_full_check_p99_ms": round(percentile(full, 0.99), 1)}
        if transactional:
            row["transactional_check_and_create_median_ms"] = round(statistics.median(transactional), 2)
            row["transactional_check_and_create_p99_ms"] = round(percentile(transactional, 0.99), 2)
        out.append(row)
        print(json.dumps(row), flush=True)
        for protocol, pending in [*others, (mine_protocol, mine)]:
            protocol.abort(pending)
            protocol.close()
        shutil.rmtree(base, ignore_errors=True)
    return out


def _send(url: str, instant_time: str, files: list[str]) -> None:
    client = MarkerServerClient(url, instant_time)
    for f in files:
        client.create(f, IOType.MERGE)
    client.close()


# -- 3. direct vs server-based markers for >= 1,000 files ----------------------------------------------


def bench_many_files(spark: Any, partitions: int, rows: int, repeats: int) -> list[dict[str, Any]]:
    base = tempfile.mkdtemp(prefix="tm-files-")
    df = spark.createDataFrame(_rows(range(rows), partitions, "bulk").to_pandas()).repartition(2).cache()
    df.count()
    out = []
    for _ in range(repeats):
        for kind in ("DIRECT", "TIMELINE_SERVER_BASED"):
            path = f"{base}/{kind}-{time.time_ns()}"
            opts = {"hoodie.write.markers.type": kind, "hoodie.bulkinsert.shuffle.parallelism": "0"}
            table = tidemark.Table.create(path, spark=spark, record_key="id", partition_by="part", options=opts)
            marker_files: list[int] = []
            original = table._protocol().complete

            def count_markers(pending: Any, stats: Any, _orig: Any = original, path: str = path,
                              marker_files: list[int] = marker_files, **kw: Any) -> Any:
                folder = Path(path) / marker_dir(pending.instant_time)
                marker_files.append(sum(1 for p in folder.rglob("*") if p.is_file()))
                started = time.perf_counter()
                read_markers(LocalStorage(path), pending.instant_time)
                marker_files.append(int((time.perf_counter() - started) * 1000))
                return _orig(pending, stats, **kw)

            table._protocol().complete = count_markers  # type: ignore[method-assign]
            began = time.perf_counter()
            result = table.bulk_insert(df)
            elapsed = time.perf_counter() - began
            row = {"markers": kind, "data_files": result.num_files, "seconds": round(elapsed, 2),
                   "marker_files_on_disk": marker_files[0], "read_markers_ms": marker_files[1]}
            out.append(row)
            print(json.dumps(row), flush=True)
            table.close()
            shutil.rmtree(path, ignore_errors=True)
    df.unpersist()
    shutil.rmtree(base, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--json", help="write the results here as JSON")
    parser.add_argument("--only", choices=["scenario", "latency", "files"], action="append")
    args = parser.parse_args()
    only = set(args.only or ["scenario", "latency", "files"])
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}}
    if "latency" in only:
        results["check_latency"] = bench_check_latency(3, 500, 50, 200 if not args.quick else 50)
    spark = spark_session() if only & {"scenario", "files"} else None
    if "scenario" in only:
        groups, per_group = (16, 2_000) if args.quick else (64, 15_000)
        results["scenario"] = bench_scenario(spark, groups, per_group, small_rows=100)
    if "files" in only:
        results["many_files"] = bench_many_files(spark, 300 if args.quick else 600, 60_000 if args.quick else 240_000,
                                                 1 if args.quick else 2)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
