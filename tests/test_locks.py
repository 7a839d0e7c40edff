"""Lock providers: exclusion between objects, threads and processes; owners; dead holders.

The ZooKeeper tests run against a real server started by the session fixture below
(installed by scripts/install-services.sh). No test sleeps to hide a race: waits are
barriers or bounded polling loops with deadlines.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from signals import wait_for_file
from tidemark.concurrency.locks.base import (
    LockProvider,
    LockSettings,
    canonical_provider_name,
)
from tidemark.concurrency.locks.filesystem import FileSystemLockProvider
from tidemark.concurrency.locks.registry import create_lock_provider
from tidemark.errors import ConfigError, TidemarkError
from zookeeper import ZooKeeperServer

PROVIDERS = ["in_process", "filesystem", "zookeeper"]
CROSS_PROCESS = ["filesystem", "zookeeper"]
ZK_SESSION_MS = 2000


def _settings(name: str, request: pytest.FixtureRequest) -> LockSettings:
    if name != "zookeeper":
        return LockSettings(provider=name)
    server: ZooKeeperServer = request.getfixturevalue("zookeeper_server")
    return LockSettings(
        provider=name,
        zk_url=server.url,
        zk_port=server.port,
        zk_base_path=f"/tidemark-tests/{uuid.uuid4().hex[:12]}",  # no interference between tests
        zk_session_timeout_ms=ZK_SESSION_MS,
        zk_connection_timeout_ms=15_000,
    )


MakeProvider = Callable[[], Any]


@pytest.fixture(params=PROVIDERS)
def provider_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def lock_settings(provider_name: str, request: pytest.FixtureRequest) -> LockSettings:
    return _settings(provider_name, request)


@pytest.fixture
def make_provider(lock_settings: LockSettings, tmp_path: Path) -> Iterator[MakeProvider]:
    """Build providers for one table (all sharing the lock); all are closed at teardown."""
    table = str(tmp_path / "table")
    made: list[Any] = []

    def make() -> Any:
        provider = create_lock_provider(lock_settings, table)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        provider.close()


def _provider(settings: LockSettings, table: str) -> Any:
    """A provider as built by the registry (every built-in one also has ``owner_id``)."""
    return create_lock_provider(settings, table)


def _fs(settings: LockSettings, table: str) -> FileSystemLockProvider:
    provider = create_lock_provider(replace(settings, provider="filesystem"), table)
    assert isinstance(provider, FileSystemLockProvider)
    return provider


def _wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.01)


# -- every provider ------------------------------------------------------------------------


def test_mutual_exclusion(make_provider: MakeProvider) -> None:
    first, second = make_provider(), make_provider()
    assert first.try_acquire(5)
    assert not second.try_acquire(0)
    started = time.monotonic()
    assert not second.try_acquire(0.1)
    assert time.monotonic() - started >= 0.09  # it really waited for the timeout
    first.release()
    assert second.try_acquire(5)
    assert not first.try_acquire(0.05)
    second.release()
    assert first.try_acquire(5)
    first.release()


def test_owner_names_the_holder(make_provider: MakeProvider) -> None:
    holder, other = make_provider(), make_provider()
    assert holder.owner() is None and other.owner() is None
    assert holder.try_acquire(5)
    for seen_by in (holder, other):
        described = seen_by.owner()
        assert described is not None and holder.owner_id in described
    holder.release()
    assert other.owner() is None


def test_not_reentrant_and_release_is_safe(make_provider: MakeProvider) -> None:
    provider, other = make_provider(), make_provider()
    provider.release()  # not held: a no-op
    assert provider.try_acquire(5)
    assert not provider.try_acquire(0.05)  # a holder asking again waits like anyone else
    provider.release()
    provider.release()  # twice: still a no-op
    assert other.try_acquire(5)  # the failed re-acquire left nothing behind
    provider.release()  # a non-holder's release does not free the holder's lock
    assert not provider.try_acquire(0.05)
    other.close()  # close releases
    assert provider.try_acquire(5)
    provider.release()


def test_release_wakes_a_waiting_thread(make_provider: MakeProvider) -> None:
    holder, waiter = make_provider(), make_provider()
    assert holder.try_acquire(5)
    waiting = threading.Event()
    result: dict[str, Any] = {}

    def wait_for_lock() -> None:
        waiting.set()
        result["acquired"] = waiter.try_acquire(30)
        result["at"] = time.monotonic()

    thread = threading.Thread(target=wait_for_lock)
    thread.start()
    assert waiting.wait(10)
    assert holder.owner() is not None
    released_at = time.monotonic()
    holder.release()
    thread.join(30)
    assert result["acquired"] is True
    assert result["at"] - released_at < 5
    waiter.release()


def test_threads_never_overlap(make_provider: MakeProvider) -> None:
    threads_n, rounds = 3, 15
    providers = [make_provider() for _ in range(threads_n)]
    inside = 0
    max_inside = 0
    entries = 0
    counter_guard = threading.Lock()
    start = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def worker(provider: Any) -> None:
        nonlocal inside, max_inside, entries
        try:
            start.wait(10)
            for _ in range(rounds):
                assert provider.try_acquire(30)
                with counter_guard:
                    inside += 1
                    entries += 1
                    max_inside = max(max_inside, inside)
                with counter_guard:
                    inside -= 1
                provider.release()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    workers = [threading.Thread(target=worker, args=(p,)) for p in providers]
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    assert not errors
    assert entries == threads_n * rounds
    assert max_inside == 1


def test_lock_latency(make_provider: MakeProvider, provider_name: str, record_property: Any) -> None:
    provider = make_provider()
    samples = []
    for _ in range(60):
        started = time.perf_counter()
        assert provider.try_acquire(5)
        provider.release()
        samples.append(time.perf_counter() - started)
    median_ms = statistics.median(samples) * 1000
    record_property(f"{provider_name}_acquire_release_median_ms", round(median_ms, 3))
    print(f"\n[lock latency] {provider_name}: acquire+release median {median_ms:.3f} ms over {len(samples)}")
    assert median_ms < 500


# -- across processes ----------------------------------------------------------------------

CHILD = """
import json, os, sys, time
from tidemark.concurrency.locks.base import LockSettings
from tidemark.concurrency.locks.registry import create_lock_provider
args = json.loads(sys.argv[1])
provider = create_lock_provider(LockSettings(**args["settings"]), args["table"])
if not provider.try_acquire(60):
    sys.exit(3)
tmp = args["barrier"] + ".tmp"
with open(tmp, "w") as f:
    f.write(provider.owner_id)
os.replace(tmp, args["barrier"])
time.sleep(600)  # hold the lock until the test kills this process
"""


def _start_holder(settings: LockSettings, table: str, barrier: Path) -> subprocess.Popen[bytes]:
    payload = json.dumps({"settings": asdict(settings), "table": table, "barrier": str(barrier)})
    return subprocess.Popen([sys.executable, "-c", CHILD, payload], stderr=subprocess.PIPE)


def _wait_for_barrier(child: subprocess.Popen[bytes], barrier: Path, timeout: float = 60) -> str:
    try:
        return wait_for_file(barrier, processes=[child], timeout=timeout, what="the lock-holder's barrier")
    except AssertionError as failure:
        err = child.stderr.read().decode(errors="replace") if child.stderr and child.poll() is not None else ""
        raise AssertionError(f"{failure}\n{err}") from None


@pytest.mark.parametrize("name", CROSS_PROCESS)
def test_other_process_holds_then_dies_by_sigkill(
    name: str, request: pytest.FixtureRequest, tmp_path: Path, record_property: Any
) -> None:
    settings = _settings(name, request)
    table = str(tmp_path / "table")
    barrier = tmp_path / "holder-ready"
    child = _start_holder(settings, table, barrier)
    provider = _provider(settings, table)
    try:
        child_owner = _wait_for_barrier(child, barrier)
        # Exclusion across processes, and the waiter can name the other process as holder.
        assert not provider.try_acquire(0.2)
        described = provider.owner()
        assert described is not None and child_owner in described
        assert str(child.pid) in described

        child.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        child.wait(10)
        if name == "zookeeper":
            # The ephemeral node outlives the TCP connection until the session expires.
            assert not provider.try_acquire(0)
        assert provider.try_acquire(30)
        release_s = time.monotonic() - killed_at
        record_property(f"{name}_dead_holder_release_s", round(release_s, 3))
        print(f"\n[dead holder] {name}: lock acquired {release_s:.3f} s after SIGKILL of the holder")
        if name == "filesystem":
            assert release_s < 1.0
        else:
            assert release_s < 15.0
        assert provider.owner_id in (provider.owner() or "")
        provider.release()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        if child.stderr:
            child.stderr.close()
        provider.close()


@pytest.mark.parametrize("name", CROSS_PROCESS)
def test_other_process_waits_while_we_hold(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    settings = _settings(name, request)
    table = str(tmp_path / "table")
    provider = _provider(settings, table)
    code = (
        "import json, sys\n"
        "from tidemark.concurrency.locks.base import LockSettings\n"
        "from tidemark.concurrency.locks.registry import create_lock_provider\n"
        "a = json.loads(sys.argv[1])\n"
        "p = create_lock_provider(LockSettings(**a['settings']), a['table'])\n"
        "got = p.try_acquire(0.3)\n"
        "print(json.dumps({'got': got, 'owner': p.owner()}))\n"
        "p.close()\n"
    )
    payload = json.dumps({"settings": asdict(settings), "table": table})
    try:
        assert provider.try_acquire(5)
        out = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, timeout=120, check=True)
        seen = json.loads(out.stdout)
        assert seen["got"] is False
        assert provider.owner_id in seen["owner"]
        provider.release()
        out = subprocess.run([sys.executable, "-c", code, payload], capture_output=True, timeout=120, check=True)
        assert json.loads(out.stdout)["got"] is True
    finally:
        provider.close()


# -- registry ------------------------------------------------------------------------------


def test_unknown_provider_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        create_lock_provider(LockSettings(provider="redis-ish"), str(tmp_path))
    assert info.value.key == "hoodie.write.lock.provider"
    assert "redis-ish" in str(info.value)


@pytest.mark.parametrize(
    ("hudi_class", "short"),
    [
        ("org.apache.hudi.client.transaction.lock.InProcessLockProvider", "in_process"),
        ("org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider", "filesystem"),
        ("org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider", "zookeeper"),
        ("org.apache.hudi.client.transaction.lock.ZookeeperBasedImplicitBasePathLockProvider", "zookeeper"),
    ],
)
def test_hudi_class_names_map_to_short_names(hudi_class: str, short: str) -> None:
    assert canonical_provider_name(hudi_class) == short


def test_hudi_class_name_builds_the_provider(tmp_path: Path) -> None:
    from tidemark.concurrency.locks.in_process import InProcessLockProvider

    fs = create_lock_provider(
        LockSettings(provider="org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider"), str(tmp_path)
    )
    mem = create_lock_provider(
        LockSettings(provider="org.apache.hudi.client.transaction.lock.InProcessLockProvider"), str(tmp_path)
    )
    assert isinstance(fs, FileSystemLockProvider) and isinstance(mem, InProcessLockProvider)
    checked: list[LockProvider] = [fs, mem]  # both satisfy the protocol
    for provider in checked:
        provider.close()


# -- in-process specifics ------------------------------------------------------------------


def test_in_process_one_lock_per_table_whatever_the_spelling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    settings = LockSettings(provider="in_process")
    a = create_lock_provider(settings, "t1")
    b = create_lock_provider(settings, str(tmp_path / "t1") + "/")
    c = create_lock_provider(settings, "file://" + str(tmp_path / "t1"))
    other_table = create_lock_provider(settings, str(tmp_path / "t2"))
    assert a.try_acquire(1)
    assert not b.try_acquire(0) and not c.try_acquire(0)
    assert other_table.try_acquire(0)
    for p in (a, b, c, other_table):
        p.close()


def test_in_process_release_from_another_thread(tmp_path: Path) -> None:
    settings = LockSettings(provider="in_process")
    holder = create_lock_provider(settings, str(tmp_path))
    other = create_lock_provider(settings, str(tmp_path))
    assert holder.try_acquire(1)
    t = threading.Thread(target=holder.release)
    t.start()
    t.join(10)
    assert other.try_acquire(5)
    other.close()


# -- file-system specifics -----------------------------------------------------------------


def test_filesystem_lock_and_owner_files(tmp_path: Path) -> None:
    table = tmp_path / "table"
    provider = _fs(LockSettings(), str(table))
    lock_file = table / ".hoodie" / ".locks" / "table.lock"
    owner_file = Path(str(lock_file) + ".owner")
    assert provider.try_acquire(1)
    info = json.loads(owner_file.read_text())
    assert info["owner_id"] == provider.owner_id
    assert info["pid"] == os.getpid() and info["host"] == socket.gethostname()
    assert abs(info["acquired_at"] - time.time() * 1000) < 60_000
    assert not [p for p in lock_file.parent.iterdir() if p.name.endswith(".tmp")]
    provider.release()
    assert lock_file.exists() and not owner_file.exists()  # the lock file stays: the flock is the lock
    provider.close()


def test_filesystem_path_setting_file_or_directory(tmp_path: Path) -> None:
    from tidemark.concurrency.locks.filesystem import lock_file_path

    as_file = tmp_path / "locks" / "my.lock"
    assert lock_file_path(LockSettings(filesystem_path=str(as_file)), "/x/t") == str(as_file)
    assert lock_file_path(LockSettings(filesystem_path=str(tmp_path)), "/x/t") == str(tmp_path / "table.lock")
    with pytest.raises(ConfigError) as info:
        lock_file_path(LockSettings(), "s3://bucket/t")
    assert "zookeeper" in str(info.value)
    one = create_lock_provider(LockSettings(provider="filesystem", filesystem_path=str(as_file)), str(tmp_path / "a"))
    two = create_lock_provider(LockSettings(provider="filesystem", filesystem_path=str(as_file)), str(tmp_path / "b"))
    assert one.try_acquire(1) and not two.try_acquire(0)  # the same lock file: the same lock
    one.close()
    two.close()


def test_filesystem_leftover_owner_file_of_a_dead_holder_is_ignored(tmp_path: Path) -> None:
    provider = _fs(LockSettings(), str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True)
    owner_file = Path(provider.path + ".owner")
    owner_file.parent.mkdir(parents=True, exist_ok=True)
    leftover = {"owner_id": "ghost", "pid": int(dead.stdout), "host": socket.gethostname(), "acquired_at": 1}
    owner_file.write_text(json.dumps(leftover))
    assert provider.owner() is None  # nobody holds the flock
    assert provider.try_acquire(1)
    assert json.loads(owner_file.read_text())["owner_id"] == provider.owner_id
    provider.close()


def test_filesystem_expiry_is_reported_and_binds_the_holder(tmp_path: Path) -> None:
    settings = LockSettings(provider="filesystem", filesystem_expire_ms=50)
    holder = _fs(settings, str(tmp_path))
    other = _fs(settings, str(tmp_path))
    assert holder.held_for_ms() is None and not holder.expired()
    assert holder.try_acquire(1)
    assert not holder.expired()
    _wait_for(holder.expired, 10, "the holder to pass the expiry")
    assert (holder.held_for_ms() or 0) > 50
    described = other.owner()
    assert described is not None and holder.owner_id in described and "expiry" in described
    assert not other.try_acquire(0)  # a live holder is never broken by others
    holder.release()
    assert other.try_acquire(1)
    never = _fs(replace(settings, filesystem_expire_ms=0), str(tmp_path / "n"))
    assert never.try_acquire(1) and not never.expired()
    for p in (holder, other, never):
        p.close()


# -- ZooKeeper specifics -------------------------------------------------------------------


def test_zookeeper_needs_a_url(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        create_lock_provider(LockSettings(provider="zookeeper"), str(tmp_path))
    assert info.value.key == "hoodie.write.lock.zookeeper.url"


def test_zookeeper_unreachable_server_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = LockSettings(provider="zookeeper", zk_url="127.0.0.1", zk_port=port, zk_connection_timeout_ms=1000)
    with pytest.raises(TidemarkError, match=rf"cannot reach ZooKeeper at 127\.0\.0\.1:{port}.*is the server running"):
        create_lock_provider(settings, str(tmp_path))


def test_zookeeper_lock_node_path(tmp_path: Path) -> None:
    from tidemark.concurrency.locks.zookeeper import default_lock_key, lock_node_path

    key_a = default_lock_key("/data/warehouse/orders")
    assert key_a.startswith("orders-") and len(key_a) == len("orders-") + 8
    assert default_lock_key("/data/warehouse/orders/") == key_a
    assert default_lock_key("/other/orders") != key_a  # same name, different table
    assert default_lock_key("s3://b/my table!").startswith("my_table_-")
    settings = LockSettings(zk_url="h", zk_base_path="/hudi/locks/", zk_lock_key="orders")
    assert lock_node_path(settings, "/x") == "/hudi/locks/orders"
    assert lock_node_path(replace(settings, zk_lock_key=None), "/x/t").startswith("/hudi/locks/t-")


def test_zookeeper_session_expiry_of_a_live_holder_is_reported(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from kazoo.client import KazooClient

    settings = _settings("zookeeper", request)
    holder, other = _provider(settings, str(tmp_path)), _provider(settings, str(tmp_path))
    try:
        assert holder.try_acquire(5)
        assert not holder.lost
        # Expire the holder's session from outside (as a long pause or a partition would):
        # a second client joins the session and closes it.
        session_id, password = holder._client.client_id
        intruder = KazooClient(hosts=holder.hosts, client_id=(session_id, password))
        intruder.start(timeout=15)
        intruder.stop()
        intruder.close()
        assert other.try_acquire(15)  # the ephemeral node went with the session
        _wait_for(lambda: holder.lost, 15, "the holder to notice that its session expired")
        # Asking again after the loss forgets the lost lock (release is safe) and waits like anyone else.
        assert not holder.try_acquire(0.05)
        assert other.owner() == other.owner_id  # the new holder was not disturbed
        other.release()
        assert holder.try_acquire(5) and not holder.lost  # a fresh acquire on the new session
        holder.release()
        holder.release()
    finally:
        holder.close()
        other.close()
