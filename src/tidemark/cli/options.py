"""``tidemark options``: every option key tidemark accepts, with its default and meaning."""

from __future__ import annotations

import argparse

from rich import box
from rich.markup import escape
from rich.padding import Padding
from rich.table import Table as RichTable
from rich.text import Text

from tidemark.cli.output import HelpFormatter, Ui
from tidemark.config.options import OPTIONS, Option

DESCRIPTION = """\
List every option key that Table.create and Table.open accept in options={...},
with its default value and what it does. Keys are Hudi's own (hoodie.*), so a
Hudi user finds them under the names they know. An unknown key is an error
(UnknownOptionError names the closest known key).

Scope "table": the value is fixed when the table is created and stored in
.hoodie/hoodie.properties. Scope "write": the value applies to the writes of
the Table object it is passed to.

Give WORDS to list only the options whose key or description contains all of
them (case-insensitive).
"""

EPILOG = """\
examples:
  tidemark options
      every option
  tidemark options parquet
      the options about parquet files
  tidemark options small file
      options whose key or description mentions both "small" and "file"

  in Python:
      Table.create(path, spark=spark, record_key="id",
                   options={"hoodie.parquet.compression.codec": "zstd"})
"""


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "options",
        help="list every option key with its default and meaning",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "words", metavar="WORDS", nargs="*",
        help="only list options whose key or description contains all these words",
    )
    parser.set_defaults(run=run)


TABLE_WIDTH = 120  # narrower terminals get the list layout


def _default(option: Option) -> Text:
    return Text("(none)", style="dim") if option.default is None else Text(option.default)


def _about(option: Option) -> str:
    """The option's description, and the older keys Hudi (and tidemark) also take for it."""
    also = f" Also accepted as {', '.join(option.alternatives)}." if option.alternatives else ""
    return option.doc + also


def run(args: argparse.Namespace, ui: Ui) -> int:
    words = [w.lower() for w in args.words]
    chosen = [o for o in OPTIONS if all(w in f"{o.key} {_about(o)}".lower() for w in words)]
    if not chosen:
        wanted = " ".join(args.words)
        ui.out.print(f"no option matches {escape(repr(wanted))}; `tidemark options` lists them all")
        return 1
    if ui.out.width >= TABLE_WIDTH:
        grid = RichTable(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
        grid.add_column("key", no_wrap=True, style="bold")
        grid.add_column("default", no_wrap=True)
        grid.add_column("scope", no_wrap=True)
        grid.add_column("description", ratio=1)
        for option in chosen:
            grid.add_row(Text(option.key), _default(option), option.scope, Text(_about(option)))
        ui.out.print(grid)
    else:  # narrow terminal: one short block per option
        for option in chosen:
            ui.out.print(Text(option.key, style="bold"))
            about = Text.assemble("    default: ", _default(option), f"   scope: {option.scope}")
            ui.out.print(about)
            ui.out.print(Padding(Text(_about(option)), (0, 0, 0, 4), expand=False))
    ui.out.print(f"{len(chosen)} of {len(OPTIONS)} options")
    return 0
