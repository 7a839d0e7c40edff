"""A create-if-absent in two steps: the bytes are written first, the name is given later.

A commit publishes its completed instant file under a name holding its completion time,
which is known only under the table lock; its bytes are known before. On the local file
system :func:`stage` writes them to a hidden temporary file in the target folder before
the lock is taken, and under the lock :meth:`StagedFile.publish` gives them their name
with one ``link`` (atomic; fails if the name exists, as ``create_if_absent``): the lock is
held for one metadata operation instead of a file creation, a write, a link and an
unlink. Object stores have no such split (a conditional put carries its bytes): there
``publish`` is ``create_if_absent``. Either way readers see the whole file or none.

The temporary file's name starts with a dot; timeline listings skip such names. A crash
between ``stage`` and ``discard`` leaves it behind, as an interrupted ``create_if_absent``
would; it never names an instant.
"""

from __future__ import annotations

from tidemark.storage.base import CreateOutcome, Storage
from tidemark.storage.local import LocalStorage


class StagedFile:
    """Bytes waiting for their name in ``folder``; :meth:`discard` once published (or not)."""

    def __init__(self, storage: Storage, folder: str, data: bytes) -> None:
        self._storage = storage
        # Only the local file system splits a create in two; elsewhere publish is a conditional put.
        self._local = storage if isinstance(storage, LocalStorage) else None
        self._folder = folder
        self.data = data
        self._temp = self._local.stage(folder, data) if self._local is not None else None

    def publish(self, path: str) -> CreateOutcome:
        """Create ``path`` with the staged bytes unless it exists (atomic, as ``create_if_absent``)."""
        if self._temp is not None and self._local is not None:
            return self._local.publish_staged(self._temp, path, self.data)
        return self._storage.create_if_absent(path, self.data)

    def restage(self, data: bytes) -> None:
        """Publish these bytes instead (the earlier temporary file goes)."""
        self.discard()
        self.data = data
        self._temp = self._local.stage(self._folder, data) if self._local is not None else None

    def discard(self) -> None:
        """Remove the temporary file (the published name, if any, stays)."""
        temp, self._temp = self._temp, None
        if temp is not None:
            LocalStorage.discard_staged(temp)


def stage(storage: Storage, folder: str, data: bytes) -> StagedFile:
    """Write ``data`` ahead, to be published in ``folder`` under a name known later."""
    return StagedFile(storage, folder, data)
