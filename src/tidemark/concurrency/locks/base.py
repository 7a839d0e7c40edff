"""The lock-provider seam: one small protocol, implementations chosen by name.

A provider guards one table. It is **not reentrant**: a holder that asks again
blocks like anyone else. ``try_acquire`` waits at most ``timeout`` seconds and
returns whether the lock is now held by this provider object; it never raises
for "somebody else holds it". ``owner()`` describes the current holder where the
provider can know it (for error messages), else None.

Providers are built by :func:`create_lock_provider` from a :class:`LockSettings`
(resolved options) and the table's base path; register new ones with
:func:`register_lock_provider`.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tidemark.errors import ConfigError


class LockProvider(Protocol):
    def try_acquire(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the lock; True once held."""
        ...

    def release(self) -> None:
        """Release the lock if held by this provider; a no-op otherwise."""
        ...

    def owner(self) -> str | None:
        """Who holds the lock now, if known."""
        ...

    def close(self) -> None:
        """Free connections and threads (releases the lock if held)."""
        ...


@dataclass(frozen=True)
class LockSettings:
    """Resolved lock options (see tidemark.config.options for the keys)."""

    provider: str = "in_process"
    wait_time_ms: int = 60_000  # longest wait of one acquire attempt
    num_retries: int = 15
    retry_wait_ms: int = 1_000  # first pause between attempts; doubles up to max_retry_wait_ms
    max_retry_wait_ms: int = 16_000
    filesystem_path: str | None = None
    filesystem_expire_ms: int = 60_000
    zk_url: str | None = None
    zk_port: int = 2181
    zk_base_path: str = "/hudi/locks"
    zk_lock_key: str | None = None
    zk_session_timeout_ms: int = 10_000
    zk_connection_timeout_ms: int = 15_000
    extra: dict[str, str] = field(default_factory=dict)


def owner_id() -> str:
    """A readable identity of this process for lock files and ZooKeeper nodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


Factory = Callable[[LockSettings, str], LockProvider]
_REGISTRY: dict[str, Factory] = {}
_ALIASES: dict[str, str] = {
    "org.apache.hudi.client.transaction.lock.InProcessLockProvider": "in_process",
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider": "filesystem",
    "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider": "zookeeper",
    "org.apache.hudi.client.transaction.lock.ZookeeperBasedImplicitBasePathLockProvider": "zookeeper",
    "inprocess": "in_process",
    "fs": "filesystem",
    "file": "filesystem",
    "zk": "zookeeper",
}


def register_lock_provider(name: str, factory: Factory) -> None:
    _REGISTRY[name] = factory


def canonical_provider_name(name: str) -> str:
    key = name.strip()
    key = _ALIASES.get(key, key).lower()
    if key not in ("in_process", "filesystem", "zookeeper") and key not in _REGISTRY:
        known = sorted({"in_process", "filesystem", "zookeeper", *_REGISTRY})
        raise ConfigError(
            f"unknown lock provider {name!r}; use one of {known} or a Hudi class name",
            key="hoodie.write.lock.provider",
        )
    return key


def create_lock_provider(settings: LockSettings, table_path: str) -> LockProvider:
    name = canonical_provider_name(settings.provider)
    if name not in _REGISTRY:
        # Built-in providers register themselves on import; import lazily (kazoo is optional).
        if name == "in_process":
            from tidemark.concurrency.locks import in_process  # noqa: F401
        elif name == "filesystem":
            from tidemark.concurrency.locks import filesystem  # noqa: F401
        elif name == "zookeeper":
            from tidemark.concurrency.locks import zookeeper  # noqa: F401
    return _REGISTRY[name](settings, table_path)
