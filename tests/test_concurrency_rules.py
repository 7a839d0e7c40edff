"""Engine-free concurrency pieces: conflict rules, commit window, heartbeats, lock retries, modes."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from tidemark import ConfigError, LockTimeoutError, WriteConflictError
from tidemark.concurrency.conflict import CommitWindow, ConflictResolutionStrategy, PendingCommit, strategy_by_name
from tidemark.concurrency.heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_path
from tidemark.concurrency.locks.base import LockSettings
from tidemark.concurrency.transaction import TableLock
from tidemark.config import resolve_write_config
from tidemark.format.commit_metadata import CommitMetadata, WriteStat
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Instant, State, Timeline

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "in_process"}


def _stat(partition: str, file_id: str, inserts: int = 0) -> WriteStat:
    return WriteStat(partition, file_id, f"{partition}/{file_id}_0-0-0_x.parquet", None, inserts, inserts, 0, 0, 1)


def _publish(storage: LocalStorage, requested: str, completion: str, stats: tuple[WriteStat, ...]) -> Instant:
    inst = Instant(requested, Action.COMMIT, State.COMPLETED, completion)
    storage.write_atomic(f".hoodie/timeline/{inst.file_name}", CommitMetadata("UPSERT", stats).to_bytes())
    return inst


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id").close()
    return LocalStorage(str(tmp_path / "t"))


def test_candidates_are_instants_the_snapshot_did_not_contain(storage: LocalStorage) -> None:
    old = _publish(storage, "20260101000000000", "20260101000000100", ())
    # completed before our instant time was generated, but after our snapshot: still a candidate
    sneaky = _publish(storage, "20260101000000200", "20260101000000300", ())
    later = _publish(storage, "20260101000000500", "20260101000000600", ())
    window = CommitWindow("20260101000000400", frozenset({old.requested_time}))
    assert [i.requested_time for i in window.candidates(Timeline.load(storage))] == [
        sneaky.requested_time, later.requested_time]


def test_shared_file_group_conflicts_and_disjoint_ones_do_not(storage: LocalStorage) -> None:
    theirs = _publish(storage, "20260101000000200", "20260101000000300", (_stat("p1", "f1"),))
    strategy = ConflictResolutionStrategy()
    timeline = Timeline.load(storage)
    strategy.check(storage, timeline, PendingCommit("20260101000000250", (_stat("p1", "f2"),), {}, frozenset()))
    with pytest.raises(WriteConflictError) as info:
        strategy.check(storage, timeline, PendingCommit("20260101000000250", (_stat("p1", "f1"),), {}, frozenset()))
    assert info.value.conflicting_instant == theirs.requested_time
    assert info.value.file_groups == [("p1", "f1")]


def test_replacing_a_file_group_someone_wrote_conflicts(storage: LocalStorage) -> None:
    _publish(storage, "20260101000000200", "20260101000000300", (_stat("p1", "f1"),))
    mine = PendingCommit("20260101000000250", (_stat("p1", "new"),), {"p1": ("f1",)}, frozenset())
    with pytest.raises(WriteConflictError):
        ConflictResolutionStrategy().check(storage, Timeline.load(storage), mine)


def test_strategies_by_name() -> None:
    assert strategy_by_name("tidemark").check_keys
    assert not strategy_by_name("simple").check_keys
    assert not strategy_by_name(
        "org.apache.hudi.client.transaction.SimpleConcurrentFileWritesConflictResolutionStrategy").check_keys
    with pytest.raises(ConfigError):
        strategy_by_name("nonsense")


def test_heartbeat_expires_only_after_the_tolerated_misses(storage: LocalStorage) -> None:
    policy = HeartbeatPolicy(interval_ms=100, tolerable_misses=2)
    beat = Heartbeat(storage, "20260101000000000", policy).start()
    try:
        assert not policy.is_expired(storage, "20260101000000000")
        assert beat.is_alive()
    finally:
        beat.stop(delete=False)
    deadline = time.monotonic() + 5
    while not policy.is_expired(storage, "20260101000000000"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert not beat.is_alive()
    beat.stop()
    assert not storage.exists(heartbeat_path("20260101000000000"))


def test_lock_timeout_names_the_holder_after_retries(storage: LocalStorage) -> None:
    settings = LockSettings(provider="filesystem", wait_time_ms=50, num_retries=2, retry_wait_ms=10)
    holder = TableLock(settings, storage.base_path)
    holder.acquire("test")
    waiter = TableLock(settings, storage.base_path)
    try:
        started = time.monotonic()
        with pytest.raises(LockTimeoutError) as info:
            waiter.acquire("commit")
        assert time.monotonic() - started >= 0.15  # three attempts of 50 ms
        assert info.value.holder and str(info.value.holder)
    finally:
        holder.release()
        holder.close()
        waiter.close()


def test_multi_writer_mode_uses_lazy_cleaning_and_says_so_when_eager_was_asked() -> None:
    assert resolve_write_config(OCC).failed_writes_policy == "LAZY"
    assert resolve_write_config({}).failed_writes_policy == "EAGER"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = resolve_write_config({**OCC, "hoodie.clean.failed.writes.policy": "EAGER"})
    assert config.failed_writes_policy == "LAZY"
    assert any("LAZY" in str(w.message) for w in caught)


def test_hudi_lock_provider_class_names_are_accepted() -> None:
    config = resolve_write_config({**OCC, "hoodie.write.lock.provider":
                                   "org.apache.hudi.client.transaction.lock.InProcessLockProvider"})
    assert config.lock.provider == "in_process"
    with pytest.raises(ConfigError):
        resolve_write_config({**OCC, "hoodie.write.lock.provider": "zookeeper"})  # no url


def test_instant_times_from_threads_are_unique_and_increasing(tmp_path: Path) -> None:
    import threading

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="p", options=OCC)
    results: list[tidemark.CommitResult] = []

    def write(p: int) -> None:
        t = tidemark.Table.open(table.path, spark=None, options=OCC)
        for i in range(5):
            results.append(t.upsert(pa.table({"id": [i], "p": [f"p{p}"]})))

    threads = [threading.Thread(target=write, args=(p,)) for p in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    times = [r.instant_time for r in results] + [r.completion_time for r in results]
    assert len(set(times)) == len(times) == 40
    by_completion = sorted(results, key=lambda r: r.completion_time)
    for r in results:
        assert r.completion_time > r.instant_time
    # completion times follow publication order: each is above every time generated before it
    assert [r.completion_time for r in by_completion] == sorted(r.completion_time for r in results)
    assert table.read().num_rows == 20


FAST_HEARTBEAT = {**OCC, "hoodie.write.lock.provider": "filesystem", "hoodie.client.heartbeat.interval_in_ms": "100",
                  "hoodie.client.heartbeat.tolerable.misses": "2"}


def _dead_write(path: str) -> str:
    """Start a write whose heartbeat then stops: what a crashed writer leaves behind."""
    from tidemark.write.commit import CommitProtocol

    protocol = CommitProtocol(LocalStorage(path), resolve_write_config(FAST_HEARTBEAT))
    pending = protocol.start("UPSERT", Action.COMMIT)
    assert pending.heartbeat is not None
    pending.heartbeat.stop(delete=False)
    protocol.close()
    return pending.instant_time


def _wait_expired(path: str, instant: str) -> None:
    policy = HeartbeatPolicy(100, 2)
    deadline = time.monotonic() + 10
    while not policy.is_expired(LocalStorage(path), instant):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_writer_whose_heartbeat_expired_aborts_instead_of_committing(tmp_path: Path) -> None:
    from tidemark.write.commit import CommitProtocol

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=FAST_HEARTBEAT)
    protocol = CommitProtocol(LocalStorage(table.path), resolve_write_config(FAST_HEARTBEAT))
    pending = protocol.start("UPSERT", Action.COMMIT)
    assert pending.heartbeat is not None
    pending.heartbeat.stop(delete=False)  # the heartbeat thread starved: the writer looks dead
    _wait_expired(table.path, pending.instant_time)
    with pytest.raises(tidemark.HeartbeatExpiredError):
        protocol.complete(pending, [], schema_json=None)
    timeline = Timeline.load(LocalStorage(table.path))
    assert not timeline.is_completed(pending.instant_time)
    assert all(i.requested_time != pending.instant_time for i in timeline)
    protocol.close()


def test_two_cleaners_roll_a_dead_write_back_once(tmp_path: Path) -> None:
    import threading

    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=FAST_HEARTBEAT)
    table.upsert(pa.table({"id": [1]}))
    dead = _dead_write(table.path)
    _wait_expired(table.path, dead)
    start = threading.Barrier(2)
    results: list[int] = []

    def clean() -> None:
        t = tidemark.Table.open(table.path, spark=None, options=FAST_HEARTBEAT)
        start.wait()
        results.append(len(t.clean().rolled_back))
        t.close()

    threads = [threading.Thread(target=clean) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(results) == [0, 1]
    rollbacks = Timeline.load(LocalStorage(table.path)).filter(actions=[Action.ROLLBACK])
    assert len(rollbacks) == 1
    assert table.read().column("id").to_pylist() == [1]
