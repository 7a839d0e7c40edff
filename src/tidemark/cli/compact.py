"""``tidemark compact``: merge the log files of a merge-on-read table into new base files."""

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
    option_pairs,
    storage_options,
    with_recorded_writer_settings,
    working,
)
from tidemark.services.compaction import delta_commits_since_last_compaction, pending_compactions
from tidemark.table import Table
from tidemark.timeline import Timeline

DESCRIPTION = """\
Compact the merge-on-read table at PATH: for every file group whose latest file
slice has log files, merge the base file and those logs into a new base file.
Snapshot reads then have no logs left to merge, and read-optimized reads see
every change.

The compaction is planned under the table lock and takes only the logs of
deltacommits that completed before the plan (<t>.compaction.requested); it
then runs without the lock and completes as <t>_<c>.commit. Writers may keep
writing meanwhile: a log that completes after the plan stays visible on top of
the compacted base file, and no writer conflicts with the compaction.

A compaction left pending by a process that died is finished first (in
multi-writer mode only once its heartbeat expired). Only the Arrow engine runs
here: the command starts no Spark.

Writers can also compact inline: hoodie.compact.inline=true compacts after a
write once hoodie.compact.inline.max.delta.commits (default 5) deltacommits
piled up since the last compaction.
"""

EPILOG = """\
examples:
  tidemark compact /data/trips
      plan and run a compaction; prints the file groups it compacted
  tidemark compact /data/trips --dry-run
      show how many deltacommits and file groups a compaction would take now
  tidemark compact /data/trips --options hoodie.write.concurrency.mode=optimistic_concurrency_control \\
      hoodie.write.lock.provider=filesystem
      plan under the same lock the writers use

exit codes: 0 compacted (or nothing to compact), 1 failed, 2 bad usage
(no table at PATH, or a copy-on-write table).
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "compact",
        help="merge a merge-on-read table's log files into new base files",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("path", metavar="PATH", help=PATH_HELP)
    add_storage_option_argument(parser)
    parser.add_argument("--dry-run", action="store_true", help="only show what a compaction would take")
    add_options_argument(parser, "for the lock and heartbeats (the writers' concurrency options)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, ui: Ui) -> int:
    from tidemark.errors import ConfigError
    from tidemark.format.properties import MERGE_ON_READ
    from tidemark.fsview import FileSystemView
    from tidemark.services.compaction import plan_operations

    options = with_recorded_writer_settings(args.path, option_pairs(args.options), storage_options(args))
    table = Table.open(args.path, storage_options=storage_options(args), spark=None, options=options)
    if table.config.table_type != MERGE_ON_READ:
        raise ConfigError(f"{table.path} is a {table.config.table_type} table: only MERGE_ON_READ tables compact")
    timeline = Timeline.load(table.storage)
    if args.dry_run:
        ops = plan_operations(FileSystemView(table.storage, timeline))
        pending = pending_compactions(timeline)
        ui.out.print(
            f"{count(delta_commits_since_last_compaction(timeline))} deltacommit(s) since the last compaction; "
            f"{count(len(ops))} file group(s) with logs ({count(sum(len(o.log_files) for o in ops))} log files)"
        )
        if pending:
            ui.out.print(f"pending compaction {pending[0].requested_time} would be finished first")
        return 0
    with working(ui, "compacting"):
        result = table.compact()
    if result is None:
        ui.out.print("nothing to compact: no file slice has log files (or another process runs a compaction)")
        return 0
    ui.out.print(
        f"{ui.check} compaction {result.instant.requested_time} completed at {result.instant.completion_time}: "
        f"{count(len(result.stats))} file group(s), "
        f"{count(sum(s.log_files_compacted for s in result.stats))} log file(s) merged"
    )
    for stat in result.stats:
        ui.out.print(f"  wrote {escape(stat.path)} ({count(stat.num_writes)} records)", soft_wrap=True)
    return 0
