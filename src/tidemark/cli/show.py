"""``tidemark show``: the rows of a table (or of a past version of it), read without Spark."""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich import box
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import (
    PATH_HELP,
    CliUsageError,
    HelpFormatter,
    Ui,
    add_storage_option_argument,
    count,
    fits,
    instant_time_arg,
    readable_time,
    storage_options,
)
from tidemark.errors import TidemarkError
from tidemark.format.names import COMMIT_TIME, META_COLUMNS
from tidemark.read.plan import ReadPlan
from tidemark.table import Table

DEFAULT_LIMIT = 20

DESCRIPTION = """\
Print rows of the Hudi table at PATH as a table, and how many rows it has.

By default this is a snapshot read: the latest version of every record, as
readers see it now (only completed instants count). With --as-of it is a time
travel read: the table as it was at instant T, counting only the instants
requested at or before T (the same rule as Hudi and hudi-rs).

Rows are shown in file order (partition by partition), not sorted. The five
Hudi meta columns (_hoodie_commit_time, _hoodie_commit_seqno,
_hoodie_record_key, _hoodie_partition_path, _hoodie_file_name) come first
unless --no-meta is given.

The parquet files are read directly with pyarrow: no Spark is started, so
this is quick. The total row count comes from the files' footers.
"""

EPILOG = """\
examples:
  tidemark show /data/trips
      the first 20 rows of the latest snapshot, and the total row count
  tidemark show /data/trips --no-meta --columns trip_id,city,fare --limit 5
      five rows, three columns
  tidemark show /data/trips --as-of 20261122035143159
      the table as of that instant (copy the time from `tidemark timeline`)
  tidemark show /data/trips --as-of "2026-11-22 03:51:40"
      the same with a readable time (UTC unless it has an offset)
  tidemark show /data/trips --limit 0
      only count the rows
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "show",
        help="print rows of a table (latest, or as of an instant) without Spark",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument(
        "--as-of", metavar="T", dest="as_of",
        help="time travel: read the table as of instant T, either a 17-digit instant time "
        "(yyyyMMddHHmmssSSS) or an ISO date-time such as 2026-11-22T03:51:40 (UTC)",
    )
    parser.add_argument(
        "-n", "--limit", metavar="N", type=int, default=DEFAULT_LIMIT,
        help=f"print at most N rows (default: {DEFAULT_LIMIT}; 0 prints only the count)",
    )
    parser.add_argument(
        "-c", "--columns", metavar="COLS",
        help="comma-separated columns to print, in this order (default: all)",
    )
    parser.add_argument(
        "--no-meta", action="store_true", dest="no_meta",
        help="leave out the _hoodie_* meta columns",
    )
    parser.set_defaults(run=run)


def _selected_columns(available: Sequence[str], columns: str | None, no_meta: bool) -> list[str]:
    if columns is not None:
        wanted = [c.strip() for c in columns.split(",") if c.strip()]
        if not wanted:
            raise CliUsageError("--columns: give column names, e.g. --columns trip_id,city")
        unknown = [c for c in wanted if c not in available]
        if unknown:
            raise CliUsageError(
                f"--columns: no column(s) {', '.join(unknown)} in the table; "
                f"it has {', '.join(available)}"
            )
    else:
        wanted = list(available)
    if no_meta:
        wanted = [c for c in wanted if c not in META_COLUMNS]
    return wanted


def _keep(batch: pa.RecordBatch, plan: ReadPlan) -> pa.RecordBatch:
    if plan.commit_times is None:
        return batch
    wanted = pa.array(sorted(plan.commit_times), pa.string())
    return batch.filter(pc.is_in(batch.column(COMMIT_TIME), value_set=wanted))


def read_rows(
    table: Table, plan: ReadPlan, columns: Sequence[str], limit: int
) -> tuple[list[dict[str, Any]], int]:
    """The first ``limit`` rows of the plan (only ``columns``) and the total row count."""
    rows: list[dict[str, Any]] = []
    total = 0
    for base_file in plan.files:
        try:
            found, some = _read_file(
                table.storage.open_ranged(base_file.path, base_file.size or None), plan, columns, limit - len(rows)
            )
        except (pa.ArrowException, OSError) as exc:  # a damaged or unreadable data file
            raise TidemarkError(f"cannot read {base_file.path}: {exc}") from None
        total += found
        rows.extend(some)
    return [{c: row.get(c) for c in columns} for row in rows], total


def _read_file(
    full_path: str | pa.NativeFile, plan: ReadPlan, columns: Sequence[str], room: int
) -> tuple[int, list[dict[str, Any]]]:
    """How many of the file's rows the plan keeps, and the first ``room`` of them."""
    parquet = pq.ParquetFile(full_path)
    if plan.commit_times is None and room <= 0:
        return parquet.metadata.num_rows, []  # the footer has the count: no data read
    # A file written before a column was added lacks it: such cells print as null.
    names = parquet.schema_arrow.names
    wanted = [c for c in columns if c in names]
    needed = wanted if plan.commit_times is None else sorted({*wanted, COMMIT_TIME})
    rows: list[dict[str, Any]] = []
    kept_rows = 0
    for batch in parquet.iter_batches(batch_size=max(min(room, 10_000), 1), columns=needed):
        kept = _keep(batch, plan)
        kept_rows += kept.num_rows
        if len(rows) < room:
            rows.extend(kept.slice(0, room - len(rows)).to_pylist())
        elif plan.commit_times is None:
            break
    if plan.commit_times is None:
        return parquet.metadata.num_rows, rows
    return kept_rows, rows


def cell(value: Any) -> Text:
    """A value as printed: Text, so that brackets in the data are never read as markup."""
    if value is None:
        return Text("null", style="dim")
    if isinstance(value, float):
        return Text(repr(value))
    if isinstance(value, dt.datetime):
        return Text(value.isoformat(sep=" "))
    if isinstance(value, bytes):
        return Text(value[:16].hex() + ("…" if len(value) > 16 else ""))
    return Text(str(value))


def _available_columns(table: Table, plan: ReadPlan) -> list[str]:
    schema = table.schema
    if schema is not None:
        return [*META_COLUMNS, *(n for n in schema.names if n not in META_COLUMNS)]
    if plan.files:
        return list(pq.read_schema(table.storage.open_ranged(plan.files[0].path, plan.files[0].size or None)).names)
    return list(META_COLUMNS)


def run(args: argparse.Namespace, ui: Ui) -> int:
    if args.limit < 0:
        raise CliUsageError(f"--limit must be 0 or more, got {args.limit}")
    as_of = instant_time_arg(args.as_of, "--as-of") if args.as_of is not None else None
    table = Table.open(args.path, storage_options=storage_options(args), spark=None)
    plan = table.read_plan(as_of=as_of)
    columns = _selected_columns(_available_columns(table, plan), args.columns, args.no_meta)
    if not columns:
        raise CliUsageError("no columns left to show (--no-meta removed every selected column)")
    rows, total = read_rows(table, plan, columns, args.limit)

    narrow = False
    what = f"as of {as_of} ({readable_time(as_of)} UTC)" if as_of else "latest snapshot"
    if rows:
        grid = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        for name in columns:
            grid.add_column(name, style="dim" if name in META_COLUMNS else None)
        for row in rows:
            grid.add_row(*(cell(row[c]) for c in columns))
        narrow = not fits(ui.out, grid)
        ui.out.print(grid)
    shown = f"showing {count(len(rows))}" if len(rows) < total else "showing all"
    if args.limit == 0 or total == 0:
        shown = ""
    files = f"{count(len(plan.files))} file{'s' if len(plan.files) != 1 else ''}"
    tail = f"; {shown}" if shown else ""
    ui.out.print(f"{count(total)} row{'s' if total != 1 else ''} in {files}, {what}{tail}")
    if narrow:
        ui.out.print("[dim](too wide for the terminal: --no-meta or --columns a,b,c "
                     "shows fewer columns)[/]")
    return 0
