#!/usr/bin/env python
"""The floor under the Arrow engine (issue 18): pyarrow doing only what Hudi's format requires,
beside tidemark and delta-rs, in one run.

For each shape of ``bench_shapes.py`` (1M rows; the 10 % upsert batch), three sides:

* **tidemark**: ``Table.bulk_insert`` / ``Table.upsert`` with ``spark=None``, as the benchmark runs them;
* **delta-rs**: ``write_deltalake`` / ``DeltaTable.merge`` (update all, insert all);
* **floor**: the base files tidemark writes, written by pyarrow alone from rows already in memory
  (Hudi's meta columns built, the per-file constant ones as one-entry dictionaries, the rows in
  file order), with tidemark's writer options and Hudi's footer (the key range and the bloom
  filter of every key, hashed on a thread of its own beside the encoding), on one thread per
  core. For an upsert, the floor also decodes every base file the upsert rewrites (all of its
  columns, as a copy-on-write rewrite must to carry its untouched rows; beside the encoding, as a
  rewrite that streams the stored file overlaps them), and its filter is the
  replaced file's with the new keys hashed onto it, as tidemark's rewrite makes it (the keys
  that are new are known beforehand). Nothing else: no partitioning or ordering of the batch,
  no index lookup, no merge, no markers, no timeline.

The floor is what no pyarrow-based writer of the same Hudi files can go below; ``floor/delta``
above 1 proves a target out of reach on that shape (with this file layout), and ``tidemark/floor``
is what tidemark adds on top of the format. Medians of ``--repeat`` runs, the three sides
alternating which goes first.

    .venv/bin/python benchmarks/bench_floor.py --repeat 5 --out /tmp/floor.md --json /tmp/floor.json
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_shapes as bs  # noqa: E402
from bench_write import machine_info, tree_cpu_seconds  # noqa: E402

SHAPES = ["int-p0-narrow", "fmt-p10-narrow", "uuid-p10-narrow", "fmt-p100-narrow", "fmt-p10-wide"]
# The per-file constant meta columns, given to the writer as one-entry dictionaries (as tidemark does).
DICTIONARY_META = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_file_name"]


def base_files(path: str) -> set[str]:
    """The table's base files, relative to ``path``."""
    return {os.path.relpath(p, path) for p in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True)
            if "/.hoodie" not in p}


def file_group(path: str) -> str:
    return os.path.basename(path).split("_")[0]


class HudiFiles:
    """The base files one tidemark write produced, held in memory as its writer was given them,
    with the options tidemark wrote them with; :meth:`write` writes them again (the floor)."""

    def __init__(self, written: list[str], rewritten: list[str]) -> None:
        import pyarrow.parquet as pq

        self.rewritten = rewritten  # the base files these replace (decoded by the floor), in order
        self.tables = [pq.read_table(p, read_dictionary=DICTIONARY_META) for p in written]
        meta = pq.read_metadata(written[0])
        names = [meta.schema.column(i).path for i in range(meta.num_columns)]
        chunks = [meta.row_group(0).column(i) for i in range(meta.num_columns)]
        self.options: dict[str, Any] = {
            # Per column: tidemark leaves the codec off columns it barely shrinks (random ids).
            "compression": {n: "none" if c.compression == "UNCOMPRESSED" else c.compression.lower()
                            for n, c in zip(names, chunks, strict=True)},
            "use_dictionary": [n for n, c in zip(names, chunks, strict=True) if "RLE_DICTIONARY" in c.encodings],
            "write_statistics": [n for n, c in zip(names, chunks, strict=True) if c.statistics is not None],
        }
        self.row_group_rows = max(meta.row_group(g).num_rows for g in range(meta.num_row_groups))
        # Each rewritten file's keys that the file it replaces does not hold (in file order).
        self.new_keys = []
        for table, old in zip(self.tables, rewritten, strict=False):
            import pyarrow.compute as pc

            keys = table.column("_hoodie_record_key").combine_chunks()
            stored = pq.read_table(old, columns=["_hoodie_record_key"]).column(0).combine_chunks()
            self.new_keys.append(keys.filter(pc.invert(pc.is_in(keys, value_set=stored))))

    def write(self, out: str, threads: int) -> None:
        import pyarrow.parquet as pq

        from tidemark.format.bloom import footer_metadata

        os.makedirs(out, exist_ok=True)
        hashing = ThreadPoolExecutor(max_workers=threads)
        decoding = ThreadPoolExecutor(max_workers=threads)

        def decode(i: int) -> None:
            for _ in pq.ParquetFile(self.rewritten[i], read_dictionary=DICTIONARY_META[:2]).iter_batches(
                    batch_size=65_536, use_threads=False):
                pass

        def one(i: int) -> None:
            # The stored rows a copy-on-write rewrite carries over are decoded beside the encoding
            # (a rewrite streams them: its slices are decoded while the previous ones encode).
            decoded = decoding.submit(decode, i) if i < len(self.rewritten) else None
            rows = self.tables[i]
            keys = rows.column("_hoodie_record_key").combine_chunks()
            footer = hashing.submit(footer_metadata, keys) if i >= len(self.rewritten) else \
                hashing.submit(carried_footer, self.rewritten[i], keys, self.new_keys[i])
            with pq.ParquetWriter(os.path.join(out, f"{i}.parquet"), rows.schema, **self.options) as writer:
                writer.write_table(rows, row_group_size=self.row_group_rows)
                writer.add_key_value_metadata(footer.result())
            if decoded is not None:
                decoded.result()

        try:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                list(pool.map(one, range(len(self.tables))))
        finally:
            hashing.shutdown()
            decoding.shutdown()


def carried_footer(replaced: str, keys: Any, new_keys: Any) -> dict[str, str]:
    """The footer of a rewritten file holding ``keys``: the filter of the file it replaces
    with ``new_keys`` hashed onto it, as tidemark's rewrite carries it (a filter that does not
    carry over is built from every key, as there)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from tidemark.format.bloom import DEFAULT_NUM_ENTRIES, BloomBuilder, footer_metadata, range_footer, with_added_keys
    from tidemark.write.footer import stored_filter

    stored = stored_filter(pq.read_metadata(replaced))
    if stored is None:
        return footer_metadata(keys)
    bounds = pc.min_max(keys)
    if stored.keys >= DEFAULT_NUM_ENTRIES:
        builder = BloomBuilder.resuming(stored.bloom, stored.keys)
        builder.add(new_keys)
        return range_footer(bounds["min"].as_py(), bounds["max"].as_py(), builder.build())
    carried = with_added_keys(stored.bloom, new_keys, len(keys))
    return footer_metadata(keys) if carried is None else \
        range_footer(bounds["min"].as_py(), bounds["max"].as_py(), carried)


def measure(fn: Callable[[], Any]) -> tuple[float, float]:
    cpu, began = tree_cpu_seconds()[0], time.perf_counter()
    fn()
    return time.perf_counter() - began, tree_cpu_seconds()[0] - cpu


def run_shape(name: str, rows: int, repeat: int, root: str) -> list[dict[str, Any]]:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable, write_deltalake

    import tidemark

    shape = bs.parse_shape(name)
    data = bs.make_data(shape, rows, 0.10, os.path.join(root, "data"))
    source, batch = ds.dataset(data.base_dir).to_table(), ds.dataset(data.batch_dir).to_table()
    partition_by = ["region"] if shape.partitions else None
    key = shape.key_field
    threads = os.cpu_count() or 1

    def create(path: str) -> tidemark.Table:
        return bs._create(path, shape, None)

    # What tidemark writes: a bulk_insert's files, and an upsert's new files with those they replace.
    loaded, delta_loaded = os.path.join(root, "tm"), os.path.join(root, "delta")
    create(loaded).bulk_insert(source)
    write_deltalake(delta_loaded, source, partition_by=partition_by)
    bulk_files = HudiFiles([os.path.join(loaded, p) for p in sorted(base_files(loaded))], [])
    probe = os.path.join(root, "probe")
    shutil.copytree(loaded, probe)
    tidemark.Table.open(probe, spark=None).upsert(batch)
    new = sorted(base_files(probe) - base_files(loaded))
    old = {file_group(p): p for p in base_files(loaded)}
    upsert_files = HudiFiles([os.path.join(probe, p) for p in new],
                             [os.path.join(loaded, old[file_group(p)]) for p in new if file_group(p) in old])

    def fresh(path: str) -> str:
        shutil.rmtree(path, ignore_errors=True)
        return path

    def tm_bulk() -> None:
        create(fresh(os.path.join(root, "run"))).bulk_insert(source)

    def delta_bulk() -> None:
        write_deltalake(fresh(os.path.join(root, "run")), source, partition_by=partition_by)

    def floor_bulk() -> None:
        bulk_files.write(fresh(os.path.join(root, "run")), threads)

    def tm_upsert() -> Callable[[], None]:
        path = fresh(os.path.join(root, "run"))
        shutil.copytree(loaded, path)
        table = tidemark.Table.open(path, spark=None)
        return lambda: table.upsert(batch)

    def delta_upsert() -> Callable[[], None]:
        path = fresh(os.path.join(root, "run"))
        shutil.copytree(delta_loaded, path)
        return lambda: (DeltaTable(path).merge(source=batch, predicate=f"t.{key} = s.{key}", source_alias="s",
                                               target_alias="t")
                        .when_matched_update_all().when_not_matched_insert_all().execute())

    def floor_upsert() -> Callable[[], None]:  # (the probe's new files stay until the shape is done)
        out = fresh(os.path.join(root, "run"))
        return lambda: upsert_files.write(out, threads)

    results = []
    for work, sides in (("bulk", {"tidemark": lambda: tm_bulk, "delta-rs": lambda: delta_bulk,
                                  "floor": lambda: floor_bulk}),
                        ("upsert", {"tidemark": tm_upsert, "delta-rs": delta_upsert, "floor": floor_upsert})):
        times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
        order = list(sides)
        for rep in range(repeat):
            for side in order[rep % 3:] + order[:rep % 3]:  # each side goes first in turn
                times[side].append(measure(sides[side]()))
                print(f"  {name:16s} {work:6s} {side:8s} rep {rep}: {times[side][-1][0]:6.3f} s", flush=True)
        med = {side: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t))
               for side, t in times.items()}
        files = bulk_files if work == "bulk" else upsert_files
        results.append({
            "shape": name, "work": work, "rows": rows, "files": len(files.tables),
            **{f"{side}_s": round(m[0], 3) for side, m in med.items()},
            **{f"{side}_cpu_s": round(m[1], 3) for side, m in med.items()},
            "floor_over_delta": round(med["floor"][0] / med["delta-rs"][0], 2),
            "tidemark_over_floor": round(med["tidemark"][0] / med["floor"][0], 2),
            "tidemark_over_delta": round(med["tidemark"][0] / med["delta-rs"][0], 2),
        })
    shutil.rmtree(root, ignore_errors=True)
    return results


def report(rows: list[dict[str, Any]], command: str) -> str:
    info = machine_info()
    lines = [f"Command: `{command}`", "",
             f"Machine: {info.get('cpu', '?')}, {os.cpu_count()} cores; Python {info.get('python', '?')}; "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "| shape | work | files | tidemark s | delta-rs s | floor s | floor / delta-rs | tidemark / floor "
             "| tidemark / delta-rs |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['shape']} | {r['work']} | {r['files']} | {r['tidemark_s']:.3f} | {r['delta-rs_s']:.3f} "
                     f"| {r['floor_s']:.3f} | {r['floor_over_delta']:.2f}× | {r['tidemark_over_floor']:.2f}× "
                     f"| {r['tidemark_over_delta']:.2f}× |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--shapes", nargs="+", default=SHAPES)
    p.add_argument("--work-dir", default=None, help="where the tables go (default: a temporary folder)")
    p.add_argument("--out", help="Markdown report")
    p.add_argument("--json", help="every median as JSON")
    args = p.parse_args(argv)
    command = "benchmarks/bench_floor.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    rows = []
    for name in args.shapes:
        root = tempfile.mkdtemp(prefix=f"tm-floor-{name}-", dir=args.work_dir)
        rows.extend(run_shape(name, args.rows, args.repeat, root))
    text = report(rows, command)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"command": command, "results": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
