"""Removing a metadata table that tidemark would otherwise leave stale, as Hudi disables one.

Hudi (``hoodie.metadata.enable=false``) first clears ``hoodie.table.metadata.partitions`` and
``hoodie.table.metadata.partitions.inflight`` in ``hoodie.properties`` and then deletes the
``.hoodie/metadata`` folder. Readers (Hudi's and hudi-rs) trust the metadata table only for
the partitions that property names, so after the first step none trusts it, whatever is
left of the folder; the order makes the removal crash-safe. Each step is idempotent: a
writer that finds the property empty but the folder still there (a crash in between, or in
the middle of the delete) just deletes the rest.

Call :func:`drop_metadata_table` under the table lock before the first change to the file
listing; the property edit also holds the ``hoodie.properties`` mutex, like every other
read-modify-write of that file.
"""

from __future__ import annotations

from collections.abc import Mapping

from tidemark.concurrency.writer_settings import properties_mutex, read_properties
from tidemark.format.properties import PROPERTIES_PATH, format_properties
from tidemark.storage import Storage

METADATA_DIR = ".hoodie/metadata"
PARTITIONS_KEY = "hoodie.table.metadata.partitions"
INFLIGHT_PARTITIONS_KEY = "hoodie.table.metadata.partitions.inflight"
_KEYS = (PARTITIONS_KEY, INFLIGHT_PARTITIONS_KEY)


def _declared(props: Mapping[str, str]) -> bool:
    return any((props.get(key) or "").strip() for key in _KEYS)


def _folder_present(storage: Storage) -> bool:
    # A listing of .hoodie rather than exists(): on object stores a folder is only a prefix.
    return "metadata" in storage.list_subdirs(".hoodie")


def metadata_table_present(storage: Storage, props: Mapping[str, str] | None = None) -> bool:
    """Whether the table declares metadata partitions or still has a ``.hoodie/metadata`` folder."""
    return _declared(props if props is not None else read_properties(storage)) or _folder_present(storage)


def forget_partitions(storage: Storage) -> bool:
    """Step 1: empty both metadata-partition properties (as Hudi does: the keys stay, empty).

    Takes the ``hoodie.properties`` mutex; the file is replaced atomically, every other key
    (and so ``hoodie.table.checksum``, which sums the table name) unchanged. Returns whether
    anything changed.
    """
    with properties_mutex(storage):
        props = read_properties(storage)
        if not _declared(props):
            return False
        for key in _KEYS:
            if key in props:
                props[key] = ""
        props[PARTITIONS_KEY] = ""
        storage.write_atomic(PROPERTIES_PATH, format_properties(props).encode())
        return True


def delete_folder(storage: Storage) -> bool:
    """Step 2: delete ``.hoodie/metadata`` (whatever is left of it). Returns whether it existed."""
    if not _folder_present(storage):
        return False
    storage.delete_tree(METADATA_DIR)
    return True


def drop_metadata_table(storage: Storage) -> bool:
    """Remove the metadata table: properties first, then the folder. Idempotent and crash-safe
    (see the module notes). Returns whether there was anything to remove."""
    forgot = forget_partitions(storage)
    deleted = delete_folder(storage)
    return forgot or deleted
