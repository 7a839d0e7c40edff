"""The table's recorded writer settings: the concurrency mode and the lock every writer must use.

A lock excludes only the writers that use *the same* lock: an ``in_process`` lock in two
processes, a ``filesystem`` lock next to a ``zookeeper`` one, two ZooKeeper lock nodes, or
an optimistic writer next to a writer that takes no lock at all exclude nothing, and their
commits silently overwrite or roll back each other's. So the table records the settings of
its writers in ``.hoodie/hoodie.properties``, and a writer whose settings disagree is
refused (:class:`~tidemark.errors.WriterSettingsError`) before it writes anything.

* Recorded: ``tidemark.write.concurrency.mode``, ``tidemark.write.lock.provider`` and the
  lock's identity: ``tidemark.write.lock.filesystem.path`` (only when not the table's default
  lock file), ``tidemark.write.lock.zookeeper.{url,port,base_path,lock_key}`` or
  ``tidemark.write.lock.dynamodb.{table,partition_key,region,endpoint_url}`` (the ``storage``
  provider's lock object is always the table's own ``.hoodie/.locks/table_lock.json``). The keys are
  tidemark's own (Hudi has no table-level concurrency settings), so Hudi readers and writers
  ignore them; their values are those of the matching ``hoodie.write.*`` options.
* When: at create, if the create options name a multi-writer mode; otherwise by the first
  multi-writer (optimistic or non-blocking) *ingestion* write on a table that records none.
  A table that records nothing is a single-writer table as far as tidemark knows: plain
  writers and table services work on it as before.
* Changed only by :func:`change` (``Table.set_concurrency``, ``tidemark concurrency --set``),
  under the old settings' lock and only while no pending write is alive. Setting
  ``single_writer`` removes the keys again.
* Reads never look at any of this.

Every read-modify-write of ``hoodie.properties`` here happens under an exclusive ``flock``
on ``.hoodie/.locks/hoodie.properties.lock``, a lock independent of any lock provider, so
two first writers with different providers cannot both record their own settings.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

from tidemark.concurrency.locks.base import LockSettings, canonical_provider_name
from tidemark.errors import TableNotFoundError, WriterSettingsError
from tidemark.format.properties import PROPERTIES_PATH, format_properties, load_properties
from tidemark.storage import Storage, exclusive_flock

SINGLE_WRITER = "single_writer"

MODE_KEY = "tidemark.write.concurrency.mode"
PROVIDER_KEY = "tidemark.write.lock.provider"
FS_PATH_KEY = "tidemark.write.lock.filesystem.path"
ZK_URL_KEY = "tidemark.write.lock.zookeeper.url"
ZK_PORT_KEY = "tidemark.write.lock.zookeeper.port"
ZK_BASE_PATH_KEY = "tidemark.write.lock.zookeeper.base_path"
ZK_LOCK_KEY_KEY = "tidemark.write.lock.zookeeper.lock_key"
DDB_TABLE_KEY = "tidemark.write.lock.dynamodb.table"
DDB_PARTITION_KEY_KEY = "tidemark.write.lock.dynamodb.partition_key"
DDB_REGION_KEY = "tidemark.write.lock.dynamodb.region"
DDB_ENDPOINT_KEY = "tidemark.write.lock.dynamodb.endpoint_url"
RECORDED_KEYS = (MODE_KEY, PROVIDER_KEY, FS_PATH_KEY, ZK_URL_KEY, ZK_PORT_KEY, ZK_BASE_PATH_KEY, ZK_LOCK_KEY_KEY,
                 DDB_TABLE_KEY, DDB_PARTITION_KEY_KEY, DDB_REGION_KEY, DDB_ENDPOINT_KEY)

MUTEX_PATH = ".hoodie/.locks/hoodie.properties.lock"


@dataclass(frozen=True)
class WriterSettings:
    """One writer's (or the table's) concurrency mode and lock identity."""

    mode: str
    provider: str | None = None  # None: single_writer (no lock)
    filesystem_path: str | None = None  # the lock file; None: <table>/.hoodie/.locks/table.lock
    zk_url: str | None = None
    zk_port: int | None = None
    zk_base_path: str | None = None
    zk_lock_key: str | None = None
    ddb_table: str | None = None
    ddb_partition_key: str | None = None  # None: the table's name (filled in by check())
    ddb_region: str | None = None
    ddb_endpoint_url: str | None = None

    @property
    def multi_writer(self) -> bool:
        return self.mode != SINGLE_WRITER

    @classmethod
    def of(cls, mode: str, lock: LockSettings, table_path: str) -> WriterSettings:
        """The settings a writer with these options uses on the table at ``table_path``."""
        if mode == SINGLE_WRITER:
            return cls(SINGLE_WRITER)
        provider = canonical_provider_name(lock.provider)
        if provider == "filesystem":
            path = None
            if lock.filesystem_path:
                from tidemark.concurrency.locks.filesystem import lock_file_path

                path = lock_file_path(lock, table_path)
            return cls(mode, provider, filesystem_path=path)
        if provider == "zookeeper":
            return cls(
                mode,
                provider,
                zk_url=lock.zk_url,
                zk_port=lock.zk_port,
                zk_base_path=lock.zk_base_path,
                zk_lock_key=lock.zk_lock_key or _default_lock_key(table_path),
            )
        if provider == "dynamodb":
            from tidemark.concurrency.locks.dynamodb_names import region_of

            return cls(mode, provider, ddb_table=lock.dynamodb_table, ddb_partition_key=lock.dynamodb_partition_key,
                       ddb_region=region_of(lock.dynamodb_region), ddb_endpoint_url=lock.dynamodb_endpoint_url)
        return cls(mode, provider)

    @classmethod
    def recorded(cls, props: Mapping[str, str]) -> WriterSettings | None:
        """The settings recorded in ``hoodie.properties`` (None when the table records none)."""
        mode = props.get(MODE_KEY)
        if not mode:
            return None
        port = props.get(ZK_PORT_KEY)
        settings = cls(
            mode=mode,
            provider=props.get(PROVIDER_KEY) or None,
            filesystem_path=props.get(FS_PATH_KEY) or None,
            zk_url=props.get(ZK_URL_KEY) or None,
            zk_port=int(port) if port and port.isdigit() else None,
            zk_base_path=props.get(ZK_BASE_PATH_KEY) or None,
            zk_lock_key=props.get(ZK_LOCK_KEY_KEY) or None,
            ddb_table=props.get(DDB_TABLE_KEY) or None,
            ddb_partition_key=props.get(DDB_PARTITION_KEY_KEY) or None,
            ddb_region=props.get(DDB_REGION_KEY) or None,
            ddb_endpoint_url=props.get(DDB_ENDPOINT_KEY) or None,
        )
        # Recorded without a DynamoDB partition key (set_concurrency): Hudi's default, the table's name.
        return settings.with_table_defaults(props, "") if props.get("hoodie.table.name") else settings

    def to_properties(self) -> dict[str, str]:
        """The ``tidemark.write.*`` keys that record these settings (none for single_writer)."""
        if not self.multi_writer:
            return {}
        values = {
            MODE_KEY: self.mode,
            PROVIDER_KEY: self.provider,
            FS_PATH_KEY: self.filesystem_path,
            ZK_URL_KEY: self.zk_url,
            ZK_PORT_KEY: str(self.zk_port) if self.zk_port is not None else None,
            ZK_BASE_PATH_KEY: self.zk_base_path,
            ZK_LOCK_KEY_KEY: self.zk_lock_key,
            DDB_TABLE_KEY: self.ddb_table,
            DDB_PARTITION_KEY_KEY: self.ddb_partition_key,
            DDB_REGION_KEY: self.ddb_region,
            DDB_ENDPOINT_KEY: self.ddb_endpoint_url,
        }
        return {k: v for k, v in values.items() if v}

    def options(self) -> dict[str, str]:
        """The writer options (``hoodie.write.*``) that use exactly these settings."""
        return {"hoodie.write." + k[len("tidemark.write."):]: v for k, v in self.to_properties().items()} or {
            "hoodie.write.concurrency.mode": SINGLE_WRITER
        }

    def lock_settings(self, base: LockSettings) -> LockSettings:
        """``base`` (timeouts and retries) with this lock's provider and identity."""
        return replace(
            base,
            provider=self.provider or base.provider,
            filesystem_path=self.filesystem_path,
            zk_url=self.zk_url,
            zk_port=self.zk_port or base.zk_port,
            zk_base_path=self.zk_base_path or base.zk_base_path,
            zk_lock_key=self.zk_lock_key,
            dynamodb_table=self.ddb_table or base.dynamodb_table,
            dynamodb_partition_key=self.ddb_partition_key or base.dynamodb_partition_key,
            dynamodb_region=self.ddb_region or base.dynamodb_region,
            dynamodb_endpoint_url=self.ddb_endpoint_url,
        )

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.options().items())

    def same_lock_as(self, other: WriterSettings, table_path: str) -> bool:
        """Whether both settings take one and the same lock on the table at ``table_path``."""
        if self.mode != other.mode or self.provider != other.provider:
            return False
        if self.provider == "filesystem":
            return _fs_lock_file(self, table_path) == _fs_lock_file(other, table_path)
        if self.provider == "zookeeper":
            return _zk_hosts(self) == _zk_hosts(other) and _zk_node(self) == _zk_node(other)
        if self.provider == "dynamodb":
            return _ddb_item(self) == _ddb_item(other)
        return True

    def with_table_defaults(self, props: Mapping[str, str], table_path: str) -> WriterSettings:
        """These settings with the defaults that depend on the table filled in (DynamoDB's partition
        key is the table's name, as in Hudi)."""
        if self.provider == "dynamodb" and not self.ddb_partition_key:
            from tidemark.concurrency.locks.dynamodb_names import table_name_key

            return replace(self, ddb_partition_key=table_name_key(props, table_path))
        return self


def _default_lock_key(table_path: str) -> str:
    from tidemark.concurrency.locks.zookeeper_names import default_lock_key

    return default_lock_key(table_path)


def _fs_lock_file(settings: WriterSettings, table_path: str) -> str:
    from tidemark.concurrency.locks.filesystem import lock_file_path

    path = settings.filesystem_path or lock_file_path(LockSettings(provider="filesystem"), table_path)
    return os.path.realpath(path)


def _zk_hosts(settings: WriterSettings) -> frozenset[str]:
    from tidemark.concurrency.locks.zookeeper_names import zookeeper_hosts

    return frozenset(zookeeper_hosts(settings.zk_url or "", settings.zk_port or 2181).split(","))


def _ddb_item(settings: WriterSettings) -> tuple[str | None, ...]:
    endpoint = (settings.ddb_endpoint_url or "").rstrip("/")
    return (settings.ddb_table, settings.ddb_partition_key, settings.ddb_region, endpoint)


def _zk_node(settings: WriterSettings) -> str:
    base = (settings.zk_base_path or "").rstrip("/")
    if base and not base.startswith("/"):
        base = "/" + base
    return f"{base}/{(settings.zk_lock_key or '').strip('/')}"


# -- reading, checking and recording ---------------------------------------------------------
def read_properties(storage: Storage) -> dict[str, str]:
    """The table's properties as Hudi reads them (its backup while Hudi rewrites the file).

    Raises CorruptPropertiesError if neither is sound, TableNotFoundError if both are gone.
    """
    props = load_properties(storage.read_bytes)
    if props is None:
        raise TableNotFoundError(storage.base_path, f"{PROPERTIES_PATH} is gone")
    return props


def table_settings(storage: Storage) -> WriterSettings | None:
    """The settings the table records now (None: none recorded, a single-writer table)."""
    return WriterSettings.recorded(read_properties(storage))


@contextlib.contextmanager
def properties_mutex(storage: Storage) -> Iterator[None]:
    """Exclusive ``flock`` around a read-modify-write of ``hoodie.properties`` (any provider, any process).

    Object stores have no flock: there the read-modify-write relies on :func:`write_settings`'
    compare-and-swap alone (``If-Match`` on the file's ETag).
    """
    if not storage.is_local:
        yield
        return
    with exclusive_flock(storage.full_path(MUTEX_PATH)):
        yield


def write_settings(storage: Storage, settings: WriterSettings, *, expected: WriterSettings | None) -> bool:
    """Replace the recorded settings if they are still ``expected``; other keys stay as they are.

    A compare-and-swap on ``hoodie.properties`` (If-Match on object stores): returns False, writing
    nothing, when the recorded settings are no longer ``expected`` or the file changed meanwhile.
    """
    current = storage.read_versioned(PROPERTIES_PATH)
    if current is None:
        read_properties(storage)  # raises the right error (gone, or only its backup left)
        return False
    recorded = load_properties(lambda path: current.data if path == PROPERTIES_PATH else storage.read_bytes(path))
    if recorded is None or WriterSettings.recorded(recorded) != expected:
        return False
    props = {k: v for k, v in recorded.items() if k not in RECORDED_KEYS}
    props.update(settings.to_properties())
    return storage.replace_if_match(PROPERTIES_PATH, format_properties(props).encode(), current.version)


def mismatch_error(table_path: str, recorded: WriterSettings, given: WriterSettings) -> WriterSettingsError:
    if recorded.mode != given.mode:
        what = f"the table's writers use {recorded.mode}, this writer {given.mode}"
    elif recorded.provider != given.provider:
        what = f"the table's writers lock with {recorded.provider}, this writer with {given.provider}"
    else:
        what = f"this writer's {given.provider} lock is not the table's (another lock file or lock node)"
    return WriterSettingsError(
        f"refused to write to {table_path}: {what}, so their locks would not exclude each other and "
        f"commits would be lost. The table records: {recorded.describe()}; this writer has: "
        f"{given.describe()}. Open the table with the recorded options, or, once every writer is "
        "stopped, change the table's settings with Table.set_concurrency(options) / "
        "`tidemark concurrency PATH --set --options ...`. Nothing was written.",
        recorded=recorded.options(),
        given=given.options(),
    )


def check(storage: Storage, given: WriterSettings, *, record: bool) -> WriterSettings | None:
    """Refuse a writer whose settings disagree with the table's (WriterSettingsError); with
    ``record``, a multi-writer on a table that records nothing records its own settings.
    Returns the table's settings after the check."""
    if given.provider == "dynamodb" and not given.ddb_partition_key:
        given = given.with_table_defaults(read_properties(storage), storage.base_path)
    recorded = table_settings(storage)
    if recorded is None and record and given.multi_writer:
        with properties_mutex(storage):
            recorded = table_settings(storage)  # a first writer with other settings may have won
            if recorded is None and write_settings(storage, given, expected=None):
                return given
            recorded = table_settings(storage)
    if recorded is None:
        return None
    if not recorded.same_lock_as(given, storage.base_path):
        raise mismatch_error(storage.base_path, recorded, given)
    return recorded
