"""``tidemark restore``: roll the table back to a savepoint."""

from __future__ import annotations

import argparse

from tidemark.cli import rollback as rollback_cmd
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
    working,
)
from tidemark.errors import NotSavepointedError
from tidemark.table import Table
from tidemark.timeline import Timeline

DESCRIPTION = """\
Restore the Hudi table at PATH to its savepoint INSTANT: every write after
INSTANT is rolled back, newest first (its data files deleted, a rollback
instant for each), and a restore instant (<r>_<c>.restore) records the whole
operation. Afterwards the table reads exactly as it did at INSTANT.

INSTANT must have a savepoint (`tidemark savepoint PATH INSTANT`; `tidemark
savepoint PATH` lists them); otherwise nothing is changed and the exit code is
2. Restore also refuses when instants after INSTANT were already archived
(only possible with hoodie.archive.beyond.savepoint=true).

Stop the writers first: pending writes after INSTANT are rolled back too, and
their writers then fail to commit. The restore runs under the table lock.
You are asked to confirm unless --yes is given or stdin is not a terminal.
"""

EPILOG = """\
examples:
  tidemark savepoint /data/trips
      list the savepoints to restore to
  tidemark restore /data/trips 20261122035154682
      show what would be rolled back, ask, then restore
  tidemark restore /data/trips 20261122035154682 --yes
      no question asked (for scripts)
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "restore",
        help="roll the table back to a savepoint",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument("instant", metavar="INSTANT", help="the savepointed instant (17 digits)")
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    add_options_argument(parser, "e.g. the writers' lock settings")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ui: Ui) -> int:
    instant = instant_time_arg(args.instant, "INSTANT")
    options = with_recorded_writer_settings(args.path, option_pairs(args.options), storage_options(args))
    with Table.open(args.path, storage_options=storage_options(args), spark=None, options=options) as table:
        if not any(sp.requested_time == instant for sp in table.savepoints()):
            raise NotSavepointedError(instant)
        timeline = Timeline.load(table.storage)
        later = [i for i in timeline if i.action.writes_data and i.requested_time > instant]
        ui.out.print(
            f"restore to savepoint {instant} ({readable_time(instant)} UTC): "
            f"{count(len(later))} later write(s) will be rolled back"
        )
        for inst in later[:10]:
            ui.out.print(f"  {inst.action.value} {inst.requested_time} ({inst.state.value})")
        if len(later) > 10:
            ui.out.print(f"  ... and {count(len(later) - 10)} more")
        ask = not args.yes and rollback_cmd.stdin_is_interactive()
        if ask and not rollback_cmd.confirm(ui, f"Restore to {instant}?"):
            ui.out.print("aborted; nothing was changed")
            return 1
        with working(ui, f"restoring to {instant}"):
            result = table.restore(instant)
        deleted = sum(len(r.deleted_files) for r in result.rollbacks)
        ui.out.print(
            f"{ui.check} restored to {instant}: rolled back {count(len(result.rollbacks))} write(s), "
            f"deleted {count(deleted)} data file(s); restore instant {result.restore_instant.requested_time}"
        )
    return 0
