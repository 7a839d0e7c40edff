"""The metadata table (``.hoodie/metadata``): Hudi's index of the data table's files and stats.

A metadata table that a writer does not update goes stale, and Hudi's readers and hudi-rs,
which list files through it, then miss new files and keep deleted ones. tidemark keeps its
``files`` partition true and drops the others (:mod:`tidemark.metadata.maintain`; records
with :mod:`~tidemark.metadata.files_writer`, compacts with :mod:`~tidemark.metadata.compact`,
cleans and archives with :mod:`~tidemark.metadata.timeline_service`, knows what rollbacks
undid with :mod:`~tidemark.metadata.undone`, creates with :mod:`~tidemark.metadata.create`
(every new table, by default) and :mod:`~tidemark.metadata.bootstrap` (an existing table, when
asked), reads with :mod:`~tidemark.metadata.files`);
when it cannot, it removes the table the way Hudi does when ``hoodie.metadata.enable=false``
(:mod:`tidemark.metadata.disable`). See docs/metadata-table.md.
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
