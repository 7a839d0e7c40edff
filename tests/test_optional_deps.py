"""``pip install tidemark`` without the ``spark`` extra: the Arrow engine and the CLI work with
neither PySpark nor pandas importable, and asking for Spark says which extra to install.

Each check runs in a fresh interpreter whose import system refuses ``pyspark``, ``py4j`` and
``pandas`` (a meta-path finder installed before anything else is imported), as if they were
not installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

BLOCKED = ("pyspark", "py4j", "pandas")

PRELUDE = f"""
import sys

class _NotInstalled:
    '''Finds the blocked top-level packages only to say they are not there.'''

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
        return None

sys.meta_path.insert(0, _NotInstalled())
for _name in list(sys.modules):
    if _name.split(".")[0] in {BLOCKED!r}:
        del sys.modules[_name]
"""


def run_without_spark(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = PRELUDE + textwrap.dedent(body)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"),
                                                          os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_the_blocker_blocks() -> None:
    done = run_without_spark("""
        for name in ("pyspark", "pyspark.sql", "pandas", "py4j"):
            try:
                __import__(name)
            except ImportError:
                pass
            else:
                raise SystemExit(f"{name} was imported")
        print("ok")
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_arrow_engine_and_cli_without_pyspark_or_pandas(tmp_path: Path) -> None:
    done = run_without_spark("""
        import contextlib, io, json, sys

        import pyarrow as pa

        import tidemark
        from tidemark import Table
        from tidemark.cli.main import main

        path = sys.argv[1]
        table = Table.create(path, spark=None, record_key="id", partition_by="city", ordering_field="ts")
        table.insert(pa.table({"id": [1, 2], "city": ["sf", "nyc"], "ts": [1, 1], "v": ["a", "b"]}))
        table.upsert(pa.table({"id": [1, 3], "city": ["sf", "la"], "ts": [2, 1], "v": ["a2", "c"]}))
        upserted = sorted((r["id"], r["v"]) for r in table.read().to_pylist())
        last = table.upsert(pa.table({"id": [2], "city": ["nyc"], "ts": [2], "v": ["b2"]}))
        table.rollback(last.instant_time)
        reopened = Table.open(path, spark=None)
        after_rollback = sorted((r["id"], r["v"]) for r in reopened.read().to_pylist())

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            help_code = main(["--help"])
        with contextlib.redirect_stdout(io.StringIO()):
            timeline_code = main(["timeline", path])
        loaded = sorted(n for n in sys.modules if n.split(".")[0] in ("pyspark", "pandas", "py4j"))
        print(json.dumps({"upserted": upserted, "after_rollback": after_rollback, "help": help_code,
                          "help_lists_demo": "demo" in out.getvalue(), "timeline": timeline_code,
                          "loaded": loaded}))
    """, str(tmp_path / "t"))
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["upserted"] == [[1, "a2"], [2, "b"], [3, "c"]]
    assert got["after_rollback"] == [[1, "a2"], [2, "b"], [3, "c"]]
    assert got["help"] == 0 and got["help_lists_demo"]
    assert got["timeline"] == 0
    assert got["loaded"] == []


def test_the_console_help_without_pyspark_or_pandas() -> None:
    done = run_without_spark("""
        import sys
        from tidemark.cli.main import main
        sys.exit(main(["--help"]))
    """)
    assert done.returncode == 0, done.stderr
    assert "quick start:" in done.stdout


@pytest.mark.parametrize("ask", ["start_spark", "ddl_schema", "cli_cluster_spark"])
def test_asking_for_spark_without_pyspark_names_the_extra(tmp_path: Path, ask: str) -> None:
    done = run_without_spark("""
        import contextlib, io, sys

        import pyarrow as pa

        from tidemark import MissingDependencyError, Table
        from tidemark.cli.main import main
        from tidemark.engines.spark.session import start_spark

        ask, path = sys.argv[1], sys.argv[2]
        if ask == "cli_cluster_spark":
            Table.create(path, spark=None, record_key="id").insert(pa.table({"id": [1]}))
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(["cluster", path, "--spark"])
            print(f"exit {code}: {err.getvalue()}")
            sys.exit(0)
        try:
            if ask == "start_spark":
                start_spark(path)
            else:
                Table.create(path, spark=None, record_key="id", schema="id long, v string")
        except MissingDependencyError as exc:
            print(f"raised {exc.package} {exc.extra}: {exc}")
    """, ask, str(tmp_path / "t"))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "pip install 'tidemark[spark]'" in done.stdout, done.stdout
    if ask == "cli_cluster_spark":
        assert done.stdout.startswith("exit 1: "), done.stdout
        assert "error:" in done.stdout
    else:
        assert done.stdout.startswith("raised pyspark spark: "), done.stdout
        assert not (tmp_path / "t" / ".hoodie").exists()  # nothing written


def test_demo_outside_a_source_checkout_says_where_it_is(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An installed package has no examples/: `tidemark demo` (any arguments) says where the demo is."""
    from tidemark.cli import demo
    from tidemark.cli.main import main

    monkeypatch.setattr(demo, "EXAMPLES", tmp_path / "no-examples")
    monkeypatch.delitem(sys.modules, demo.MODULE_NAME, raising=False)
    for argv in (["demo"], ["demo", "--keep", "--path", str(tmp_path / "t")], ["demo", "--help"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.strip().startswith("error: the demo is not part of the installed package"), err
        assert "examples/demo.py" in err and "scripts/demo.sh" in err
        assert "Traceback" not in err
    assert not (tmp_path / "t").exists()
    assert main(["--help"]) == 0
    assert "\n  demo " in capsys.readouterr().out


def test_the_demo_of_the_checkout_is_the_example() -> None:
    from tidemark.cli import demo

    example = demo.load_example()
    assert example is not None
    assert Path(example.__file__ or "") == Path(__file__).resolve().parents[1] / "examples" / "demo.py"
