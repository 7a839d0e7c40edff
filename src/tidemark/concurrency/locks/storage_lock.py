"""Storage-based lock provider: one lock object in the table's own storage (Hudi 1.1's design).

``hoodie.write.lock.provider=storage`` (or Hudi's class name
``org.apache.hudi.client.transaction.lock.StorageBasedLockProvider``). The lock is the object
``<table>/.hoodie/.locks/table_lock.json``, JSON as Hudi writes it::

    {"expired": false, "validUntil": <epoch ms>, "owner": "<holder id>"}

built only on the :class:`~tidemark.storage.Storage` protocol's conditional writes, so it works
wherever the storage has them (the local file system; S3, GCS and Azure through ETags):

* **acquire**: read the object; if absent, create it (put-if-absent); if it says ``expired``
  (released) or its ``validUntil`` has passed by more than the clock-drift allowance, replace
  it by compare-and-swap on the version read. Losing either race means someone else got it.
* **renew** (a background thread every ``hoodie.write.lock.storage.renew.interval.secs``):
  compare-and-swap a new ``validUntil`` onto the version this holder wrote last. If the version
  changed, someone took the lock over: the lease is lost.
* **release**: compare-and-swap ``"expired": true`` (the object stays; the next writer replaces it).
* **fence**: :meth:`~tidemark.concurrency.locks.lease.LeaseLockProvider.assert_held` before
  publishing (see :mod:`tidemark.concurrency.locks.lease`).

A waiter reads ``validUntil`` with its own wall clock, so clocks of the writers' hosts must agree
within the allowance (500 ms, as in Hudi) plus half the validity (the holder's fence margin).
A SIGKILLed holder's lock is taken over once its ``validUntil`` passed (at most
``validity.timeout.secs`` after its last renewal).

Hudi's rules for the two settings hold: validity >= 10 s, renew interval >= 1 s, validity >= 10x
the renew interval (checked in :mod:`tidemark.config.resolve`).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from tidemark.concurrency.locks.in_process import normalize_table_path
from tidemark.concurrency.locks.lease import Lease, LeaseLockProvider, LeaseUnknown
from tidemark.config.locks import LockSettings
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.location import open_storage

LOCK_OBJECT = ".hoodie/.locks/table_lock.json"
CLOCK_DRIFT_MS = 500  # a waiter treats a lease as expired only this long after its validUntil

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _record(expired: bool, valid_until_ms: int, owner: str) -> bytes:
    return json.dumps({"expired": expired, "validUntil": valid_until_ms, "owner": owner}).encode()


def _parse(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("validUntil"), int):
        return None
    return value


class StorageLockProvider(LeaseLockProvider):
    """A lease on ``.hoodie/.locks/table_lock.json`` kept with the storage's conditional writes."""

    provider_name = "storage"

    def __init__(self, settings: LockSettings, table_path: str, storage: Storage | None = None) -> None:
        self.storage = storage if storage is not None else open_storage(table_path)
        where = f"{normalize_table_path(self.storage.base_path)}/{LOCK_OBJECT}"
        super().__init__(validity_s=settings.storage_validity_s, renew_interval_s=settings.storage_renew_interval_s,
                         where=where)

    # -- requests (storage errors other than tidemark's own are "unknown": retried, fenced by time)
    def _read(self) -> tuple[dict[str, Any] | None, str | None, bool]:
        """(record, version, exists): the lock object as it is now."""
        try:
            current = self.storage.read_versioned(LOCK_OBJECT)
        except OSError as exc:
            raise LeaseUnknown(f"reading {LOCK_OBJECT}: {exc}") from exc
        if current is None:
            return None, None, False
        return _parse(current.data), current.version, True

    def _write_lease(self, version: str | None) -> Lease | None:
        """Write a fresh lease of this holder: create the object (``version`` None) or CAS it."""
        started = time.monotonic()
        valid_until = _now_ms() + int(self.validity_s * 1000)
        data = _record(False, valid_until, self.owner_id)
        try:
            if version is None:
                outcome = self.storage.create_if_absent(LOCK_OBJECT, data)
                if outcome is CreateOutcome.ALREADY_EXISTS:
                    return None
                ok = True  # CREATED, or UNKNOWN: the read-back below decides
            else:
                ok = self.storage.replace_if_match(LOCK_OBJECT, data, version)
        except OSError as exc:
            raise LeaseUnknown(f"writing {LOCK_OBJECT}: {exc}") from exc
        if not ok:
            return None
        # The new version token: read back what we wrote (a different owner or validUntil means we lost).
        record, new_version, _ = self._read()
        if record is None or new_version is None or record.get("owner") != self.owner_id \
                or record.get("validUntil") != valid_until:
            return None
        return Lease(new_version, started + self.validity_s, detail=valid_until)

    # -- the lease -------------------------------------------------------------------------------
    def _attempt(self) -> Lease | None:
        record, version, exists = self._read()
        if not exists:
            return self._write_lease(None)
        if record is None:
            log.warning("lock object %s is not a lock record; replacing it", self.where)
        elif not record.get("expired") and _now_ms() <= int(record["validUntil"]) + CLOCK_DRIFT_MS:
            return None  # held by someone (possibly this provider: the lock is not reentrant)
        return self._write_lease(version)

    def _extend(self, lease: Lease) -> Lease | None:
        return self._write_lease(lease.token)

    def _give_up(self, lease: Lease) -> None:
        try:
            released = self.storage.replace_if_match(LOCK_OBJECT, _record(True, int(lease.detail), self.owner_id),
                                                     lease.token)
        except OSError as exc:
            raise LeaseUnknown(f"releasing {LOCK_OBJECT}: {exc}") from exc
        if not released:
            log.warning("lock %s was taken over before this holder released it", self.where)

    def _describe_holder(self) -> str | None:
        record, _, exists = self._read()
        if not exists or record is None or record.get("expired"):
            return None
        left_ms = int(record["validUntil"]) - _now_ms()
        if left_ms + CLOCK_DRIFT_MS < 0:
            return None
        return f"{record.get('owner')} (lease valid for {left_ms / 1000:.1f} s more; lock {self.where})"


def factory(settings: LockSettings, table_path: str, storage: Storage | None = None) -> StorageLockProvider:
    return StorageLockProvider(settings, table_path, storage)
