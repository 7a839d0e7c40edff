"""A rollback (or restore) is never undone by a concurrent writer, and one a crash interrupted
is always finished by the next writer.

Writers run in real OS processes (tests/writer_process.py) held at barriers; processes that
must die in the middle of a rollback, restore or clean run a few lines of their own (below)
that SIGKILL themselves at the named point. Tables are checked with tidemark and hudi-rs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from test_multi_writer import Writer, rows
from tidemark.cli.main import main as cli_main
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline

HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "300", "hoodie.client.heartbeat.tolerable.misses": "4"}
LOCK_WAIT = {"hoodie.write.lock.wait_time_ms": "2000", "hoodie.write.lock.num_retries": "10",
             "hoodie.write.lock.wait_time_ms_between_retry": "50"}
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "filesystem",
       **LOCK_WAIT, **HEARTBEAT}


@pytest.fixture(params=["COPY_ON_WRITE", "MERGE_ON_READ"])
def table_type(request: Any) -> str:
    return str(request.param)


def make_table(path: Path, options: dict[str, str], table_type: str = "COPY_ON_WRITE") -> tidemark.Table:
    t = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part", options=options,
                              table_type=table_type)
    t.upsert(pa.Table.from_pylist(rows(list(range(10)), "seed")))
    return t


@pytest.fixture
def table(tmp_path: Path) -> Iterator[tidemark.Table]:
    t = make_table(tmp_path / "t", OCC)
    yield t
    t.close()


def visible(table: tidemark.Table) -> dict[int, tuple[str, str]]:
    """id -> (v, _hoodie_commit_time), as tidemark reads the table; checked against hudi-rs."""
    mine = rows_of(table.read(), ["id", "v", "_hoodie_commit_time"])
    theirs = rows_of(hudi_rs_read(table.path), ["id", "v", "_hoodie_commit_time"])
    assert mine == theirs
    return {r[0]: (r[1], r[2]) for r in mine}


def seed_only(table: tidemark.Table) -> None:
    got = visible(table)
    assert sorted(got) == list(range(10))
    assert {v for v, _ in got.values()} == {"seed"}


def pending(table: tidemark.Table) -> list[Any]:
    return Timeline.load(LocalStorage(table.path)).pending


def go(tmp: Path) -> None:
    tmp.joinpath("go.tmp").write_text("go")
    tmp.joinpath("go.tmp").replace(tmp / "go")


def barrier(tmp: Path, name: str) -> dict[str, str]:
    return {"ready": str(tmp / f"{name}.ready"), "go": str(tmp / "go")}


# -- a rolled-back commit never comes back ---------------------------------------------------


def test_a_writer_that_built_on_a_rolled_back_commit_conflicts(
    tmp_path: Path, table_type: str
) -> None:
    """Issue 13.1: A commits c1; B merges into the same file group on top of c1; c1 is rolled back;
    B must not bring c1's rows back. Copy-on-write: B's new base file holds c1's rows.
    Merge-on-read: c1 created the file group (an insert) and B appended a log to it."""
    t = make_table(tmp_path / "t", OCC, table_type)
    try:
        key = 0 if table_type == "COPY_ON_WRITE" else 100  # merge-on-read: inserts start new file groups
        c1 = t.upsert(pa.Table.from_pylist(rows([key], "a"))).instant_time
        other = 5 if table_type == "COPY_ON_WRITE" else key  # same file group as c1's row
        b = Writer(tmp_path, t, OCC, rows([other], "b"), paused=True)
        b.wait_for(b.ready)
        with tidemark.Table.open(t.path, spark=None, options=OCC) as admin:
            undone = admin.rollback(c1)
        go(tmp_path)
        outcome = b.outcome()
        assert outcome["status"] == "error" and outcome["error"] == "RolledBackConflictError", outcome
        assert outcome["conflicting_instant"] == undone.rollback_instant.requested_time
        assert c1 in outcome["message"]
        got = visible(t)
        assert all(commit != c1 for _, commit in got.values())
        seed_only(t)
        assert not pending(t)
        # retried, the write builds on the table as it is now
        t.upsert(pa.Table.from_pylist(rows([other], "b")))
        assert visible(t)[other][0] == "b"
        assert all(commit != c1 for _, commit in visible(t).values())
    finally:
        t.close()


def test_a_writer_whose_base_file_a_rollback_removed_fails_typed(tmp_path: Path, table: tidemark.Table) -> None:
    """Issue 13.9: the base file a writer is about to merge was removed by a concurrent rollback:
    a typed conflict, not a raw FileNotFoundError; the write is rolled back."""
    c1 = table.upsert(pa.Table.from_pylist(rows([0], "a"))).instant_time
    b = Writer(tmp_path, table, OCC, rows([5], "b"), pause_before_write=barrier(tmp_path, "b"))
    b.wait_for(tmp_path / "b.ready")
    mine = (tmp_path / "b.ready").read_text()
    with tidemark.Table.open(table.path, spark=None, options=OCC) as admin:
        admin.rollback(c1)
    go(tmp_path)
    outcome = b.outcome()
    assert outcome["status"] == "error" and outcome["error"] == "RolledBackConflictError", outcome
    assert c1 in outcome["message"]
    seed_only(table)
    assert not pending(table)
    assert not [f for f in LocalStorage(table.path).walk_files("") if mine in f.name and f.name.endswith(".parquet")]


def test_a_restore_concurrent_with_a_writer_is_not_undone(tmp_path: Path, table: tidemark.Table) -> None:
    """Issue 13.1 (restore): a writer that built on a commit that a restore to a savepoint removes
    fails with a typed conflict; the table stays as of the savepoint."""
    seed = table.timeline()[-1].requested_time
    table.savepoint(seed)
    table.upsert(pa.Table.from_pylist(rows([0], "a")))
    b = Writer(tmp_path, table, OCC, rows([5], "b"), pause_before_write=barrier(tmp_path, "b"))
    b.wait_for(tmp_path / "b.ready")
    with tidemark.Table.open(table.path, spark=None, options=OCC) as admin:
        admin.restore(seed)
    go(tmp_path)
    outcome = b.outcome()
    assert outcome["status"] == "error" and outcome["error"] == "RolledBackConflictError", outcome
    seed_only(table)
    assert not pending(table)


# -- live writers are left alone ---------------------------------------------------------------


def test_a_single_writer_client_leaves_a_live_writer_alone(tmp_path: Path, table: tidemark.Table) -> None:
    """Issue 13.2: a single-writer client next to a live multi-writer write is refused before it
    touches anything (the table records its writers' mode); and on a table that records nothing
    (written before settings were recorded), its EAGER rollback of failed writes still leaves a
    pending write whose heartbeat is alive alone."""
    b = Writer(tmp_path, table, OCC, rows([1], "b"), paused=True)
    b.wait_for(b.ready)
    with tidemark.Table.open(table.path, spark=None) as single, pytest.raises(tidemark.WriterSettingsError):
        single.upsert(pa.Table.from_pylist(rows([3], "s")))
    go(tmp_path)
    assert b.outcome()["status"] == "committed"
    got = visible(table)
    assert got[1][0] == "b" and got[3][0] == "seed"  # the refused write left nothing

    from tidemark.config import resolve_write_config
    from tidemark.write.commit import CommitProtocol

    plain = tidemark.Table.create(str(tmp_path / "unrecorded"), spark=None, record_key="id", partition_by="part")
    plain.upsert(pa.Table.from_pylist(rows(list(range(3)), "seed")))
    live = CommitProtocol(LocalStorage(plain.path), resolve_write_config(OCC))  # records nothing
    started = live.start("UPSERT", Action.COMMIT)  # its heartbeat thread keeps beating
    try:
        with tidemark.Table.open(plain.path, spark=None) as single:
            single.upsert(pa.Table.from_pylist(rows([3], "s")))
        assert [i.requested_time for i in pending(plain)] == [started.instant_time]
    finally:
        if started.heartbeat is not None:
            started.heartbeat.stop()
        live.close()


def test_rollback_of_a_live_pending_write_is_refused_unless_forced(
    tmp_path: Path, table: tidemark.Table, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 13.10: Table.rollback and `tidemark rollback` refuse a pending write whose heartbeat
    is alive; forced, the write is rolled back and its writer fails (typed) at commit."""
    b = Writer(tmp_path, table, OCC, rows([1], "b"), paused=True)
    b.wait_for(b.ready)
    live = b.ready.read_text()
    with tidemark.Table.open(table.path, spark=None, options=OCC) as admin, pytest.raises(
        tidemark.WriterAliveError, match="force"
    ):
        admin.rollback(live)
    code = cli_main(["rollback", table.path, live, "--yes", "--options",
                     *(f"{k}={v}" for k, v in HEARTBEAT.items())])
    err = capsys.readouterr().err
    assert code != 0 and "writer is alive" in err and "Traceback" not in err
    assert any(i.requested_time == live for i in pending(table))

    code = cli_main(["rollback", table.path, live, "--yes", "--force", "--options",
                     *(f"{k}={v}" for k, v in HEARTBEAT.items())])
    assert code == 0, capsys.readouterr().err
    assert not pending(table)
    go(tmp_path)
    outcome = b.outcome()
    # typed: its files are gone (CommitError) or its instant is (HeartbeatExpiredError)
    assert outcome["status"] == "error" and outcome["error"] in ("CommitError", "HeartbeatExpiredError"), outcome
    seed_only(table)


# -- interrupted rollbacks, restores and cleans are finished ---------------------------------

# Runs in its own process: opens the table, arms a SIGKILL at a named point, then acts.
DYING = textwrap.dedent("""
    import json, os, signal, sys
    from pathlib import Path
    import pyarrow as pa
    import tidemark

    spec = json.loads(sys.argv[1])
    timeline = Path(spec["table"], ".hoodie", "timeline")

    def die(what):
        Path(spec["signal"] + ".tmp").write_text(what)
        os.replace(spec["signal"] + ".tmp", spec["signal"])
        os.kill(os.getpid(), signal.SIGKILL)

    if spec["kill"] == "rollback_inflight":
        # after the rolled-back instant's files and timeline files are deleted, before completing
        import tidemark.recovery.rollback as rb
        new_time = rb.new_instant_time
        def new_instant_time(floor=None):
            if floor and (timeline / f"{floor}.rollback.inflight").exists():
                die(floor)
            return new_time(floor=floor)
        rb.new_instant_time = new_instant_time
        # the write fails after writing its files, so its writer rolls it back
        import tidemark.write.commit as wc
        def fail(self, pending, partitions):
            raise RuntimeError("injected failure")
        wc.CommitProtocol._ensure_partition_metafiles = fail
    elif spec["kill"] == "restore_midway":
        import tidemark.recovery.savepoint as sp
        roll = sp.rollback
        done = []
        def rollback(*args, **kwargs):
            if len(done) == spec["after"]:
                die("restore")
            done.append(roll(*args, **kwargs))
            return done[-1]
        sp.rollback = rollback
    elif spec["kill"] == "clean_executing":
        import tidemark.recovery.clean as cl
        saved = cl.savepointed_files
        def savepointed_files(storage, tl):
            if any(p.name.endswith(".clean.inflight") for p in timeline.iterdir()):
                die("clean")
            return saved(storage, tl)
        cl.savepointed_files = savepointed_files

    elif spec["kill"] == "compaction_executing":
        import tidemark.services.compaction as cp
        cp.execute = lambda *args, **kwargs: die("compaction")
    elif spec["kill"] == "none_pause_cluster_commit":
        import time
        import tidemark.services.cluster as cs
        commit = cs.ClusteringService.commit
        def paused(self, scheduled, stats):
            Path(spec["ready"] + ".tmp").write_text(scheduled.instant_time)
            os.replace(spec["ready"] + ".tmp", spec["ready"])
            while not Path(spec["go"]).exists():
                time.sleep(0.01)
            return commit(self, scheduled, stats)
        cs.ClusteringService.commit = paused

    table = tidemark.Table.open(spec["table"], spark=None, options=spec["options"])
    if spec["act"] == "cluster":
        try:
            table.cluster()
            outcome = {"status": "committed"}
        except tidemark.TidemarkError as error:
            outcome = {"status": "error", "error": type(error).__name__, "message": str(error)}
        Path(spec["result"]).write_text(json.dumps(outcome))
        raise SystemExit(0)
    if spec["act"] == "compact":
        table.compact()
    elif spec["act"] == "upsert":
        table.upsert(pa.Table.from_pylist(spec["rows"]))
    elif spec["act"] == "restore":
        table.restore(spec["savepoint"])
    elif spec["act"] == "clean":
        table.clean()
    raise SystemExit("survived: the kill point was never reached")
""")


def die_in_a_process(tmp: Path, table: tidemark.Table, options: dict[str, str], **spec: Any) -> str:
    signal = tmp / "killed"
    full = {"table": table.path, "options": options, "signal": str(signal), **spec}
    proc = subprocess.run([sys.executable, "-c", DYING, json.dumps(full)], timeout=120, capture_output=True)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    return signal.read_text()


@pytest.fixture(params=["filesystem", "zookeeper"])
def lock_options(request: Any) -> dict[str, str]:
    if request.param == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        return {**OCC, **server.lock_options("tidemark-rollback")}
    return OCC


def test_a_rollback_killed_midway_is_finished_by_the_next_writer(
    tmp_path: Path, lock_options: dict[str, str]
) -> None:
    """Issue 13.7: a writer SIGKILLed while rolling back its own failed write (its files already
    deleted) leaves a pending rollback; the next writer finishes it although no expired write
    is pending."""
    table = make_table(tmp_path / "t", lock_options)
    try:
        rollback_time = die_in_a_process(tmp_path, table, lock_options, kill="rollback_inflight", act="upsert",
                                         rows=rows([1, 2], "doomed"))
        storage = LocalStorage(table.path)
        stuck = Timeline.load(storage).filter(actions=[Action.ROLLBACK], states=[State.REQUESTED, State.INFLIGHT])
        assert [i.requested_time for i in stuck] == [rollback_time]
        assert [i.action for i in pending(table)] == [Action.ROLLBACK]  # the failed write itself is gone

        table.upsert(pa.Table.from_pylist(rows([3], "next")))
        timeline = Timeline.load(storage)
        assert not timeline.pending
        assert timeline.completed_instant(rollback_time) is not None
        got = visible(table)
        assert got[3][0] == "next" and got[1][0] == got[2][0] == "seed"
    finally:
        table.close()


def test_a_restore_killed_midway_is_finished_by_the_next_writer(tmp_path: Path, table: tidemark.Table) -> None:
    """Issue 13.7 (restore): a restore SIGKILLed after rolling back some of its instants is
    finished by the next writer; the table is as of the savepoint plus that writer's rows."""
    seed = table.timeline()[-1].requested_time
    table.savepoint(seed)
    table.upsert(pa.Table.from_pylist(rows([0], "a")))
    table.upsert(pa.Table.from_pylist(rows([1], "b")))
    die_in_a_process(tmp_path, table, OCC, kill="restore_midway", after=1, act="restore", savepoint=seed)
    stuck = [i for i in pending(table) if i.action is Action.RESTORE]
    assert len(stuck) == 1
    assert visible(table)[0][0] == "a"  # half restored

    table.upsert(pa.Table.from_pylist(rows([3], "next")))
    assert not pending(table)
    got = visible(table)
    assert got[3][0] == "next"
    assert [got[k][0] for k in (0, 1, 2)] == ["seed"] * 3
    restores = Timeline.load(LocalStorage(table.path)).filter(actions=[Action.RESTORE], states=[State.COMPLETED])
    assert [r.requested_time for r in restores] == [stuck[0].requested_time]


def test_a_clean_killed_midway_is_finished_by_the_next_writer(tmp_path: Path) -> None:
    """Issue 13.7 (clean): a cleaner SIGKILLed while executing leaves a pending clean; once its
    heartbeat expired the next writer finishes it, whatever else is pending."""
    options = {**OCC, "hoodie.clean.automatic": "false", "hoodie.clean.commits.retained": "1"}
    table = make_table(tmp_path / "t", options)
    try:
        for n in range(3):
            table.upsert(pa.Table.from_pylist(rows([0], f"v{n}")))
        die_in_a_process(tmp_path, table, options, kill="clean_executing", act="clean")
        clean = [i for i in pending(table) if i.action is Action.CLEAN]
        assert len(clean) == 1
        # the dead cleaner's heartbeat must expire first (a live cleaner is left alone)
        table.upsert(pa.Table.from_pylist(rows([4], "early")))
        deadline = time.monotonic() + 30
        while any(i.action is Action.CLEAN for i in pending(table)):
            assert time.monotonic() < deadline, "the interrupted clean was never finished"
            table.upsert(pa.Table.from_pylist(rows([3], "next")))
            time.sleep(0.2)
        timeline = Timeline.load(LocalStorage(table.path))
        assert timeline.completed_instant(clean[0].requested_time) is not None
        got = visible(table)
        assert got[0][0] == "v2" and got[3][0] == "next"
    finally:
        table.close()


# -- table services never bring a rolled-back instant back ----------------------------------


def test_a_commit_under_a_pending_compaction_cannot_be_rolled_back(tmp_path: Path) -> None:
    """The class of 13.1 for compaction: a compaction plan that merges a deltacommit's logs would
    publish its rows again after a rollback; the rollback is refused until the compaction is done
    (and then the compaction, a later commit, must be rolled back first)."""
    table = make_table(tmp_path / "t", OCC, "MERGE_ON_READ")
    try:
        c1 = table.upsert(pa.Table.from_pylist(rows([0], "a"))).instant_time  # a log on p0's slice
        die_in_a_process(tmp_path, table, OCC, kill="compaction_executing", act="compact")
        assert [i.action for i in pending(table)] == [Action.COMPACTION]
        with pytest.raises(tidemark.TidemarkError, match="compaction"):
            table.rollback(c1)
        assert visible(table)[0] == ("a", c1)
        deadline = time.monotonic() + 30
        while table.compact() is None:  # left alone until the dead compactor's heartbeat expired
            assert time.monotonic() < deadline, "the interrupted compaction was never finished"
            time.sleep(0.1)
        assert not pending(table)
        assert visible(table)[0] == ("a", c1)
        with pytest.raises(tidemark.TidemarkError, match="later commits"):
            table.rollback(c1)
    finally:
        table.close()


def test_a_clustering_that_read_a_rolled_back_commit_is_aborted(tmp_path: Path) -> None:
    """The class of 13.1 for clustering: a clustering planned before a commit was rolled back
    rewrote that commit's rows; it must not publish them."""
    options = {**OCC, "hoodie.parquet.small.file.limit": "0"}  # every insert a new small file group
    table = make_table(tmp_path / "t", options)
    try:
        table.upsert(pa.Table.from_pylist(rows(list(range(10, 20)), "more")))
        c1 = table.upsert(pa.Table.from_pylist(rows([0], "a"))).instant_time
        ready, result = tmp_path / "cluster.ready", tmp_path / "cluster.result"
        spec = {"table": table.path, "options": options, "signal": str(tmp_path / "unused"),
                "kill": "none_pause_cluster_commit", "act": "cluster", "ready": str(ready), "go": str(tmp_path / "go"),
                "result": str(result)}
        proc = subprocess.Popen([sys.executable, "-c", DYING, json.dumps(spec)])
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the clustering never got ready"
            time.sleep(0.01)
        table.rollback(c1)
        go(tmp_path)
        assert proc.wait(timeout=60) == 0
        outcome = json.loads(result.read_text())
        assert outcome["status"] == "error" and outcome["error"] == "RolledBackConflictError", outcome
        got = visible(table)
        assert got[0][0] == "seed" and all(commit != c1 for _, commit in got.values())
        assert not pending(table)
    finally:
        table.close()


def test_a_writer_whose_instant_was_force_rolled_back_before_it_wrote_fails_typed(
    tmp_path: Path, table: tidemark.Table
) -> None:
    """Forced rollback of a live write before it wrote anything: the writer fails with a typed
    error (never a raw OSError) and nothing of it becomes visible."""
    b = Writer(tmp_path, table, OCC, rows([1, 6], "b"), pause_before_write=barrier(tmp_path, "b"))
    b.wait_for(tmp_path / "b.ready")
    live = (tmp_path / "b.ready").read_text()
    table.rollback(live, force=True)
    go(tmp_path)
    outcome = b.outcome()
    assert outcome["status"] == "error" and outcome["instant_time"] == live, outcome
    seed_only(table)
    assert not pending(table)
