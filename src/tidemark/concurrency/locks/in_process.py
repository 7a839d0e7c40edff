"""In-process lock provider: one ``threading.Lock`` per table path, shared by the whole process.

Excludes writers (threads) of the *same* Python process only; other processes see
nothing of it. Use it for several writer threads in one driver (Hudi's
``InProcessLockProvider``). A lock is released by any provider object of the same
table, from any thread, only if that object holds it (``release`` of a non-holder is
a no-op).
"""

from __future__ import annotations

import os
import threading

from tidemark.concurrency.locks.base import LockSettings, owner_id, register_lock_provider

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}
_OWNERS: dict[str, str] = {}


def normalize_table_path(table_path: str) -> str:
    """One spelling per table: absolute for local paths (``file://`` stripped), URIs as given without trailing '/'."""
    path = table_path.strip()
    if path.startswith("file://"):
        path = path[len("file://") :]
    if "://" in path:
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def _table_lock(key: str) -> threading.Lock:
    with _GUARD:
        lock = _LOCKS.get(key)
        if lock is None:
            lock = _LOCKS[key] = threading.Lock()
        return lock


class InProcessLockProvider:
    """A process-wide, non-reentrant lock for one table path."""

    def __init__(self, settings: LockSettings, table_path: str) -> None:
        self._settings = settings
        self._key = normalize_table_path(table_path)
        self._lock = _table_lock(self._key)
        self._id = owner_id()
        self._held = False

    @property
    def owner_id(self) -> str:
        return self._id

    def try_acquire(self, timeout: float) -> bool:
        if timeout > 0:
            acquired = self._lock.acquire(timeout=min(timeout, threading.TIMEOUT_MAX))
        else:
            acquired = self._lock.acquire(blocking=False)
        if acquired:
            with _GUARD:
                _OWNERS[self._key] = self._id
            self._held = True
        return acquired

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        with _GUARD:
            if _OWNERS.get(self._key) == self._id:
                del _OWNERS[self._key]
        self._lock.release()

    def owner(self) -> str | None:
        with _GUARD:
            return _OWNERS.get(self._key)

    def close(self) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"InProcessLockProvider({self._key!r}, held={self._held})"


def factory(settings: LockSettings, table_path: str) -> InProcessLockProvider:
    return InProcessLockProvider(settings, table_path)


register_lock_provider("in_process", factory)
