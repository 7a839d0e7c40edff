"""``tidemark concurrency``: show or change the concurrency mode and lock a table's writers must use."""

from __future__ import annotations

import argparse

from rich.markup import escape

from tidemark.cli.output import (
    PATH_HELP,
    CliUsageError,
    HelpFormatter,
    Ui,
    add_options_argument,
    add_storage_option_argument,
    option_pairs,
    storage_options,
)
from tidemark.table import Table

DESCRIPTION = """\
Show the concurrency mode and lock that the table at PATH records for its
writers (in .hoodie/hoodie.properties, keys tidemark.write.*), or change them
with --set.

Locks only exclude writers that use the same lock. So once a table records its
settings, every write and table service whose options disagree is refused
before it writes anything (WriterSettingsError): another concurrency mode,
another lock provider, another lock file or ZooKeeper lock node, or no
concurrency options at all. Reads never need them.

A table records them when it is created with multi-writer options, or when
the first optimistic / non-blocking writer writes to it. A table that records
none is a single-writer table: plain writers work as before.

--set records the settings given with --options instead
(hoodie.write.concurrency.mode and hoodie.write.lock.*; single_writer removes
the recorded settings). It holds the old settings' lock and is refused while
any pending write is alive: stop every writer first. The commands that write
(clean, cluster, compact, rollback, savepoint, restore) use the recorded
settings unless their --options say otherwise.

The in_process lock provider excludes the threads of one process only: a
table locked with it cannot be written by a second process at the same time
(InProcessLockError). Use filesystem (one machine) or zookeeper for writers
in several processes.
"""

EPILOG = """\
examples:
  tidemark concurrency /data/trips
      the recorded settings, as options for Table.open
  tidemark concurrency /data/trips --set --options \\
        hoodie.write.concurrency.mode=optimistic_concurrency_control \\
        hoodie.write.lock.provider=zookeeper hoodie.write.lock.zookeeper.url=zk1
      from now on writers must lock with ZooKeeper at zk1
  tidemark concurrency /data/trips --set --options hoodie.write.concurrency.mode=single_writer
      back to a single writer: the recorded settings are removed
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "concurrency",
        help="show or change the concurrency mode and lock the table's writers must use",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument(
        "--set", action="store_true", dest="set_settings",
        help="record the mode and lock given with --options (stop every writer first)",
    )
    add_options_argument(parser, "with --set: the new mode and lock")
    parser.set_defaults(run=run)


def _print(ui: Ui, options: dict[str, str]) -> None:
    for key, value in options.items():
        ui.out.print(f"  {escape(key)}={escape(value)}", soft_wrap=True)


def run(args: argparse.Namespace, ui: Ui) -> int:
    given = option_pairs(args.options)
    if given and not args.set_settings:
        raise CliUsageError("--options without --set: add --set to record them as the table's settings")
    if args.set_settings and "hoodie.write.concurrency.mode" not in given:
        raise CliUsageError("--set needs --options hoodie.write.concurrency.mode=... (and its lock options)")
    with Table.open(args.path, storage_options=storage_options(args), spark=None) as table:
        if args.set_settings:
            new = table.set_concurrency(given)
            if not new.multi_writer:
                ui.out.print(f"{ui.check} the table records no writer settings now: a single writer at a time")
                return 0
            ui.out.print(f"{ui.check} the table's writers must now use:")
            _print(ui, new.options())
            return 0
        recorded = table.recorded_writer_settings()
        if recorded is None:
            ui.out.print("no writer settings recorded: a single-writer table (the first multi-writer write "
                         "records its settings)")
            return 0
        ui.out.print("the table's writers must use:")
        _print(ui, recorded.options())
    return 0
