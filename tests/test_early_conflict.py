"""Early conflict detection through markers: direct and server-based markers, three strategies.

Scenario tests run writers as real OS processes (tests/writer_process.py) lined up
with file barriers; the in-process Spark tests use the session's SparkSession for
the later writer. Every scenario checks the table afterwards against what must be
in it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
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
from tidemark.config import resolve_write_config
from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings
from tidemark.errors import ConfigError, EarlyConflictError
from tidemark.fsview import FileSystemView
from tidemark.markers import IOType, Marker, MarkerSpec, open_marker_writer, read_markers
from tidemark.markers.direct import DirectMarkerWriter
from tidemark.markers.early_conflict import ConflictDetector, file_group_lock
from tidemark.markers.listing import MARKERS_TYPE_FILE, marked_data_files
from tidemark.markers.server import MarkerServer, MarkerServerClient
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline
from tidemark.write.commit import CommitProtocol

WRITER = str(Path(__file__).with_name("writer_process.py"))
HEARTBEAT = {"hoodie.client.heartbeat.interval_in_ms": "300", "hoodie.client.heartbeat.tolerable.misses": "4"}
PARTS = 8

OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.lock.wait_time_ms": "2000",
    "hoodie.write.lock.num_retries": "10",
    "hoodie.write.lock.wait_time_ms_between_retry": "50",
    **HEARTBEAT,
}


def detection(strategy: str | None, **extra: str) -> dict[str, str]:
    """Writer options with early conflict detection by ``strategy`` (None: detection off)."""
    if strategy is None:
        return dict(OCC)
    opts = {
        **OCC,
        "hoodie.write.concurrency.early.conflict.detection.enable": "true",
        "hoodie.write.concurrency.early.conflict.detection.strategy": strategy,
        "hoodie.write.concurrency.async.conflict.detector.period_ms": "50",
        **extra,
    }
    if strategy == "async_timeline_server":
        opts["hoodie.write.markers.type"] = "TIMELINE_SERVER_BASED"
    return opts


STRATEGIES = ["simple_direct", "transactional_direct", "async_timeline_server"]


def seed_rows() -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % PARTS}", "v": "seed"} for i in range(4 * PARTS)]


@pytest.fixture
def table(tmp_path: Path) -> Iterator[tidemark.Table]:
    t = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", options=OCC)
    t.upsert(pa.Table.from_pylist(seed_rows()))  # one file group per partition
    yield t
    t.close()


def file_group_of(table: tidemark.Table, partition: str) -> str:
    storage = LocalStorage(table.path)
    groups = FileSystemView(storage, Timeline.load(storage)).file_groups([f"part={partition}"])
    assert len(groups) == 1
    return groups[0].file_id


class Barrier:
    def __init__(self, tmp: Path, name: str) -> None:
        self.ready = tmp / f"{name}.ready"
        self.go = tmp / f"{name}.go"

    def spec(self) -> dict[str, str]:
        return {"ready": str(self.ready), "go": str(self.go)}

    def release(self) -> None:
        write_atomically(self.go, "go")


class Writer:
    """One writer process: ``pauses`` maps a hook name of writer_process.py to a barrier name."""

    def __init__(self, tmp: Path, table: tidemark.Table, options: dict[str, str], rows: list[dict[str, Any]],
                 *, pauses: tuple[str, ...] = (), **extra: Any) -> None:
        name = uuid.uuid4().hex[:8]
        self.tmp = tmp
        self.result = tmp / f"{name}.result"
        self.barriers = {hook: Barrier(tmp, f"{name}-{hook}") for hook in pauses}
        spec = {"table": table.path, "options": options, "operation": "upsert", "rows": rows,
                "result": str(self.result), "crash_signal": str(tmp / f"{name}.crashed"), **extra}
        for hook, barrier in self.barriers.items():
            spec[hook] = barrier.spec()
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(spec))
        self.process = subprocess.Popen([sys.executable, WRITER, str(path)])

    def reached(self, hook: str, timeout: float = 90) -> str:
        """Wait until the writer stands at barrier ``hook``; returns its instant time."""
        return wait_for_file(self.barriers[hook].ready, processes=[self.process], timeout=timeout, what=hook)

    def release(self, hook: str) -> None:
        self.barriers[hook].release()

    def outcome(self, timeout: float = 180) -> dict[str, Any]:
        self.process.wait(timeout=timeout)
        return json.loads(self.result.read_text())


def rows(ids: list[int], v: str) -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % PARTS}", "v": v} for i in ids]


def visible(table: tidemark.Table) -> dict[int, str]:
    return {r[0]: r[1] for r in rows_of(table.read(), ["id", "v"])}


def model(*updates: tuple[list[int], str]) -> dict[int, str]:
    state = {r["id"]: "seed" for r in seed_rows()}
    for ids, v in updates:
        state.update(dict.fromkeys(ids, v))
    return state


def files_written_by(table: tidemark.Table, instant_time: str) -> list[str]:
    """Data files of ``instant_time`` a rollback recorded as deleted (what the write had produced)."""
    storage = LocalStorage(table.path)
    timeline = Timeline.load(storage)
    from tidemark.format.commit_metadata import read_avro

    for inst in timeline.completed:
        if inst.action is Action.ROLLBACK:
            meta = read_avro(storage.read_bytes(f".hoodie/timeline/{inst.file_name}"))
            if instant_time in meta["commitsRollback"]:
                return [f for p in meta["partitionMetadata"].values() for f in p["successDeleteFiles"]]
    raise AssertionError(f"no rollback of {instant_time}")


def data_files_of(table: tidemark.Table, instant_time: str) -> list[str]:
    return [str(p) for p in Path(table.path).rglob(f"*_{instant_time}.parquet")]


# -- configuration ------------------------------------------------------------------------------


def test_detection_needs_multi_writer_mode_and_a_fitting_marker_type() -> None:
    with pytest.raises(ConfigError, match="optimistic_concurrency_control"):
        resolve_write_config({"hoodie.write.concurrency.early.conflict.detection.enable": "true"})
    with pytest.raises(ConfigError, match="works on direct markers"):
        resolve_write_config(detection("simple_direct") | {"hoodie.write.markers.type": "TIMELINE_SERVER_BASED"})
    with pytest.raises(ConfigError, match="marker server"):
        resolve_write_config(detection("async_timeline_server") | {"hoodie.write.markers.type": "DIRECT"})
    with pytest.raises(ConfigError, match="expected one of"):
        resolve_write_config(detection("bloom_direct"))
    hudi_class = "org.apache.hudi.table.marker.SimpleTransactionDirectMarkerBasedDetectionStrategy"
    config = resolve_write_config(detection(hudi_class))
    assert config.early_conflict is not None
    assert config.early_conflict.strategy is DetectionStrategy.TRANSACTIONAL_DIRECT
    server = resolve_write_config(
        {**OCC, "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
         "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    )
    assert server.early_conflict is not None
    assert server.early_conflict.strategy is DetectionStrategy.ASYNC_TIMELINE_SERVER
    assert resolve_write_config(OCC).early_conflict is None


# -- markers -------------------------------------------------------------------------------------


def test_marker_server_batches_markers_into_a_few_files_that_read_back_whole(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    instant = "20261122000000001"
    wanted = {Marker(f"part=p{i % 7}/f{i}-0_0-1-{i}_{instant}.parquet", IOType.CREATE) for i in range(300)}
    with MarkerServer(storage, instant, batch_interval_ms=5, num_threads=3) as server:
        chunks = [sorted(wanted, key=lambda m: m.name)[i::6] for i in range(6)]

        def send(chunk: list[Marker]) -> None:
            client = MarkerServerClient(server.url, instant)
            for marker in chunk:
                client.create(marker.data_file, marker.io_type)
            client.close()

        threads = [threading.Thread(target=send, args=(c,)) for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert set(MarkerServerClient(server.url, instant).markers()) == {m.name for m in wanted}
    folder = tmp_path / ".hoodie" / ".temp" / instant
    names = sorted(p.name for p in folder.iterdir())
    assert (folder / MARKERS_TYPE_FILE).read_text() == "TIMELINE_SERVER_BASED"
    marker_files = [n for n in names if n.startswith("MARKERS") and n != MARKERS_TYPE_FILE]
    assert 1 <= len(marker_files) <= 3
    assert set(read_markers(storage, instant)) == wanted
    assert marked_data_files(storage, instant) == sorted(m.data_file for m in wanted)


def test_an_acknowledged_marker_survives_the_driver_being_killed(tmp_path: Path) -> None:
    """The server answers only after the batch is on disk: SIGKILL loses no acknowledged marker."""
    url_file = tmp_path / "url"
    instant = "20261122000000002"
    script = textwrap.dedent(f"""
        import time
        from tidemark.markers.server import MarkerServer
        from tidemark.storage import LocalStorage
        server = MarkerServer(LocalStorage({str(tmp_path)!r}), {instant!r}, batch_interval_ms=20,
                              num_threads=4).start()
        open({str(url_file)!r} + ".tmp", "w").write(server.url)
        import os; os.replace({str(url_file)!r} + ".tmp", {str(url_file)!r})
        time.sleep(600)
    """)
    driver = subprocess.Popen([sys.executable, "-c", script])
    try:
        client = MarkerServerClient(wait_for_file(url_file, processes=[driver], timeout=30), instant)
        acknowledged = []
        for i in range(120):
            data_file = f"p{i % 3}/g{i}-0_0-1-{i}_{instant}.parquet"
            client.create(data_file, IOType.MERGE)
            acknowledged.append(data_file)
    finally:
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    assert set(marked_data_files(LocalStorage(str(tmp_path)), instant)) == set(acknowledged)


def test_commit_deletes_files_of_failed_task_attempts_with_server_markers(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  options={"hoodie.write.markers.type": "TIMELINE_SERVER_BASED"})
    from tidemark.write import file_group as file_group_module

    original = file_group_module.write_file_group
    leftovers: list[str] = []

    def with_failed_attempt(spec: Any, incoming: Any, **kwargs: Any) -> Any:
        # a first task attempt that wrote its file and died before reporting it
        dead = original(spec, incoming, **{**kwargs, "token": "9-9-9"})
        leftovers.append(dead.path)
        return original(spec, incoming, **kwargs)

    from tidemark.engines.arrow import file_groups

    file_groups.write_file_group = with_failed_attempt  # type: ignore[assignment]
    try:
        result = table.upsert(pa.Table.from_pylist(seed_rows()))
    finally:
        file_groups.write_file_group = original  # type: ignore[assignment]
    assert leftovers and all(not (Path(table.path) / p).exists() for p in leftovers)
    assert len(list(Path(table.path).rglob("*.parquet"))) == result.num_files == PARTS
    assert not (Path(table.path) / ".hoodie" / ".temp" / result.instant_time).exists()
    assert sorted(r["id"] for r in hudi_rs_read(table.path).to_pylist()) == list(range(4 * PARTS))


# -- the detector ------------------------------------------------------------------------------


def _pending(table: tidemark.Table, options: dict[str, str]) -> Any:
    protocol = CommitProtocol(LocalStorage(table.path), resolve_write_config(options))
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    return protocol, pending


def test_only_older_live_writers_markers_count(table: tidemark.Table) -> None:
    storage = LocalStorage(table.path)
    f0, f1 = file_group_of(table, "p0"), file_group_of(table, "p1")
    older_protocol, older = _pending(table, OCC)
    younger_protocol, younger = _pending(table, OCC)
    DirectMarkerWriter(storage, older.instant_time).create(f"part=p0/{f0}_0-1-0_{older.instant_time}.parquet",
                                                          IOType.MERGE)
    DirectMarkerWriter(storage, younger.instant_time).create(
        f"part=p1/{f1}_0-1-0_{younger.instant_time}.parquet", IOType.MERGE
    )
    base = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT, heartbeat_expiry_ms=1200)
    as_younger = ConflictDetector(storage, base.for_write(younger.instant_time, frozenset()))
    as_older = ConflictDetector(storage, base.for_write(older.instant_time, frozenset()))

    conflict = as_younger.find([("part=p0", f0)])
    assert conflict is not None
    assert (conflict.conflicting_instant, conflict.file_id, conflict.reason) == (older.instant_time, f0, "marker")
    assert as_younger.find([("part=p1", f1), ("part=p2", file_group_of(table, "p2"))]) is None
    assert as_older.find([("part=p1", f1)]) is None  # the younger writer yields, never the older

    # the older writer dies: once its heartbeat expired its marker stops counting
    assert older.heartbeat is not None
    older.heartbeat.stop(delete=False)
    deadline = time.monotonic() + 10
    while now_ms() - (last_heartbeat_ms(storage, older.instant_time) or 0) <= 1200:
        assert as_younger.find([("part=p0", f0)]) is not None  # still alive as far as anyone can tell
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert as_younger.find([("part=p0", f0)]) is None
    younger_protocol.abort(younger)
    older_protocol.close()
    younger_protocol.close()


def test_commit_conflict_check_sees_writes_completed_since_the_snapshot(table: tidemark.Table) -> None:
    storage = LocalStorage(table.path)
    snapshot = frozenset(i.requested_time for i in Timeline.load(storage).completed)
    protocol, pending = _pending(table, OCC)
    done = table.upsert(pa.Table.from_pylist(rows([3], "other")))  # completes after our snapshot
    f3 = file_group_of(table, "p3")
    plain = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT).for_write(pending.instant_time, snapshot)
    with_commits = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT, check_commit_conflict=True).for_write(
        pending.instant_time, snapshot
    )
    assert ConflictDetector(storage, plain).find([("part=p3", f3)]) is None
    conflict = ConflictDetector(storage, with_commits).find([("part=p3", f3)])
    assert conflict is not None and (conflict.conflicting_instant, conflict.reason) == (done.instant_time, "commit")
    assert ConflictDetector(storage, with_commits).find([("part=p4", file_group_of(table, "p4"))]) is None
    protocol.abort(pending)

    # A file group marked *before* another write committed to it is caught at the next marker.
    snapshot = frozenset(i.requested_time for i in Timeline.load(storage).completed)
    protocol, pending = _pending(table, OCC)
    settings = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT, check_commit_conflict=True).for_write(
        pending.instant_time, snapshot
    )
    writer = open_marker_writer(storage, pending.instant_time, MarkerSpec(early_conflict=settings))
    writer.create(f"part=p3/{f3}_0-1-0_{pending.instant_time}.parquet", IOType.MERGE)
    later = table.upsert(pa.Table.from_pylist(rows([3], "again")))
    with pytest.raises(EarlyConflictError) as caught:
        writer.create(f"part=p4/{file_group_of(table, 'p4')}_0-1-1_{pending.instant_time}.parquet", IOType.MERGE)
    assert (caught.value.conflicting_instant, caught.value.file_id, caught.value.reason) == (
        later.instant_time, f3, "commit")
    protocol.abort(pending)
    protocol.close()


def test_transactional_strategy_checks_and_creates_under_the_file_group_lock(table: tidemark.Table) -> None:
    """While the older writer holds partition/fileId's lock, the younger one's check waits for it and
    then sees the marker created under it: the race the simple strategy leaves open is closed."""
    storage = LocalStorage(table.path)
    f0 = file_group_of(table, "p0")
    older_protocol, older = _pending(table, OCC)
    younger_protocol, younger = _pending(table, OCC)
    settings = EarlyConflictSettings(DetectionStrategy.TRANSACTIONAL_DIRECT).for_write(younger.instant_time,
                                                                                       frozenset())
    script = textwrap.dedent(f"""
        import json, sys
        from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings
        from tidemark.errors import EarlyConflictError
        from tidemark.markers import IOType, MarkerSpec, open_marker_writer
        from tidemark.storage import LocalStorage
        settings = EarlyConflictSettings(DetectionStrategy.TRANSACTIONAL_DIRECT).for_write(
            {younger.instant_time!r}, frozenset())
        writer = open_marker_writer(LocalStorage({table.path!r}), {younger.instant_time!r},
                                    MarkerSpec(early_conflict=settings))
        print("checking", flush=True)
        try:
            writer.create("part=p0/{f0}_1-1-1_{younger.instant_time}.parquet", IOType.MERGE)
        except EarlyConflictError as e:
            print(json.dumps(e.payload()), flush=True)
        else:
            print("created", flush=True)
    """)
    with file_group_lock(storage, "part=p0", f0):  # the older writer, between its check and its marker
        younger_writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert younger_writer.stdout is not None
        assert younger_writer.stdout.readline().strip() == "checking"
        DirectMarkerWriter(storage, older.instant_time).create(
            f"part=p0/{f0}_0-1-0_{older.instant_time}.parquet", IOType.MERGE
        )
        assert younger_writer.poll() is None  # blocked on the lock, has not looked yet
    out, _ = younger_writer.communicate(timeout=60)
    payload = json.loads(out.strip().splitlines()[-1])
    assert (payload["conflicting_instant"], payload["file_id"]) == (older.instant_time, f0)
    assert settings.strategy is DetectionStrategy.TRANSACTIONAL_DIRECT
    assert marked_data_files(storage, younger.instant_time) == []  # no marker, no file
    for protocol, pending in ((younger_protocol, younger), (older_protocol, older)):
        protocol.abort(pending)
        protocol.close()


def test_marker_writer_refuses_before_creating_anything(table: tidemark.Table) -> None:
    storage = LocalStorage(table.path)
    f5 = file_group_of(table, "p5")
    older_protocol, older = _pending(table, OCC)
    younger_protocol, younger = _pending(table, OCC)
    DirectMarkerWriter(storage, older.instant_time).create(f"part=p5/{f5}_0-1-0_{older.instant_time}.parquet",
                                                          IOType.MERGE)
    for strategy in (DetectionStrategy.SIMPLE_DIRECT, DetectionStrategy.TRANSACTIONAL_DIRECT):
        settings = EarlyConflictSettings(strategy).for_write(younger.instant_time, frozenset())
        writer = open_marker_writer(storage, younger.instant_time, MarkerSpec(early_conflict=settings))
        with pytest.raises(EarlyConflictError) as caught:
            writer.create(f"part=p5/{f5}_0-2-0_{younger.instant_time}.parquet", IOType.MERGE)
        assert caught.value.strategy == strategy.value
        assert EarlyConflictError.from_text(f"Py4JJavaError: ... {caught.value} ...") is not None
        writer.create(f"part=p6/new-0_0-2-0_{younger.instant_time}.parquet", IOType.CREATE)  # other groups pass
    assert marked_data_files(storage, younger.instant_time) == [f"part=p6/new-0_0-2-0_{younger.instant_time}.parquet"]
    for protocol, pending in ((younger_protocol, younger), (older_protocol, older)):
        protocol.abort(pending)
        protocol.close()


# -- scenarios with real writer processes ------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_later_writer_on_a_held_file_group_stops_before_writing_anything(
    tmp_path: Path, table: tidemark.Table, strategy: str
) -> None:
    f0 = file_group_of(table, "p0")
    a = Writer(tmp_path, table, detection(strategy), rows([0], "a"), pauses=("pause_before_commit",))
    a_instant = a.reached("pause_before_commit")  # A has written file group F and holds its marker
    b = Writer(tmp_path, table, detection(strategy), rows(list(range(1, 4 * PARTS)) + [8], "b"))
    b_out = b.outcome()
    assert b_out["status"] == "error" and b_out["error"] == "EarlyConflictError"
    assert b_out["conflicting_instant"] == a_instant
    assert b_out["file_groups"] == [["part=p0", f0]]
    assert files_written_by(table, b_out["instant_time"]) == []  # stopped before its first file
    assert data_files_of(table, b_out["instant_time"]) == []
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    expected = model(([0], "a"))
    assert visible(table) == expected
    assert {r["id"]: r["v"] for r in hudi_rs_read(table.path).to_pylist()} == expected


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_file_group_taken_while_the_job_runs_stops_the_job(
    tmp_path: Path, table: tidemark.Table, strategy: str
) -> None:
    """The driver's check passed; the older writer takes F afterwards; B's tasks find it."""
    a = Writer(tmp_path, table, detection(strategy), rows([0], "a"),
               pauses=("pause_before_write", "pause_before_commit"))
    a_instant = a.reached("pause_before_write")  # older than B, no marker yet
    b = Writer(tmp_path, table, detection(strategy), rows(list(range(1, 4 * PARTS)) + [8], "b"),
               pauses=("pause_after_early_check",))
    b_instant = b.reached("pause_after_early_check")
    assert a_instant < b_instant
    a.release("pause_before_write")
    a.reached("pause_before_commit")  # A now holds F's marker
    b.release("pause_after_early_check")
    b_out = b.outcome()
    assert b_out["status"] == "error" and b_out["error"] == "EarlyConflictError", b_out
    assert b_out["conflicting_instant"] == a_instant
    assert b_out["file_groups"] == [["part=p0", file_group_of(table, "p0")]]
    assert data_files_of(table, b_instant) == []  # everything B wrote was rolled back
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    assert visible(table) == model(([0], "a"))


def test_without_detection_the_later_writer_finds_out_at_commit(tmp_path: Path, table: tidemark.Table) -> None:
    a = Writer(tmp_path, table, detection(None), rows([0], "a"), pauses=("pause_before_commit",))
    a.reached("pause_before_commit")
    b = Writer(tmp_path, table, detection(None), rows([8, 1], "b"), pauses=("pause_before_commit",))
    b_instant = b.reached("pause_before_commit")
    assert data_files_of(table, b_instant)  # B wrote all its files
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    b.release("pause_before_commit")
    b_out = b.outcome()
    assert b_out["status"] == "error" and b_out["error"] == "WriteConflictError"
    assert len(files_written_by(table, b_instant)) == 2  # the work was done, and thrown away
    assert visible(table) == model(([0], "a"))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_writers_on_disjoint_file_groups_never_stop_each_other(
    tmp_path: Path, table: tidemark.Table, strategy: str
) -> None:
    opts = detection(strategy, **{"hoodie.write.concurrency.early.conflict.check.commit.conflict": "true"})
    a = Writer(tmp_path, table, opts, rows([0, 1], "a"), pauses=("pause_before_commit",))
    a.reached("pause_before_commit")
    b = Writer(tmp_path, table, opts, rows([2, 3, 4, 5, 6, 7, 100], "b"), pauses=("pause_before_commit",))
    b.reached("pause_before_commit")
    a.release("pause_before_commit")
    b.release("pause_before_commit")
    assert [a.outcome()["status"], b.outcome()["status"]] == ["committed", "committed"]
    assert visible(table) == model(([0, 1], "a"), ([2, 3, 4, 5, 6, 7, 100], "b"))


def test_a_crashed_writers_markers_stop_blocking_once_its_heartbeat_expired(
    tmp_path: Path, table: tidemark.Table
) -> None:
    opts = detection("simple_direct")
    dead = Writer(tmp_path, table, opts, rows([0], "dead"), crash_at="while_writing")
    dead.process.wait(timeout=90)
    dead_instant = (tmp_path / Path(dead.result).name.replace(".result", ".crashed")).read_text()
    storage = LocalStorage(table.path)
    assert marked_data_files(storage, dead_instant)
    started = time.monotonic()
    b = Writer(tmp_path, table, opts, rows([8], "b"))
    b_out = b.outcome()
    beat_age = now_ms() - (last_heartbeat_ms(storage, dead_instant) or 0)
    if b_out["status"] == "error":  # B came while the dead writer still looked alive
        assert b_out["error"] == "EarlyConflictError" and b_out["conflicting_instant"] == dead_instant
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 30
        while now_ms() - (last_heartbeat_ms(storage, dead_instant) or 0) <= 1200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        b_out = Writer(tmp_path, table, opts, rows([8], "b")).outcome()
    else:
        assert beat_age > 1200
    assert b_out["status"] == "committed"
    if dead_instant in {i.requested_time for i in Timeline.load(storage)}:
        # B's start (which rolls back expired writes) came just before the heartbeat expired and
        # its marker check just after: B ignored the dead markers and left the rollback to the
        # next writer or clean. That one must roll it back now, and never while it looked alive.
        assert beat_age > 1200
        cleaner = tidemark.Table.open(table.path, spark=None, options=opts)
        assert [r.rolled_back.requested_time for r in cleaner.rollback_failed_writes()] == [dead_instant]
        cleaner.close()
    assert dead_instant not in {i.requested_time for i in Timeline.load(storage)}  # rolled back lazily
    assert visible(table) == model(([8], "b"))


def test_retry_after_an_early_conflict_waits_for_the_holder_then_commits(
    tmp_path: Path, table: tidemark.Table
) -> None:
    opts = detection("simple_direct", **{"hoodie.write.num.retries.on.conflict.failures": "2"})
    a = Writer(tmp_path, table, opts, rows([0], "a"), pauses=("pause_before_commit",))
    a_instant = a.reached("pause_before_commit")
    b = Writer(tmp_path, table, opts, rows([8, 1], "b"))
    storage = LocalStorage(table.path)
    deadline = time.monotonic() + 90
    while not any(i.action is Action.ROLLBACK for i in Timeline.load(storage).completed):
        assert b.process.poll() is None and time.monotonic() < deadline  # B waits for A, it does not give up
        time.sleep(0.02)
    a.release("pause_before_commit")
    assert a.outcome()["instant_time"] == a_instant
    b_out = b.outcome()
    assert b_out["status"] == "committed" and b_out["attempts"] == 2
    assert visible(table) == model(([0], "a"), ([8, 1], "b"))


# -- Spark ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_spark_write_stops_at_a_file_group_taken_while_its_job_runs(
    spark: Any, tmp_path: Path, strategy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B is a Spark write in this process: its task raises, the job stops, the driver rolls back."""
    path = str(tmp_path / "t")
    seed = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OCC)
    seed.upsert(pa.Table.from_pylist(seed_rows()))
    seed.close()
    table = tidemark.Table.open(path, spark=spark, options=detection(strategy))
    a = Writer(tmp_path, table, detection(strategy), rows([0], "a"),
               pauses=("pause_before_write", "pause_before_commit"))
    a_instant = a.reached("pause_before_write")

    from tidemark.write.client import WriteClient

    original = WriteClient._check_early

    def check_then_let_a_write(self: Any, pending: Any, file_groups: Any) -> None:
        original(self, pending, file_groups)  # passes: A holds no marker yet
        a.release("pause_before_write")
        a.reached("pause_before_commit")

    monkeypatch.setattr(WriteClient, "_check_early", check_then_let_a_write)
    batch = spark.createDataFrame(rows(list(range(1, 4 * PARTS)) + [8], "b"), "id long, part string, v string")
    with pytest.raises(EarlyConflictError) as caught:
        table.upsert(batch)
    error = caught.value
    assert error.conflicting_instant == a_instant
    assert error.file_groups == [("part=p0", file_group_of(table, "p0"))]
    assert data_files_of(table, error.instant_time or "") == []
    assert error.instant_time not in {i.requested_time for i in table.timeline()}
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    monkeypatch.undo()
    assert visible(table) == model(([0], "a"))
    table.close()


def test_a_retried_spark_task_leaves_no_duplicate_file(tmp_path: Path) -> None:
    """A Spark application whose every first task attempt dies after writing its file."""
    path = str(tmp_path / "t")
    seed = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OCC)
    seed.upsert(pa.Table.from_pylist(seed_rows()))
    seed.close()
    hooks = Path(__file__).with_name("failing_first_attempt_daemon.py")
    result = tmp_path / "result.json"
    one_task = {**OCC, "hoodie.upsert.shuffle.parallelism": "1"}  # each worker is a fresh process here
    spec = {"table": path, "options": one_task, "operation": "upsert", "rows": rows(list(range(4 * PARTS)), "b"),
            "schema": "id long, part string, v string", "engine": "spark", "spark_master": "local[1,2]",
            "spark_conf": {"spark.python.use.daemon": "false", "spark.python.worker.module": hooks.stem,
                           "spark.executorEnv.PYTHONPATH": str(hooks.parent)},
            "result": str(result)}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hooks.parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, WRITER, str(tmp_path / "spec.json")], check=True, env=env, timeout=300)
    out = json.loads(result.read_text())
    assert out["status"] == "committed", out
    failed = list(tmp_path.glob("t/**/*_*-*-*_" + out["instant_time"] + ".parquet"))
    per_group: dict[str, int] = {}
    for f in failed:
        per_group[f.name.split("_", 1)[0]] = per_group.get(f.name.split("_", 1)[0], 0) + 1
    assert per_group and set(per_group.values()) == {1}  # one file per file group: the retry's
    attempts_log = tmp_path / "attempts.log"
    assert attempts_log.exists() and "first attempt died" in attempts_log.read_text()
    assert {r["id"]: r["v"] for r in hudi_rs_read(path).to_pylist()} == model((list(range(4 * PARTS)), "b"))


# -- CLI --------------------------------------------------------------------------------------------


def test_markers_command_lists_writers_heartbeats_markers_and_shared_file_groups(
    table: tidemark.Table, capsys: pytest.CaptureFixture[str]
) -> None:
    from tidemark.cli.main import main

    storage = LocalStorage(table.path)
    f0, f1 = file_group_of(table, "p0"), file_group_of(table, "p1")
    first_protocol, first = _pending(table, OCC)
    second_protocol, second = _pending(table, OCC)
    DirectMarkerWriter(storage, first.instant_time).create(f"part=p0/{f0}_0-1-0_{first.instant_time}.parquet",
                                                          IOType.MERGE)
    with MarkerServer(storage, second.instant_time, batch_interval_ms=5, num_threads=2) as server:
        client = MarkerServerClient(server.url, second.instant_time)
        client.create(f"part=p0/{f0}_0-2-0_{second.instant_time}.parquet", IOType.MERGE)
        client.create(f"part=p1/{f1}_0-2-1_{second.instant_time}.parquet", IOType.MERGE)
        client.create(f"part=p2/new-0_0-2-2_{second.instant_time}.parquet", IOType.CREATE)

    assert main(["markers", table.path, "--json", "--files"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by_instant = {w["instant"]: w for w in doc["writers"]}
    assert set(by_instant) == {first.instant_time, second.instant_time}
    one, two = by_instant[first.instant_time], by_instant[second.instant_time]
    assert (one["marker_type"], one["markers"], one["heartbeat"]) == ("direct", 1, "alive")
    assert (two["marker_type"], two["markers"], two["partitions"], two["file_groups"]) == ("server", 3, 3, 3)
    assert one["shares_file_groups_with"] == {second.instant_time: 1}
    assert f"part=p2/new-0_0-2-2_{second.instant_time}.parquet.marker.CREATE" in two["marker_files"]

    assert main(["markers", table.path]) == 0
    out = capsys.readouterr().out
    assert "2 pending write(s), 2 with a live heartbeat" in out
    assert first.instant_time in out and second.instant_time in out and "alive" in out

    for protocol, pending in ((second_protocol, second), (first_protocol, first)):
        protocol.abort(pending)
        protocol.close()
    assert main(["markers", table.path]) == 0
    assert "no active writers" in capsys.readouterr().out


# -- markers drive rollback, whatever their type ------------------------------------------------


@pytest.mark.parametrize("marker_type", ["DIRECT", "TIMELINE_SERVER_BASED"])
def test_a_crashed_writes_files_are_found_by_its_markers_and_rolled_back(
    tmp_path: Path, table: tidemark.Table, marker_type: str
) -> None:
    opts = {**OCC, "hoodie.write.markers.type": marker_type}
    dead = Writer(tmp_path, table, opts, rows(list(range(4 * PARTS)), "dead"), crash_at="while_writing")
    dead.process.wait(timeout=90)
    dead_instant = (tmp_path / Path(dead.result).name.replace(".result", ".crashed")).read_text()
    storage = LocalStorage(table.path)
    written = data_files_of(table, dead_instant)
    assert written and {str(Path(table.path) / f) for f in marked_data_files(storage, dead_instant)} >= set(written)
    assert (Path(table.path, ".hoodie/.temp", dead_instant, MARKERS_TYPE_FILE).exists()
            == (marker_type == "TIMELINE_SERVER_BASED"))
    assert visible(table) == model()  # invisible while pending
    result = table.rollback(dead_instant, force=True)  # its heartbeat has not expired yet: we know it is dead
    assert sorted(str(Path(table.path) / f) for f in result.deleted_files) == sorted(written)
    assert data_files_of(table, dead_instant) == []
    assert not Path(table.path, ".hoodie/.temp", dead_instant).exists()


def test_spark_write_with_the_marker_server(spark: Any, tmp_path: Path) -> None:
    opts = {"hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
            "hoodie.markers.timeline_server_based.batch.num_threads": "4"}
    table = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="part",
                                  options=opts)
    schema = "id long, part string, v string"
    spark.sparkContext.setJobGroup("the-users-group", "the user's own jobs")
    first = table.bulk_insert(spark.createDataFrame(rows(list(range(40)), "one"), schema))
    second = table.upsert(spark.createDataFrame(rows([1, 2, 3, 100], "two"), schema))
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == "the-users-group"  # given back
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert first.num_files >= PARTS and second.num_updates == 3 and second.num_inserts == 1
    assert list(Path(table.path, ".hoodie/.temp").glob("*")) == []  # markers go with the commit
    expected = {i: "one" for i in range(40)} | {1: "two", 2: "two", 3: "two", 100: "two"}
    assert visible(table) == expected
    assert {r["id"]: r["v"] for r in hudi_rs_read(table.path).to_pylist()} == expected
    table.close()


def test_a_task_that_stops_signals_the_driver_which_cancels_the_job(table: tidemark.Table) -> None:
    """Engines retry failed tasks; the signal file lets the driver cancel at the first stop."""
    from tidemark.markers.early_conflict import ConflictSignalWatcher

    storage = LocalStorage(table.path)
    f0 = file_group_of(table, "p0")
    older_protocol, older = _pending(table, OCC)
    younger_protocol, younger = _pending(table, OCC)
    DirectMarkerWriter(storage, older.instant_time).create(f"part=p0/{f0}_0-1-0_{older.instant_time}.parquet",
                                                          IOType.MERGE)
    cancelled = threading.Event()
    watcher = ConflictSignalWatcher(storage, younger.instant_time, cancelled.set, poll_ms=10).start()
    settings = EarlyConflictSettings(DetectionStrategy.SIMPLE_DIRECT).for_write(younger.instant_time, frozenset())
    writer = open_marker_writer(storage, younger.instant_time, MarkerSpec(early_conflict=settings))
    assert not cancelled.is_set()
    with pytest.raises(EarlyConflictError):
        writer.create(f"part=p0/{f0}_0-2-0_{younger.instant_time}.parquet", IOType.MERGE)
    assert cancelled.wait(timeout=30)
    signalled = watcher.stop()
    assert signalled is not None and (signalled.conflicting_instant, signalled.file_id) == (older.instant_time, f0)
    assert marked_data_files(storage, younger.instant_time) == []  # the signal is not a marker
    for protocol, pending in ((younger_protocol, younger), (older_protocol, older)):
        protocol.abort(pending)
        protocol.close()
