"""Writers whose locks do not exclude each other are refused (issue 13, item 2).

The table records its writers' concurrency mode and lock in hoodie.properties; a writer
with other settings (mode, provider, ZooKeeper lock node), or without concurrency options on
a multi-writer table, is refused before it writes anything, and the in_process lock cannot be
used by two processes on one table. Cross-process cases run writers as real OS processes
(tests/writer_process.py); every refused writer must leave the table exactly as it was,
read by tidemark and by hudi-rs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from tidemark.concurrency.writer_settings import MODE_KEY, PROVIDER_KEY
from tidemark.format.properties import PROPERTIES_PATH, parse_properties
from tidemark.storage import LocalStorage

WRITER = str(Path(__file__).with_name("writer_process.py"))
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.wait_time_ms": "2000",
    "hoodie.write.lock.num_retries": "10",
    "hoodie.write.lock.wait_time_ms_between_retry": "50",
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "4",
}
FILESYSTEM = {**OCC, "hoodie.write.lock.provider": "filesystem"}
IN_PROCESS = {**OCC, "hoodie.write.lock.provider": "in_process"}


class Writer:
    """One write in its own OS process; ``paused``: it waits at a barrier before committing."""

    def __init__(self, tmp: Path, path: str, options: dict[str, str], rows: list[dict[str, Any]],
                 *, paused: bool = False) -> None:
        name = uuid.uuid4().hex[:8]
        self.result = tmp / f"{name}.result"
        self.ready = tmp / f"{name}.ready"
        self.go = tmp / f"{name}.go"
        spec: dict[str, Any] = {"table": path, "options": options, "operation": "upsert", "rows": rows,
                                "result": str(self.result)}
        if paused:
            spec["pause_before_commit"] = {"ready": str(self.ready), "go": str(self.go)}
        spec_path = tmp / f"{name}.json"
        spec_path.write_text(json.dumps(spec))
        self.process = subprocess.Popen([sys.executable, WRITER, str(spec_path)])

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.exists():
            assert self.process.poll() is None, f"writer exited with {self.process.returncode} before its barrier"
            assert time.monotonic() < deadline, "timed out waiting for the writer's barrier"
            time.sleep(0.01)

    def release(self) -> None:
        tmp = self.go.with_suffix(".tmp")
        tmp.write_text("go")
        tmp.replace(self.go)

    def outcome(self, timeout: float = 120) -> dict[str, Any]:
        self.process.wait(timeout=timeout)
        outcome: dict[str, Any] = json.loads(self.result.read_text())
        return outcome


def rows(ids: list[int], v: str) -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % 3}", "v": v} for i in ids]


def make_table(path: Path, options: dict[str, str] | None = None) -> tidemark.Table:
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part", options=options)
    table.upsert(pa.Table.from_pylist(rows(list(range(9)), "seed")))
    return table


def state(path: str) -> tuple[Any, ...]:
    """Everything a refused writer must not change: rows (tidemark and hudi-rs), timeline, data files,
    recorded settings."""
    storage = LocalStorage(path)
    with tidemark.Table.open(path, spark=None) as reader:
        mine = rows_of(reader.read(), ["id", "part", "v"])
    theirs = rows_of(hudi_rs_read(path), ["id", "part", "v"])
    files = sorted(
        f.path for f in storage.walk_files("", skip_hidden_dirs=False)
        if not f.path.startswith((".hoodie/.locks", ".hoodie/.heartbeat"))
    )
    props = parse_properties(storage.read_bytes(PROPERTIES_PATH).decode())
    recorded = {k: v for k, v in props.items() if k.startswith("tidemark.write.")}
    return mine, theirs, files, recorded


def recorded(path: str) -> dict[str, str]:
    props = parse_properties(LocalStorage(path).read_bytes(PROPERTIES_PATH).decode())
    return {k: v for k, v in props.items() if k.startswith("tidemark.write.")}


# -- in_process ----------------------------------------------------------------------------
def test_in_process_lock_from_two_processes_is_refused(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", IN_PROCESS)
    table.upsert(pa.Table.from_pylist(rows([100], "parent")))  # this process now claims the table
    before = state(table.path)
    outcome = Writer(tmp_path, table.path, IN_PROCESS, rows([101, 102], "child")).outcome()
    assert outcome["status"] == "error" and outcome["error"] == "InProcessLockError"
    assert "filesystem" in outcome["message"] and "zookeeper" in outcome["message"]
    assert state(table.path) == before

    table.close()  # the claim goes with the last in-process-locked Table of the path
    assert Writer(tmp_path, table.path, IN_PROCESS, rows([101], "child")).outcome()["status"] == "committed"
    # ... and now the child held it: this process may claim it again
    with tidemark.Table.open(table.path, spark=None, options=IN_PROCESS) as again:
        again.upsert(pa.Table.from_pylist(rows([103], "parent")))
        assert {r[0] for r in rows_of(again.read(), ["id"])} >= {100, 101, 103}


def test_in_process_lock_still_excludes_threads_of_one_process(tmp_path: Path) -> None:
    import threading

    make_table(tmp_path / "t", IN_PROCESS).close()
    path = str(tmp_path / "t")
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            with tidemark.Table.open(path, spark=None, options=IN_PROCESS) as t:
                t.upsert(pa.Table.from_pylist(rows([1000 + n], f"t{n}")))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    got = {r[0] for r in rows_of(hudi_rs_read(path), ["id"])}
    assert {1000, 1001, 1002} <= got


# -- mismatched providers and modes --------------------------------------------------------
def test_filesystem_writer_is_refused_on_a_zookeeper_table(tmp_path: Path, zookeeper_server: Any) -> None:
    zk = {**OCC, **zookeeper_server.lock_options("tidemark-ws")}
    table = make_table(tmp_path / "t", zk)
    assert recorded(table.path)[PROVIDER_KEY] == "zookeeper"
    before = state(table.path)
    outcome = Writer(tmp_path, table.path, FILESYSTEM, rows([50, 51], "fs")).outcome()
    assert outcome["status"] == "error" and outcome["error"] == "WriterSettingsError"
    assert "zookeeper" in outcome["message"] and "filesystem" in outcome["message"]
    assert state(table.path) == before
    # another ZooKeeper lock node (base path) is another lock: refused too
    other = {**OCC, **zookeeper_server.lock_options("tidemark-ws")}
    outcome = Writer(tmp_path, table.path, other, rows([52], "zk2")).outcome()
    assert outcome["error"] == "WriterSettingsError" and "lock node" in outcome["message"]
    other_key = {**zk, "hoodie.write.lock.zookeeper.lock_key": "another-key"}
    assert Writer(tmp_path, table.path, other_key, rows([52], "zk3")).outcome()["error"] == "WriterSettingsError"
    assert state(table.path) == before
    # the recorded settings are accepted
    assert Writer(tmp_path, table.path, zk, rows([53], "zk")).outcome()["status"] == "committed"
    table.close()


def test_zookeeper_writer_is_refused_on_a_filesystem_table(tmp_path: Path, zookeeper_server: Any) -> None:
    table = make_table(tmp_path / "t")  # single writer: records nothing
    assert recorded(table.path) == {}
    table.close()
    # the first optimistic ingestion write records its settings
    assert Writer(tmp_path, str(tmp_path / "t"), FILESYSTEM, rows([20], "fs")).outcome()["status"] == "committed"
    assert recorded(str(tmp_path / "t")) == {MODE_KEY: "optimistic_concurrency_control", PROVIDER_KEY: "filesystem"}
    before = state(str(tmp_path / "t"))
    zk = {**OCC, **zookeeper_server.lock_options("tidemark-ws")}
    outcome = Writer(tmp_path, str(tmp_path / "t"), zk, rows([21], "zk")).outcome()
    assert outcome["status"] == "error" and outcome["error"] == "WriterSettingsError"
    assert state(str(tmp_path / "t")) == before


def test_plain_writer_is_refused_on_an_optimistic_table(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILESYSTEM)
    before = state(table.path)
    outcome = Writer(tmp_path, table.path, {}, rows([30, 31], "plain")).outcome()
    assert outcome["status"] == "error" and outcome["error"] == "WriterSettingsError"
    assert "single_writer" in outcome["message"] and "optimistic_concurrency_control" in outcome["message"]
    assert state(table.path) == before
    # table services without the writers' settings are refused as well
    with tidemark.Table.open(table.path, spark=None) as plain:
        for service in (plain.clean, plain.archive, plain.rollback_failed_writes):
            with pytest.raises(tidemark.WriterSettingsError):
                service()
        assert len(plain.read()) == 9  # reads never need the concurrency options
    assert state(table.path) == before
    table.close()


def test_plain_writer_opened_before_the_first_optimistic_writer_is_refused_afterwards(tmp_path: Path) -> None:
    """The check runs at every write, not only at open: a plain writer that opened the table
    while it recorded nothing is refused once an optimistic writer recorded its settings."""
    plain = make_table(tmp_path / "t")
    optimistic = Writer(tmp_path, plain.path, FILESYSTEM, rows([40], "occ"), paused=True)
    optimistic.wait_ready()  # recorded, its write pending with a live heartbeat
    before = state(plain.path)
    with pytest.raises(tidemark.WriterSettingsError):
        plain.upsert(pa.Table.from_pylist(rows([41], "plain")))
    assert state(plain.path) == before
    optimistic.release()
    assert optimistic.outcome()["status"] == "committed"
    got = dict((r[0], r[2]) for r in rows_of(hudi_rs_read(plain.path), ["id", "part", "v"]))
    assert got[40] == "occ" and 41 not in got


def test_non_blocking_writer_is_refused_on_an_optimistic_table(tmp_path: Path) -> None:
    table = tidemark.Table.create(
        str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", ordering_field="v",
        table_type="MERGE_ON_READ",
        options={**FILESYSTEM, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"},
    )
    table.upsert(pa.Table.from_pylist(rows([1, 2], "a")))
    before = state(table.path)
    nbcc = {**FILESYSTEM, "hoodie.write.concurrency.mode": "non_blocking_concurrency_control"}
    with (
        tidemark.Table.open(table.path, spark=None, options=nbcc) as other,
        pytest.raises(tidemark.WriterSettingsError, match="non_blocking_concurrency_control"),
    ):
        other.upsert(pa.Table.from_pylist(rows([3], "b")))
    assert state(table.path) == before
    table.close()


# -- matching writers ----------------------------------------------------------------------
def test_matching_writers_still_write_concurrently(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILESYSTEM)
    a = Writer(tmp_path, table.path, FILESYSTEM, rows([300, 303], "a"), paused=True)  # p0
    b = Writer(tmp_path, table.path, FILESYSTEM, rows([301, 304], "b"), paused=True)  # p1
    a.wait_ready()
    b.wait_ready()  # both pending at once
    a.release()
    b.release()
    assert [a.outcome()["status"], b.outcome()["status"]] == ["committed", "committed"]
    got = dict((r[0], r[2]) for r in rows_of(hudi_rs_read(table.path), ["id", "part", "v"]))
    assert got[300] == got[303] == "a" and got[301] == got[304] == "b"
    assert rows_of(table.read(), ["id", "v"]) == sorted(got.items())
    table.close()


def test_unrecorded_table_keeps_working_and_hudi_reads_recorded_table(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t")
    table.upsert(pa.Table.from_pylist(rows([60], "plain")))  # nothing recorded: plain writers as before
    assert recorded(table.path) == {}
    with tidemark.Table.open(table.path, spark=None, options=FILESYSTEM) as occ:
        occ.upsert(pa.Table.from_pylist(rows([61], "occ")))
    assert recorded(table.path)[MODE_KEY] == "optimistic_concurrency_control"
    assert table.recorded_writer_settings() is not None
    props = parse_properties(LocalStorage(table.path).read_bytes(PROPERTIES_PATH).decode())
    assert props["hoodie.table.checksum"]  # the rest of hoodie.properties is untouched
    got = rows_of(hudi_rs_read(table.path), ["id", "v"])
    assert (60, "plain") in got and (61, "occ") in got


# -- changing the recorded settings --------------------------------------------------------
def test_set_concurrency_is_refused_while_a_write_is_alive_then_switches(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILESYSTEM)
    live = Writer(tmp_path, table.path, FILESYSTEM, rows([70], "live"), paused=True)
    live.wait_ready()
    before = recorded(table.path)
    with pytest.raises(tidemark.WriterSettingsError, match="alive"):
        table.set_concurrency({"hoodie.write.concurrency.mode": "single_writer"})
    assert recorded(table.path) == before
    live.release()
    assert live.outcome()["status"] == "committed"

    table.set_concurrency(IN_PROCESS)
    assert recorded(table.path)[PROVIDER_KEY] == "in_process"
    outcome = Writer(tmp_path, table.path, FILESYSTEM, rows([71], "fs")).outcome()
    assert outcome["error"] == "WriterSettingsError"  # the old settings are refused now
    with tidemark.Table.open(table.path, spark=None, options=IN_PROCESS) as t:
        t.upsert(pa.Table.from_pylist(rows([72], "ip")))
        t.set_concurrency({"hoodie.write.concurrency.mode": "single_writer"})
    assert recorded(table.path) == {}
    table.upsert(pa.Table.from_pylist(rows([73], "plain")))  # back to a single writer
    got = dict((r[0], r[2]) for r in rows_of(hudi_rs_read(table.path), ["id", "part", "v"]))
    assert got[70] == "live" and got[72] == "ip" and got[73] == "plain" and 71 not in got
    table.close()


def test_cli_concurrency_shows_and_sets(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILESYSTEM)
    table.close()

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tidemark", *args], capture_output=True, text=True, timeout=120)

    shown = cli("concurrency", table.path)
    assert shown.returncode == 0 and "hoodie.write.lock.provider=filesystem" in shown.stdout
    changed = cli("concurrency", table.path, "--set", "--options",
                  "hoodie.write.concurrency.mode=optimistic_concurrency_control",
                  "hoodie.write.lock.provider=in_process")
    assert changed.returncode == 0, changed.stderr
    assert recorded(table.path)[PROVIDER_KEY] == "in_process"
    # a writing command with other settings is refused (usage error), with the recorded ones it runs
    refused = cli("clean", table.path, "--options", "hoodie.write.lock.provider=filesystem")
    assert refused.returncode == 2 and "in_process" in refused.stderr
    assert cli("clean", table.path).returncode == 0
