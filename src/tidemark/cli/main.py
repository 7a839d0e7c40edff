"""The ``tidemark`` command: argument parsing, dispatch, and the exit-code contract.

Exit codes: 0 success; 1 the operation failed (or was declined); 2 bad usage (a bad
argument, a path that holds no table, an instant that is not on the timeline).
Expected errors print ``error: <message>`` on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from rich.markup import escape

from tidemark import __version__
from tidemark.cli import (
    clean,
    cluster,
    compact,
    concurrency,
    demo,
    markers,
    options,
    restore,
    rollback,
    savepoint,
    show,
    timeline,
    upgrade,
)
from tidemark.cli.output import CliUsageError, HelpFormatter, Ui, make_ui
from tidemark.errors import (
    ConfigError,
    InstantNotFoundError,
    InvalidInputError,
    TableNotFoundError,
    TidemarkError,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Errors in what the user typed; everything else that goes wrong is a failed operation.
USAGE_ERRORS: tuple[type[TidemarkError], ...] = (
    CliUsageError,
    ConfigError,
    InvalidInputError,
    TableNotFoundError,
    InstantNotFoundError,
)

DESCRIPTION = """\
tidemark creates, writes and reads Apache Hudi (v8) tables, copy-on-write and
merge-on-read, from Python and PySpark, with many concurrent writers
(optimistic concurrency control). This command inspects tables, rolls back and
cleans up failed writes, runs table services (cleaning, clustering,
compaction), takes savepoints and restores to them, and runs the demo. Only
the demo (and `cluster --spark`) starts Spark; the other commands
read the files directly.
"""

EPILOG = """\
quick start:
  tidemark demo --keep          four writers at once on a demo table (Spark),
                                checked with hudi-rs; it prints the table's path
  tidemark timeline PATH        what was written to it, instant by instant
  tidemark show PATH --no-meta  its rows
  tidemark show PATH --as-of T  its rows as of instant T (time travel)
  tidemark markers PATH         who is writing it right now: heartbeats, markers,
                                file groups two writers both hold
  tidemark clean PATH           roll back writes whose writer died (heartbeat
                                expired; a live writer's write is never touched),
                                then delete file versions no reader needs
  tidemark savepoint PATH T     pin the table as of commit T (never cleaned)
  tidemark restore PATH T       roll the table back to savepoint T
  tidemark cluster PATH         rewrite small files into big ones (optionally
                                --sort-by columns), while writers keep writing
  tidemark compact PATH         merge-on-read: merge log files into new base files
  tidemark concurrency PATH     the concurrency mode and lock its writers must use
                                (--set changes them; mismatched writers are refused)
  tidemark upgrade PATH         a version 6 table (Hudi 0.14/0.15) to version 8
  tidemark <command> --help     the manual of a command, with examples

  from Python:
      from tidemark import Table
      table = Table.create("/data/trips", spark=spark, record_key="trip_id",
                           partition_by="city", ordering_field="ts")
      table.upsert(df)
      table.read().show()

exit codes:
  0  success
  1  the operation failed (nothing was changed unless the message says so),
     or a confirmation was declined
  2  bad usage: a wrong argument, no table at PATH, an unknown instant

Colours are off when the output is not a terminal, or with NO_COLOR=1.
"""


class _UsageExit(Exception):
    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class ArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose usage errors come back to :func:`main` instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise _UsageExit(self, message)


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(
        prog="tidemark",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tidemark {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", dest="command")
    for module in (demo, timeline, show, markers, rollback, clean, savepoint, restore, cluster, compact, concurrency,
                   upgrade, options):
        module.add_parser(commands)
    return parser


def _print_error(ui: Ui, message: str) -> None:
    ui.err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (a test's capture): nothing will be flushed to a closed pipe


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: ``sys.argv[1:]``); returns the exit code."""
    ui = make_ui()
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except _UsageExit as exc:
        exc.parser.print_usage(sys.stderr)
        _print_error(ui, exc.message)
        return EXIT_USAGE
    except SystemExit as exc:  # --help and --version
        return exc.code if isinstance(exc.code, int) else EXIT_OK
    if args.command is None:
        parser.print_help(sys.stderr)
        _print_error(ui, "choose a command (listed above)")
        return EXIT_USAGE
    try:
        code: int = args.run(args, ui)
        return code
    except USAGE_ERRORS as exc:
        _print_error(ui, str(exc))
        return EXIT_USAGE
    except TidemarkError as exc:
        _print_error(ui, str(exc))
        return EXIT_FAILED
    except BrokenPipeError:
        # The reader went away (`tidemark show PATH | head`): stop quietly, like other tools.
        _silence_stdout()
        return EXIT_FAILED
    except OSError as exc:
        _print_error(ui, f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
        return EXIT_FAILED
    except KeyboardInterrupt:
        _print_error(ui, "interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
