"""``tidemark upgrade``: upgrade a version 6 table (Hudi 0.14/0.15) to version 8 in place."""

from __future__ import annotations

import argparse

from tidemark.cli.output import (
    PATH_HELP,
    HelpFormatter,
    Ui,
    add_options_argument,
    count,
    option_pairs,
    with_recorded_writer_settings,
    working,
)
from tidemark.table import Table

DESCRIPTION = """\
Upgrade the Hudi table at PATH from table version 6 (written by Hudi 0.14 or
0.15) to version 8 (Hudi 1.x), in place, the way Hudi 1.x's upgrade does it:
the timeline moves from .hoodie/ to .hoodie/timeline/ (layout 2), each
completed instant named <t>_<completion> with its file's modification time as
the completion time, commit metadata rewritten from JSON to Avro; the archived
timeline (.hoodie/archived/) goes into the LSM history
(.hoodie/timeline/history/); hoodie.properties gets table version 8, timeline
layout 2, the timeline path, the initial version (6), the record merge mode
and strategy chosen from the payload class, and the key generator type. Data
files are not touched.

tidemark reads a version 6 table as it is but writes only version 8 tables:
every write to a version 6 table is refused until it is upgraded. After the
upgrade, Hudi 1.x and hudi-rs read and write the table; Hudi 0.x no longer
can, so upgrade a lake's writers together.

The upgrade runs under the table lock. It is safe to interrupt: until
hoodie.properties is replaced (one atomic step) readers keep reading the
version 6 timeline; run the command again to finish. A table with pending
instants (a Hudi 0.x write still running, or failed) is refused: finish or
roll it back with Hudi 0.x first.
"""

EPILOG = """\
examples:
  tidemark upgrade /data/trips
      upgrade the table; prints how many instants moved
  tidemark upgrade /data/trips      (again)
      nothing to do on a version 8 table; finishes an interrupted upgrade

exit codes: 0 upgraded (or already version 8), 1 refused or failed (nothing
was changed unless the message says so), 2 bad usage (no table at PATH).
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "upgrade",
        help="upgrade a version 6 table (Hudi 0.14/0.15) to version 8 in place",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_options_argument(parser, "for the lock (the writers' concurrency options)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ui: Ui) -> int:
    options = with_recorded_writer_settings(args.path, option_pairs(args.options))
    table = Table.open(args.path, spark=None, options=options)
    with working(ui, "upgrading"):
        result = table.upgrade()
    if not result.upgraded:
        done = "; finished an interrupted upgrade" if result.resumed else ""
        ui.out.print(f"{ui.check} {table.path} is already table version {result.to_version}{done}")
        return 0
    resumed = " (an interrupted upgrade, finished)" if result.resumed else ""
    ui.out.print(
        f"{ui.check} upgraded {table.path} from table version {result.from_version} to {result.to_version}"
        f"{resumed}: {count(result.instants)} instant(s) moved to .hoodie/timeline/, "
        f"{count(result.archived)} archived instant(s) to the history"
    )
    return 0
