"""Several writers in real OS processes against one table, with a real lock provider.

Every scenario runs with the ZooKeeper lock (a real server on 127.0.0.1) and with
the file-system lock. Writers use the Arrow engine so that a process starts in
well under a second; the commit protocol is the same one Spark writers use.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from signals import wait_for_file, write_atomically
from tidemark.concurrency.heartbeat import last_heartbeat_ms, now_ms
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline

WRITER = str(Path(__file__).with_name("writer_process.py"))
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "300", "hoodie.client.heartbeat.tolerable.misses": "4"}
EXPIRY_MS = 1200


@pytest.fixture(params=["filesystem", "zookeeper"])
def options(request: Any) -> dict[str, str]:
    opts = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
            "hoodie.write.lock.wait_time_ms": "2000", "hoodie.write.lock.num_retries": "10",
            "hoodie.write.lock.wait_time_ms_between_retry": "50", **HEARTBEAT}
    if request.param == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        opts.update(server.lock_options("tidemark-mw"))
    else:
        opts["hoodie.write.lock.provider"] = "filesystem"
    return opts


@pytest.fixture
def table(tmp_path: Path, options: dict[str, str]) -> Iterator[tidemark.Table]:
    t = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", options=options)
    t.upsert(pa.Table.from_pylist([{"id": i, "part": f"p{i % 5}", "v": "seed"} for i in range(10)]))
    yield t
    t.close()


class Writer:
    def __init__(self, tmp: Path, table: tidemark.Table, options: dict[str, str], rows: list[dict[str, Any]],
                 operation: str = "upsert", **extra: Any) -> None:
        name = uuid.uuid4().hex[:8]
        self.result = tmp / f"{name}.result"
        self.ready = tmp / f"{name}.ready"
        self.crash_signal = tmp / f"{name}.crashed"
        spec = {"table": table.path, "options": options, "operation": operation, "rows": rows,
                "result": str(self.result), "crash_signal": str(self.crash_signal), **extra}
        if extra.pop("paused", False) or spec.pop("paused", False):
            spec["pause_before_commit"] = {"ready": str(self.ready), "go": str(tmp / "go")}
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(spec))
        self.process = subprocess.Popen([sys.executable, WRITER, str(path)])

    def wait_for(self, path: Path, timeout: float = 60) -> None:
        wait_for_file(path, processes=[self.process], timeout=timeout)

    def outcome(self, timeout: float = 120) -> dict[str, Any]:
        self.process.wait(timeout=timeout)
        return json.loads(self.result.read_text())


def rows(ids: list[int], v: str, parts: int = 5) -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % parts}", "v": v} for i in ids]


def release(tmp: Path, writers: list[Writer]) -> list[dict[str, Any]]:
    for w in writers:
        w.wait_for(w.ready)
    write_atomically(tmp / "go", "go")
    return [w.outcome() for w in writers]


def visible(table: tidemark.Table) -> list[tuple[Any, ...]]:
    return rows_of(table.read(), ["id", "part", "v"])


def test_two_writers_on_disjoint_partitions_both_commit(tmp_path: Path, table: tidemark.Table, options: dict) -> None:
    a = Writer(tmp_path, table, options, rows([100, 105], "a"), paused=True)  # p0
    b = Writer(tmp_path, table, options, rows([101, 106], "b"), paused=True)  # p1
    outcomes = release(tmp_path, [a, b])
    assert [o["status"] for o in outcomes] == ["committed", "committed"]
    got = {r[0]: r[2] for r in visible(table)}
    assert got[100] == got[105] == "a" and got[101] == got[106] == "b"
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == sorted((k, v) for k, v in got.items())


def test_two_writers_on_the_same_file_group_exactly_one_commits(
    tmp_path: Path, table: tidemark.Table, options: dict
) -> None:
    before = visible(table)
    a = Writer(tmp_path, table, options, rows([0], "a"), paused=True)
    b = Writer(tmp_path, table, options, rows([5], "b"), paused=True)  # both in p0's file group
    outcomes = release(tmp_path, [a, b])
    committed = [o for o in outcomes if o["status"] == "committed"]
    failed = [o for o in outcomes if o["status"] == "error"]
    assert len(committed) == 1 and len(failed) == 1
    assert failed[0]["error"] == "WriteConflictError"
    assert failed[0]["conflicting_instant"] == committed[0]["instant_time"]
    winner = "a" if outcomes[0]["status"] == "committed" else "b"
    expected = sorted([r for r in before if r[0] not in (0, 5)]
                      + [(0, "p0", "a" if winner == "a" else "seed"), (5, "p0", "b" if winner == "b" else "seed")])
    assert visible(table) == expected
    loser = failed[0]["instant_time"]
    storage = LocalStorage(table.path)
    assert not [f for f in storage.walk_files("") if loser in f.name]  # its files are gone
    assert all(i.requested_time != loser for i in Timeline.load(storage))


def test_five_writers_on_distinct_partitions_all_commit(tmp_path: Path, table: tidemark.Table, options: dict) -> None:
    writers = [Writer(tmp_path, table, options, rows([200 + p], f"w{p}"), paused=True) for p in range(5)]
    outcomes = release(tmp_path, writers)
    assert [o["status"] for o in outcomes] == ["committed"] * 5
    times = sorted(o["completion_time"] for o in outcomes)
    assert len(set(times)) == 5
    got = {r[0]: r[2] for r in visible(table)}
    assert all(got[200 + p] == f"w{p}" for p in range(5))


def test_concurrent_inserts_of_the_same_new_key_never_duplicate(
    tmp_path: Path, table: tidemark.Table, options: dict
) -> None:
    a = Writer(tmp_path, table, options, rows([777], "a"), operation="insert", paused=True)
    b = Writer(tmp_path, table, options, rows([777], "b"), operation="insert", paused=True)
    outcomes = release(tmp_path, [a, b])
    assert sorted(o["status"] for o in outcomes) == ["committed", "error"]
    assert [o["error"] for o in outcomes if o["status"] == "error"] == ["WriteConflictError"]
    keys = [r[0] for r in visible(table)]
    assert keys.count(777) == 1
    assert [r["id"] for r in hudi_rs_read(table.path).to_pylist()].count(777) == 1


def test_conflicting_writer_retries_and_commits_when_asked(
    tmp_path: Path, table: tidemark.Table, options: dict
) -> None:
    retrying = {**options, "hoodie.write.num.retries.on.conflict.failures": "2"}
    a = Writer(tmp_path, table, retrying, rows([0], "a"), paused=True)
    b = Writer(tmp_path, table, retrying, rows([5], "b"), paused=True)
    # both race for the same file group; the loser retries from the start against the new table
    a.wait_for(a.ready)
    b.wait_for(b.ready)
    write_atomically(tmp_path / "go", "go")
    first, second = a.outcome(), b.outcome()
    statuses = {first["status"], second["status"]}
    assert statuses == {"committed"}
    assert sorted([first["attempts"], second["attempts"]]) == [1, 2]
    got = {r[0]: r[2] for r in visible(table)}
    assert (got[0], got[5]) == ("a", "b")


STEPS = ["after_requested", "while_writing", "holding_lock", "after_publish"]


@pytest.mark.parametrize("step", STEPS)
def test_a_writer_killed_at_each_step_is_cleaned_after_its_heartbeat_expired_never_before(
    tmp_path: Path, table: tidemark.Table, options: dict, step: str
) -> None:
    before = visible(table)
    victim = Writer(tmp_path, table, options, rows([1, 2], "doomed"), crash_at=step)
    victim.wait_for(victim.crash_signal)
    victim.process.wait(timeout=30)
    doomed = victim.crash_signal.read_text()
    storage = LocalStorage(table.path)

    # readers see a consistent table at once: the dead write is either fully there or not at all
    published = Timeline.load(storage).is_completed(doomed)
    assert published == (step == "after_publish")
    expected = before if not published else sorted(
        [r for r in before if r[0] not in (1, 2)] + [(1, "p1", "doomed"), (2, "p2", "doomed")])
    assert visible(table) == expected

    # a live writer proceeds even though the lock holder died
    other = Writer(tmp_path, table, options, rows([3], "survivor"))
    assert other.outcome()["status"] == "committed"

    beat = last_heartbeat_ms(storage, doomed)
    if not published:
        if beat is not None and now_ms() - beat < EXPIRY_MS - 200:
            table.clean()  # too early: the heartbeat has not expired yet
            assert not Timeline.load(storage).is_completed(doomed)
            # Judged only if the clean ended before the heartbeat expired (a loaded machine can
            # take longer than the margin; then rolling back was right).
            if now_ms() - beat < EXPIRY_MS:
                assert any(i.requested_time == doomed for i in Timeline.load(storage)), "rolled back too early"
        deadline = time.monotonic() + 30
        while any(i.requested_time == doomed for i in Timeline.load(storage)):
            assert time.monotonic() < deadline, "never cleaned"
            table.clean()
            time.sleep(0.1)
        rollbacks = Timeline.load(storage).filter(actions=[Action.ROLLBACK], states=[State.COMPLETED])
        assert len(rollbacks) == 1
        assert not [f for f in storage.walk_files("") if doomed in f.name]
    got = {r[0]: r[2] for r in visible(table)}
    assert got[3] == "survivor"
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == sorted((k, v) for k, v in got.items())


def test_a_live_slow_writer_is_never_rolled_back_by_another_writers_cleaning(
    tmp_path: Path, table: tidemark.Table, options: dict
) -> None:
    slow = Writer(tmp_path, table, options, rows([300], "slow"), paused=True)
    slow.wait_for(slow.ready)
    time.sleep(EXPIRY_MS * 2 / 1000)  # longer than the expiry: only its heartbeat thread keeps it alive
    fast = Writer(tmp_path, table, options, rows([301], "fast"))
    assert fast.outcome()["status"] == "committed"
    table.clean()
    write_atomically(tmp_path / "go", "go")
    assert slow.outcome()["status"] == "committed"
    got = {r[0]: r[2] for r in visible(table)}
    assert (got[300], got[301]) == ("slow", "fast")


def test_lock_that_cannot_be_had_names_its_holder(tmp_path: Path, table: tidemark.Table, options: dict) -> None:
    from tidemark.concurrency.transaction import TableLock
    from tidemark.config import resolve_write_config

    config = resolve_write_config(options)
    holder = TableLock(config.lock, table.path)
    holder.acquire("hold for the test")
    try:
        impatient = {**options, "hoodie.write.lock.wait_time_ms": "200", "hoodie.write.lock.num_retries": "1"}
        w = Writer(tmp_path, table, impatient, rows([400], "x"))
        outcome = w.outcome()
        assert outcome["error"] == "LockTimeoutError"
        assert outcome["holder"]
    finally:
        holder.release()
        holder.close()
    assert 400 not in [r[0] for r in visible(table)]


def test_two_spark_applications_write_one_table_with_the_zookeeper_lock(
    tmp_path: Path, zookeeper_server: Any
) -> None:
    options = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
               "hoodie.write.lock.provider": "zookeeper", "hoodie.write.lock.zookeeper.url": zookeeper_server.url,
               "hoodie.write.lock.zookeeper.port": str(zookeeper_server.port),
               "hoodie.write.lock.zookeeper.base_path": f"/tidemark-spark/{uuid.uuid4().hex[:10]}",
               "hoodie.write.num.retries.on.conflict.failures": "3"}
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  options=options)
    schema = "id long, part string, v string"
    a = Writer(tmp_path, table, options, [{"id": i, "part": "a", "v": "app-a"} for i in range(500)],
               engine="spark", schema=schema, paused=True)
    b = Writer(tmp_path, table, options, [{"id": 1000 + i, "part": "b", "v": "app-b"} for i in range(500)],
               engine="spark", schema=schema, paused=True)
    a.wait_for(a.ready, timeout=180)
    b.wait_for(b.ready, timeout=180)  # both applications have written their files; neither has committed
    write_atomically(tmp_path / "go", "go")
    outcomes = [a.outcome(timeout=180), b.outcome(timeout=180)]
    assert [o["status"] for o in outcomes] == ["committed", "committed"]
    got = table.read()
    assert got.num_rows == 1000
    assert sorted(set(zip(got.column("part").to_pylist(), got.column("v").to_pylist(), strict=True))) == [
        ("a", "app-a"), ("b", "app-b")]
    assert hudi_rs_read(table.path).num_rows == 1000
    table.close()
