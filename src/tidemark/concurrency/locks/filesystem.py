"""File-system lock provider for tables on the local file system (``flock`` based).

The lock is an exclusive ``flock`` on a lock file: ``settings.filesystem_path`` when set
(an existing directory gets ``table.lock`` inside it, as Hudi's option names a folder),
else ``<table>/.hoodie/.locks/table.lock``. The lock file itself is never deleted; holding
the lock means holding the ``flock``, never "the file exists". Consequences:

* **A dead holder never blocks.** The kernel drops the ``flock`` when the holder's last
  descriptor closes, which includes the process dying by SIGKILL, OOM or a crash, so a
  waiter gets the lock within one polling interval (5-20 ms). There is no stale lock file
  to clean up by hand (unlike Hudi's create/delete lock, apache/hudi#9015).
* **A stuck live holder cannot be broken by others** (``flock`` has no such operation).
  After acquiring, the holder writes ``<lock>.owner`` (JSON: owner_id, pid, host,
  acquired_at epoch ms; written atomically with temp file + ``os.replace``), so
  :meth:`FileSystemLockProvider.owner` names the holder and how long it has held the lock,
  and says when that exceeds ``filesystem_expire_ms``. The expiry binds the holder itself:
  a holder must not trust a lock it has held longer than the expiry; it can check
  :meth:`~FileSystemLockProvider.held_for_ms` / :meth:`~FileSystemLockProvider.expired`
  before it publishes anything. ``0`` means no expiry.
* Each ``try_acquire`` opens the lock file anew, so two provider objects in one process
  exclude each other exactly like two processes do (a ``flock`` belongs to an open file
  description, not to a process). The provider is not reentrant.
* The descriptor is close-on-exec, so programs started with ``subprocess`` do not inherit
  the lock. A child made by a bare ``fork()`` (``multiprocessing``'s fork start method)
  shares the descriptor: the lock then lives until the parent releases it explicitly or
  both processes are gone. A forked child never unlocks its parent's lock through an
  inherited provider object (``release`` checks the pid).
* Local file systems only. ``flock`` over NFS is emulated with POSIX record locks and is
  only as reliable as the NFS lock daemon; object stores have no locks at all (use the
  ``storage``, ``dynamodb`` or ``zookeeper`` provider there).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import socket
import time
import uuid
from typing import Any

from tidemark.concurrency.locks.base import LockSettings, owner_id
from tidemark.concurrency.locks.in_process import normalize_table_path
from tidemark.errors import ConfigError

LOCK_FILE_NAME = "table.lock"
OWNER_SUFFIX = ".owner"
_POLL_MIN_S = 0.005
_POLL_MAX_S = 0.02

log = logging.getLogger(__name__)


def lock_file_path(settings: LockSettings, table_path: str) -> str:
    """The lock file a provider for ``table_path`` uses under ``settings``."""
    if settings.filesystem_path:
        path = _local_path(settings.filesystem_path, "hoodie.write.lock.filesystem.path")
        if os.path.isdir(path) or settings.filesystem_path.endswith("/"):
            path = os.path.join(path, LOCK_FILE_NAME)
        return path
    base = _local_path(table_path, "hoodie.write.lock.provider")
    return os.path.join(base, ".hoodie", ".locks", LOCK_FILE_NAME)


def _local_path(path: str, key: str) -> str:
    normalized = normalize_table_path(path)
    if "://" in normalized:
        raise ConfigError(
            f"the filesystem lock provider works on the local file system only, not {path!r}; "
            "use the storage, dynamodb or zookeeper lock provider for tables on object stores or shared storage",
            key=key,
        )
    return normalized


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class FileSystemLockProvider:
    """An exclusive ``flock`` on a local lock file; see the module docstring."""

    def __init__(self, settings: LockSettings, table_path: str) -> None:
        self._settings = settings
        self.path = lock_file_path(settings, table_path)
        self.owner_path = self.path + OWNER_SUFFIX
        self._id = owner_id()
        self._fd: int | None = None
        self._pid = 0  # the process that acquired (a forked child must not unlock)
        self._acquired_mono = 0.0
        self._acquired_at_ms = 0

    @property
    def owner_id(self) -> str:
        return self._id

    # -- acquire / release -------------------------------------------------------------

    def try_acquire(self, timeout: float) -> bool:
        deadline = time.monotonic() + max(timeout, 0.0)
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        delay = _POLL_MIN_S
        fd = self._open()
        try:
            while True:
                if self._try_flock(fd):
                    if self._same_file(fd):
                        break
                    # The lock file was replaced under us (someone deleted it): lock the new one.
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)
                    fd = self._open()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    os.close(fd)
                    return False
                time.sleep(min(delay, remaining))
                delay = min(delay * 1.5, _POLL_MAX_S)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._pid = os.getpid()
        self._acquired_mono = time.monotonic()
        self._acquired_at_ms = _now_ms()
        self._write_owner()
        return True

    def release(self) -> None:
        fd = self._fd
        if fd is None:
            return
        self._fd = None
        try:
            if self._pid == os.getpid():
                try:
                    if (self._read_owner() or {}).get("owner_id") == self._id:
                        os.unlink(self.owner_path)
                except OSError:
                    pass
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def close(self) -> None:
        self.release()

    # -- holder-side expiry ------------------------------------------------------------

    def held_for_ms(self) -> int | None:
        """How long this provider has held the lock (monotonic clock), or None if not held."""
        if self._fd is None:
            return None
        return int((time.monotonic() - self._acquired_mono) * 1000)

    def expired(self) -> bool:
        """True when this provider holds the lock for longer than ``filesystem_expire_ms`` (0 = never)."""
        held = self.held_for_ms()
        expire = self._settings.filesystem_expire_ms
        return held is not None and expire > 0 and held > expire

    # -- owner -------------------------------------------------------------------------

    def owner(self) -> str | None:
        if self._fd is not None:
            return self._describe(self._id, _now_ms() - self._acquired_at_ms)
        if not self._is_locked():
            return None
        info = self._read_owner()
        if not info or "owner_id" not in info:
            return None  # the new holder has not written its owner file yet
        pid, host = info.get("pid"), info.get("host")
        if host == socket.gethostname() and isinstance(pid, int) and not _pid_alive(pid):
            return None  # a dead holder's leftover owner file; the new holder is about to replace it
        age = _now_ms() - int(info.get("acquired_at", _now_ms()))
        return self._describe(str(info["owner_id"]), age)

    def _describe(self, who: str, age_ms: int) -> str:
        text = f"{who} (held for {age_ms / 1000:.1f} s"
        expire = self._settings.filesystem_expire_ms
        if expire > 0 and age_ms > expire:
            text += f", longer than the lock expiry of {expire / 1000:.1f} s: the holder may be stuck"
        return text + f"; lock file {self.path})"

    # -- helpers -----------------------------------------------------------------------

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)

    @staticmethod
    def _try_flock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def _same_file(self, fd: int) -> bool:
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)

    def _is_locked(self) -> bool:
        """Whether someone holds the lock: probe with a shared lock, released at once."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    return True
                raise
            fcntl.flock(fd, fcntl.LOCK_UN)
            return False
        finally:
            os.close(fd)

    def _write_owner(self) -> None:
        info = {
            "owner_id": self._id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "acquired_at": self._acquired_at_ms,
        }
        tmp = f"{self.owner_path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as out:
                json.dump(info, out)
            os.replace(tmp, self.owner_path)
        except OSError as exc:  # informational only: the flock is what excludes
            log.warning("could not write lock owner file %s: %s", self.owner_path, exc)
            with contextlib.suppress(OSError):
                os.unlink(tmp)

    def _read_owner(self) -> dict[str, Any] | None:
        try:
            with open(self.owner_path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def __repr__(self) -> str:
        return f"FileSystemLockProvider({self.path!r}, held={self._fd is not None})"


def factory(settings: LockSettings, table_path: str) -> FileSystemLockProvider:
    return FileSystemLockProvider(settings, table_path)
