"""``tidemark timeline``: the instants of a table, newest last."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from rich import box
from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    ago,
    count,
    fits,
    option_pairs,
    readable_time,
    storage_options,
)
from tidemark.concurrency.heartbeat import HeartbeatPolicy, last_heartbeat_ms, now_ms
from tidemark.format.clustering_plan import CLUSTER_OPERATION
from tidemark.format.commit_metadata import CommitMetadata, read_avro
from tidemark.format.names import TIMELINE_DIR
from tidemark.storage import Storage
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
  action         commit, replacecommit (insert_overwrite or clustering),
                 clustering (a clustering still pending), rollback, clean, ...
  state          requested / inflight (pending: planned or being written) or
                 completed (published and visible to readers)
  operation      the write operation from the commit metadata (UPSERT, INSERT,
                 BULK_INSERT, DELETE, INSERT_OVERWRITE); for a rollback, the
                 instant it rolled back
  inserts, updates, deletes
                 record counts of the write
  files          data files written (for a rollback: files deleted); "+N
                 replaced" counts file groups an insert_overwrite replaced
  service        for a table-service instant (shown when there is one):
                 clustering, clean, rollback, savepoint, restore, compaction,
                 ...; empty for ingestion writes. A clustering is a
                 replacecommit with operation CLUSTER; an insert_overwrite
                 replacecommit is a write. "+N replaced" in files counts the
                 file groups a clustering or insert_overwrite replaced.
  heartbeat      for a pending write (shown when there is one), what its
                 writer's heartbeat file (.hoodie/.heartbeat/<instant>) says:
                   alive (beat 0.4 s ago)  the writer is running; nobody may
                                           roll the write back
                   expired (12 s ago)      no beat for longer than the expiry:
                                           the writer is dead, and the next
                                           write or `tidemark clean` rolls it
                                           back
                   none                    no heartbeat file: a single-writer
                                           write, or one whose writer never
                                           started one (counts as dead once
                                           requested longer ago than the expiry)
                 The expiry is hoodie.client.heartbeat.interval_in_ms x
                 hoodie.client.heartbeat.tolerable.misses (default 60000 x 2);
                 pass the writers' values with --options if they differ.
  concurrent with
                 for a completed write (shown when any overlap), the other
                 completed writes that ran at the same time: their
                 [requested, completed] intervals overlap its own. Shows the
                 first of them and "+N" for the others. Concurrent writes
                 are what optimistic concurrency control checks for conflicts.

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
  tidemark timeline /data/trips --all | grep clustering
      every clustering, pending or completed
  tidemark timeline /data/trips --options hoodie.client.heartbeat.interval_in_ms=2000
      judge heartbeats with the writers' interval of 2 s (expired after 4 s)
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
    add_storage_option_argument(parser)
    parser.add_argument(
        "--all", action="store_true",
        help=f"show every instant, not just the latest {DEFAULT_SHOWN} (and the pending ones)",
    )
    add_options_argument(parser, "for the heartbeat expiry (hoodie.client.heartbeat.*)")
    parser.set_defaults(run=run)


# Actions whose pending instants belong to a writer with a heartbeat (as in the commit protocol).
_HEARTBEAT_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)


@dataclass(frozen=True)
class Liveness:
    """What the heartbeat of a pending write says about its writer."""

    status: str  # "alive", "expired" or "none" (no heartbeat file)
    age_ms: int | None = None  # since the last beat

    @property
    def text(self) -> str:
        if self.age_ms is None:
            return self.status
        if self.status == "alive":
            return f"alive (beat {ago(self.age_ms)} ago)"
        return f"{self.status} ({ago(self.age_ms)} ago)"

    @property
    def style(self) -> str:
        return {"alive": "green", "expired": "red"}.get(self.status, "dim")


def liveness(
    storage: Storage,
    instant: Instant,
    policy: HeartbeatPolicy,
    now: int | None = None,
    *,
    actions: Sequence[Action] = _HEARTBEAT_ACTIONS,
) -> Liveness | None:
    """The heartbeat state of a pending write (None for other instants).

    ``actions``: whose pending instants have a heartbeat (writes; the timeline adds clustering).

    Alive and expired are decided as HeartbeatPolicy.is_expired decides them.
    """
    if instant.is_completed or instant.action not in actions:
        return None
    beat = last_heartbeat_ms(storage, instant.requested_time)
    if beat is None:
        return Liveness("none")
    age = (now if now is not None else now_ms()) - beat
    return Liveness("expired" if age > policy.expiry_ms else "alive", age)


def concurrent_instants(instants: Sequence[Instant]) -> dict[str, list[str]]:
    """For each completed data instant, the other completed data instants that ran with it.

    Two writes ran concurrently when their [requested, completion] intervals
    overlap. Lists are in requested-time order; only the timeline is read.
    """
    done = sorted(
        (i for i in instants if i.is_completed and i.action.writes_data and i.completion_time),
        key=lambda i: i.requested_time,
    )
    out: dict[str, list[str]] = {i.requested_time: [] for i in done}
    for n, first in enumerate(done):
        for later in done[n + 1:]:  # requested at or after `first`: overlap iff it began before `first` ended
            if later.requested_time >= (first.completion_time or ""):
                break
            out[first.requested_time].append(later.requested_time)
            out[later.requested_time].append(first.requested_time)
    return out


def policy_of(table: Table) -> HeartbeatPolicy:
    config = table.write_config
    return HeartbeatPolicy(config.heartbeat_interval_ms, config.heartbeat_tolerable_misses)


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
    heartbeat: Liveness | None = None  # pending writes only
    concurrent: tuple[str, ...] = ()  # completed data instants that overlapped this one
    label: str = ""  # who wrote it, when the caller knows (the demo's writer names)
    service: str = ""  # the table service this instant belongs to ("" for ingestion writes)


# Actions that are table services whatever their metadata says; a replacecommit is one only when
# its operation is CLUSTER (an insert_overwrite replacecommit is a write).
SERVICE_ACTIONS = {
    Action.CLUSTERING: "clustering",
    Action.CLEAN: "clean",
    Action.ROLLBACK: "rollback",
    Action.SAVEPOINT: "savepoint",
    Action.RESTORE: "restore",
    Action.COMPACTION: "compaction",
    Action.LOG_COMPACTION: "log compaction",
    Action.INDEXING: "indexing",
}


def service_of(instant: Instant, operation: str) -> str:
    """The table service an instant belongs to, or "" for an ingestion write."""
    if instant.action is Action.REPLACE_COMMIT and operation == CLUSTER_OPERATION:
        return "clustering"
    return SERVICE_ACTIONS.get(instant.action, "")


def _timeline_file(table: Table, name: str) -> bytes:
    return table.storage.read_bytes(f"{TIMELINE_DIR}/{name}")


def describe(table: Table, timeline: Timeline, instant: Instant) -> InstantRow:
    """The row for ``instant``; metadata that cannot be read leaves its cells empty."""
    row = _describe(table, timeline, instant)
    return replace(row, service=service_of(instant, row.operation))


def _describe(table: Table, timeline: Timeline, instant: Instant) -> InstantRow:
    try:
        if instant.action is Action.CLUSTERING:  # pending: its plan says what it will replace
            clustering = timeline.clustering_plan(instant)
            if clustering is None:
                return InstantRow(instant, CLUSTER_OPERATION)
            return InstantRow(instant, CLUSTER_OPERATION, replaced=len(clustering.file_groups()))
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
_SERVICE_STYLE = "magenta"


def _num(value: int | None) -> str:
    return "" if value is None else count(value)


def _concurrent(row: InstantRow) -> str:
    if not row.concurrent:
        return ""
    more = len(row.concurrent) - 1
    return row.concurrent[0] + (f" +{more}" if more else "")


def render(rows: list[InstantRow]) -> RichTable:
    """The timeline as one table row per instant (about 170 columns, more with the optional ones).

    The writer, heartbeat and concurrent-with columns only appear when a row has a value.
    """
    labels = any(row.label for row in rows)
    heartbeats = any(row.heartbeat for row in rows)
    overlaps = any(row.concurrent for row in rows)
    services = any(row.service for row in rows)
    table = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("requested", no_wrap=True, style="bold")
    table.add_column("requested at (UTC)", no_wrap=True)
    table.add_column("completed", no_wrap=True)
    table.add_column("completed at", no_wrap=True)
    if labels:
        table.add_column("writer", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("operation", no_wrap=True)
    if services:
        table.add_column("service", no_wrap=True)
    for name in ("inserts", "updates", "deletes", "files"):
        table.add_column(name, justify="right", no_wrap=True)
    if heartbeats:
        table.add_column("heartbeat", no_wrap=True)
    if overlaps:
        table.add_column("concurrent with", no_wrap=True)
    for row in rows:
        inst = row.instant
        cells: list[RenderableType] = [
            inst.requested_time,
            readable_time(inst.requested_time),
            inst.completion_time or "",
            _completed_at(inst),
        ]
        if labels:
            cells.append(Text(row.label))
        cells += [
            inst.action.value,
            Text(inst.state.value, style=_STATE_STYLE[inst.state]),
            Text(row.operation),
            *([Text(row.service, style=_SERVICE_STYLE)] if services else []),
            _num(row.inserts),
            _num(row.updates),
            _num(row.deletes),
            _files(row),
        ]
        if heartbeats:
            beat = row.heartbeat
            cells.append(Text(beat.text, style=beat.style) if beat else Text(""))
        if overlaps:
            cells.append(_concurrent(row))
        table.add_row(*cells)
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
            *(("  [", (row.service, _SERVICE_STYLE), "]") if row.service else ()),
            *(("  by ", row.label) if row.label else ()),
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
        elif row.replaced:
            lines.append(Text(f"  plans to replace {row.replaced} file group(s)"))
        if row.heartbeat:
            lines.append(Text.assemble("  heartbeat: ", (row.heartbeat.text, row.heartbeat.style)))
        if row.concurrent:
            shown, more = row.concurrent[:3], len(row.concurrent) - 3
            tail = f" and {more} more" if more > 0 else ""
            lines.append(Text(f"  concurrent with {', '.join(shown)}{tail}"))
        parts.extend(lines)
    return Group(*parts)


def _pending_summary(rows: Sequence[InstantRow], pending: int) -> str:
    states = [row.heartbeat.status for row in rows if row.heartbeat]
    words = {
        "alive": "alive (being written)",
        "expired": "expired (failed: `tidemark clean` or the next write rolls it back)",
        "none": "without a heartbeat",
    }
    detail = [f"{states.count(s)} {text}" for s, text in words.items() if states.count(s)]
    return f"; {pending} pending (requested/inflight)" + (": " + ", ".join(detail) if detail else "")


def print_timeline(
    ui: Ui,
    table: Table,
    *,
    show_all: bool = True,
    title: str | None = None,
    policy: HeartbeatPolicy | None = None,
    labels: Mapping[str, str] | None = None,
) -> int:
    """Print the table's timeline; returns how many instants it has.

    ``policy`` judges heartbeats (default: from the table's options); ``labels`` names
    the writer of instants by requested time (a "writer" column).
    """
    timeline = Timeline.load(table.storage)
    instants = timeline.instants
    shown = select(instants, show_all)
    if not instants:
        ui.out.print(f"{escape(table.path)}: the timeline is empty (no writes yet)")
        return 0
    policy = policy or policy_of(table)
    overlaps = concurrent_instants(instants)
    now = now_ms()
    rows = [
        replace(
            describe(table, timeline, i),
            heartbeat=liveness(table.storage, i, policy, now, actions=(*_HEARTBEAT_ACTIONS, Action.CLUSTERING)),
            concurrent=tuple(overlaps.get(i.requested_time, ())),
            label=(labels or {}).get(i.requested_time, ""),
        )
        for i in shown
    ]
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
        summary += _pending_summary(rows, pending)
    ui.out.print(summary)
    return len(instants)


def run(args: argparse.Namespace, ui: Ui) -> int:
    table = Table.open(args.path, storage_options=storage_options(args), spark=None, options=option_pairs(args.options))
    title = f"timeline of {table.config.name} at {table.path}"
    print_timeline(ui, table, show_all=args.all, title=title)
    return 0
