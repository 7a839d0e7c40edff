"""Shared pieces of the CLI: consoles, the usage-error type, time and number formatting."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement

from tidemark.errors import TidemarkError
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time

# Output that is not going to a terminal (a pipe, a file, a test's capture) is not wrapped
# at rich's default 80 columns: a wide table is easier to read and grep than a folded one.
_PIPE_WIDTH = 320


PATH_HELP = ("folder of the table (the one holding .hoodie/), or its URI: s3://bucket/prefix, gs://..., "
             "az://..., abfs://..., file://...")


class CliUsageError(TidemarkError):
    """The command line itself is wrong (a bad value for an option); exit code 2."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-formatted description and epilog; wraps argument help to the terminal."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)

    def _format_action(self, action: argparse.Action) -> str:
        # List the subcommands themselves, without argparse's "{a,b,c}" / metavar line above them.
        if isinstance(action, argparse._SubParsersAction):
            return "".join(self._format_action(sub) for sub in action._get_subactions())
        return super()._format_action(action)


@dataclass
class Ui:
    """Where a command writes: ``out`` for results, ``err`` for errors and warnings."""

    out: Console
    err: Console

    @property
    def check(self) -> str:
        """A check mark, or a plain one if the output encoding cannot show it."""
        return "✓" if (self.out.encoding or "").lower().startswith("utf") else "+"


def make_console(stream: Any) -> Console:
    """A console on ``stream`` (looked up now, so pytest's capture is honoured)."""
    is_tty = bool(getattr(stream, "isatty", lambda: False)())
    width = None if is_tty or os.environ.get("COLUMNS") else _PIPE_WIDTH
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def fits(console: Console, renderable: RenderableType) -> bool:
    """Whether ``renderable`` can be drawn at its natural width on ``console``."""
    unbounded = console.options.update(max_width=1_000_000)
    return Measurement.get(console, unbounded, renderable).maximum <= console.width


def make_ui() -> Ui:
    return Ui(out=make_console(sys.stdout), err=make_console(sys.stderr))


def readable_time(instant_time: str | None, *, date: bool = True) -> str:
    """``20261122035133493`` -> ``2026-11-22 03:51:33.493`` (UTC); ``""`` for None."""
    if not instant_time:
        return ""
    try:
        moment = parse_instant_time(instant_time)
    except ValueError:
        return instant_time
    text = moment.strftime("%Y-%m-%d %H:%M:%S" if date else "%H:%M:%S")
    return f"{text}.{moment.microsecond // 1000:03d}"


def instant_time_arg(value: str, what: str) -> str:
    """An instant time from the command line: 17 (or 14) digits, or an ISO date-time.

    ``2026-11-22T03:51:33``, ``2026-11-22 03:51:33.493`` and ``2026-11-22`` are read as
    UTC unless they carry an offset; the result is the 17-digit form.
    """
    text = value.strip()
    if text.isdigit():
        try:
            parse_instant_time(text)
        except ValueError as exc:
            raise CliUsageError(f"{what}: {exc}") from None
        return text
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CliUsageError(
            f"{what}: {value!r} is neither an instant time (17 digits, yyyyMMddHHmmssSSS) "
            "nor an ISO date-time such as 2026-11-22T03:51:33"
        ) from None
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return format_instant_time(moment)


def option_pairs(values: list[str] | None, flag: str = "--options") -> dict[str, str]:
    """``["k=v", ...]`` from the command line as a dict; a pair without ``=`` is a usage error.

    Keys are checked later, by Table.open (an unknown key names the closest known one).
    """
    out: dict[str, str] = {}
    for pair in values or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliUsageError(
                f"{flag}: expected KEY=VALUE, got {pair!r} "
                "(e.g. hoodie.client.heartbeat.interval_in_ms=2000)"
            )
        out[key.strip()] = value.strip()
    return out


def with_recorded_writer_settings(
    path: str, options: dict[str, str], storage_options: dict[str, str] | None = None
) -> dict[str, str]:
    """The concurrency mode and lock the table records for its writers, overridden by ``options``
    (settings that then differ from the recorded ones are refused when the command writes).
    So a command that writes (clean, cluster, ...) takes the same lock as the table's writers
    without being told."""
    from tidemark.concurrency.writer_settings import table_settings
    from tidemark.storage.location import open_storage

    try:
        recorded = table_settings(open_storage(path, storage_options))
    except (OSError, TidemarkError):  # no table there: Table.open says so
        return options
    return {**recorded.options(), **options} if recorded is not None else options


def add_storage_option_argument(parser: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): the object store's options, as hudi-rs takes them."""
    parser.add_argument(
        "--storage-option", dest="storage_option", metavar="KEY=VALUE", action="append", default=[],
        help="an object-store option of a table at a URI (repeatable), e.g. aws_endpoint_url=http://host:9000, "
        "aws_region=us-east-1; without them the standard environment variables (AWS_*, ...) apply",
    )


def storage_options(args: argparse.Namespace) -> dict[str, str]:
    """The ``--storage-option`` pairs of a command line."""
    return option_pairs(getattr(args, "storage_option", None), flag="--storage-option")


def add_options_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--options", metavar="KEY=VALUE", nargs="+", action="extend", default=[],
        help=f"options as Table.open takes them, {what}; `tidemark options heartbeat` lists "
        "the heartbeat keys. Give them last, after PATH",
    )


def ago(ms: float) -> str:
    """A duration in milliseconds as people say it: ``0.4 s``, ``12 s``, ``3 min``, ``2 h``, ``5 d``."""
    secs = max(ms, 0) / 1000
    if secs < 10:
        return f"{secs:.1f} s"
    if secs < 120:
        return f"{secs:.0f} s"
    if secs < 2 * 3600:
        return f"{secs / 60:.0f} min"
    if secs < 2 * 86400:
        return f"{secs / 3600:.0f} h"
    return f"{secs / 86400:.0f} d"


def count(value: int) -> str:
    return f"{value:,}"


def seconds(value: float) -> str:
    return f"{value:.1f}s"


@contextlib.contextmanager
def working(ui: Ui, what: str) -> Iterator[None]:
    """A spinner with the elapsed time while a long service runs, on a terminal only
    (redirected output stays exactly the results)."""
    if not ui.err.is_terminal:
        yield
        return
    with ui.err.status(f"{what} ...", spinner="dots"):
        yield
