"""Lock settings: the resolved ``hoodie.write.lock.*`` options, and lock provider names.

The providers themselves live in :mod:`tidemark.concurrency.locks`; a provider registered
there (:func:`tidemark.concurrency.locks.registry.register_lock_provider`) adds its name here,
so that options naming it resolve.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidemark.errors import ConfigError


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


BUILT_IN_PROVIDERS = ("in_process", "filesystem", "zookeeper")
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
_REGISTERED: set[str] = set()  # names of providers registered at run time


def add_provider_name(name: str) -> None:
    """Accept ``name`` as a lock provider (called when a provider registers)."""
    _REGISTERED.add(name)


def canonical_provider_name(name: str) -> str:
    key = name.strip()
    key = _ALIASES.get(key, key).lower()
    if key not in BUILT_IN_PROVIDERS and key not in _REGISTERED:
        known = sorted({*BUILT_IN_PROVIDERS, *_REGISTERED})
        raise ConfigError(
            f"unknown lock provider {name!r}; use one of {known} or a Hudi class name",
            key="hoodie.write.lock.provider",
        )
    return key
