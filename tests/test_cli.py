"""The ``tidemark`` command line, tested through its exit codes and output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tidemark import Table
from tidemark.cli import rollback as rollback_cmd
from tidemark.cli.main import main
from tidemark.cli.output import CliUsageError, ago, instant_time_arg, option_pairs, readable_time
from tidemark.cli.timeline import concurrent_instants, select
from tidemark.concurrency.heartbeat import last_heartbeat_ms, now_ms
from tidemark.config import resolve_write_config
from tidemark.config.options import OPTIONS
from tidemark.format.commit_metadata import CommitMetadata, read_avro
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Instant, State, Timeline
from tidemark.write.commit import CommitProtocol, PendingWrite

COMMANDS = ("demo", "timeline", "show", "markers", "rollback", "clean", "savepoint", "restore", "cluster",
            "compact", "options")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_clean_error(err: str, *fragments: str) -> None:
    assert err.lstrip().splitlines()[-1].startswith("error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


# -- help, version, usage errors (no Spark) ------------------------------------------------


def test_main_help_lists_every_command_and_a_quick_start(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for command in COMMANDS:
        assert f"\n  {command} " in out
    assert "quick start:" in out
    assert "exit codes:" in out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_manual(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = run(capsys, command, "--help")
    assert code == 0
    assert f"usage: tidemark {command}" in out
    assert "examples:" in out
    assert f"tidemark {command}" in out.split("examples:")[1]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import tidemark

    code, out, _ = run(capsys, "--version")
    assert code == 0
    assert out.strip() == f"tidemark {tidemark.__version__}"


def test_help_as_a_real_process() -> None:
    console_script = Path(sys.executable).with_name("tidemark")
    commands = [[sys.executable, "-m", "tidemark", "--help"]]
    if console_script.exists():
        commands.append([str(console_script), "--help"])
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert "usage: tidemark" in done.stdout
        assert "quick start:" in done.stdout


def test_no_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys)
    assert code == 2
    assert "timeline" in err  # the help, with the command list
    assert_clean_error(err, "choose a command")


def test_unknown_command_and_bad_option_value(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == 2
    assert_clean_error(err, "invalid choice")
    code, _, err = run(capsys, "show", "somewhere", "--limit", "many")
    assert code == 2
    assert "usage: tidemark show" in err
    assert_clean_error(err, "--limit")


@pytest.mark.parametrize(
    "argv",
    [("timeline",), ("show",), ("rollback", "20260101000000000", "--yes"), ("clean",)],
    ids=["timeline", "show", "rollback", "clean"],
)
def test_missing_table_is_a_clean_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    for path in (tmp_path / "nowhere", tmp_path):  # absent, and a folder without a table
        code, out, err = run(capsys, argv[0], str(path), *argv[1:])
        assert code == 2
        assert out == ""
        assert_clean_error(err, "no Hudi table at")


def test_options_lists_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "options")
    assert code == 0
    for option in OPTIONS:
        assert option.key in out
    assert f"{len(OPTIONS)} of {len(OPTIONS)} options" in out


def test_options_filter(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "options", "compression")
    assert code == 0
    assert "hoodie.parquet.compression.codec" in out
    assert "snappy" in out
    assert "hoodie.table.name" not in out
    code, out, _ = run(capsys, "options", "no-such-thing")
    assert code == 1
    assert "no option matches" in out


def test_options_narrow_terminal(capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    monkeypatch.setenv("COLUMNS", "70")
    code, out, _ = run(capsys, "options")
    assert code == 0
    assert "default: snappy" in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 70


def test_instant_time_arguments() -> None:
    assert instant_time_arg("20261122035133493", "t") == "20261122035133493"
    assert instant_time_arg("2026-11-22T03:51:33.493", "t") == "20261122035133493"
    assert instant_time_arg("2026-11-22 03:51:33", "t") == "20261122035133000"
    assert instant_time_arg("2026-11-22T05:51:33+02:00", "t") == "20261122035133000"
    for bad in ("yesterday", "2026112203", "20261399000000000"):
        with pytest.raises(CliUsageError):
            instant_time_arg(bad, "t")
    assert readable_time("20261122035133493") == "2026-11-22 03:51:33.493"
    assert readable_time("20261122035133493", date=False) == "03:51:33.493"


def test_timeline_selection_keeps_pending_instants() -> None:
    done = [
        Instant(f"2026010100000{i:04d}", Action.COMMIT, State.COMPLETED, f"2026010100000{i:04d}")
        for i in range(30)
    ]
    pending = Instant("20251231000000000", Action.COMMIT, State.INFLIGHT)
    instants = [pending, *done]
    shown = select(instants, show_all=False, limit=20)
    assert shown == [pending, *done[-20:]]
    assert select(instants, show_all=True, limit=20) == instants


def test_timeline_of_a_table_without_writes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    code, out, _ = run(capsys, "timeline", str(tmp_path / "t"))
    assert code == 0
    assert "the timeline is empty" in out
    code, out, _ = run(capsys, "show", str(tmp_path / "t"))
    assert code == 0
    assert "0 rows in 0 files" in out


def test_options_arguments_and_durations() -> None:
    assert option_pairs(["a.b=1", " c = x=y "]) == {"a.b": "1", "c": "x=y"}
    assert option_pairs(None) == {}
    for bad in ("novalue", "=1"):
        with pytest.raises(CliUsageError):
            option_pairs([bad])
    assert [ago(ms) for ms in (400, 12_300, 300_000, 3 * 3600_000, 5 * 86400_000)] == [
        "0.4 s", "12 s", "5 min", "3 h", "5 d"
    ]


def test_bad_options_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, spark=None, record_key="id")
    code, _, err = run(capsys, "timeline", path, "--options", "hoodie.client.heartbeat.interval_in_ms")
    assert code == 2
    assert_clean_error(err, "KEY=VALUE")
    code, _, err = run(capsys, "clean", path, "--options", "hoodie.client.heartbeat.interval_ms=5")
    assert code == 2
    assert_clean_error(err, "unknown option", "hoodie.client.heartbeat.interval_in_ms")
    code, _, err = run(capsys, "demo", "--writers-mode", "processes")
    assert code == 2
    assert_clean_error(err, "--writers-mode")


def test_concurrent_instants_from_intervals() -> None:
    def done(requested: str, completed: str, action: Action = Action.COMMIT) -> Instant:
        return Instant(f"2026010100{requested}000", action, State.COMPLETED, f"2026010100{completed}000")

    a, b, c, d = done("0000", "0010"), done("0005", "0008"), done("0009", "0020"), done("0030", "0031")
    rollback = done("0006", "0007", Action.ROLLBACK)  # not a data instant
    pending = Instant("20260101000007000", Action.COMMIT, State.INFLIGHT)
    found = concurrent_instants([d, c, b, a, rollback, pending])
    t = {x: x.requested_time for x in (a, b, c, d)}
    assert found == {t[a]: [t[b], t[c]], t[b]: [t[a]], t[c]: [t[a]], t[d]: []}


def test_timeline_shows_which_writes_ran_concurrently(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = str(tmp_path / "t")
    Table.create(path, spark=None, record_key="id")
    times = {  # requested -> completed: the first overlaps the next two; the last is alone
        "20260101000000000": "20260101000010000",
        "20260101000005000": "20260101000008000",
        "20260101000009000": "20260101000020000",
        "20260101000030000": "20260101000031000",
    }
    for requested, completed in times.items():
        Path(path, ".hoodie", "timeline", f"{requested}_{completed}.commit").write_bytes(
            CommitMetadata("UPSERT").to_bytes()
        )
    code, out, err = run(capsys, "timeline", path)
    assert code == 0, err
    assert "concurrent with" in out
    lines = {line.split()[0]: line.rstrip() for line in out.splitlines() if line.startswith("2026")}
    assert lines["20260101000000000"].endswith("20260101000005000 +1")
    assert lines["20260101000005000"].endswith("20260101000000000")
    assert lines["20260101000009000"].endswith("20260101000000000")
    alone = [word for word in lines["20260101000030000"].split() if word.startswith("2026010100")]
    assert alone == ["20260101000030000", "20260101000031000"]  # nothing overlapped it
    assert "heartbeat" not in out  # no pending write, no heartbeat column


# -- clean: failed writes with expired heartbeats (Arrow engine, no Spark) ----------------------

# Writers beat every 100 ms; a heartbeat older than 1 s (100 ms x 10) counts as expired.
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "100", "hoodie.client.heartbeat.tolerable.misses": "10"}
HEARTBEAT_ARGS = ("--options", *(f"{k}={v}" for k, v in HEARTBEAT.items()))
EXPIRY_MS = 1000


@pytest.fixture
def arrow_table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    table = Table.create(path, spark=None, record_key="id")
    table.upsert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    return path


@pytest.fixture
def protocol(arrow_table: str) -> Iterator[CommitProtocol]:
    """Starts writes by hand, as a multi-writer writer would, with fast heartbeats."""
    options = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", **HEARTBEAT}
    p = CommitProtocol(LocalStorage(arrow_table), resolve_write_config(options))
    started: list[PendingWrite] = []
    original = p.start

    def start(operation: str, action: Action) -> PendingWrite:
        started.append(original(operation, action))
        return started[-1]

    p.start = start  # type: ignore[method-assign]
    yield p
    for pending in started:  # no heartbeat thread outlives the test
        if pending.heartbeat is not None:
            pending.heartbeat.stop(delete=False)
    p.close()


def dead_writer(protocol: CommitProtocol) -> str:
    """A write whose writer died: instant inflight, heartbeat file left, no more beats."""
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    assert pending.heartbeat is not None
    pending.heartbeat.stop(delete=False)
    return pending.instant_time


def wait_until_expired(path: str, instant_time: str, expiry_ms: int = EXPIRY_MS) -> None:
    storage = LocalStorage(path)
    deadline = time.monotonic() + 30
    while now_ms() - (last_heartbeat_ms(storage, instant_time) or 0) <= expiry_ms:
        assert time.monotonic() < deadline, "the heartbeat never expired"
        time.sleep(0.05)


def instants_of(path: str) -> dict[str, Instant]:
    return {i.requested_time: i for i in Timeline.load(LocalStorage(path))}


def test_clean_rolls_back_an_expired_write_and_never_a_live_one(
    capsys: pytest.CaptureFixture[str], arrow_table: str, protocol: CommitProtocol
) -> None:
    dead = dead_writer(protocol)
    live = protocol.start("UPSERT", Action.COMMIT).instant_time  # its heartbeat thread keeps beating
    wait_until_expired(arrow_table, dead)

    code, out, err = run(capsys, "timeline", arrow_table, *HEARTBEAT_ARGS)
    assert code == 0, err
    lines = {line.split()[0]: line for line in out.splitlines() if line[:1].isdigit()}
    assert "heartbeat" in out.splitlines()[1]
    assert "expired (" in lines[dead] and "inflight" in lines[dead]
    assert "alive (beat " in lines[live] and "requested" in lines[live]
    assert "2 pending (requested/inflight): 1 alive (being written), 1 expired" in out

    code, out, err = run(capsys, "clean", arrow_table, *HEARTBEAT_ARGS)
    assert code == 0, err
    assert "2 pending write(s); a heartbeat expires after 1 s" in out
    assert f"rolled back commit {dead} (inflight)" in out
    assert f"left alone: commit {live}" in out and "(its writer is alive)" in out

    after = instants_of(arrow_table)
    assert dead not in after  # the dead write is gone...
    rollbacks = [i for i in after.values() if i.action is Action.ROLLBACK and i.is_completed]
    assert len(rollbacks) == 1  # ...and a completed rollback instant records it
    done = read_avro(Path(arrow_table, ".hoodie", "timeline", rollbacks[0].file_name).read_bytes())
    assert done["commitsRollback"] == [dead]
    assert after[live].state is State.REQUESTED  # the live write is untouched
    assert last_heartbeat_ms(LocalStorage(arrow_table), live) is not None

    code, out, _ = run(capsys, "clean", arrow_table, *HEARTBEAT_ARGS)  # again: nothing to do
    assert code == 0
    assert "nothing rolled back" in out and "(its writer is alive)" in out
    code, out, _ = run(capsys, "show", arrow_table, "-n", "0")
    assert "3 rows" in out  # the committed data is untouched


def test_clean_with_the_default_expiry_leaves_a_recently_dead_write(
    capsys: pytest.CaptureFixture[str], arrow_table: str, protocol: CommitProtocol
) -> None:
    dead = dead_writer(protocol)  # its last beat is seconds old, the default expiry 2 min
    code, out, err = run(capsys, "clean", arrow_table)
    assert code == 0, err
    assert "a heartbeat expires after 120 s" in out
    assert "nothing rolled back" in out
    assert f"left alone: commit UPSERT {dead}" in out
    assert dead in instants_of(arrow_table)


def test_clean_all_pending_rolls_back_every_pending_write(
    capsys: pytest.CaptureFixture[str], arrow_table: str, protocol: CommitProtocol
) -> None:
    live = protocol.start("UPSERT", Action.COMMIT).instant_time
    orphan = "20250101000000000"  # a single-writer write that died: no heartbeat file at all
    Path(arrow_table, ".hoodie", "timeline", f"{orphan}.commit.requested").touch()
    code, out, _ = run(capsys, "timeline", arrow_table)
    orphan_line = next(line for line in out.splitlines() if line.startswith(orphan))
    assert orphan_line.rstrip().endswith("none")

    code, out, err = run(capsys, "clean", arrow_table, "--all-pending")  # stdin is no terminal: no question
    assert code == 0, err
    assert "1 of them has a live heartbeat" in err
    assert f"rolled back commit {live}" in out and f"rolled back commit {orphan}" in out
    after = instants_of(arrow_table)
    assert live not in after and orphan not in after
    assert not [i for i in after.values() if not i.is_completed]

    code, out, _ = run(capsys, "clean", arrow_table)
    assert code == 0
    assert out.splitlines() == ["no pending writes", "no file versions cleaned (nothing to clean)"]


def test_rollback_warns_about_a_live_heartbeat(
    capsys: pytest.CaptureFixture[str], arrow_table: str, protocol: CommitProtocol
) -> None:
    live = protocol.start("UPSERT", Action.COMMIT).instant_time
    code, out, err = run(capsys, "rollback", arrow_table, live, "--yes", "--force", *HEARTBEAT_ARGS)
    assert code == 0, err
    assert "its heartbeat is alive" in err and "that writer will fail" in err
    assert f"rolled back {live}" in out
    assert live not in instants_of(arrow_table)


def test_clean_all_pending_asks_first(
    capsys: pytest.CaptureFixture[str], arrow_table: str, monkeypatch: Any
) -> None:
    pending = "20250101000000000"
    Path(arrow_table, ".hoodie", "timeline", f"{pending}.commit.requested").touch()
    monkeypatch.setattr(rollback_cmd, "stdin_is_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    code, out, _ = run(capsys, "clean", arrow_table, "--all-pending")
    assert code == 1
    assert "aborted; nothing was changed" in out
    assert pending in instants_of(arrow_table)


# -- a small table written with Spark --------------------------------------------------------


@pytest.fixture(scope="module")
def cli_spark(request: pytest.FixtureRequest) -> Any:
    """The suite's shared ``spark`` fixture, or (if conftest has none) the one local session."""
    try:
        return request.getfixturevalue("spark")
    except pytest.FixtureLookupError:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        return session


SCHEMA = "id string, city string, amount long, ts long"


@dataclass(frozen=True)
class Written:
    path: str
    first: str  # bulk_insert of ids 0..29 (amount = i)
    second: str  # upsert: ids 0..4 get amount 1000 + i, ids 30..34 are new
    first_files: int  # files each commit wrote
    second_files: int
    files_now: int  # files of the latest snapshot
    files_then: int  # files of the snapshot as of `first`


@pytest.fixture(scope="module")
def written(cli_spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Written:
    path = str(tmp_path_factory.mktemp("cli") / "trips")
    table = Table.create(path, spark=cli_spark, record_key="id", partition_by="city", ordering_field="ts")
    cities = ("sf", "nyc", "la")
    rows = [(f"id-{i:03d}", cities[i % 3], i, 1) for i in range(30)]
    first = table.bulk_insert(cli_spark.createDataFrame(rows, SCHEMA).coalesce(1))
    changes = [(f"id-{i:03d}", cities[i % 3], 1000 + i, 2) for i in [*range(5), *range(30, 35)]]
    second = table.upsert(cli_spark.createDataFrame(changes, SCHEMA))
    return Written(
        path, first.instant_time, second.instant_time, first.num_files, second.num_files,
        len(table.read_plan().files), len(table.read_plan(as_of=first.instant_time).files),
    )


@pytest.fixture
def copy_of(written: Written, tmp_path: Path) -> Iterator[str]:
    """A private copy of the written table, for tests that change it."""
    target = tmp_path / "copy"
    shutil.copytree(written.path, target)
    yield str(target)


@pytest.mark.spark
def test_timeline_shows_instants_operations_and_counts(
    capsys: pytest.CaptureFixture[str], written: Written
) -> None:
    code, out, err = run(capsys, "timeline", written.path)
    assert code == 0, err
    lines = out.splitlines()
    first = next(line for line in lines if line.startswith(written.first))
    second = next(line for line in lines if line.startswith(written.second))
    assert first.split()[-4:] == ["30", "0", "0", str(written.first_files)]
    assert "BULK_INSERT" in first and "completed" in first and "commit" in first
    assert second.split()[-4:] == ["5", "5", "0", str(written.second_files)]
    assert "UPSERT" in second
    assert readable_time(written.first) in first  # the readable time next to the raw one
    assert "2 instant(s)" in out


@pytest.mark.spark
def test_timeline_narrow_terminal(
    capsys: pytest.CaptureFixture[str], written: Written, monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run(capsys, "timeline", written.path, "--all")
    assert code == 0
    assert max(len(line.rstrip()) for line in out.splitlines()) <= 80
    assert f"{written.second}  commit  completed  UPSERT" in out
    assert f"+5 inserts  ~5 updates  -0 deletes  {written.second_files} files" in out


@pytest.mark.spark
def test_show_snapshot(capsys: pytest.CaptureFixture[str], written: Written) -> None:
    code, out, err = run(capsys, "show", written.path, "--limit", "100", "--no-meta")
    assert code == 0, err
    assert f"35 rows in {written.files_now} files, latest snapshot; showing all" in out
    assert "_hoodie" not in out
    amounts = {line.split()[0]: int(line.split()[2]) for line in out.splitlines() if line.startswith("id-")}
    assert len(amounts) == 35
    assert amounts["id-000"] == 1000 and amounts["id-010"] == 10 and amounts["id-034"] == 1034


@pytest.mark.spark
def test_show_limit_columns_and_meta(capsys: pytest.CaptureFixture[str], written: Written) -> None:
    code, out, _ = run(capsys, "show", written.path, "-n", "4", "-c", "amount,id")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header == ["amount", "id"]
    assert sum(1 for line in out.splitlines() if "id-" in line) == 4
    assert f"35 rows in {written.files_now} files, latest snapshot; showing 4" in out

    code, out, _ = run(capsys, "show", written.path, "-n", "1")
    assert out.splitlines()[0].split()[:2] == ["_hoodie_commit_time", "_hoodie_commit_seqno"]

    code, out, _ = run(capsys, "show", written.path, "--limit", "0")
    assert code == 0
    assert out.strip() == f"35 rows in {written.files_now} files, latest snapshot"

    code, _, err = run(capsys, "show", written.path, "--columns", "id,nope")
    assert code == 2
    assert_clean_error(err, "nope", "amount")


@pytest.mark.spark
def test_show_time_travel(capsys: pytest.CaptureFixture[str], written: Written) -> None:
    code, out, _ = run(capsys, "show", written.path, "--as-of", written.first, "-n", "50", "--no-meta")
    assert code == 0
    assert f"30 rows in {written.files_then} files, as of {written.first}" in out
    amounts = {line.split()[0]: int(line.split()[2]) for line in out.splitlines() if line.startswith("id-")}
    assert amounts["id-000"] == 0 and "id-030" not in amounts

    readable = readable_time(written.second)  # a readable time works too
    code, out, _ = run(capsys, "show", written.path, "--as-of", readable, "-n", "0")
    assert code == 0
    assert "35 rows" in out

    code, out, _ = run(capsys, "show", written.path, "--as-of", "2000-01-01")
    assert code == 0
    assert "0 rows in 0 files" in out

    code, _, err = run(capsys, "show", written.path, "--as-of", "last tuesday")
    assert code == 2
    assert_clean_error(err, "--as-of")


@pytest.mark.spark
def test_show_damaged_data_file(capsys: pytest.CaptureFixture[str], copy_of: str) -> None:
    victim = Path(copy_of, Table.open(copy_of, spark=None).read_plan().files[0].path)
    victim.write_bytes(b"this is not parquet")
    code, out, err = run(capsys, "show", copy_of)
    assert code == 1
    assert_clean_error(err, "cannot read", victim.name)


@pytest.mark.spark
def test_rollback_latest_commit(capsys: pytest.CaptureFixture[str], written: Written, copy_of: str) -> None:
    code, out, err = run(capsys, "rollback", copy_of, written.second, "--yes")
    assert code == 0, err
    assert f"rolled back {written.second}: deleted {written.second_files} data file(s)" in out
    deleted = [line for line in out.splitlines() if line.strip().startswith("deleted city=")]
    assert len(deleted) == written.second_files

    code, out, _ = run(capsys, "show", copy_of, "-n", "0")
    assert "30 rows" in out
    code, out, _ = run(capsys, "timeline", copy_of)
    rollback_line = next(line for line in out.splitlines() if " rollback " in line)
    assert f"of {written.second}" in rollback_line
    assert written.second not in out.replace(f"of {written.second}", "")

    # Rolled back already: it is no longer on the timeline.
    code, _, err = run(capsys, "rollback", copy_of, written.second, "--yes")
    assert code == 2
    assert_clean_error(err, "not found")


@pytest.mark.spark
def test_rollback_refuses_a_commit_that_later_ones_build_on(
    capsys: pytest.CaptureFixture[str], written: Written, copy_of: str
) -> None:
    code, out, err = run(capsys, "rollback", copy_of, written.first, "--yes")
    assert code == 1
    assert_clean_error(err, "cannot be rolled back", written.second)
    code, out, _ = run(capsys, "show", copy_of, "-n", "0")
    assert "35 rows" in out  # unchanged


@pytest.mark.spark
def test_rollback_pending_write(capsys: pytest.CaptureFixture[str], copy_of: str) -> None:
    pending = "20990101000000000"
    Path(copy_of, ".hoodie", "timeline", f"{pending}.commit.requested").touch()
    code, out, _ = run(capsys, "timeline", copy_of)
    assert "1 pending" in out
    code, out, err = run(capsys, "rollback", copy_of, pending)  # stdin is not a terminal: no question
    assert code == 0, err
    assert "pending: its files are not visible to readers" in out
    assert f"rolled back {pending}" in out
    code, out, _ = run(capsys, "timeline", copy_of)
    assert not any(line.startswith(pending) for line in out.splitlines())  # its row is gone
    assert f"of {pending}" in out  # and the rollback's row names it
    assert out.splitlines()[-1] == "3 instant(s)"  # two commits and the rollback; none pending


@pytest.mark.spark
def test_rollback_asks_and_can_be_declined(
    capsys: pytest.CaptureFixture[str], written: Written, copy_of: str, monkeypatch: Any
) -> None:
    monkeypatch.setattr(rollback_cmd, "stdin_is_interactive", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    code, out, _ = run(capsys, "rollback", copy_of, written.second)
    assert code == 1
    assert "aborted; nothing was changed" in out
    code, out, _ = run(capsys, "show", copy_of, "-n", "0")
    assert "35 rows" in out

    monkeypatch.setattr("builtins.input", lambda prompt="": "yes")
    code, out, _ = run(capsys, "rollback", copy_of, written.second)
    assert code == 0
    assert f"rolled back {written.second}" in out


@pytest.mark.spark
def test_demo_end_to_end(capsys: pytest.CaptureFixture[str], cli_spark: Any, tmp_path: Path) -> None:
    """The whole demo, once, small: four writers in threads sharing the test session."""
    path = tmp_path / "demo"
    code, out, err = run(capsys, "demo", "--rows", "100", "--path", str(path))
    assert code == 0, out + err
    assert "Traceback" not in err
    assert "not implemented" not in out
    assert "Four writers at the same time" in out
    lines = [line.split() for line in out.splitlines()]
    commits = [words for words in lines if words and words[0].startswith("+") and "attempts" in words]
    by_writer: dict[str, list[str]] = {}
    for words in commits:  # "+1.2s ingest UPSERT <requested> <completed> +n ~n -n attempts k ..."
        writer = "GDPR delete" if words[1] == "GDPR" else words[1]
        by_writer.setdefault(writer, []).append(words[3 if writer == "GDPR delete" else 2])
    assert by_writer == {
        "ingest": ["UPSERT", "UPSERT"],
        "correction": ["UPSERT", "UPSERT"],
        "GDPR delete": ["DELETE", "DELETE"],
        "backfill": ["INSERT_OVERWRITE", "INSERT"],
    }
    assert "8 commits by 4 writers" in out
    assert "concurrent with" in out  # the timeline shows writes that overlapped
    assert "the writers over time" in out
    assert "tidemark reads exactly the expected" in out
    assert "hudi-rs agrees:" in out
    assert (path / ".hoodie" / "hoodie.properties").exists()  # a table at --path is kept
    assert not [i for i in Timeline.load(LocalStorage(str(path))) if not i.is_completed]
    assert cli_spark.range(3).count() == 3  # the shared session still works

    code, _, err = run(capsys, "demo", "--path", str(path))  # not empty any more
    assert code == 2
    assert_clean_error(err, "new or empty folder")


@pytest.mark.spark
def test_multi_stream_demo_end_to_end(capsys: pytest.CaptureFixture[str], cli_spark: Any, tmp_path: Path) -> None:
    """Two Spark writers on their own column groups (NBCC) plus a compactor: no aborts, the
    per-group latest values in tidemark's read, and in hudi-rs's after the final compaction."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
    from multi_stream_demo import expected_rows, make_streams

    path = tmp_path / "wide"
    code, out, err = run(capsys, "demo", "--multi-stream", "--rows", "120", "--path", str(path))
    assert code == 0, out + err
    assert "Traceback" not in err
    assert "8 deltacommits by 2 writers" in out
    assert "0 aborted or retried writes" in out
    assert "tidemark reads 120 trips" in out
    assert "hudi-rs reads the same 120 trips" in out
    # (that the writers overlap is proven with barriers in tests/test_nbcc.py; threads sharing two
    # cores usually overlap here too, but nothing makes them)
    assert not Timeline.load(LocalStorage(str(path))).pending
    # the Arrow engine's merge agrees with the Spark one the demo checked
    table = Table.open(str(path), spark=None)
    got = {r["trip_id"]: r for r in table.read().to_pylist()}
    want = expected_rows(make_streams(120))
    assert {k: {c: v[c] for c in want[k]} for k, v in got.items()} == want
