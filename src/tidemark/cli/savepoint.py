"""``tidemark savepoint``: pin the table as of a commit, list savepoints, or remove one."""

from __future__ import annotations

import argparse

from rich.markup import escape

from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    count,
    instant_time_arg,
    option_pairs,
    readable_time,
    storage_options,
    with_recorded_writer_settings,
)
from tidemark.table import Table

DESCRIPTION = """\
Savepoint the completed commit INSTANT of the Hudi table at PATH: the base
files a reader sees as of INSTANT are listed in a savepoint instant
(<INSTANT>_<c>.savepoint on the timeline), and cleaning never deletes them. Time
travel to INSTANT (`tidemark show PATH --as-of INSTANT`) keeps working however
many commits follow, and `tidemark restore PATH INSTANT` can roll the table
back to it.

Without INSTANT, list the table's savepoints. With --delete, remove the
savepoint of INSTANT: its files become cleanable again.

INSTANT must be a completed commit on the active timeline, not older than what
cleaning already let go (the earliest retained instant of the last clean). The
savepoint is taken under the table lock (pass the writers' lock settings with
--options); writers keep writing meanwhile.
"""

EPILOG = """\
examples:
  tidemark savepoint /data/trips 20261122035154682
      pin the table as of that commit
  tidemark savepoint /data/trips 20261122035154682 --comment "before the backfill"
      the same, with a note kept in the savepoint
  tidemark savepoint /data/trips
      list the savepoints
  tidemark savepoint /data/trips 20261122035154682 --delete
      remove the savepoint; its files may be cleaned from now on
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "savepoint",
        help="pin the table as of a commit (cleaning keeps its files), or list savepoints",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument(
        "instant", metavar="INSTANT", nargs="?",
        help="requested time of a completed commit (17 digits, as `tidemark timeline` shows it); "
        "leave out to list the savepoints",
    )
    parser.add_argument("--comment", default="", help="a note stored in the savepoint")
    parser.add_argument("--delete", action="store_true", help="remove the savepoint of INSTANT")
    add_options_argument(parser, "e.g. the writers' lock settings")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ui: Ui) -> int:
    options = with_recorded_writer_settings(args.path, option_pairs(args.options), storage_options(args))
    with Table.open(args.path, storage_options=storage_options(args), spark=None, options=options) as table:
        if args.instant is None:
            points = table.savepoints()
            if not points:
                ui.out.print("no savepoints")
            for sp in points:
                ui.out.print(f"savepoint {sp.requested_time} ({readable_time(sp.requested_time)} UTC)")
            return 0
        instant = instant_time_arg(args.instant, "INSTANT")
        if args.delete:
            table.delete_savepoint(instant)
            ui.out.print(f"{ui.check} removed the savepoint of {instant}; its files may be cleaned from now on")
            return 0
        result = table.savepoint(instant, comment=args.comment)
        ui.out.print(
            f"{ui.check} savepoint {result.savepoint.requested_time} "
            f"({readable_time(result.savepoint.requested_time)} UTC): {count(len(result.files))} "
            "base file(s) pinned; cleaning will keep them",
        )
        for path in result.files[:10]:
            ui.out.print(f"  {escape(path)}", soft_wrap=True)
        if len(result.files) > 10:
            ui.out.print(f"  ... and {count(len(result.files) - 10)} more")
    return 0
