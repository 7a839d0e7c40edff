"""The local file system backend.

Atomic create-if-absent writes the content to a unique temporary file and then
``link``s it to the final name: ``link`` fails if the name exists, so the file
appears whole or not at all, and only one of several racing writers wins.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import uuid
from collections.abc import Iterator

from tidemark.storage.base import CreateOutcome, DataSource, FileInfo, Versioned


class LocalOutputFile:
    """A file written in place on the local file system (visible as it grows, as before)."""

    def __init__(self, full: str) -> None:
        os.makedirs(os.path.dirname(full), exist_ok=True)
        self._full = full

    @property
    def sink(self) -> str:
        return self._full

    def size(self) -> int:
        try:
            return os.path.getsize(self._full)
        except FileNotFoundError:
            return 0

    def commit(self) -> int:
        return os.path.getsize(self._full)


class LocalStorage:
    """Files below ``base_path`` on the local file system."""

    def __init__(self, base_path: str) -> None:
        self._base = os.path.abspath(os.path.expanduser(base_path))

    @property
    def base_path(self) -> str:
        return self._base

    @property
    def options(self) -> dict[str, str]:
        return {}

    @property
    def is_local(self) -> bool:
        return True

    def full_path(self, path: str) -> str:
        return os.path.join(self._base, path) if path else self._base

    def open_input(self, path: str) -> DataSource:
        return self.full_path(path)  # pyarrow reads (and memory-maps) local files itself

    def open_ranged(self, path: str, size: int | None = None) -> DataSource:
        return self.full_path(path)  # local reads fetch only what is read already

    def open_output(self, path: str) -> LocalOutputFile:
        return LocalOutputFile(self.full_path(path))

    def exists(self, path: str) -> bool:
        return os.path.exists(self.full_path(path))

    def modified_ms(self, path: str) -> int | None:
        try:
            return os.stat(self.full_path(path)).st_mtime_ns // 1_000_000
        except FileNotFoundError:
            return None

    def read_bytes(self, path: str) -> bytes:
        with open(self.full_path(path), "rb") as fh:
            return fh.read()

    def _temp_for(self, full: str) -> str:
        """A new hidden temporary file beside ``full``. Its name holds nothing of ``full``'s: a
        writer killed before removing it leaves it behind, and a Hudi reader parses names like
        ``.<file id>_<instant>.log.<version>_<token>`` as log files whatever follows them (a
        leftover of a metadata table's log file was read as a log of no records, which hudi-rs
        refuses: "No schema available for merge output")."""
        head = os.path.dirname(full)
        os.makedirs(head, exist_ok=True)
        return os.path.join(head, f".tidemark-{uuid.uuid4().hex}.tmp")

    def _written_temp(self, full: str, data: bytes) -> str:
        """A new temporary beside ``full`` holding ``data`` (:meth:`_temp_for`); removed again if
        writing it fails (a full disk), so that a failed write leaves no file behind."""
        tmp = self._temp_for(full)
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return tmp

    def write_atomic(self, path: str, data: bytes) -> None:
        self._replace(self.full_path(path), data)

    def _replace(self, full: str, data: bytes) -> None:
        """``full`` holding ``data``, replaced whole; nothing left behind if that fails."""
        tmp = self._written_temp(full, data)
        try:
            os.replace(tmp, full)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def create_if_absent(self, path: str, data: bytes = b"") -> CreateOutcome:
        full = self.full_path(path)
        if not data:  # an empty file (a marker) appears whole: one exclusive create, no temporary
            os.makedirs(os.path.dirname(full), exist_ok=True)
            try:
                os.close(os.open(full, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
                return CreateOutcome.CREATED
            except FileExistsError:
                return CreateOutcome.ALREADY_EXISTS
        tmp = self._written_temp(full, data)
        try:
            return self._link_or_create(tmp, full, data)
        finally:
            os.unlink(tmp)

    # -- create-if-absent in two steps (storage/staged.py) -------------------------------------
    def stage(self, folder: str, data: bytes) -> str:
        """Write ``data`` to a new hidden temporary file in ``folder``; returns its full path."""
        return self._written_temp(os.path.join(self.full_path(folder), "staged"), data)

    def publish_staged(self, staged: str, path: str, data: bytes) -> CreateOutcome:
        """Give the staged file (holding ``data``) the name ``path`` unless it exists: one ``link``."""
        return self._link_or_create(staged, self.full_path(path), data)

    @staticmethod
    def discard_staged(staged: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staged)

    @staticmethod
    def _link_or_create(tmp: str, full: str, data: bytes) -> CreateOutcome:
        try:
            os.link(tmp, full)
            return CreateOutcome.CREATED
        except FileExistsError:
            return CreateOutcome.ALREADY_EXISTS
        except OSError as exc:  # pragma: no cover - file systems without hard links
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            try:
                fd = os.open(full, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return CreateOutcome.ALREADY_EXISTS
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
            except BaseException:  # never a part of the content under the name
                with contextlib.suppress(OSError):
                    os.unlink(full)
                raise
            return CreateOutcome.CREATED

    @staticmethod
    def _version_of(st: os.stat_result) -> str:
        # Every write_atomic / replace gives the name a new inode, so (inode, mtime, size) changes
        # with each replacement even within one mtime tick.
        return f"{st.st_ino}-{st.st_mtime_ns}-{st.st_size}"

    def read_versioned(self, path: str) -> Versioned | None:
        full = self.full_path(path)
        try:
            with open(full, "rb") as fh:
                st = os.fstat(fh.fileno())
                return Versioned(fh.read(), self._version_of(st))
        except FileNotFoundError:
            return None

    def replace_if_match(self, path: str, data: bytes, version: str) -> bool:
        full = self.full_path(path)
        head, tail = os.path.split(full)
        # All compare-and-swaps of one file serialise on a side lock; plain readers never block.
        with exclusive_flock(os.path.join(head, f".{tail}.cas.lock")):
            try:
                current = self._version_of(os.stat(full))
            except FileNotFoundError:
                return False
            if current != version:
                return False
            self._replace(full, data)
            return True

    def list_dir(self, path: str) -> list[FileInfo]:
        full = self.full_path(path)
        out: list[FileInfo] = []
        try:
            entries = os.scandir(full)
        except FileNotFoundError:
            return out
        with entries:
            for entry in entries:
                try:
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # deleted while we listed: another writer's temp file
                    continue
                rel = f"{path}/{entry.name}" if path else entry.name
                out.append(FileInfo(rel, st.st_size, st.st_mtime))
        return out

    def list_names(self, path: str) -> list[str]:
        try:
            return os.listdir(self.full_path(path))
        except FileNotFoundError:
            return []

    def list_subdirs(self, path: str) -> list[str]:
        try:
            with os.scandir(self.full_path(path)) as entries:
                return [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except FileNotFoundError:
            return []

    def walk_files(self, path: str = "", *, skip_hidden_dirs: bool = True) -> Iterator[FileInfo]:
        stack = [path]
        while stack:
            current = stack.pop()
            try:
                entries = list(os.scandir(self.full_path(current)))
            except FileNotFoundError:
                continue
            for entry in entries:
                rel = f"{current}/{entry.name}" if current else entry.name
                if entry.is_dir(follow_symlinks=False):
                    if skip_hidden_dirs and entry.name.startswith("."):
                        continue
                    stack.append(rel)
                elif entry.is_file(follow_symlinks=False):
                    try:
                        st = entry.stat()
                    except FileNotFoundError:  # deleted while we listed
                        continue
                    yield FileInfo(rel, st.st_size, st.st_mtime)

    def delete(self, path: str) -> bool:
        try:
            os.unlink(self.full_path(path))
            return True
        except FileNotFoundError:
            return False

    def delete_tree(self, path: str) -> None:
        shutil.rmtree(self.full_path(path), ignore_errors=True)

    def is_empty_dir(self, path: str) -> bool:
        full = self.full_path(path)
        return os.path.isdir(full) and not os.listdir(full)


@contextlib.contextmanager
def exclusive_flock(full_path: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``full_path`` (created if absent) for the block.

    Blocks until it is had; the operating system drops it if the process dies, so a crashed
    holder never leaves it stuck.
    """
    os.makedirs(os.path.dirname(full_path), exist_ok=True)
    fd = os.open(full_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock
