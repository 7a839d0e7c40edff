#!/usr/bin/env python
"""Write benchmarks on the table shapes people really have (issue 18), side by side in one run.

Every case is one *shape*: a key kind, a partition count and a schema width.

* key kinds: ``int`` (a long id), ``fmt`` (a formatted id such as ``k000000123``), ``uuid``
  (random UUID text; the key order says nothing about the insert order);
* partitions: 0 (none), 10 or 100 values of a ``region`` string column;
* schemas: ``narrow`` (8 columns) or ``wide`` (30 columns with a struct and a list column).

For each shape and size N, against the peer that does the same work:

=========  ===============================================  ==========================================
engine     tidemark step                                    peer
=========  ===============================================  ==========================================
spark      ``Table.bulk_insert`` of N rows                  ``df.write.partitionBy(...).parquet``
spark      ``Table.upsert`` of a 10 % batch (half updates   raw Spark full-outer-join rewrite of the
           spread over the table, half new keys)            parquet table (``partitionBy``)
spark      ``Table.upsert`` touching one partition          the same raw rewrite
           (updates in ~10 % of the file groups)
arrow      ``Table.bulk_insert`` (``spark=None``)           ``deltalake.write_deltalake(partition_by=)``
arrow      ``Table.upsert`` of the 10 % batch               delta-rs ``merge(...)`` update-all/insert-all
=========  ===============================================  ==========================================

The rows are generated once per shape with pyarrow, written as plain parquet, and both sides
read the same data (Spark caches it before any timing). Every step runs ``--repeat`` times on a
fresh copy, alternating which side goes first; medians of wall and process-tree CPU seconds are
reported, with their ratio. The results are checked: row counts and a checksum of one updated
column agree between tidemark and its peer after every upsert.

    .venv/bin/python benchmarks/bench_shapes.py --quick                 # smoke run, a few minutes
    .venv/bin/python benchmarks/bench_shapes.py --rows 1000000 --repeat 3 \\
        --out benchmarks/shapes.md --json benchmarks/shapes.json      # the BENCHMARKS.md run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_write import machine_info, start_spark, tree_cpu_seconds  # noqa: E402

BASE_EPOCH = 1704067200  # 2024-01-01T00:00:00Z
TARGETS = {  # tidemark / peer, from issue 18
    ("spark", "bulk"): 1.0,
    ("spark", "upsert"): 0.8,
    ("spark", "narrow"): 0.3,
    ("arrow", "bulk"): 1.0,
    ("arrow", "upsert"): 1.0,
}


@dataclass(frozen=True)
class Shape:
    key: str  # int | fmt | uuid
    partitions: int  # 0 = unpartitioned
    width: str  # narrow | wide

    @property
    def name(self) -> str:
        return f"{self.key}-p{self.partitions}-{self.width}"

    @property
    def key_field(self) -> str:
        return "id" if self.key == "int" else "key"


def parse_shape(text: str) -> Shape:
    key, parts, width = text.split("-")
    if key not in ("int", "fmt", "uuid") or not parts.startswith("p") or width not in ("narrow", "wide"):
        raise argparse.ArgumentTypeError(f"a shape is KEY-pN-WIDTH, e.g. fmt-p10-narrow; got {text!r}")
    return Shape(key, int(parts[1:]), width)


DEFAULT_SHAPES = ["int-p0-narrow", "fmt-p10-narrow", "uuid-p10-narrow", "fmt-p100-narrow", "fmt-p10-wide"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[1_000_000], help="table sizes N")
    p.add_argument("--shapes", type=parse_shape, nargs="+", default=[parse_shape(s) for s in DEFAULT_SHAPES],
                   help=f"shapes KEY-pPARTITIONS-WIDTH (default: {' '.join(DEFAULT_SHAPES)})")
    p.add_argument("--engines", nargs="+", default=["spark", "arrow"], choices=["spark", "arrow"])
    p.add_argument("--batch-fraction", type=float, default=0.10, help="upsert batch size as a fraction of N")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="smoke run: N=100k, 1 repeat, two shapes")
    p.add_argument("--work-dir", default="/tmp/tidemark-bench-shapes")
    p.add_argument("--driver-memory", default="6g")
    p.add_argument("--shuffle-partitions", type=int, default=8)
    p.add_argument("--out", help="write the results as a Markdown fragment here")
    p.add_argument("--json", help="write every measurement as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.repeat = [100_000], 1
        args.shapes = [parse_shape("int-p0-narrow"), parse_shape("fmt-p10-wide")]
    return args


# -- data -------------------------------------------------------------------------------------
def _keys(shape: Shape, ids: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if shape.key == "int":
        return pa.array(ids, pa.int64())
    if shape.key == "fmt":
        digits = pc.utf8_lpad(pc.cast(pa.array(ids, pa.int64()), pa.string()), 9, "0")
        return pc.binary_join_element_wise("k", digits, "")
    # uuid: a deterministic pseudo-random 128-bit value per id, as UUID text (version 4 layout).
    hi = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) ^ np.uint64(0xD1B54A32D192ED03)
    lo = (ids.astype(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)) ^ np.uint64(0x94D049BB133111EB)
    hexs = np.char.add(np.char.mod("%016x", hi), np.char.mod("%016x", lo))
    text = [f"{h[:8]}-{h[8:12]}-4{h[13:16]}-a{h[17:20]}-{h[20:]}" for h in hexs.tolist()]
    return pa.array(text, pa.string())


def shape_rows(shape: Shape, ids: Any, version: int) -> Any:
    """The rows of ``ids`` at ``version`` (0: initial load; 1: an update of note/amount/updated_at)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = np.asarray(ids, dtype=np.int64)

    def text(prefix: str, values: Any) -> pa.Array:
        return pc.binary_join_element_wise(prefix, pc.cast(pa.array(values, pa.int64()), pa.string()), "")

    ts = pa.timestamp("us", tz="UTC")
    seconds = ids % 31_536_000 + BASE_EPOCH
    columns: dict[str, Any] = {shape.key_field: _keys(shape, ids)}
    if shape.partitions:
        columns["region"] = pc.binary_join_element_wise(
            "r", pc.utf8_lpad(pc.cast(pa.array(ids % shape.partitions, pa.int64()), pa.string()), 3, "0"), "")
    columns.update({
        "user": text("user_", ids % 100_000),
        "category": text("cat_", ids % 16),
        "note": text(f"v{version}-", (ids * 2654435761 + version) % 1_000_000_007),
        "amount": pa.array(((ids * 7919 + version) % 100_000) / 100.0, pa.float64()),
        "score": pa.array(((ids * 104729 + version) % 1_000_003) / 1_000_003.0, pa.float64()),
        "created_at": pa.array(seconds * 1_000_000, pa.int64()).cast(ts),
        "updated_at": pa.array((seconds + version * 86_400) * 1_000_000, pa.int64()).cast(ts),
    })
    if shape.width == "wide":
        for i in range(8):
            columns[f"i{i}"] = pa.array((ids * (i + 3)) % 1_000_003, pa.int64())
        for i in range(6):
            columns[f"d{i}"] = pa.array(((ids * (i + 11)) % 9973) / 7.0, pa.float64())
        for i in range(4):
            columns[f"s{i}"] = text(f"s{i}_", (ids * (i + 5)) % 50_000)
        columns["flag"] = pa.array(ids % 3 == 0, pa.bool_())
        columns["addr"] = pa.StructArray.from_arrays(
            [text("street_", ids % 5000), pa.array(ids % 99_999, pa.int32())], names=["street", "zip"])
        offsets = pa.array(np.arange(0, 3 * len(ids) + 1, 3, dtype=np.int32))
        columns["tags"] = pa.ListArray.from_arrays(offsets, pa.array(np.repeat(ids % 97, 3), pa.int64()))
    return pa.table(columns)


@dataclass
class Data:
    """One shape at one size: the initial rows and the two upsert batches, as parquet folders."""

    shape: Shape
    n: int
    base_dir: str  # N rows, one parquet file per 250k rows
    batch_dir: str  # 10 %: half updates spread over the key space, half new keys
    narrow_dir: str  # updates of keys in one partition only (or one key range), plus new keys
    batch_rows: int
    narrow_rows: int


def make_data(shape: Shape, n: int, fraction: float, root: str) -> Data:
    import numpy as np
    import pyarrow.parquet as pq

    d = os.path.join(root, "data", f"{shape.name}-{n}")
    os.makedirs(d, exist_ok=True)
    base_dir, batch_dir, narrow_dir = (os.path.join(d, x) for x in ("base", "batch", "narrow"))
    for x in (base_dir, batch_dir, narrow_dir):
        os.makedirs(x, exist_ok=True)
    for i, start in enumerate(range(0, n, 250_000)):
        pq.write_table(shape_rows(shape, np.arange(start, min(n, start + 250_000)), 0),
                       os.path.join(base_dir, f"part-{i:04d}.parquet"))
    half = int(n * fraction) // 2
    rng = np.random.default_rng(20240101)
    updates = np.sort(rng.choice(n, size=half, replace=False))
    new = np.arange(n, n + half)
    pq.write_table(shape_rows(shape, np.concatenate([updates, new]), 1), os.path.join(batch_dir, "b.parquet"))
    # Narrow: updates confined to ~10 % of the file groups: one partition of ten, or one key range.
    if shape.partitions:
        in_one = np.arange(0, n, shape.partitions)[: half]  # partition r000 holds ids % P == 0
        narrow_new = new[new % shape.partitions == 0]
    else:
        in_one = np.arange(0, min(half, n // 10))
        narrow_new = new[: len(in_one)]
    pq.write_table(shape_rows(shape, np.concatenate([in_one, narrow_new]), 1), os.path.join(narrow_dir, "b.parquet"))
    return Data(shape, n, base_dir, batch_dir, narrow_dir, 2 * half, len(in_one) + len(narrow_new))


# -- measuring --------------------------------------------------------------------------------
@dataclass
class Measurement:
    shape: str
    n: int
    engine: str  # spark | arrow
    bench: str  # bulk | upsert | narrow
    side: str  # tidemark | peer
    rep: int
    seconds: float
    cpu_s: float
    load1: float
    extra: dict[str, Any] = field(default_factory=dict)


class Recorder:
    def __init__(self) -> None:
        self.results: list[Measurement] = []

    def measure(self, m: dict[str, Any], fn: Callable[[], Any]) -> Any:
        cpu0 = tree_cpu_seconds()[0]
        start = time.time()
        value = fn()
        seconds = time.time() - start
        cpu = tree_cpu_seconds()[0] - cpu0
        rec = Measurement(seconds=seconds, cpu_s=cpu, load1=os.getloadavg()[0], **m)
        self.results.append(rec)
        print(f"  [{time.strftime('%H:%M:%S')}] {rec.shape:<18} N={rec.n:>9,} {rec.engine:<5} {rec.bench:<6} "
              f"{rec.side:<8} rep {rec.rep}  {seconds:7.2f} s  cpu {cpu:6.1f} s  load {rec.load1:4.1f}", flush=True)
        return value


def _check(what: str, got: tuple[int, float], want: tuple[int, float]) -> None:
    if got[0] != want[0] or abs(got[1] - want[1]) > 1e-6 * max(1.0, abs(want[1])):
        raise AssertionError(f"{what}: got (rows, sum(amount)) = {got}, expected {want}")


def _arrow_summary(table: Any) -> tuple[int, float]:
    import pyarrow.compute as pc

    return table.num_rows, float(pc.sum(table["amount"]).as_py() or 0.0)


def _spark_summary(df: Any) -> tuple[int, float]:
    from pyspark.sql import functions as F

    row = df.agg(F.count(F.lit(1)), F.sum("amount")).collect()[0]
    return int(row[0]), float(row[1] or 0.0)


def _expected(data: Data, batch_dir: str) -> tuple[int, float]:
    """Rows and sum(amount) after upserting ``batch_dir`` into the base rows (computed with Arrow)."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    base = ds.dataset(data.base_dir).to_table(columns=[data.shape.key_field, "amount"])
    batch = ds.dataset(batch_dir).to_table(columns=[data.shape.key_field, "amount"])
    keep = pc.invert(pc.is_in(base[data.shape.key_field], value_set=batch[data.shape.key_field]))
    kept = base.filter(keep)
    return kept.num_rows + batch.num_rows, float(pc.sum(kept["amount"]).as_py()) + float(
        pc.sum(batch["amount"]).as_py())


# An unpartitioned Spark table of 1M narrow rows is one or two file groups at Hudi's default
# 120 MB: a "narrow" upsert could not touch only ~10 % of them. Those shapes write files of at
# most 2 MiB (about 20 file groups per 1M rows; the small-file limit scaled down with it).
P0_SPARK_OPTIONS = {"hoodie.parquet.max.file.size": str(2 << 20), "hoodie.parquet.small.file.limit": str(1 << 20)}


def _create(path: str, shape: Shape, spark: Any) -> Any:
    import tidemark

    options = P0_SPARK_OPTIONS if spark is not None and not shape.partitions else None
    return tidemark.Table.create(path, spark=spark, record_key=shape.key_field, options=options,
                                 partition_by=["region"] if shape.partitions else [], ordering_field="updated_at")


def raw_rewrite(spark: Any, base: str, batch_df: Any, out: str, shape: Shape) -> None:
    """Upsert the plain way: full outer join of the table with the batch, everything written anew."""
    from pyspark.sql import functions as F

    table = spark.read.parquet(base)
    key = shape.key_field
    joined = table.alias("t").join(batch_df.alias("s"), F.col(f"t.{key}") == F.col(f"s.{key}"), "full_outer")
    hit = F.col(f"s.{key}").isNotNull()
    out_df = joined.select(*[F.when(hit, F.col(f"s.{c}")).otherwise(F.col(f"t.{c}")).alias(c) for c in table.columns])
    writer = out_df.write.partitionBy("region") if shape.partitions else out_df.write
    writer.parquet(out)


def run_spark(spark: Any, data: Data, rec: Recorder, repeat: int, root: str) -> None:
    import tidemark

    shape = data.shape
    source = spark.read.parquet(data.base_dir).cache()
    source.count()
    batches = {b: spark.read.parquet(p).cache() for b, p in (("upsert", data.batch_dir), ("narrow", data.narrow_dir))}
    for df in batches.values():
        df.count()
    base_summary = _spark_summary(source)
    want = {"upsert": _expected(data, data.batch_dir), "narrow": _expected(data, data.narrow_dir)}
    common = {"shape": shape.name, "n": data.n, "engine": "spark"}
    # Untimed warm-up of both sides (JIT, Python workers, class loading): otherwise the first
    # measurement of a session pays it (int-p0 bulk_insert measured 3.45× that way).
    warm = os.path.join(root, "spark", shape.name, "warm")
    _create(os.path.join(warm, "tm"), shape, spark).bulk_insert(source.limit(20_000))
    (source.limit(20_000).write.partitionBy("region") if shape.partitions else source.limit(20_000).write).parquet(
        os.path.join(warm, "raw"))
    shutil.rmtree(warm)
    for rep in range(repeat):
        d = os.path.join(root, "spark", shape.name, str(rep))
        os.makedirs(d)
        tm_base, raw_base = os.path.join(d, "tm"), os.path.join(d, "raw")

        def tm_bulk(path: str = tm_base) -> Any:
            return _create(path, shape, spark).bulk_insert(source)

        def raw_bulk(path: str = raw_base) -> None:
            (source.write.partitionBy("region") if shape.partitions else source.write).parquet(path)

        steps = [("tidemark", tm_bulk), ("peer", raw_bulk)]
        for side, fn in steps if rep % 2 == 0 else steps[::-1]:
            rec.measure({**common, "bench": "bulk", "side": side, "rep": rep}, fn)
        if rep == 0:
            _check("tidemark bulk_insert", _spark_summary(tidemark.Table.open(tm_base, spark=spark).read()),
                   base_summary)
        for bench, batch_df in batches.items():
            tm_path, raw_out = os.path.join(d, f"tm_{bench}"), os.path.join(d, f"raw_{bench}")
            shutil.copytree(tm_base, tm_path)
            table = tidemark.Table.open(tm_path, spark=spark)
            steps = [("tidemark", lambda t=table, b=batch_df: t.upsert(b)),
                     ("peer", lambda b=batch_df, o=raw_out, r=raw_base: raw_rewrite(spark, r, b, o, shape))]
            for side, fn in steps if rep % 2 == 0 else steps[::-1]:
                value = rec.measure({**common, "bench": bench, "side": side, "rep": rep}, fn)
                if side == "tidemark":
                    rec.results[-1].extra.update({"files": value.num_files, "bytes": value.bytes_written})
            if rep == 0:
                _check(f"tidemark {bench}", _spark_summary(table.read()), want[bench])
                _check(f"raw {bench}", _spark_summary(spark.read.parquet(raw_out)), want[bench])
            shutil.rmtree(tm_path)
            shutil.rmtree(raw_out)
        shutil.rmtree(d)
    source.unpersist()
    for df in batches.values():
        df.unpersist()


def run_arrow(data: Data, rec: Recorder, repeat: int, root: str) -> None:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake

    import tidemark

    shape = data.shape
    source = ds.dataset(data.base_dir).to_table()
    batch = ds.dataset(data.batch_dir).to_table()
    want = _expected(data, data.batch_dir)
    common = {"shape": shape.name, "n": data.n, "engine": "arrow"}
    partition_by = ["region"] if shape.partitions else None
    key = shape.key_field
    for rep in range(repeat):
        d = os.path.join(root, "arrow", shape.name, str(rep))
        os.makedirs(d)
        tm_base, delta_base = os.path.join(d, "tm"), os.path.join(d, "delta")
        steps = [("tidemark", lambda p=tm_base: _create(p, shape, None).bulk_insert(source)),
                 ("peer", lambda p=delta_base: write_deltalake(p, source, partition_by=partition_by))]
        for side, fn in steps if rep % 2 == 0 else steps[::-1]:
            rec.measure({**common, "bench": "bulk", "side": side, "rep": rep}, fn)
        tm_path, delta_path = os.path.join(d, "tm_up"), os.path.join(d, "delta_up")
        shutil.copytree(tm_base, tm_path)
        shutil.copytree(delta_base, delta_path)
        table = tidemark.Table.open(tm_path, spark=None)

        def delta_merge(delta_path: str = delta_path) -> None:
            (DeltaTable(delta_path).merge(source=batch, predicate=f"t.{key} = s.{key}", source_alias="s",
                                          target_alias="t")
             .when_matched_update_all().when_not_matched_insert_all().execute())

        steps = [("tidemark", lambda t=table: t.upsert(batch)), ("peer", delta_merge)]
        for side, fn in steps if rep % 2 == 0 else steps[::-1]:
            value = rec.measure({**common, "bench": "upsert", "side": side, "rep": rep}, fn)
            if side == "tidemark":
                rec.results[-1].extra.update({"files": value.num_files, "bytes": value.bytes_written})
        if rep == 0:
            _check("tidemark arrow upsert", _arrow_summary(table.read()), want)
            _check("delta merge", _arrow_summary(DeltaTable(delta_path).to_pyarrow_table(columns=[key, "amount"])),
                   want)
        shutil.rmtree(d)


# -- report -----------------------------------------------------------------------------------
def summarise(results: list[Measurement]) -> list[dict[str, Any]]:
    rows = []
    keys = sorted({(m.shape, m.n, m.engine, m.bench) for m in results},
                  key=lambda k: (k[2], k[0], k[1], ["bulk", "upsert", "narrow"].index(k[3])))
    for shape, n, engine, bench in keys:
        sides = {s: [m for m in results if (m.shape, m.n, m.engine, m.bench, m.side) == (shape, n, engine, bench, s)]
                 for s in ("tidemark", "peer")}
        if not sides["tidemark"] or not sides["peer"]:
            continue
        tm_s = statistics.median(m.seconds for m in sides["tidemark"])
        peer_s = statistics.median(m.seconds for m in sides["peer"])
        tm_cpu = statistics.median(m.cpu_s for m in sides["tidemark"])
        peer_cpu = statistics.median(m.cpu_s for m in sides["peer"])
        target = TARGETS.get((engine, bench))
        ratio = tm_s / peer_s if peer_s else float("inf")
        rows.append({"shape": shape, "n": n, "engine": engine, "bench": bench, "tidemark_s": tm_s, "peer_s": peer_s,
                     "ratio": ratio, "cpu_ratio": tm_cpu / peer_cpu if peer_cpu else float("inf"),
                     "target": target, "met": target is not None and ratio <= target,
                     "load": statistics.median(m.load1 for m in sides["tidemark"] + sides["peer"])})
    return rows


def report(args: argparse.Namespace, rows: list[dict[str, Any]], command: str) -> str:
    peer = {("spark", "bulk"): "`df.write(.partitionBy).parquet`", ("spark", "upsert"): "raw outer-join rewrite",
            ("spark", "narrow"): "raw outer-join rewrite", ("arrow", "bulk"): "`write_deltalake`",
            ("arrow", "upsert"): "delta-rs `merge`"}
    info = machine_info()
    lines = [f"Command: `{command}`", "",
             f"Machine: {info.get('cpu', platform.processor())}, {os.cpu_count()} cores; "
             f"Python {platform.python_version()}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "| engine | shape | N | work | peer | tidemark s | peer s | wall ratio | CPU ratio | target | load |",
             "|---|---|---:|---|---|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        target = f"≤ {r['target']}× {'met' if r['met'] else '**not met**'}" if r["target"] else ""
        lines.append(f"| {r['engine']} | {r['shape']} | {r['n']:,} | {r['bench']} | {peer[(r['engine'], r['bench'])]} "
                     f"| {r['tidemark_s']:.2f} | {r['peer_s']:.2f} | {r['ratio']:.2f}× | {r['cpu_ratio']:.2f}× "
                     f"| {target} | {r['load']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "benchmarks/bench_shapes.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    shutil.rmtree(args.work_dir, ignore_errors=True)
    os.makedirs(args.work_dir)
    rec = Recorder()
    spark = start_spark(args, os.path.join(args.work_dir, "eventlog")) if "spark" in args.engines else None
    try:
        for n in args.rows:
            for shape in args.shapes:
                print(f"{shape.name} N={n:,}: generating", flush=True)
                data = make_data(shape, n, args.batch_fraction, args.work_dir)
                if spark is not None:
                    run_spark(spark, data, rec, args.repeat, args.work_dir)
                if "arrow" in args.engines:
                    run_arrow(data, rec, args.repeat, args.work_dir)
                shutil.rmtree(os.path.dirname(data.base_dir))
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(args.work_dir, ignore_errors=True)
    rows = summarise(rec.results)
    text = report(args, rows, command)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": command, "rows": rows, "measurements": [asdict(m) for m in rec.results]}, fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
