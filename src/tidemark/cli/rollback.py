"""``tidemark rollback``: undo a pending write, or the latest completed one."""

from __future__ import annotations

import argparse
import sys

from rich.markup import escape

from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    ago,
    count,
    option_pairs,
    readable_time,
    storage_options,
    with_recorded_writer_settings,
)
from tidemark.cli.timeline import describe, liveness, policy_of
from tidemark.errors import TidemarkError, WriterAliveError
from tidemark.recovery.rollback import find_instant, pending_rollback_of
from tidemark.table import Table
from tidemark.timeline import Timeline

DESCRIPTION = """\
Roll back the write INSTANT of the Hudi table at PATH: delete the data files it
wrote and its instant, and record a rollback instant on the timeline.

INSTANT can be
  * a pending write (state requested or inflight): a write that failed, or
    whose process died, and left files behind. Readers never see these files;
    rolling back removes them. A pending write whose heartbeat is alive (with
    the default expiry, or the one given with --options) may still be running:
    it is refused unless --force is given, and then that writer will fail
    when it tries to commit. `tidemark clean` rolls back only writes whose
    heartbeat expired, which is safe while other writers run.
  * the latest completed write (commit or replacecommit). Its rows disappear
    from the table at once: readers see the table as it was before it.
    An older completed write cannot be rolled back while later ones build on
    it; roll those back first, newest first.

Before anything is changed, the instant is shown and you are asked to confirm.
The question is skipped with --yes, or when stdin is not a terminal (scripts).
"""

EPILOG = """\
examples:
  tidemark timeline /data/trips
      find the instant: copy its 17-digit requested time
  tidemark rollback /data/trips 20261122035154682
      show what would be rolled back, ask, then roll it back
  tidemark rollback /data/trips 20261122035154682 --yes
      no question asked (for scripts)
  tidemark rollback /data/trips 20261122035154682 --force
      roll back a pending write even though its writer looks alive (it will fail)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "rollback",
        help="undo a pending write or the latest completed one",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument(
        "instant", metavar="INSTANT",
        help="requested time of the write to roll back: 17 digits, as `tidemark timeline` shows it",
    )
    parser.add_argument(
        "-y", "--yes", action="store_true",
        help="do not ask for confirmation",
    )
    parser.add_argument(
        "--force", action="store_true",
        help="roll back a pending write even if its heartbeat is alive: its writer will then fail",
    )
    add_options_argument(parser, "for the heartbeat expiry (hoodie.client.heartbeat.*)")
    parser.set_defaults(run=run)


def stdin_is_interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def confirm(ui: Ui, question: str) -> bool:
    try:
        answer = ui.out.input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def run(args: argparse.Namespace, ui: Ui) -> int:
    options = with_recorded_writer_settings(args.path, option_pairs(args.options), storage_options(args))
    table = Table.open(args.path, storage_options=storage_options(args), spark=None, options=options)
    timeline = Timeline.load(table.storage)
    wanted = args.instant.strip()
    if pending_rollback_of(table.storage, timeline, wanted):  # a failure interrupted its rollback: finish it
        result = table.rollback(wanted)
        ui.out.print(f"{ui.check} finished the interrupted rollback of {wanted} "
                     f"(rollback {result.rollback_instant.requested_time}, {count(len(result.deleted_files))} "
                     "file(s) deleted)")
        return 0
    instant = find_instant(timeline, wanted)
    if instant.is_completed:
        # Checked here too (the library checks again) so we never ask a question and then refuse.
        later = [
            i for i in timeline.completed_data_instants
            if (i.completion_time or "") > (instant.completion_time or "")
        ]
        if later:
            raise TidemarkError(
                f"instant {instant.requested_time} cannot be rolled back: later commits "
                f"({', '.join(i.requested_time for i in later[:3])}) build on it; "
                "roll those back first, newest first"
            )
    row = describe(table, timeline, instant)
    operation = f" {row.operation}" if row.operation else ""
    state = instant.state.value
    ui.out.print(
        f"{instant.action.value}{escape(operation)} {instant.requested_time} "
        f"({readable_time(instant.requested_time)} UTC), {state}"
    )
    if instant.is_completed:
        ui.out.print(
            f"  wrote {count(row.files or 0)} file(s): +{count(row.inserts or 0)} inserted, "
            f"~{count(row.updates or 0)} updated, -{count(row.deletes or 0)} deleted records; "
            "rolling back makes the table read as it did before it"
        )
    else:
        ui.out.print("  pending: its files are not visible to readers; rolling back deletes them")
        beat = liveness(table.storage, instant, policy_of(table))
        if beat is not None and beat.status == "alive":
            if not args.force:
                # Refused before asking; the library refuses again under the lock.
                raise WriterAliveError(instant.requested_time, beat.age_ms or 0)
            ui.err.print(
                f"[yellow]warning:[/] its heartbeat is alive (last beat {ago(beat.age_ms or 0)} ago):"
                " a writer may still be running it; with --force it is rolled back and that writer will fail",
                soft_wrap=True,
            )
    ask = not args.yes and stdin_is_interactive()
    if ask and not confirm(ui, f"Roll back {instant.requested_time}?"):
        ui.out.print("aborted; nothing was changed")
        return 1
    result = table.rollback(instant.requested_time, force=args.force)
    deleted = result.deleted_files
    ui.out.print(
        f"{ui.check} rolled back {instant.requested_time}: deleted {count(len(deleted))} "
        f"data file(s); rollback instant {result.rollback_instant.requested_time}"
    )
    for path in deleted:
        ui.out.print(f"  deleted {escape(path)}", soft_wrap=True)
    return 0
