"""In-process lock provider: one ``threading.Lock`` per table path, shared by the whole process.

Excludes writers (threads) of the *same* Python process only; other processes see
nothing of it. Use it for several writer threads in one driver (Hudi's
``InProcessLockProvider``), never for writers in several processes. A lock is released
by any provider object of the same table, from any thread, only if that object holds it
(``release`` of a non-holder is a no-op).

So that two processes cannot both use it on one table (their locks would exclude
nothing), the process **claims** the table while any in-process provider of it is open:
an exclusive, non-blocking ``flock`` on ``<table>/.hoodie/.locks/in_process.lock``, taken
by the first provider of the table in the process and dropped when the last one closes
(or the process dies). A provider created while another process holds the claim raises
:class:`~tidemark.errors.InProcessLockError`. Tables that do not exist yet, and tables
not on the local file system, are not claimed.
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading

from tidemark.concurrency.locks.base import LockSettings, owner_id, register_lock_provider
from tidemark.errors import ConfigError, InProcessLockError

CLAIM_FILE = os.path.join(".hoodie", ".locks", "in_process.lock")

_GUARD = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}
_OWNERS: dict[str, str] = {}
_CLAIMS: dict[str, tuple[int, int]] = {}  # table key -> (claim file descriptor, open providers)


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


def _claim(key: str) -> bool:
    """Claim the table for this process (see the module doc); False when there is nothing to claim."""
    if "://" in key or not os.path.isdir(os.path.join(key, ".hoodie")):
        return False
    with _GUARD:
        claimed = _CLAIMS.get(key)
        if claimed is not None:
            _CLAIMS[key] = (claimed[0], claimed[1] + 1)
            return True
        path = os.path.join(key, CLAIM_FILE)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 256).decode(errors="replace").strip() or None
            os.close(fd)
            raise InProcessLockError(key, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{socket.gethostname()}:{os.getpid()}".encode(), 0)
        _CLAIMS[key] = (fd, 1)
        return True


def _unclaim(key: str) -> None:
    with _GUARD:
        claimed = _CLAIMS.get(key)
        if claimed is None:
            return
        if claimed[1] > 1:
            _CLAIMS[key] = (claimed[0], claimed[1] - 1)
            return
        del _CLAIMS[key]
        os.close(claimed[0])  # drops the flock


class InProcessLockProvider:
    """A process-wide, non-reentrant lock for one table path."""

    def __init__(self, settings: LockSettings, table_path: str) -> None:
        self._settings = settings
        self._key = normalize_table_path(table_path)
        if "://" in self._key:
            # Its claim file (which keeps two processes off one table) needs a local folder.
            raise ConfigError(
                f"the in_process lock provider works on local tables only, not {table_path!r}: writers "
                "in other processes or machines would not be excluded. Use the zookeeper lock provider "
                "(or the storage-based / DynamoDB providers) for tables on object stores",
                key="hoodie.write.lock.provider",
            )
        self._lock = _table_lock(self._key)
        self._id = owner_id()
        self._held = False
        self._claimed = _claim(self._key)

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
        if self._claimed:
            self._claimed = False
            _unclaim(self._key)

    def __repr__(self) -> str:
        return f"InProcessLockProvider({self._key!r}, held={self._held})"


def factory(settings: LockSettings, table_path: str) -> InProcessLockProvider:
    return InProcessLockProvider(settings, table_path)


register_lock_provider("in_process", factory)
