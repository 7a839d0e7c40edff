"""``tidemark cluster``: rewrite small files into target-size ones, optionally sorted, with progress."""

from __future__ import annotations

import argparse
import re
import tempfile
import threading
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tidemark.cli.output import (
    PATH_HELP,
    CliUsageError,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    count,
    option_pairs,
    storage_options,
    with_recorded_writer_settings,
)
from tidemark.services.cluster import ClusteringProgress
from tidemark.table import ClusteringResult, Table

DESCRIPTION = """\
Cluster the Hudi table at PATH: rewrite its small base files (below the
small-file limit) into few files of the target size, per partition, optionally
sorted by columns. Readers then open far fewer files; a sort makes filters on
the sort columns skip more of each file. Rows keep their commit times, so
incremental readers do not see clustered rows as changes.

How it runs, as in Hudi: the plan is made under the table lock, so it sees a
static table, and published as a pending `clustering` instant; the files are
rewritten without the lock, while writers keep writing; the result is a
`replacecommit` (operation CLUSTER) that replaces the small file groups by the
new ones in one atomic step. Old files stay on disk until cleaned.

Ingestion wins: if a write touches a planned file group before the clustering
commits, the clustering is rolled back and the command fails (exit code 1);
run it again. Writers are never failed by a clustering (with
hoodie.clustering.updates.strategy=reject, writes to planned file groups fail
instead and the clustering always commits). A clustering whose process died is
rolled back by the next one (after its heartbeat expired when several writers
share the table).

Sizes accept a unit: 128MB, 1GiB, 512k (powers of 1024) or plain bytes.
Defaults come from the hoodie.clustering.plan.strategy.* options
(`tidemark options clustering`): small files below 300 MiB, target 1 GiB,
at most 2 GiB and 30 groups per run.

The files are rewritten in this process with pyarrow, one group after another;
--spark runs one Spark task per group on a local Spark session instead.
Progress (groups done) is shown while it runs.
"""

EPILOG = """\
examples:
  tidemark cluster /data/trips
      cluster the small files with the default sizes
  tidemark cluster /data/trips --target-file-size 256MB --sort-by city ts
      files of about 256 MiB, rows sorted by city, then ts
  tidemark cluster /data/trips --dry-run
      show which files would be rewritten, change nothing
  tidemark cluster /data/trips --options hoodie.write.concurrency.mode=optimistic_concurrency_control \\
        hoodie.write.lock.provider=zookeeper hoodie.write.lock.zookeeper.url=zk1
      the writers use ZooKeeper locks: the clustering takes the same lock
"""

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
          "g": 1024**3, "gb": 1024**3, "gib": 1024**3}


def parse_size(value: str) -> int:
    """``128MB`` -> 134217728; plain digits are bytes. Raises CliUsageError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", value)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise CliUsageError(f"{value!r} is not a size; use e.g. 134217728, 128MB or 1GiB")
    size = int(float(match.group(1)) * _UNITS[unit])
    if size <= 0:
        raise CliUsageError(f"size {value!r} must be above 0")
    return size


def human_bytes(size: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "cluster",
        help="rewrite small files into target-size ones, optionally sorted (a table service)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument("--sort-by", metavar="COLUMN", nargs="+", action="extend", dest="sort_by",
                        help="sort each group's rows by these columns (default: "
                        "hoodie.clustering.plan.strategy.sort.columns, else no sort)")
    parser.add_argument("--target-file-size", metavar="SIZE", type=str, dest="target",
                        help="size of the files written (default 1GiB)")
    parser.add_argument("--small-file-limit", metavar="SIZE", type=str, dest="small",
                        help="files below this size are rewritten (default 300MiB, at most the target)")
    parser.add_argument("--max-groups", metavar="N", type=int, dest="max_groups",
                        help="most clustering groups in this run (default 30)")
    parser.add_argument("--dry-run", action="store_true", dest="dry_run",
                        help="show the plan and change nothing")
    parser.add_argument("--spark", action="store_true",
                        help="rewrite the groups as tasks of a local Spark session (local[2])")
    add_options_argument(parser, "e.g. the writers' lock settings")
    parser.set_defaults(run=run)


class _Reporter:
    """Progress: a bar on a terminal, else one line each time another group is done."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.lock = threading.Lock()
        self.bar: Progress | None = None
        self.task: Any = None
        self.last_done = -1

    def __enter__(self) -> _Reporter:
        if self.ui.err.is_terminal:
            self.bar = Progress(TextColumn("clustering"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("groups"), TimeElapsedColumn(), console=self.ui.err, transient=True)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def __call__(self, progress: ClusteringProgress) -> None:
        with self.lock:
            if self.bar is not None:
                if self.task is None:
                    self.task = self.bar.add_task("clustering", total=progress.groups_total)
                self.bar.update(self.task, completed=progress.groups_done)
                return
            if progress.groups_done == self.last_done:
                return
            self.last_done = progress.groups_done
            written = ""
            if progress.files_written:
                written = f" ({count(progress.files_written)} file(s), {human_bytes(progress.bytes_written)} written)"
            self.ui.out.print(f"  groups done: {progress.groups_done}/{progress.groups_total}{written}")


def _print_plan(ui: Ui, table: Table, kwargs: dict[str, Any]) -> int:
    plan = table.clustering_plan(**kwargs)
    if plan is None:
        ui.out.print("nothing to cluster: no partition has small files to combine")
        return 0
    sort = f", sorted by {', '.join(plan.sort_columns)}" if plan.sort_columns else ""
    ui.out.print(f"plan: {len(plan.groups)} group(s), {count(plan.num_input_files)} file(s), "
                 f"{human_bytes(sum(g.input_bytes for g in plan.groups))} -> about "
                 f"{sum(g.num_output_groups for g in plan.groups)} file(s) of up to "
                 f"{human_bytes(plan.target_file_size)}{sort}")
    for group in plan.groups:
        ui.out.print(f"  {escape(group.partition_path or '<root>')}: {len(group.slices)} file(s), "
                     f"{human_bytes(group.input_bytes)} -> {group.num_output_groups} file(s)", soft_wrap=True)
    ui.out.print("dry run: nothing was changed")
    return 0


def _print_result(ui: Ui, result: ClusteringResult) -> None:
    for instant in result.rolled_back:
        ui.out.print(f"rolled back clustering {instant} first (its process had died)")
    if not result.clustered:
        ui.out.print("nothing to cluster: no partition has small files to combine")
        return
    sort = f", sorted by {', '.join(result.sort_columns)}" if result.sort_columns else ""
    ui.out.print(
        f"{ui.check} clustered {count(result.files_before)} file(s) ({human_bytes(result.bytes_before)}) in "
        f"{count(len(result.partitions))} partition(s) into {count(result.files_after)} file(s) "
        f"({human_bytes(result.bytes_after)}){sort}; replacecommit {result.instant_time}"
    )


def run(args: argparse.Namespace, ui: Ui) -> int:
    kwargs: dict[str, Any] = {
        "sort_by": args.sort_by,
        "target_file_size": parse_size(args.target) if args.target else None,
        "small_file_limit": parse_size(args.small) if args.small else None,
        "max_groups": args.max_groups,
    }
    if args.max_groups is not None and args.max_groups <= 0:
        raise CliUsageError(f"--max-groups must be at least 1, got {args.max_groups}")
    options = with_recorded_writer_settings(args.path, option_pairs(args.options), storage_options(args))
    if args.dry_run or not args.spark:
        with Table.open(args.path, storage_options=storage_options(args), spark=None, options=options) as table:
            if args.dry_run:
                return _print_plan(ui, table, kwargs)
            return _cluster(ui, table, kwargs)
    from tidemark.engines.spark.session import start_spark

    with tempfile.TemporaryDirectory(prefix="tidemark-cluster-") as scratch:
        spark, made = start_spark(scratch)
        try:
            with Table.open(args.path, storage_options=storage_options(args), spark=spark, options=options) as table:
                return _cluster(ui, table, kwargs)
        finally:
            if made:
                spark.stop()


def _cluster(ui: Ui, table: Table, kwargs: dict[str, Any]) -> int:
    with _Reporter(ui) as reporter:
        result = table.cluster(progress=reporter, **kwargs)
    _print_result(ui, result)
    return 0
