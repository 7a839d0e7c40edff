"""``tidemark demo``: runs the demo of the source checkout (``examples/demo.py``).

The demo is an example of using tidemark, not part of the package: it lives in the
repository's ``examples/`` folder and needs the ``spark`` and ``test`` extras. From a
checkout (an editable install) this command loads it and takes its arguments; in an
installed package, where there is no ``examples/`` folder, it says where to get it.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from tidemark.cli.output import CliUsageError, HelpFormatter, Ui

# src/tidemark/cli/demo.py -> the repository root, where examples/ is in a checkout.
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
MODULE_NAME = "tidemark_example_demo"


def load_example(examples: Path | None = None) -> ModuleType | None:
    """``examples/demo.py`` (of ``examples``, by default the checkout's) as a module, or None when
    there is none (an installed package)."""
    if MODULE_NAME in sys.modules:
        return sys.modules[MODULE_NAME]
    examples = examples or EXAMPLES
    script = examples / "demo.py"
    if not script.is_file():
        return None
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))  # the demo's stories are its sibling modules
    spec = importlib.util.spec_from_file_location(MODULE_NAME, script)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[MODULE_NAME]
        raise
    return module


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    example = load_example()
    if example is None:
        parser = commands.add_parser(
            "demo",
            help="the demo of the source repository (not in an installed package)",
            description="Run the demo: four concurrent writers on one table with Spark, verified with "
            "hudi-rs. It is examples/demo.py in tidemark's source repository, not part of the "
            "installed package.",
            epilog="examples:\n  tidemark demo      (from a source checkout)\n"
            "  scripts/demo.sh    sets up a checkout and runs it",
            formatter_class=HelpFormatter,
            prefix_chars="+",  # takes every argument as it is (--help too), to answer each the same way
            add_help=False,
        )
        parser.add_argument("args", nargs="*", help=argparse.SUPPRESS)
        parser.set_defaults(run=_missing)
        return
    parser = commands.add_parser(
        "demo",
        help=example.HELP,
        description=example.DESCRIPTION,
        epilog=example.EPILOG,
        formatter_class=HelpFormatter,
    )
    example.add_arguments(parser)
    parser.set_defaults(run=example.run)


def _missing(args: argparse.Namespace, ui: Ui) -> NoReturn:
    raise CliUsageError(
        "the demo is not part of the installed package: it is examples/demo.py in tidemark's "
        "source repository; from a checkout run scripts/demo.sh (or pip install -e '.[spark,test]' "
        "and then tidemark demo)"
    )
