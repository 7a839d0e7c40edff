"""``tidemark timeline``: the instants of a table, newest last."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import PATH_HELP, HelpFormatter, Ui, count, fits, readable_time
from tidemark.format.commit_metadata import CommitMetadata, read_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.table import Table
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name

DEFAULT_SHOWN = 20

DESCRIPTION = """\
Show the timeline of the Hudi table at PATH: one row per instant (a write, a
rollback, ...), oldest first.

Columns:
  requested      the instant's requested time, 17 digits (yyyyMMddHHmmssSSS,
                 UTC): the id to pass to `tidemark show --as-of` and
                 `tidemark rollback`
  requested at   the same time, readable (UTC)
  completed      the completion time, 17 digits: when the instant was published
                 (incremental reads are ordered by it); empty while pending
  completed at   the same time, readable (UTC; the date is shown only if it
                 differs from the requested date)
  action         commit, replacecommit (insert_overwrite), rollback, ...
  state          requested / inflight (pending: planned or being written) or
                 completed (published and visible to readers)
  operation      the write operation from the commit metadata (UPSERT, INSERT,
                 BULK_INSERT, DELETE, INSERT_OVERWRITE); for a rollback, the
                 instant it rolled back
  inserts, updates, deletes
                 record counts of the write
  files          data files written (for a rollback: files deleted); "+N
                 replaced" counts file groups an insert_overwrite replaced

Only the active timeline (.hoodie/timeline) is read. No Spark is needed.
By default the latest 20 instants are shown, plus every pending one.
"""

EPILOG = """\
examples:
  tidemark timeline /data/trips
      the latest 20 instants of the table at /data/trips
  tidemark timeline /data/trips --all
      every instant on the active timeline
  tidemark timeline /data/trips | grep inflight
      find writes that are pending (or failed and not rolled back yet)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "timeline",
        help="show the instants (commits, rollbacks, ...) of a table",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    parser.add_argument(
        "--all", action="store_true",
        help=f"show every instant, not just the latest {DEFAULT_SHOWN} (and the pending ones)",
    )
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class InstantRow:
    """One instant with what its metadata says about it."""

    instant: Instant
    operation: str = ""
    inserts: int | None = None
    updates: int | None = None
    deletes: int | None = None
    files: int | None = None
    replaced: int = 0


def _timeline_file(table: Table, name: str) -> bytes:
    return table.storage.read_bytes(f"{TIMELINE_DIR}/{name}")


def describe(table: Table, timeline: Timeline, instant: Instant) -> InstantRow:
    """The row for ``instant``; metadata that cannot be read leaves its cells empty."""
    try:
        if instant.action is Action.ROLLBACK:
            if instant.is_completed:
                done = read_avro(_timeline_file(table, instant.file_name))
                undone = ", ".join(done.get("commitsRollback") or [])
                deleted = done.get("totalFilesDeleted")
                return InstantRow(instant, f"of {undone}" if undone else "", files=deleted)
            requested = instant_file_name(instant.requested_time, Action.ROLLBACK, State.REQUESTED)
            plan = read_avro(_timeline_file(table, requested))
            target = (plan.get("instantToRollback") or {}).get("commitTime")
            return InstantRow(instant, f"of {target}" if target else "")
        if not instant.action.writes_data:
            return InstantRow(instant)
        if instant.is_completed:
            meta = timeline.commit_metadata(instant)
        else:
            # A pending write's .inflight file names its operation (.requested may be empty).
            data = _timeline_file(table, instant.file_name)
            op = CommitMetadata.from_bytes(data).operation if data else ""
            return InstantRow(instant, "" if op == "UNKNOWN" else op)
    except Exception:  # a damaged or foreign metadata file: show the instant without details
        return InstantRow(instant, "?")
    stats = meta.write_stats
    return InstantRow(
        instant,
        meta.operation,
        inserts=sum(s.num_inserts for s in stats),
        updates=sum(s.num_updates for s in stats),
        deletes=sum(s.num_deletes for s in stats),
        files=len(stats),
        replaced=sum(len(ids) for ids in meta.replaced_file_ids.values()),
    )


def select(instants: list[Instant], show_all: bool, limit: int = DEFAULT_SHOWN) -> list[Instant]:
    """All instants, or the latest ``limit`` plus every pending one, in timeline order."""
    if show_all or len(instants) <= limit:
        return list(instants)
    latest = set(instants[-limit:])
    return [i for i in instants if i in latest or not i.is_completed]


_STATE_STYLE = {State.COMPLETED: "green", State.INFLIGHT: "yellow", State.REQUESTED: "yellow"}


def _num(value: int | None) -> str:
    return "" if value is None else count(value)


def render(rows: list[InstantRow]) -> RichTable:
    """The timeline as one table row per instant (needs about 170 columns)."""
    table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("requested", no_wrap=True, style="bold")
    table.add_column("requested at (UTC)", no_wrap=True)
    table.add_column("completed", no_wrap=True)
    table.add_column("completed at", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("operation", no_wrap=True)
    for name in ("inserts", "updates", "deletes", "files"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        inst = row.instant
        table.add_row(
            inst.requested_time,
            readable_time(inst.requested_time),
            inst.completion_time or "",
            _completed_at(inst),
            inst.action.value,
            Text(inst.state.value, style=_STATE_STYLE[inst.state]),
            Text(row.operation),
            _num(row.inserts),
            _num(row.updates),
            _num(row.deletes),
            _files(row),
        )
    return table


def _completed_at(inst: Instant) -> str:
    done = inst.completion_time
    same_day = done is not None and done[:8] == inst.requested_time[:8]
    return readable_time(done, date=not same_day)


def _files(row: InstantRow) -> str:
    files = _num(row.files)
    return files + f" +{row.replaced} replaced" if row.replaced else files


def render_cards(rows: list[InstantRow]) -> Group:
    """The timeline for narrow terminals: a few short lines per instant."""
    parts: list[RenderableType] = []
    for row in rows:
        inst = row.instant
        head = Text.assemble(
            (inst.requested_time, "bold"), "  ", inst.action.value, "  ",
            (inst.state.value, _STATE_STYLE[inst.state]),
            *(("  ", row.operation) if row.operation else ()),
        )
        when = f"  requested {readable_time(inst.requested_time)}"
        if inst.completion_time:
            when += f"  completed {inst.completion_time} ({_completed_at(inst)})"
        lines = [head, Text(when)]
        if row.inserts is not None:
            files = row.files or 0
            written = f"{count(files)} file{'' if files == 1 else 's'}"
            replaced = f", {row.replaced} file group(s) replaced" if row.replaced else ""
            lines.append(Text(
                f"  +{_num(row.inserts)} inserts  ~{_num(row.updates)} updates  "
                f"-{_num(row.deletes)} deletes  {written}{replaced}"
            ))
        elif row.files is not None:
            lines.append(Text(f"  {_num(row.files)} file(s) deleted"))
        parts.extend(lines)
    return Group(*parts)


def print_timeline(ui: Ui, table: Table, *, show_all: bool = True, title: str | None = None) -> int:
    """Print the table's timeline; returns how many instants it has."""
    timeline = Timeline.load(table.storage)
    instants = timeline.instants
    shown = select(instants, show_all)
    if not instants:
        ui.out.print(f"{escape(table.path)}: the timeline is empty (no writes yet)")
        return 0
    rows = [describe(table, timeline, i) for i in shown]
    if title:
        ui.out.print(Text(title, style="bold"), soft_wrap=True)
    wide = render(rows)
    ui.out.print(wide if fits(ui.out, wide) else render_cards(rows))
    pending = len(timeline.pending)
    summary = f"{count(len(instants))} instant(s)"
    if len(shown) < len(instants):
        summary += (
            f", showing {count(len(shown))} (the latest {DEFAULT_SHOWN} and any pending); "
            "--all for every one"
        )
    if pending:
        summary += (
            f"; {pending} pending (requested/inflight: being written, "
            "or failed and not rolled back)"
        )
    ui.out.print(summary)
    return len(instants)


def run(args: argparse.Namespace, ui: Ui) -> int:
    table = Table.open(args.path, spark=None)
    title = f"timeline of {table.config.name} at {table.path}"
    print_timeline(ui, table, show_all=args.all, title=title)
    return 0
