"""The lock-provider seam: one small protocol, implementations chosen by name.

A provider guards one table. It is **not reentrant**: a holder that asks again
blocks like anyone else. ``try_acquire`` waits at most ``timeout`` seconds and
returns whether the lock is now held by this provider object; it never raises
for "somebody else holds it". ``owner()`` describes the current holder where the
provider can know it (for error messages), else None.

Providers are built by :func:`create_lock_provider` from a :class:`LockSettings`
(resolved options), the table's base path and (optionally) its open storage; register new
ones with :func:`register_lock_provider`. A factory takes ``(settings, table_path)`` and, if it
accepts a third argument, the table's :class:`~tidemark.storage.Storage` (or None).

Lease-based providers (``storage``, ``dynamodb``) can lose a lock they hold without releasing
it (they paused past the lease). They expose ``assert_held()``, which the commit protocol calls
right before it publishes a completed instant; it raises
:class:`~tidemark.errors.LockLostError` when the lock is no longer safely held.
"""

from __future__ import annotations

import importlib
import inspect
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tidemark.storage import Storage

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
    # storage: one lock object under <table>/.hoodie/.locks/ (Hudi's StorageBasedLockProvider)
    storage_validity_s: int = 300
    storage_renew_interval_s: int = 30
    # dynamodb (Hudi's DynamoDBBasedLockProvider); the lease is wait_time_ms, as in Hudi
    dynamodb_table: str = "hudi_locks"
    dynamodb_partition_key: str | None = None  # None: the table's name (hoodie.table.name)
    dynamodb_region: str | None = None  # None: $AWS_REGION, else us-east-1
    dynamodb_endpoint_url: str | None = None
    dynamodb_billing_mode: str = "PAY_PER_REQUEST"
    dynamodb_read_capacity: int = 20
    dynamodb_write_capacity: int = 10
    dynamodb_table_creation_timeout_ms: int = 120_000
    extra: dict[str, str] = field(default_factory=dict)


def owner_id() -> str:
    """A readable identity of this process for lock files and ZooKeeper nodes."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


Factory = Callable[..., LockProvider]  # (settings, table_path[, storage])
_REGISTRY: dict[str, Factory] = {}
# Built-in providers loaded by module name when first used (kazoo and boto3 are optional).
_BUILTIN_MODULES = {
    "storage": "tidemark.concurrency.locks.storage_lock",
    "dynamodb": "tidemark.concurrency.locks.dynamodb",
}
_BUILTIN = ("in_process", "filesystem", "zookeeper", *_BUILTIN_MODULES)
_ALIASES: dict[str, str] = {
    "org.apache.hudi.client.transaction.lock.InProcessLockProvider": "in_process",
    "org.apache.hudi.client.transaction.lock.FileSystemBasedLockProvider": "filesystem",
    "org.apache.hudi.client.transaction.lock.ZookeeperBasedLockProvider": "zookeeper",
    "org.apache.hudi.client.transaction.lock.ZookeeperBasedImplicitBasePathLockProvider": "zookeeper",
    "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider": "storage",
    "org.apache.hudi.aws.transaction.lock.DynamoDBBasedLockProvider": "dynamodb",
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
    if key not in _BUILTIN and key not in _REGISTRY:
        known = sorted({*_BUILTIN, *_REGISTRY})
        raise ConfigError(
            f"unknown lock provider {name!r}; use one of {known} or a Hudi class name",
            key="hoodie.write.lock.provider",
        )
    return key


def create_lock_provider(settings: LockSettings, table_path: str, storage: Storage | None = None) -> LockProvider:
    """The provider named by ``settings`` for the table at ``table_path`` (``storage``: the table's
    open storage, which providers that keep their lock in the table use instead of opening it)."""
    name = canonical_provider_name(settings.provider)
    if name not in _REGISTRY:
        # Built-in providers register themselves on import; import lazily (kazoo is optional).
        if name == "in_process":
            from tidemark.concurrency.locks import in_process  # noqa: F401
        elif name == "filesystem":
            from tidemark.concurrency.locks import filesystem  # noqa: F401
        elif name == "zookeeper":
            from tidemark.concurrency.locks import zookeeper  # noqa: F401
        elif name in _BUILTIN_MODULES:
            importlib.import_module(_BUILTIN_MODULES[name])
    factory = _REGISTRY[name]
    if storage is not None and _takes_storage(factory):
        return factory(settings, table_path, storage)
    return factory(settings, table_path)


def _takes_storage(factory: Any) -> bool:
    try:
        return len(inspect.signature(factory).parameters) >= 3
    except (TypeError, ValueError):
        return False
