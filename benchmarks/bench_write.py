#!/usr/bin/env python
"""Write benchmarks: tidemark (Hudi v8 copy-on-write on Spark) against its peers.

One run, one SparkSession (local[2]), side by side:

1. ``bulk``   -- ``Table.bulk_insert`` of N rows into a fresh, non-partitioned table
                 vs ``df.write.parquet`` of the same cached DataFrame.
2. ``random`` -- ``Table.upsert`` of a batch (half updates of keys spread over the
                 whole key space, half new keys) vs a raw Spark "full outer join
                 rewrite" of the parquet table.
3. ``narrow`` -- the same, but the updates are one contiguous key range that lives in
                 one base file (plus the new keys).
4. ``delta``  -- the same two batches merged into a Delta table by delta-rs
                 (``DeltaTable.merge(...).when_matched_update_all().when_not_matched_insert_all()``).

Every timed step runs on a fresh copy of the table it modifies; every step is
repeated ``--repeat`` times and the median is reported. A Spark event log is
written for the run and read back at the end to split the largest run's
tidemark and raw steps into Spark jobs (wall time, tasks, task time) plus the
time the driver spent outside any Spark job.

    .venv/bin/python benchmarks/bench_write.py --quick          # smoke run, 2-3 minutes
    .venv/bin/python benchmarks/bench_write.py --rows 1000000 5000000 --repeat 3 --tidemark-ref HEAD \\
        --out benchmarks/results.md --json benchmarks/results.json   # the BENCHMARKS.md run, ~10 min
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASE_EPOCH = 1704067200  # 2024-01-01T00:00:00Z
LABEL_PROP = "tmbench.label"

TARGETS = {"bulk": 1.2, "random": 1.0, "narrow": 1.0}


# -- command line -------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000], help="table sizes N")
    p.add_argument("--batch-rows", type=int, default=100_000, help="upsert batch size (half updates, half new)")
    p.add_argument("--rows-per-file", type=int, default=250_000,
                   help="rows per input Spark partition, hence per bulk-inserted file (and per Delta file)")
    p.add_argument("--repeat", type=int, default=2, help="runs of every measurement; the median is reported")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: N=50k and 200k, batch 10k, 25k rows per file, 1 repeat")
    p.add_argument("--work-dir", default="/tmp/tidemark-bench", help="scratch folder for tables (emptied)")
    p.add_argument("--keep", action="store_true", help="keep the tables and the event log after the run")
    p.add_argument("--ordering-field", default="updated_at", help="tidemark ordering field, or 'none'")
    p.add_argument("--skip-delta", action="store_true", help="leave out delta-rs")
    p.add_argument("--no-diagnose", action="store_true",
                   help="leave out the extra diagnostic run (upsert with hoodie.upsert.shuffle.parallelism)")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=8)
    p.add_argument("--tidemark-ref", metavar="GIT_REF",
                   help="benchmark this commit of tidemark (a `git archive` of its src/ put first on the "
                        "driver's and the workers' PYTHONPATH) instead of the installed working tree")
    p.add_argument("--out", help="write the results as a Markdown fragment here")
    p.add_argument("--json", help="write every measurement as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.rows = [50_000, 200_000]
        args.batch_rows = 10_000
        args.rows_per_file = 25_000
        args.repeat = 1
    if args.ordering_field.lower() == "none":
        args.ordering_field = None
    return args


# -- which tidemark ---------------------------------------------------------------------------
def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def pin_tidemark(ref: str, dest: str) -> str:
    """Make ``import tidemark`` (driver and Spark workers) load ``ref``'s src/; returns the commit."""
    if "tidemark" in sys.modules:
        raise RuntimeError("pin_tidemark must run before tidemark is imported")
    sha = _git("rev-parse", "--verify", f"{ref}^{{commit}}")
    data = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", sha, "src"],
                          capture_output=True, check=True).stdout
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    src = os.path.join(dest, "src")
    sys.path.insert(0, src)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = src + (os.pathsep + old if old else "")
    return sha


def tidemark_source(pinned: str | None) -> str:
    import tidemark

    where = os.path.dirname(os.path.dirname(os.path.abspath(tidemark.__file__)))
    if pinned:
        return f"commit {pinned[:10]} (git archive of src/, imported from {where})"
    try:
        head = _git("rev-parse", "--short=10", "HEAD")
        dirty = _git("status", "--porcelain", "--", "src")
    except Exception:  # noqa: BLE001
        return f"imported from {where}"
    return f"working tree at {head}{' with uncommitted changes in src/' if dirty else ''} ({where})"


# -- the machine ---------------------------------------------------------------------------
def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _version(module: str) -> str:
    try:
        mod = __import__(module)
        return str(getattr(mod, "__version__", "?"))
    except Exception:  # noqa: BLE001 - optional peers
        return "not installed"


def machine_info() -> dict[str, Any]:
    cpuinfo = _read("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.startswith("model name")), platform.processor() or "?")
    mem_kib = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines()
                    if line.startswith("MemTotal:")), 0)
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except Exception:  # noqa: BLE001
        java = "?"
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu": model,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "java": java,
        "pyspark": _version("pyspark"),
        "pyarrow": _version("pyarrow"),
        "deltalake": _version("deltalake"),
        "numpy": _version("numpy"),
        "pandas": _version("pandas"),
        "tidemark": _version("tidemark"),
    }


# -- data: the same rows from Spark and from pyarrow ----------------------------------------
# Columns: id (long key), user, category, note (strings), amount, score (doubles),
# created_at, updated_at (timestamps, UTC). ``version`` 0 is the initial load; the
# upsert batches use version 1, which changes note, amount, score and updated_at.
def spark_rows(ids, version: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    i = F.col("id")
    return ids.select(
        i.alias("id"),
        F.concat(F.lit("user_"), (i % 100_000).cast("string")).alias("user"),
        F.concat(F.lit("cat_"), (i % 16).cast("string")).alias("category"),
        F.concat(F.lit(f"v{version}-"), ((i * 2654435761 + version) % 1_000_000_007).cast("string")).alias("note"),
        (((i * 7919 + version) % 100_000) / 100.0).alias("amount"),
        (((i * 104729 + version) % 1_000_003) / 1_000_003.0).alias("score"),
        F.timestamp_seconds(i % 31_536_000 + BASE_EPOCH).alias("created_at"),
        F.timestamp_seconds(i % 31_536_000 + BASE_EPOCH + version * 86_400).alias("updated_at"),
    )


def arrow_rows(ids, version: int):  # type: ignore[no-untyped-def]
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = np.asarray(ids, dtype=np.int64)

    def text(prefix: str, values) -> pa.Array:  # type: ignore[no-untyped-def]
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values, pa.int64()), pa.string()), "")

    ts = pa.timestamp("us", tz="UTC")
    seconds = ids % 31_536_000 + BASE_EPOCH
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "user": text("user_", ids % 100_000),
        "category": text("cat_", ids % 16),
        "note": text(f"v{version}-", (ids * 2654435761 + version) % 1_000_000_007),
        "amount": pa.array(((ids * 7919 + version) % 100_000) / 100.0, pa.float64()),
        "score": pa.array(((ids * 104729 + version) % 1_000_003) / 1_000_003.0, pa.float64()),
        "created_at": pa.array(seconds * 1_000_000, pa.int64()).cast(ts),
        "updated_at": pa.array((seconds + version * 86_400) * 1_000_000, pa.int64()).cast(ts),
    })


@dataclass(frozen=True)
class Batch:
    """An upsert batch: which existing keys it updates and which new keys it inserts."""

    kind: str  # "random" or "narrow"
    update_ids: Any  # numpy int64 array
    insert_ids: Any

    @property
    def size(self) -> int:
        return len(self.update_ids) + len(self.insert_ids)


def make_batches(n: int, batch_rows: int, rows_per_file: int) -> list[Batch]:
    import numpy as np

    half = batch_rows // 2
    new = np.arange(n, n + (batch_rows - half), dtype=np.int64)
    # Spread updates: distinct keys drawn uniformly from [0, n) (fixed seed), so every file is hit.
    spread = np.sort(np.random.default_rng(20240101).choice(n, size=half, replace=False)).astype(np.int64)
    # Narrow updates: one contiguous range inside the middle input partition (= one base file).
    files = math.ceil(n / rows_per_file)
    start = (files // 2) * rows_per_file + rows_per_file // 10
    if start + half > min(n, (files // 2 + 1) * rows_per_file):
        raise SystemExit(f"--batch-rows {batch_rows} is too large for --rows-per-file {rows_per_file}")
    narrow = np.arange(start, start + half, dtype=np.int64)
    return [Batch("random", spread, new), Batch("narrow", narrow, new)]


def spark_batch(spark, batch: Batch):  # type: ignore[no-untyped-def]
    import numpy as np
    import pyarrow as pa

    ids = pa.table({"id": pa.array(np.concatenate([batch.update_ids, batch.insert_ids]), pa.int64())})
    df = spark_rows(spark.createDataFrame(ids), 1)
    return df


# -- timing ---------------------------------------------------------------------------------
def tree_cpu_seconds() -> tuple[float, dict[int, float]]:
    """CPU seconds (user + system) used so far by this process and all its descendants.

    That is the driver, the Spark JVM, its Python workers and delta-rs's threads: a
    measure of work that other processes competing for the cores do not inflate the
    way they inflate wall time.
    """
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rfind(")") + 2:].split()
        pid = int(name)
        parent[pid] = int(rest[1])
        cpu[pid] = sum(int(x) for x in rest[11:15])  # utime stime cutime cstime
    mine = {os.getpid()}
    grew = True
    while grew:
        new = {pid for pid, ppid in parent.items() if ppid in mine and pid not in mine}
        mine |= new
        grew = bool(new)
    per_pid = {pid: cpu.get(pid, 0) / tick for pid in mine}
    return sum(per_pid.values()), per_pid


@dataclass
class Measurement:
    n: int
    rep: int
    bench: str  # bulk | random | narrow
    engine: str  # tidemark | raw | delta | ...
    seconds: float
    cpu_s: float  # CPU seconds of this process tree during the step
    load1: float  # 1-minute load average at the end of the step (2 cores)
    start_ms: int
    end_ms: int
    label: str
    extra: dict[str, Any] = field(default_factory=dict)


class Recorder:
    def __init__(self, spark) -> None:  # type: ignore[no-untyped-def]
        self.sc = spark.sparkContext if spark is not None else None
        self.results: list[Measurement] = []

    def measure(self, n: int, rep: int, bench: str, engine: str, fn: Callable[[], Any]) -> Any:
        label = f"{bench}|{engine}|{n}|{rep}"
        if self.sc is not None:
            self.sc.setLocalProperty(LABEL_PROP, label)
        cpu0, pids0 = tree_cpu_seconds()
        start = time.time()
        try:
            value = fn()
        finally:
            end = time.time()
            if self.sc is not None:
                self.sc.setLocalProperty(LABEL_PROP, "untimed")
        cpu1, pids1 = tree_cpu_seconds()
        cpu = cpu1 - cpu0
        # A process of the tree that ended during the step: its CPU is only counted if a
        # process of the tree reaped it; record how much could have gone missing.
        vanished = sum(c for pid, c in pids0.items() if pid not in pids1)
        m = Measurement(n, rep, bench, engine, end - start, cpu, os.getloadavg()[0],
                        int(start * 1000), int(end * 1000), label, {"cpu_vanished_s": vanished})
        self.results.append(m)
        print(f"  [{time.strftime('%H:%M:%S')}] N={n:>9,} rep {rep} {bench:<7} {engine:<22} "
              f"{m.seconds:8.2f} s  cpu {cpu:7.1f} s  load {m.load1:4.1f}", flush=True)
        return value, m


def du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        if "/.hoodie" in root or "_delta_log" in root:
            continue
        for f in files:
            if f.endswith(".parquet"):
                total += os.path.getsize(os.path.join(root, f))
    return total


# -- the engines ------------------------------------------------------------------------------
def raw_rewrite(spark, base: str, batch_df, out: str) -> None:  # type: ignore[no-untyped-def]
    """Upsert the plain way: full outer join of the whole table with the batch, write it all anew."""
    from pyspark.sql import functions as F

    table = spark.read.parquet(base)
    cols = table.columns
    joined = table.alias("t").join(batch_df.alias("s"), F.col("t.id") == F.col("s.id"), "full_outer")
    hit = F.col("s.id").isNotNull()
    joined.select(*[F.when(hit, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c) for c in cols]) \
        .write.parquet(out)


def delta_write(path: str, table, rows_per_file: int) -> None:  # type: ignore[no-untyped-def]
    """One Delta table with one data file per ``rows_per_file`` rows (the tidemark layout)."""
    from deltalake import write_deltalake

    for i, offset in enumerate(range(0, table.num_rows, rows_per_file)):
        write_deltalake(path, table.slice(offset, rows_per_file), mode="error" if i == 0 else "append")


def delta_merge(path: str, batch, **options: Any) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from deltalake import DeltaTable

    metrics = (
        DeltaTable(path)
        .merge(source=batch, predicate="t.id = s.id", source_alias="s", target_alias="t", **options)
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return dict(metrics)


def summary_spark(df) -> tuple[int, float, int]:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    row = df.agg(
        F.count(F.lit(1)), F.sum("amount"), F.sum(F.when(F.col("note").startswith("v1-"), 1).otherwise(0))
    ).collect()[0]
    return int(row[0]), float(row[1]), int(row[2] or 0)


def summary_delta(path: str) -> tuple[int, float, int]:
    from deltalake import DeltaTable, QueryBuilder

    out = QueryBuilder().register("t", DeltaTable(path)).execute(
        "select count(*) as c, sum(amount) as a, "
        "sum(case when note like 'v1-%' then 1 else 0 end) as u from t"
    ).read_all()
    return int(out["c"][0].as_py()), float(out["a"][0].as_py()), int(out["u"][0].as_py() or 0)


def tidemark_write_stats(table, instant_time: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """What the commit metadata says about a tidemark write: files, writing tasks, task-side time.

    The per-file write time is read from the raw Avro (``runtimeStats``): tidemark's
    ``WriteStat.from_avro`` does not read it back.
    """
    from tidemark.format.commit_metadata import read_avro
    from tidemark.format.names import TIMELINE_DIR
    from tidemark.timeline import Timeline

    timeline = Timeline.load(table.storage)
    instant = timeline.get(instant_time)
    record = read_avro(table.storage.read_bytes(f"{TIMELINE_DIR}/{instant.file_name}"))
    stats = [s for group in record["partitionToWriteStats"].values() for s in group]
    tokens = {s["path"].rsplit("/", 1)[-1].split("_")[1] for s in stats}
    ms = [sum((s.get("runtimeStats") or {}).get(k) or 0 for k in ("totalCreateTime", "totalUpsertTime"))
          for s in stats]
    return {
        "files": len(stats),
        "writing_tasks": len(tokens),
        "rows_written": sum(s["numWrites"] for s in stats),
        "file_group_ms_sum": sum(ms),
        "file_group_ms_max": max(ms) if ms else 0,
    }


# -- the run ----------------------------------------------------------------------------------
def print_breakdown(steps: list[Any], events: str) -> None:
    """Print each timed step's Spark queries (wall, tasks, task time) from the event log."""
    jobs, execs = parse_event_log(read_event_log(events))
    for m in steps:
        b = breakdown(m, jobs, execs)
        print(f"\n== {m.label}: {b['total_s']:.2f} s (in Spark {b['in_spark_s']:.2f}, "
              f"driver only {b['driver_only_s']:.2f})")
        for q in b["queries"]:
            print(f"  +{q['offset_s']:6.2f}  {q['wall_s']:6.2f} s  tasks {q['stage_tasks']}  "
                  f"task {q['task_s']:6.2f} s {q['stage_task_s']}  {q['what']}")


def start_spark(args: argparse.Namespace, event_dir: str):  # type: ignore[no-untyped-def]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    os.makedirs(event_dir, exist_ok=True)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("tidemark-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", "file://" + event_dir)
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.setLocalProperty(LABEL_PROP, "untimed")
    return spark


def profile_parser(doc: str | None, *, rows: int | list[int], repeat: int, work_dir: str,
                   repeat_help: str | None = None) -> argparse.ArgumentParser:
    """The options the bulk profiling scripts share (sizes, repeats, work dir, pinned tidemark)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if isinstance(rows, list):
        p.add_argument("--rows", type=int, nargs="+", default=rows)
    else:
        p.add_argument("--rows", type=int, default=rows)
    p.add_argument("--rows-per-file", type=int, default=250_000)
    p.add_argument("--repeat", type=int, default=repeat, help=repeat_help)
    p.add_argument("--work-dir", default=work_dir)
    p.add_argument("--tidemark-ref", metavar="GIT_REF")
    return p


@contextlib.contextmanager
def profile_session(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """A fresh ``--work-dir``, tidemark pinned to ``--tidemark-ref`` if given, and this suite's
    SparkSession (prints which tidemark is measured); stops Spark and removes the work dir after."""
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    pinned = pin_tidemark(args.tidemark_ref, os.path.join(args.work_dir, "tidemark")) if args.tidemark_ref else None
    spark = start_spark(argparse.Namespace(shuffle_partitions=8, driver_memory="6g"),
                        os.path.join(args.work_dir, "eventlog"))
    try:
        print(f"tidemark: {tidemark_source(pinned)}")
        yield spark
    finally:
        spark.stop()
        shutil.rmtree(args.work_dir, ignore_errors=True)


def timed_call(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and process-tree CPU seconds of one call of ``fn``."""
    cpu0 = tree_cpu_seconds()[0]
    start = time.time()
    fn()
    return time.time() - start, tree_cpu_seconds()[0] - cpu0


def cached_rows(spark, n: int, rows_per_file: int):  # type: ignore[no-untyped-def]
    """The suite's N input rows, one Spark partition per ``rows_per_file``, cached and counted."""
    source = spark_rows(spark.range(0, n, 1, -(-n // rows_per_file)), 0).cache()
    source.count()
    return source


def check(what: str, got: tuple[int, float, int], want: tuple[int, float, int]) -> None:
    if got[0] != want[0] or got[2] != want[2] or not math.isclose(got[1], want[1], rel_tol=1e-9):
        raise AssertionError(f"{what}: got (rows, sum(amount), updated) = {got}, expected {want}")


def run_size(spark, args: argparse.Namespace, rec: Recorder, n: int, root: str,  # type: ignore[no-untyped-def]
             *, timed: bool = True) -> None:
    import tidemark

    files = math.ceil(n / args.rows_per_file)
    batches = make_batches(n, args.batch_rows, args.rows_per_file)
    source = spark_rows(spark.range(0, n, 1, files), 0).cache()
    source.count()  # materialize: generation is not part of any timing
    batch_dfs = {b.kind: spark_batch(spark, b).cache() for b in batches}
    for df in batch_dfs.values():
        df.count()
    # Expected summaries after each upsert, computed from the generators (untimed).
    base_summary = summary_spark(source)
    arrow_source = arrow_batches = None
    if not args.skip_delta:
        import numpy as np

        arrow_source = arrow_rows(np.arange(n, dtype=np.int64), 0)
        arrow_batches = {
            b.kind: arrow_rows(np.concatenate([b.update_ids, b.insert_ids]), 1) for b in batches
        }
    expected = {}
    for b in batches:
        upd = summary_spark(batch_dfs[b.kind])
        old = summary_spark(source.join(batch_dfs[b.kind].select("id"), "id", "left_semi"))
        expected[b.kind] = (base_summary[0] + len(b.insert_ids), base_summary[1] - old[1] + upd[1], b.size)

    options: dict[str, Any] = {}
    create = dict(record_key="id", ordering_field=args.ordering_field)
    measure = rec.measure if timed else (lambda n_, r_, b_, e_, fn: (fn(), None))

    def tm_bulk(path: str) -> Any:
        table = tidemark.Table.create(path, spark=spark, options=options, **create)
        return table, table.bulk_insert(source)

    for rep in range(args.repeat):
        d = os.path.join(root, f"n{n}", f"rep{rep}")
        os.makedirs(d)
        tm_base, raw_base = os.path.join(d, "tm_base"), os.path.join(d, "raw_base")

        # 1. bulk insert vs raw parquet write (alternate which goes first).
        steps = [("tidemark", partial(tm_bulk, tm_base)), ("raw", partial(source.write.parquet, raw_base))]
        for engine, fn in steps if rep % 2 == 0 else steps[::-1]:
            value, m = measure(n, rep, "bulk", engine, fn)
            if engine == "tidemark" and m is not None:
                table, result = value
                m.extra.update({"bytes": result.bytes_written, "files": result.num_files})
            elif m is not None:
                m.extra.update({"bytes": du(raw_base), "files": len([f for f in os.listdir(raw_base)
                                                                       if f.endswith(".parquet")])})
        if rep == 0:
            check("tidemark bulk_insert", summary_spark(tidemark.Table.open(tm_base, spark=spark).read()),
                  base_summary)
            check("raw parquet write", summary_spark(spark.read.parquet(raw_base)), base_summary)

        # 2./3. upserts, each on a fresh copy of the bulk-inserted table.
        for b in batches:
            batch_df = batch_dfs[b.kind]
            tm_path, raw_out = os.path.join(d, f"tm_{b.kind}"), os.path.join(d, f"raw_{b.kind}")
            shutil.copytree(tm_base, tm_path)
            table = tidemark.Table.open(tm_path, spark=spark)
            steps = [("tidemark", partial(table.upsert, batch_df)),
                     ("raw", partial(raw_rewrite, spark, raw_base, batch_df, raw_out))]
            for engine, fn in steps if rep % 2 == 0 else steps[::-1]:
                value, m = measure(n, rep, b.kind, engine, fn)
                if engine == "tidemark" and m is not None:
                    m.extra.update({"bytes": value.bytes_written, "files": value.num_files,
                                    "updates": value.num_updates, "inserts": value.num_inserts,
                                    **tidemark_write_stats(table, value.instant_time)})
                elif m is not None:
                    m.extra.update({"bytes": du(raw_out)})
            if rep == 0:
                check(f"tidemark upsert ({b.kind})", summary_spark(table.read()), expected[b.kind])
                check(f"raw rewrite ({b.kind})", summary_spark(spark.read.parquet(raw_out)), expected[b.kind])
            shutil.rmtree(raw_out)
            # Diagnostic: the same upsert with the write stage's parallelism fixed.
            if (timed and not args.no_diagnose and n == max(args.rows)):
                diag_path = os.path.join(d, f"tm_{b.kind}_par")
                shutil.copytree(tm_base, diag_path)
                par = {"hoodie.upsert.shuffle.parallelism": str(args.shuffle_partitions)}
                diag = tidemark.Table.open(diag_path, spark=spark, options=par)
                value, m = measure(n, rep, b.kind, f"tidemark-par{args.shuffle_partitions}",
                                   partial(diag.upsert, batch_df))
                m.extra.update({"bytes": value.bytes_written, "files": value.num_files,
                                **tidemark_write_stats(diag, value.instant_time)})
                if rep == 0:
                    check(f"tidemark upsert par ({b.kind})", summary_spark(diag.read()), expected[b.kind])
                shutil.rmtree(diag_path)
            shutil.rmtree(tm_path)

        # 4. delta-rs: the same rows, the same batches, merged.
        if arrow_source is not None and arrow_batches is not None:
            delta_base = os.path.join(d, "delta_base")
            _, m = measure(n, rep, "bulk", "delta-rs",
                           partial(delta_write, delta_base, arrow_source, args.rows_per_file))
            if m is not None:
                m.extra.update({"bytes": du(delta_base), "files": files})
            variants: list[tuple[str, dict[str, Any]]] = [("delta-rs", {})]
            if timed:
                variants.append(("delta-rs-unstreamed", {"streamed_exec": False}))
            for b in batches:
                for engine, opts in variants:
                    path = os.path.join(d, f"delta_{b.kind}_{engine}")
                    shutil.copytree(delta_base, path)
                    metrics, m = measure(n, rep, b.kind, engine,
                                         partial(delta_merge, path, arrow_batches[b.kind], **opts))
                    if m is not None:
                        keep = ("num_target_files_added", "num_target_files_removed", "num_target_rows_updated",
                                "num_target_rows_inserted", "num_target_rows_copied", "scan_time_ms",
                                "execution_time_ms", "rewrite_time_ms")
                        m.extra.update({k: metrics.get(k) for k in keep if k in metrics})
                    if rep == 0:
                        check(f"delta merge ({b.kind}, {engine})", summary_delta(path), expected[b.kind])
                    shutil.rmtree(path)
            shutil.rmtree(delta_base)
        shutil.rmtree(d)

    source.unpersist()
    for df in batch_dfs.values():
        df.unpersist()


# -- the Spark event log: per-job split of the timed steps -------------------------------------
def read_event_log(event_dir: str) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(event_dir) for f in files
                   if not f.startswith((".", "appstatus")))
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    with contextlib.suppress(json.JSONDecodeError):
                        events.append(json.loads(line))
    return events


def parse_event_log(events: list[dict[str, Any]]) -> tuple[dict[int, dict[str, Any]], dict[int, dict[str, Any]]]:
    """Spark jobs (with their stages' task counts and run time) and SQL executions."""
    jobs: dict[int, dict[str, Any]] = {}
    execs: dict[int, dict[str, Any]] = {}
    stages: dict[int, dict[str, Any]] = {}
    for ev in events:
        kind = ev.get("Event", "")
        if kind == "SparkListenerJobStart":
            props = ev.get("Properties") or {}
            ex = props.get("spark.sql.execution.id")
            jobs[ev["Job ID"]] = {
                "job": ev["Job ID"], "label": props.get(LABEL_PROP, "untimed"),
                "exec": int(ex) if ex not in (None, "") else None,
                "callsite": props.get("callSite.short") or (ev["Stage Infos"][-1]["Stage Name"]
                                                           if ev.get("Stage Infos") else "?"),
                "start": ev["Submission Time"], "end": ev["Submission Time"], "stages": ev.get("Stage IDs", []),
            }
        elif kind == "SparkListenerJobEnd" and ev["Job ID"] in jobs:
            jobs[ev["Job ID"]]["end"] = ev["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            st = stages.setdefault(ev["Stage ID"], {"tasks": 0, "task_ms": 0})
            st["tasks"] += 1
            st["task_ms"] += (ev.get("Task Metrics") or {}).get("Executor Run Time", 0)
        elif kind.endswith("SparkListenerSQLExecutionStart"):
            execs[ev["executionId"]] = {"exec": ev["executionId"], "what": ev.get("description", "?"),
                                        "start": ev["time"], "end": ev["time"]}
        elif kind.endswith("SparkListenerSQLExecutionEnd") and ev["executionId"] in execs:
            execs[ev["executionId"]]["end"] = ev["time"]
    for job in jobs.values():
        ran = [stages[s] for s in job["stages"] if s in stages]
        job["stage_tasks"] = [s["tasks"] for s in ran]
        job["stage_task_ms"] = [s["task_ms"] for s in ran]
        job["task_ms"] = sum(s["task_ms"] for s in ran)
    return jobs, execs


def _short_callsite(callsite: str) -> str:
    # "collect at /work/main/src/tidemark/engines/spark/writer.py:277" -> "collect at writer.py:277"
    what, _, where = callsite.partition(" at ")
    return f"{what} at {os.path.basename(where)}" if where else callsite


def breakdown(m: Measurement, jobs: dict[int, dict[str, Any]], execs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The step as a list of Spark SQL queries (and jobs outside any query), in order.

    A query's wall time runs from its start (planning included) to its end; the
    time of the step covered by no query or job is driver-only time (Python, py4j,
    DataFrame analysis, file listing, the commit protocol).
    """
    lo, hi = m.start_ms, m.end_ms
    items: list[dict[str, Any]] = []
    for ex in execs.values():
        if lo <= ex["start"] <= hi:
            mine = sorted((j for j in jobs.values() if j["exec"] == ex["exec"]), key=lambda j: j["job"])
            items.append({"start": ex["start"], "end": max([ex["end"]] + [j["end"] for j in mine]),
                          "what": _short_callsite(ex["what"]), "jobs": len(mine),
                          "stage_tasks": [t for j in mine for t in j["stage_tasks"]],
                          "stage_task_ms": [t for j in mine for t in j["stage_task_ms"]],
                          "task_ms": sum(j["task_ms"] for j in mine)})
    for j in jobs.values():
        if j["exec"] is None and j["label"] == m.label:
            items.append({"start": j["start"], "end": j["end"], "what": _short_callsite(j["callsite"]) + " (job)",
                          "jobs": 1, "stage_tasks": j["stage_tasks"], "stage_task_ms": j["stage_task_ms"],
                          "task_ms": j["task_ms"]})
    items.sort(key=lambda i: i["start"])
    covered = 0
    cur_s = cur_e = None
    for it in items:
        s_, e_ = max(it["start"], lo), min(it["end"], hi)
        if cur_e is None or s_ > cur_e:
            if cur_s is not None:
                covered += cur_e - cur_s
            cur_s, cur_e = s_, e_
        else:
            cur_e = max(cur_e, e_)
    if cur_s is not None:
        covered += cur_e - cur_s
    rows = [{"what": it["what"], "offset_s": (it["start"] - lo) / 1000, "wall_s": (it["end"] - it["start"]) / 1000,
             "jobs": it["jobs"], "stage_tasks": it["stage_tasks"],
             "stage_task_s": [round(t / 1000, 2) for t in it["stage_task_ms"]], "task_s": it["task_ms"] / 1000}
            for it in items]
    return {"total_s": m.seconds, "in_spark_s": covered / 1000, "driver_only_s": m.seconds - covered / 1000,
            "queries": rows}


# -- reporting ----------------------------------------------------------------------------------
def _median(ms: list[Measurement]) -> float:
    return statistics.median(x.seconds for x in ms)


def _runs(ms: list[Measurement]) -> str:
    return ", ".join(f"{x.seconds:.1f}" for x in ms)


def _cpu(ms: list[Measurement]) -> float:
    return statistics.median(x.cpu_s for x in ms)


def pick(results: list[Measurement], n: int, bench: str, engine: str) -> list[Measurement]:
    return [m for m in results if m.n == n and m.bench == bench and m.engine == engine]


def report(args: argparse.Namespace, info: dict[str, Any], command: str, results: list[Measurement],
           splits: dict[str, dict[str, Any]], wall: float) -> str:
    lines: list[str] = []
    add = lines.append
    add(f"Command: `{command}`  ")
    add(f"Total wall time of the run: {wall / 60:.1f} min  ")
    add(f"Machine: {info['nproc']} cores ({info['cpu']}), {info['memory_gib']} GiB RAM, {info['os']}  ")
    add(f"Versions: Python {info['python']}, {info['java']}, pyspark {info['pyspark']}, "
        f"pyarrow {info['pyarrow']}, deltalake {info['deltalake']}, numpy {info['numpy']}, "
        f"pandas {info['pandas']}  ")
    add(f"tidemark {info['tidemark']}: {info['tidemark_source']}  ")
    add(f"Settings: local[2], spark.sql.shuffle.partitions={args.shuffle_partitions}, driver memory "
        f"{args.driver_memory}, AQE on (Spark default); batch {args.batch_rows:,} rows "
        f"({args.batch_rows // 2:,} updates + {args.batch_rows - args.batch_rows // 2:,} new keys); "
        f"{args.rows_per_file:,} rows per input partition/file; ordering field "
        f"{args.ordering_field or 'none'}; {args.repeat} run(s) each, median reported.")
    loads = [m.load1 for m in results]
    if loads:
        add("")
        add(f"1-minute load average at the end of the timed steps: median {statistics.median(loads):.1f}, "
            f"max {max(loads):.1f} (2 cores: above ~2, other processes were competing for the CPU). "
            "`CPU s` is the CPU time of this benchmark's own processes (driver, Spark JVM, Python "
            "workers, delta-rs threads) during the step, which competing load inflates much less than wall time.")
        odd = [m for m in results if m.extra.get("cpu_vanished_s", 0) > 1]
        if odd:
            add("CPU caveat: in these steps processes of the benchmark ended while it ran, so their CPU time "
                "may be missing from `CPU s`: " + "; ".join(
                    f"{m.bench}/{m.engine} N={m.n:,} run {m.rep + 1} ({m.cpu_s:.1f} s counted, up to "
                    f"{m.extra['cpu_vanished_s']:.1f} s possibly missing)" for m in odd) + ".")
    add("")

    def met(ratio: float, target: float) -> str:
        return "yes" if ratio <= target else "**no**"

    add("### 1. bulk_insert vs `df.write.parquet`")
    add("")
    add("| rows | tidemark s | raw parquet s | tidemark/raw | target | met | CPU s tidemark · raw (ratio) "
        "| tidemark MB / files | raw MB / files | runs tidemark · raw |")
    add("|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---|")
    for n in args.rows:
        tm, raw = pick(results, n, "bulk", "tidemark"), pick(results, n, "bulk", "raw")
        if not tm or not raw:
            continue
        r = _median(tm) / _median(raw)
        add(f"| {n:,} | {_median(tm):.1f} | {_median(raw):.1f} | {r:.2f}× | ≤ {TARGETS['bulk']}× | "
            f"{met(r, TARGETS['bulk'])} | {_cpu(tm):.0f} · {_cpu(raw):.0f} ({_cpu(tm) / _cpu(raw):.2f}×) | "
            f"{tm[0].extra['bytes'] / 1e6:.0f} / {tm[0].extra['files']} | "
            f"{raw[0].extra['bytes'] / 1e6:.0f} / {raw[0].extra['files']} | {_runs(tm)} · {_runs(raw)} |")
    add("")
    for idx, kind, title in ((2, "random", "upsert, updates spread over the key space"),
                             (3, "narrow", "upsert, updates in one narrow key range")):
        add(f"### {idx}. {title}: tidemark vs raw full-outer-join rewrite")
        add("")
        add("| rows | tidemark s | raw rewrite s | tidemark/raw | target | met | CPU s tidemark · raw (ratio) "
            "| files rewritten | tasks writing files | runs tidemark · raw |")
        add("|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---|")
        for n in args.rows:
            tm, raw = pick(results, n, kind, "tidemark"), pick(results, n, kind, "raw")
            if not tm or not raw:
                continue
            r = _median(tm) / _median(raw)
            add(f"| {n:,} | {_median(tm):.1f} | {_median(raw):.1f} | {r:.2f}× | ≤ {TARGETS[kind]}× | "
                f"{met(r, TARGETS[kind])} | {_cpu(tm):.0f} · {_cpu(raw):.0f} ({_cpu(tm) / _cpu(raw):.2f}×) | "
                f"{tm[0].extra['files']} of {math.ceil(n / args.rows_per_file)} | "
                f"{tm[0].extra['writing_tasks']} | {_runs(tm)} · {_runs(raw)} |")
        add("")
    if not args.skip_delta:
        add("### 4. upsert: tidemark vs delta-rs merge")
        add("")
        add("| rows | batch | tidemark s | delta-rs merge s | tidemark/delta | CPU s tidemark · delta "
            "| delta-rs streamed_exec=False s | delta files removed→added | runs tidemark · delta |")
        add("|---:|---|---:|---:|---:|---:|---:|---:|---|")
        for n in args.rows:
            for kind in ("random", "narrow"):
                tm, dl = pick(results, n, kind, "tidemark"), pick(results, n, kind, "delta-rs")
                un = pick(results, n, kind, "delta-rs-unstreamed")
                if not tm or not dl:
                    continue
                x = dl[0].extra
                files = f"{x.get('num_target_files_removed', '?')}→{x.get('num_target_files_added', '?')}"
                add(f"| {n:,} | {kind} | {_median(tm):.1f} | {_median(dl):.1f} | "
                    f"{_median(tm) / _median(dl):.2f}× | {_cpu(tm):.0f} · {_cpu(dl):.1f} | "
                    f"{(f'{_median(un):.1f}' if un else '–')} | {files} | "
                    f"{_runs(tm)} · {_runs(dl)} |")
        add("")
        add("Delta initial load (`write_deltalake` from an in-memory Arrow table, one append per "
            f"{args.rows_per_file:,} rows; for scale only, not a target): "
            + ", ".join(f"{n:,} rows {_median(pick(results, n, 'bulk', 'delta-rs')):.1f} s"
                        for n in args.rows if pick(results, n, "bulk", "delta-rs")) + ".")
        add("")
    diag = [m for m in results if m.engine.startswith("tidemark-par")]
    if diag:
        add("### Diagnostic: upsert with `hoodie.upsert.shuffle.parallelism` set")
        add("")
        add("| rows | batch | tidemark default s | tidemark with option s | tasks writing files (default → option)"
            " | raw rewrite s |")
        add("|---:|---|---:|---:|---:|---:|")
        n = max(args.rows)
        for kind in ("random", "narrow"):
            d = [m for m in diag if m.bench == kind]
            tm, raw = pick(results, n, kind, "tidemark"), pick(results, n, kind, "raw")
            if d and tm and raw:
                add(f"| {n:,} | {kind} ({d[0].engine}) | {_median(tm):.1f} | {_median(d):.1f} | "
                    f"{tm[0].extra['writing_tasks']} → {d[0].extra['writing_tasks']} | {_median(raw):.1f} |")
        add("")
    if splits:
        add("### Where the time goes (largest N, last run; from the Spark event log)")
        add("")
        add("One row per Spark SQL query (or Spark job outside a query) the step ran, in order. `offset`: "
            "when it started after the step began; `wall`: its duration, planning included; `tasks`: tasks "
            "per stage that ran; `task s`: summed executor run time of its tasks (2 cores, so up to 2× wall). "
            "*Driver only* is the part of the step during which no query or job ran.")
        for label, sp in splits.items():
            bench, engine, n, rep = label.split("|")
            add("")
            add(f"**{bench} / {engine}**, N={int(n):,}: total {sp['total_s']:.1f} s, in Spark queries/jobs "
                f"{sp['in_spark_s']:.1f} s, driver only {sp['driver_only_s']:.1f} s"
                + (f"; file-group writes inside tasks: {sp['file_group_ms_sum'] / 1000:.1f} s summed, "
                   f"{sp['file_group_ms_max'] / 1000:.1f} s the longest"
                   if "file_group_ms_sum" in sp else ""))
            add("")
            add("| offset s | wall s | jobs | tasks per stage | task s | query |")
            add("|---:|---:|---:|---|---:|---|")
            for q in sp["queries"]:
                add(f"| {q['offset_s']:.1f} | {q['wall_s']:.1f} | {q['jobs']} | "
                    f"{'+'.join(str(t) for t in q['stage_tasks']) or '–'} | {q['task_s']:.1f} | {q['what']} |")
        add("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = " ".join([".venv/bin/python", os.path.relpath(os.path.abspath(__file__), REPO),
                        *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    started = time.time()
    root = os.path.join(args.work_dir, time.strftime("run-%Y%m%d-%H%M%S"))
    event_dir = os.path.join(root, "eventlog")
    os.makedirs(root)
    pinned = pin_tidemark(args.tidemark_ref, os.path.join(root, "tidemark")) if args.tidemark_ref else None
    info = machine_info()
    info["tidemark_source"] = tidemark_source(pinned)
    spark = start_spark(args, event_dir)
    rec = Recorder(spark)
    try:
        import tidemark

        worker = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("tidemark").__file__).collect()[0]
        if os.path.abspath(worker) != os.path.abspath(tidemark.__file__):
            raise RuntimeError(f"Spark workers import tidemark from {worker}, the driver from {tidemark.__file__}")
        print(json.dumps(info, indent=1), flush=True)
        print("warm-up (untimed) ...", flush=True)
        warm = argparse.Namespace(**{**vars(args), "repeat": 1, "batch_rows": 2_000, "rows_per_file": 10_000})
        run_size(spark, warm, rec, 20_000, os.path.join(root, "warmup"), timed=False)
        for n in args.rows:
            print(f"N = {n:,}", flush=True)
            run_size(spark, args, rec, n, os.path.join(root, "data"))
    finally:
        spark.stop()
        if not args.keep:  # the tables; the event log goes after it has been read
            shutil.rmtree(os.path.join(root, "data"), ignore_errors=True)
            shutil.rmtree(os.path.join(root, "warmup"), ignore_errors=True)
    wall = time.time() - started

    jobs, execs = parse_event_log(read_event_log(event_dir))
    splits: dict[str, dict[str, Any]] = {}
    n, last = max(args.rows), args.repeat - 1
    for m in rec.results:
        if m.n == n and m.rep == last and m.engine in ("tidemark", "raw", f"tidemark-par{args.shuffle_partitions}"):
            sp = breakdown(m, jobs, execs)
            sp.update({k: v for k, v in m.extra.items() if k.startswith("file_group_ms")})
            splits[m.label] = sp
    text = report(args, info, command, rec.results, splits, wall)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": command, "machine": info, "args": vars(args),
                       "results": [asdict(m) for m in rec.results], "splits": splits}, f, indent=1)
    if args.keep:
        print(f"kept {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.rmdir(args.work_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
