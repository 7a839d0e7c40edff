"""The metadata table (``.hoodie/metadata``): Hudi's index of the data table's files and stats.

tidemark does not maintain it (yet). A metadata table that a writer does not update goes
stale, and Hudi's readers and hudi-rs, which list files through it, then miss new files and
keep deleted ones. So before tidemark changes a table that has one, it removes it the way
Hudi does when ``hoodie.metadata.enable=false`` (:mod:`tidemark.metadata.disable`).
:mod:`tidemark.metadata.files` reads the ``files`` partition and
:mod:`tidemark.metadata.files_writer` records an instant in it (tested, not yet wired into
writes; docs/metadata-table.md).
"""

from tidemark.metadata.disable import (
    INFLIGHT_PARTITIONS_KEY,
    METADATA_DIR,
    PARTITIONS_KEY,
    delete_folder,
    drop_metadata_table,
    forget_partitions,
    metadata_table_present,
)

__all__ = [
    "INFLIGHT_PARTITIONS_KEY",
    "METADATA_DIR",
    "PARTITIONS_KEY",
    "delete_folder",
    "drop_metadata_table",
    "forget_partitions",
    "metadata_table_present",
]
