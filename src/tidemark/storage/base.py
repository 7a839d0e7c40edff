"""The storage seam: a small protocol every backend implements.

Paths are relative to the table's base path and use ``/``. The two guarantees
the commit protocol builds on:

* :meth:`Storage.create_if_absent` creates a file with its full content only if
  no file of that name exists, atomically, and tells which of the outcomes
  happened. Timeline instants and lock files rely on it.
* :meth:`Storage.write_atomic` replaces a file so that readers see either the
  old or the new content, never a torn one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeAlias

import pyarrow as pa

# What parquet and log readers take: a local file name, or an in-memory file read from a store.
DataSource: TypeAlias = str | pa.NativeFile


class CreateOutcome(enum.Enum):
    """What a create-if-absent did: ``UNKNOWN`` means the answer was lost (retry by reading)."""

    CREATED = "created"
    ALREADY_EXISTS = "already_exists"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Versioned:
    """A file's content with an opaque version token (an ETag on object stores).

    Hand the token back to :meth:`Storage.replace_if_match` to replace the file only if
    nobody changed it since it was read.
    """

    data: bytes
    version: str


@dataclass(frozen=True)
class FileInfo:
    """A file found by a listing: its path relative to the base, size and modification time."""

    path: str
    size: int
    mtime: float

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


class OutputFile(Protocol):
    """A file being written (see :meth:`Storage.open_output`).

    ``sink`` is what pyarrow writers take (a local file name, or an in-memory stream);
    :meth:`size` is the bytes written so far; :meth:`commit` publishes the file (a no-op on the
    local file system, the one put on an object store). Writers must be closed before commit.
    """

    @property
    def sink(self) -> str | pa.NativeFile: ...

    def size(self) -> int: ...

    def commit(self) -> int:
        """Publish the file; returns its final size in bytes."""
        ...


class Storage(Protocol):
    """Files under one base path."""

    @property
    def options(self) -> Mapping[str, str]:
        """The storage options it was opened with (secrets included: show them only redacted)."""
        ...

    @property
    def is_local(self) -> bool:
        """Whether this is the local file system (flock, rename and folders are available)."""
        ...

    def open_input(self, path: str) -> DataSource:
        """A source pyarrow and the log reader can read ``path`` from; FileNotFoundError if absent."""
        ...

    def open_ranged(self, path: str, size: int | None = None) -> DataSource:
        """A seekable source that fetches only the bytes a reader asks for (a parquet footer, a few
        column chunks): on an object store each read is one ranged GET, where :meth:`open_input`
        downloads the whole file in one. ``size``, when the caller knows it from a listing, saves a
        request. FileNotFoundError if absent."""
        ...

    def open_output(self, path: str) -> OutputFile:
        """Start writing ``path`` (folders created as needed); nothing is visible before commit()."""
        ...

    @property
    def base_path(self) -> str: ...

    def full_path(self, path: str) -> str:
        """The path as the engines see it (absolute on the local file system)."""
        ...

    def exists(self, path: str) -> bool: ...

    def modified_ms(self, path: str) -> int | None:
        """The file's last modification time in epoch milliseconds, or None if it does not exist."""
        ...

    def read_bytes(self, path: str) -> bytes: ...

    def write_atomic(self, path: str, data: bytes) -> None:
        """Write ``data`` so readers see the whole file or the previous one."""
        ...

    def create_if_absent(self, path: str, data: bytes = b"") -> CreateOutcome:
        """Create ``path`` with ``data`` unless it exists; atomic with respect to other writers."""
        ...

    def read_versioned(self, path: str) -> Versioned | None:
        """The file's content and version token, or None if it does not exist."""
        ...

    def replace_if_match(self, path: str, data: bytes, version: str) -> bool:
        """Replace ``path`` with ``data`` only if its version is still ``version`` (compare-and-swap).

        Returns False, writing nothing, when the file changed or vanished since that version was
        read. Atomic with respect to other ``replace_if_match`` and ``create_if_absent`` callers.
        """
        ...

    def list_dir(self, path: str) -> list[FileInfo]:
        """Files (not folders) directly in ``path``; empty if the folder is absent."""
        ...

    def list_names(self, path: str) -> list[str]:
        """Names of the files directly in ``path`` (no sizes: cheaper than list_dir)."""
        ...

    def list_subdirs(self, path: str) -> list[str]:
        """Names of the folders directly in ``path``."""
        ...

    def walk_files(self, path: str = "", *, skip_hidden_dirs: bool = True) -> Iterator[FileInfo]:
        """Every file below ``path``; folders whose names start with ``.`` are skipped."""
        ...

    def delete(self, path: str) -> bool:
        """Delete a file; returns whether it existed."""
        ...

    def delete_tree(self, path: str) -> None: ...

    def is_empty_dir(self, path: str) -> bool: ...
