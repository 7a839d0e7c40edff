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


BUILT_IN_PROVIDERS = ("in_process", "filesystem", "zookeeper", "storage", "dynamodb")
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
