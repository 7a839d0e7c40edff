"""``tidemark markers``: the active writers of a table, their heartbeats and the markers they hold."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

from rich import box
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    option_pairs,
    readable_time,
    storage_options,
)
from tidemark.cli.timeline import Liveness, describe, liveness, policy_of
from tidemark.concurrency.heartbeat import now_ms
from tidemark.format.names import TEMP_DIR, marker_dir
from tidemark.markers import Marker, read_markers
from tidemark.markers.listing import MARKERS_TYPE_FILE
from tidemark.table import Table
from tidemark.timeline import Instant, Timeline

DESCRIPTION = """\
List the writers that are writing the Hudi table at PATH right now: every
pending write, with its heartbeat and the markers it holds.

A marker is a writer's durable note of a data file it is about to write
(.hoodie/.temp/<instant>/), made before the file. Markers let a failed write be
rolled back completely, and with early conflict detection
(hoodie.write.concurrency.early.conflict.detection.enable=true) they let a
writer see, before it writes a file group, that an older live writer is
writing the same one, and stop there instead of at commit.

Columns: the writer's instant; its heartbeat ("alive", "expired": the writer is
taken for dead and its markers no longer block anyone, `tidemark clean` rolls
it back); how its markers are kept (direct: one file per data file; server:
lines of MARKERS<n> files, Hudi's TIMELINE_SERVER_BASED layout, written by a
marker server in a Spark writer's driver or by an Arrow-engine writer's own
threads); how
many markers, partitions and file groups it holds; and which other writers
hold markers on the same file groups (they conflict: with early detection the
younger one stops).

Marker folders of writes that are no longer pending (a writer that died right
after publishing) are listed as leftovers; the next write removes them.
"""

EPILOG = """\
examples:
  tidemark markers /data/trips
      who is writing the table, and is anyone in anyone's way
  tidemark markers /data/trips --files
      also every marker: the data file and how it is written (CREATE: a new file
      group, MERGE: a new version of an existing one, APPEND: a log file)
  tidemark markers /data/trips --json
      the same as JSON, for scripts
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "markers",
        help="active writers, their heartbeats and how many markers each holds",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument("--files", action="store_true", help="also list every marker of every writer")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_options_argument(parser, "e.g. the writers' heartbeat settings, to judge liveness as they do")
    parser.set_defaults(run=run)


@dataclass(frozen=True)
class WriterMarkers:
    instant: Instant
    operation: str
    heartbeat: Liveness | None
    marker_type: str  # "direct", "server", "none"
    markers: tuple[Marker, ...]

    @property
    def file_groups(self) -> set[tuple[str, str]]:
        return {(m.partition_path, m.file_id) for m in self.markers}

    @property
    def partitions(self) -> set[str]:
        return {m.partition_path for m in self.markers}


def _marker_type(table: Table, instant_time: str, markers: tuple[Marker, ...]) -> str:
    if table.storage.exists(f"{marker_dir(instant_time)}/{MARKERS_TYPE_FILE}"):
        return "server"
    return "direct" if markers else "none"


def collect(table: Table) -> tuple[list[WriterMarkers], list[str]]:
    """The pending writes with their markers, and marker folders of instants no longer pending."""
    timeline = Timeline.load(table.storage)
    policy = policy_of(table)
    now = now_ms()
    writers = []
    pending = {i.requested_time for i in timeline.pending}
    for inst in timeline.pending:
        beat = liveness(table.storage, inst, policy, now)
        if beat is None:  # not a write (a service plan)
            continue
        markers = tuple(read_markers(table.storage, inst.requested_time))
        writers.append(
            WriterMarkers(
                inst,
                describe(table, timeline, inst).operation,
                beat,
                _marker_type(table, inst.requested_time, markers),
                markers,
            )
        )
    leftovers = sorted(name for name in table.storage.list_subdirs(TEMP_DIR) if name not in pending)
    return writers, leftovers


def overlaps(writers: list[WriterMarkers]) -> dict[str, list[tuple[str, int]]]:
    """For each writer, the other writers holding markers on its file groups, and on how many."""
    out: dict[str, list[tuple[str, int]]] = {w.instant.requested_time: [] for w in writers}
    for n, first in enumerate(writers):
        for second in writers[n + 1:]:
            shared = len(first.file_groups & second.file_groups)
            if shared:
                out[first.instant.requested_time].append((second.instant.requested_time, shared))
                out[second.instant.requested_time].append((first.instant.requested_time, shared))
    return out


def _render(writers: list[WriterMarkers], shared: dict[str, list[tuple[str, int]]]) -> RichTable:
    table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name in ("writer (instant)", "requested at (UTC)", "action", "state", "operation", "heartbeat", "markers"):
        table.add_column(name, no_wrap=True, justify="right" if name == "markers" else "left")
    for name in ("kept", "partitions", "file groups"):
        table.add_column(name, no_wrap=True, justify="right" if name != "kept" else "left")
    table.add_column("shares file groups with", no_wrap=True)
    for w in writers:
        inst = w.instant
        beat = w.heartbeat
        others = ", ".join(f"{t} ({n})" for t, n in shared[inst.requested_time])
        table.add_row(
            Text(inst.requested_time, style="bold"),
            readable_time(inst.requested_time),
            inst.action.value,
            inst.state.value,
            w.operation,
            Text(beat.text, style=beat.style) if beat else Text(""),
            f"{len(w.markers):,}",
            w.marker_type,
            f"{len(w.partitions):,}",
            f"{len(w.file_groups):,}",
            Text(others, style="yellow") if others else Text(""),
        )
    return table


def run(args: argparse.Namespace, ui: Ui) -> int:
    with Table.open(args.path, storage_options=storage_options(args), spark=None,
                    options=option_pairs(args.options)) as table:
        writers, leftovers = collect(table)
    shared = overlaps(writers)
    if args.json:
        doc = {
            "writers": [
                {
                    "instant": w.instant.requested_time,
                    "action": w.instant.action.value,
                    "state": w.instant.state.value,
                    "operation": w.operation,
                    "heartbeat": w.heartbeat.status if w.heartbeat else None,
                    "heartbeat_age_ms": w.heartbeat.age_ms if w.heartbeat else None,
                    "marker_type": w.marker_type,
                    "markers": len(w.markers),
                    "partitions": len(w.partitions),
                    "file_groups": len(w.file_groups),
                    "shares_file_groups_with": dict(shared[w.instant.requested_time]),
                    **({"marker_files": [m.name for m in w.markers]} if args.files else {}),
                }
                for w in writers
            ],
            "leftover_marker_folders": leftovers,
        }
        ui.out.print_json(json.dumps(doc))
        return 0
    if not writers:
        ui.out.print("no active writers: no write is pending")
    else:
        alive = sum(1 for w in writers if w.heartbeat and w.heartbeat.status == "alive")
        ui.out.print(f"{len(writers)} pending write(s), {alive} with a live heartbeat")
        ui.out.print(_render(writers, shared))
    if args.files:
        for w in writers:
            ui.out.print(f"\n[bold]{w.instant.requested_time}[/]: {len(w.markers):,} marker(s)")
            for m in w.markers:
                ui.out.print(f"  {m.io_type.value:<6} {escape(m.data_file)}", soft_wrap=True)
    if leftovers:
        ui.out.print(
            f"\nleftover marker folders of {len(leftovers)} instant(s) no longer pending "
            f"(removed by the next write): {', '.join(leftovers)}",
            soft_wrap=True,
        )
    return 0
