"""The lock providers for tables on object stores: ``storage`` (a lock object in the table's own
storage, by conditional writes) and ``dynamodb`` (on the real moto server), in real processes.

* mutual exclusion across OS processes released together by a barrier;
* a SIGKILLed holder's lock is taken over once its lease ran out, and not before;
* a holder paused (SIGSTOP) past its lease inside the commit cannot publish (LockLostError),
  while the writer that took the lock over commits;
* renewal keeps a slow live holder's lock past its validity;
* the randomized multi-process history with SIGKILLs (tests/test_history.py) with either lock.

Every storage-lock test takes the table location as a parameter: ``local`` (a folder) and ``s3``
(a bucket on the moto server), which is skipped until this branch has object-store storage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from signals import wait_for_file
from tidemark.concurrency.locks.base import LockSettings
from tidemark.concurrency.locks.registry import create_lock_provider
from tidemark.concurrency.locks.storage_lock import CLOCK_DRIFT_MS, LOCK_OBJECT
from tidemark.concurrency.writer_settings import WriterSettings
from tidemark.config import resolve_write_config
from tidemark.errors import ConfigError, LockServiceError, TidemarkError, WriterSettingsError
from tidemark.storage import LocalStorage, Storage
from tidemark.storage.location import open_storage
from tidemark.timeline import Timeline

HERE = Path(__file__).parent
HOLDER = str(HERE / "lock_holder.py")
WRITER = str(HERE / "writer_process.py")
VALIDITY_S, RENEW_S = 10, 1  # Hudi's smallest validity, renewed every second
DDB_LEASE_MS = 3000  # the dynamodb lease is hoodie.write.lock.wait_time_ms, as in Hudi
DDB_TABLE = "tidemark_test_locks"


@dataclass
class Location:
    """Where a test table lives: its URI, the options that open it, and its storage."""

    uri: str
    storage_options: dict[str, str]
    storage: Storage
    local: bool = True

    def open_kwargs(self) -> dict[str, Any]:
        return {"storage_options": self.storage_options} if self.storage_options else {}

    def hudi_rs_kwargs(self) -> dict[str, Any]:
        return {} if self.local else {"storage_options": self.storage_options}


@dataclass
class LockCase:
    """A lock to test: its provider name, the LockSettings and the equivalent write options."""

    name: str
    settings: LockSettings
    options: dict[str, str] = field(default_factory=dict)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, moto_server: Any) -> Any:
    """Credentials for boto3 (the dynamodb provider's chain) in this process and its children."""
    from moto_server import ACCESS_KEY, SECRET_KEY

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    return moto_server


def _location(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Location:
    if kind == "local":
        uri = str(tmp_path / "t")
        return Location(uri, {}, LocalStorage(uri))
    moto = request.getfixturevalue("moto_server")
    uri = f"s3://{request.getfixturevalue('s3_bucket')}/t"
    options = moto.storage_options()
    try:
        storage = open_storage(uri, options)
    except TidemarkError as exc:
        pytest.skip(f"object-store tables are not on this branch yet ({exc})")
    return Location(uri, options, storage, local=False)


def _storage_case() -> LockCase:
    return LockCase("storage", LockSettings(provider="storage", storage_validity_s=VALIDITY_S,
                                            storage_renew_interval_s=RENEW_S),
                    {"hoodie.write.lock.provider": "storage",
                     "hoodie.write.lock.storage.validity.timeout.secs": str(VALIDITY_S),
                     "hoodie.write.lock.storage.renew.interval.secs": str(RENEW_S)})


def _dynamodb_case(endpoint: str) -> LockCase:
    key = f"t-{uuid.uuid4().hex[:10]}"
    settings = LockSettings(provider="dynamodb", wait_time_ms=DDB_LEASE_MS, num_retries=40, dynamodb_table=DDB_TABLE,
                            dynamodb_partition_key=key, dynamodb_region="us-east-1", dynamodb_endpoint_url=endpoint)
    return LockCase("dynamodb", settings, {
        "hoodie.write.lock.provider": "dynamodb", "hoodie.write.lock.wait_time_ms": str(DDB_LEASE_MS),
        "hoodie.write.lock.num_retries": "40", "hoodie.write.lock.dynamodb.table": DDB_TABLE,
        "hoodie.write.lock.dynamodb.partition_key": key, "hoodie.write.lock.dynamodb.region": "us-east-1",
        "hoodie.write.lock.dynamodb.endpoint_url": endpoint})


# (lock, table location): the storage lock on every location, DynamoDB next to a local table
CASES = [("storage", "local"), ("storage", "s3"), ("dynamodb", "local")]
IDS = [f"{lock}-{where}" for lock, where in CASES]


@pytest.fixture(params=CASES, ids=IDS)
def case(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[LockCase, Location]:
    lock, where = request.param
    location = _location(where, tmp_path, request)
    if lock == "storage":
        return _storage_case(), location
    return _dynamodb_case(request.getfixturevalue("aws").endpoint), location


def _spawn(tmp: Path, script: str, spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    path = tmp / f"{uuid.uuid4().hex[:8]}.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, script, str(path)])


def _holder_spec(lock: LockCase, location: Location, **extra: Any) -> dict[str, Any]:
    return {"settings": asdict(lock.settings), "table": location.uri, "storage_options": location.storage_options,
            **extra}


def _provider(lock: LockCase, location: Location) -> Any:
    return create_lock_provider(lock.settings, location.uri, location.storage)


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


# -- the lock alone ------------------------------------------------------------------------------
def test_mutual_exclusion_across_processes(tmp_path: Path, case: tuple[LockCase, Location]) -> None:
    lock, location = case
    log, barrier = tmp_path / "critical.log", tmp_path / "go"
    holders = [_spawn(tmp_path, HOLDER, _holder_spec(lock, location, mode="loop", barrier=str(barrier),
                                                     log=str(log), iterations=12)) for _ in range(4)]
    time.sleep(1.0)  # all four are up and waiting at the barrier (a late one only makes the race smaller)
    barrier.write_text("go")
    for p in holders:
        assert p.wait(timeout=240) == 0
    lines = log.read_text().split()
    pairs = list(zip(lines[0::2], lines[1::2], strict=True))
    assert len(pairs) == 4 * 12 * 2
    entries = [(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)]
    for (enter, who), (leave, same) in entries:  # every enter is followed by the same holder's exit
        assert (enter, leave) == ("enter", "exit") and who == same, "two holders inside at once"
    assert len({who for (_, who), _ in entries}) == 4


def test_a_sigkilled_holder_is_taken_over_after_its_lease_not_before(
    tmp_path: Path, case: tuple[LockCase, Location]
) -> None:
    lock, location = case
    ready = tmp_path / "ready"
    holder = _spawn(tmp_path, HOLDER, _holder_spec(lock, location, mode="hold", ready=str(ready)))
    dead_owner = json.loads(wait_for_file(ready, processes=[holder]))["owner"]
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait(timeout=30)
    killed = time.monotonic()
    waiter = _provider(lock, location)
    try:
        assert not waiter.try_acquire(0), "taken over while the dead holder's lease was still valid"
        assert dead_owner in (waiter.owner() or "")
        if lock.name == "storage":
            valid_until = json.loads(location.storage.read_bytes(LOCK_OBJECT))["validUntil"]
            assert waiter.try_acquire(VALIDITY_S + 10)
            acquired_ms = time.time_ns() // 1_000_000
            assert acquired_ms > valid_until + CLOCK_DRIFT_MS - 50, "taken over before the lease ran out"
            assert acquired_ms < valid_until + CLOCK_DRIFT_MS + 3000, "the takeover came late"
        else:
            assert waiter.try_acquire(20)
            waited = time.monotonic() - killed
            # The dead holder's lease ended at most lease ms after the kill; the waiter must have seen the
            # same record version for a whole lease before taking over.
            assert DDB_LEASE_MS / 1000 <= waited < 2 * DDB_LEASE_MS / 1000 + 3
        waiter.assert_held()
    finally:
        waiter.close()


def test_renewal_keeps_a_slow_live_holders_lock(tmp_path: Path, case: tuple[LockCase, Location]) -> None:
    lock, location = case
    validity = VALIDITY_S if lock.name == "storage" else DDB_LEASE_MS / 1000
    hold_s = validity * (1.4 if lock.name == "storage" else 2.0)
    ready, result = tmp_path / "ready", tmp_path / "result"
    holder = _spawn(tmp_path, HOLDER, _holder_spec(lock, location, mode="hold", ready=str(ready), hold_s=hold_s,
                                                   result=str(result)))
    wait_for_file(ready, processes=[holder])
    started = time.monotonic()
    waiter = _provider(lock, location)
    try:
        # Far past the lease it started with, the live holder still has the lock: it renewed it.
        assert not waiter.try_acquire(hold_s - 1.5)
        assert time.monotonic() - started > validity + 0.5
        outcome = json.loads(wait_for_file(result, processes=[holder], timeout=60))
        assert outcome == {"held": True}
        assert waiter.try_acquire(5), "the released lock was not free"
    finally:
        waiter.close()
        holder.wait(timeout=30)


def test_the_fence_after_a_lapse_renews_if_nobody_took_over_else_refuses(
    case: tuple[LockCase, Location]
) -> None:
    """A holder whose renewals stopped (its renewal thread is told to stop: a pause of the thread
    alone) gets past the fence after its lease lapsed only if its compare-and-swap renewal proves
    nobody wrote the record meanwhile; once someone took over, the fence refuses."""
    from tidemark.errors import LockLostError

    lock, location = case
    lapse = (VALIDITY_S if lock.name == "storage" else DDB_LEASE_MS / 1000) + 1.0
    first, second = _provider(lock, location), _provider(lock, location)
    try:
        assert first.try_acquire(10)
        first._stop.set()  # no more renewals
        time.sleep(lapse)
        first.assert_held()  # lapsed, but nobody took it: the fence's renewal succeeds
        assert first.remaining_s() > lock_validity(lock) / 2
        first._stop.set()
        time.sleep(lapse)
        assert second.try_acquire(lapse + 10)  # taken over
        with pytest.raises(LockLostError):
            first.assert_held()
        second.assert_held()
    finally:
        first.close()
        second.close()


def lock_validity(lock: LockCase) -> float:
    return VALIDITY_S if lock.name == "storage" else DDB_LEASE_MS / 1000


# -- the fence in the commit protocol -------------------------------------------------------------
def _write_options(lock: LockCase) -> dict[str, str]:
    return {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", **lock.options}


def test_a_paused_holder_whose_lease_ran_out_cannot_commit(tmp_path: Path, case: tuple[LockCase, Location]) -> None:
    lock, location = case
    options = _write_options(lock)
    table = tidemark.Table.create(location.uri, spark=None, record_key="id", partition_by="part", options=options,
                                  **location.open_kwargs())
    table.upsert(pa.Table.from_pylist([{"id": i, "part": f"p{i % 5}", "v": "seed"} for i in range(10)]))
    stopped = tmp_path / "stopped"
    base = {"table": location.uri, "options": options, "operation": "upsert",
            "storage_options": location.storage_options, "crash_signal": str(tmp_path / "unused")}
    victim = _spawn(tmp_path, WRITER, {**base, "rows": [{"id": 0, "part": "p0", "v": "victim"}],
                                       "result": str(tmp_path / "victim.result"), "stop_before_fence": str(stopped)})
    try:
        wait_for_file(stopped, processes=[victim], timeout=120)
        deadline = time.monotonic() + 10
        while not _stopped(victim.pid):
            assert time.monotonic() < deadline, "the victim did not stop"
            time.sleep(0.01)
        # The victim passed its conflict checks and holds the lock, frozen, renewing nothing. Another
        # writer of the same file group waits for the victim's lease to run out, takes over, commits.
        taker = _spawn(tmp_path, WRITER, {**base, "rows": [{"id": 5, "part": "p0", "v": "taker"}],
                                          "result": str(tmp_path / "taker.result")})
        assert taker.wait(timeout=120) == 0
        assert json.loads((tmp_path / "taker.result").read_text())["status"] == "committed"
    finally:
        os.kill(victim.pid, signal.SIGCONT)
    assert victim.wait(timeout=120) == 0
    outcome = json.loads((tmp_path / "victim.result").read_text())
    assert outcome["status"] == "error" and outcome["error"] == "LockLostError", outcome
    # Without the fence the victim would publish a second file slice of p0's file group, built on
    # the version before the taker's: one of the two updates would be lost.
    got = {r[0]: r[2] for r in rows_of(table.read(), ["id", "part", "v"])}
    assert got == {**{i: "seed" for i in range(10)}, 5: "taker"}
    assert not Timeline.load(location.storage).pending, "the victim's write was not rolled back"
    theirs = {r[0]: r[1] for r in rows_of(hudi_rs_read(location.uri, **location.hudi_rs_kwargs()), ["id", "v"])}
    assert theirs == got
    table.close()


# -- the randomized history ------------------------------------------------------------------------
def test_random_history_with_sigkills_under_the_object_store_locks(
    tmp_path: Path, case: tuple[LockCase, Location]
) -> None:
    from test_history import OPTIONS, run_random_history

    lock, location = case
    options = {**OPTIONS, **lock.options, "hoodie.write.lock.wait_time_ms_between_retry": "20"}
    if lock.name == "storage":
        options["hoodie.write.lock.num_retries"] = "30"
    read = None if location.local else (lambda: hudi_rs_read(location.uri, storage_options=location.storage_options))
    count = run_random_history(tmp_path, location.uri, options, storage=location.storage,
                               storage_options=location.storage_options or None, writers=3, iterations=45,
                               kills=2, min_commits=60 if location.local else 30, read=read)
    assert count >= (60 if location.local else 30)


# -- settings, refusals and errors ------------------------------------------------------------------
def test_hudi_keys_and_rules_for_the_storage_lock() -> None:
    config = resolve_write_config({"hoodie.write.lock.provider":
                                   "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"})
    assert (config.lock.provider, config.lock.storage_validity_s, config.lock.storage_renew_interval_s) == (
        "storage", 300, 30)
    old_name = resolve_write_config({"hoodie.write.lock.storage.validity.timeout.secs": "20",
                                     "hoodie.write.lock.storage.heartbeat.poll.secs": "2"})
    assert old_name.lock.storage_renew_interval_s == 2
    for bad in ({"hoodie.write.lock.storage.validity.timeout.secs": "9"},
                {"hoodie.write.lock.storage.validity.timeout.secs": "60",
                 "hoodie.write.lock.storage.renew.interval.secs": "7"},
                {"hoodie.write.lock.storage.renew.interval.secs": "2",
                 "hoodie.write.lock.storage.heartbeat.poll.secs": "3"}):
        with pytest.raises(ConfigError):
            resolve_write_config(bad)
    hudi_class = "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider"
    ddb = resolve_write_config({"hoodie.write.lock.provider": hudi_class})
    assert (ddb.lock.provider, ddb.lock.dynamodb_table, ddb.lock.dynamodb_billing_mode) == (
        "dynamodb", "hudi_locks", "PAY_PER_REQUEST")
    with pytest.raises(ConfigError):
        resolve_write_config({"hoodie.write.lock.dynamodb.billing_mode": "FREE"})


@pytest.mark.parametrize("provider", ["filesystem", "in_process"])
def test_local_only_providers_refuse_object_store_tables(provider: str) -> None:
    with pytest.raises(ConfigError, match="storage"):
        create_lock_provider(LockSettings(provider=provider), "s3://bucket/tables/t")


def test_writer_settings_record_the_lock_and_refuse_another(tmp_path: Path, aws: Any) -> None:
    ddb = _dynamodb_case(aws.endpoint)
    implicit = {k: v for k, v in ddb.options.items() if not k.endswith("partition_key")}
    path = str(tmp_path / "trips")
    table = tidemark.Table.create(path, spark=None, record_key="id", options=_write_options(
        LockCase("dynamodb", ddb.settings, implicit)))
    table.upsert(pa.Table.from_pylist([{"id": 1, "v": "a"}]))
    recorded = table.recorded_writer_settings()
    assert recorded is not None and recorded.provider == "dynamodb"
    assert (recorded.ddb_table, recorded.ddb_partition_key, recorded.ddb_endpoint_url) == (
        DDB_TABLE, "trips", aws.endpoint)  # Hudi's default partition key: the table's name
    table.close()
    same = tidemark.Table.open(path, spark=None, options=_write_options(
        LockCase("dynamodb", ddb.settings, {**implicit, "hoodie.write.lock.dynamodb.partition_key": "trips"})))
    same.upsert(pa.Table.from_pylist([{"id": 2, "v": "b"}]))
    same.close()
    for other in ({**implicit, "hoodie.write.lock.dynamodb.partition_key": "elsewhere"}, _storage_case().options):
        refused = tidemark.Table.open(path, spark=None, options=_write_options(LockCase("x", ddb.settings, other)))
        with pytest.raises(WriterSettingsError):
            refused.upsert(pa.Table.from_pylist([{"id": 3, "v": "c"}]))
        refused.close()
    storage_settings = WriterSettings.of("optimistic_concurrency_control", _storage_case().settings, path)
    assert storage_settings.to_properties() == {"tidemark.write.concurrency.mode": "optimistic_concurrency_control",
                                                "tidemark.write.lock.provider": "storage"}


def test_an_unreachable_dynamodb_endpoint_is_a_lock_service_error(tmp_path: Path, aws: Any) -> None:
    from server_process import free_port

    settings = LockSettings(provider="dynamodb", dynamodb_partition_key="t",
                            dynamodb_endpoint_url=f"http://127.0.0.1:{free_port('127.0.0.1')}")
    started = time.monotonic()
    with pytest.raises(LockServiceError, match="endpoint_url"):
        create_lock_provider(settings, str(tmp_path))
    assert time.monotonic() - started < 30
