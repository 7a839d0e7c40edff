"""Where the file-system view gets the files of a partition from.

The view needs the data files of the partitions a caller asks about, never more. Two
sources give them:

* :class:`FolderListing` lists the partition folders themselves, one delimited listing per
  partition (on an object store: one LIST request each, never a walk of the table root or
  ``.hoodie/``). It knows the table's partitions only when told (a non-partitioned table has
  the one partition ``""``); asked for all partitions otherwise, the view walks the table.
* the metadata table's ``files`` partition (:mod:`tidemark.metadata.listing`), which holds the
  listing of every partition: no folder is listed at all.

Either way the view keeps only files of completed instants: a listing may hold files of
pending or failed writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tidemark.storage import FileInfo, Storage


class PartitionListing(Protocol):
    """The files of the table's partitions, by partition path ("" when not partitioned)."""

    source: str  # what the files come from, for logs and tests ("folders", "metadata table")

    def all_partitions(self) -> Sequence[str] | None:
        """Every partition of the table, or None when only a walk of the table can tell."""
        ...

    def files(self, partition: str) -> list[FileInfo]:
        """The files directly in ``partition`` (paths relative to the table base)."""
        ...


class FolderListing:
    """Lists partition folders one at a time. ``partitions``: the table's partitions when known
    without a walk (``[""]`` for a non-partitioned table), else None."""

    source = "folders"

    def __init__(self, storage: Storage, partitions: Sequence[str] | None = None) -> None:
        self.storage = storage
        self._partitions = None if partitions is None else list(partitions)

    def all_partitions(self) -> Sequence[str] | None:
        return self._partitions

    def files(self, partition: str) -> list[FileInfo]:
        try:
            return self.storage.list_dir(partition)
        except FileNotFoundError:  # a partition that was never written (or was dropped)
            return []
