"""The picklable description of one commit's file-group writes, shipped to every task."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tidemark.markers import MarkerSpec
from tidemark.merge import MergeConfig
from tidemark.storage.base import Storage
from tidemark.storage.location import StorageLocation, storage_of


@dataclass(frozen=True)
class WriteSpec:
    """Everything a task needs to write file groups of one commit; picklable."""

    base_path: str
    instant_time: str
    schema: pa.Schema  # of base files: meta columns + user columns
    ordering_fields: tuple[str, ...]
    compression: str
    max_file_size: int
    markers: MarkerSpec = MarkerSpec()  # how tasks keep markers (and detect conflicts early)
    merge: MergeConfig = MergeConfig()  # the table's record merging
    # Merge-on-read: the Avro schema of log blocks. When set, existing file groups get a
    # log file appended (write.log_append) instead of a rewritten base file.
    log_schema: str | None = None
    log_block_format: str = "avro"  # or "parquet"
    table_name: str = ""  # names the Avro schema in base-file footers (the folder's name if empty)
    bloom_filter: bool = True  # hoodie.parquet.bloom.filter.enabled: the key bloom filter in footers
    # Where the table lives, with its storage options: tasks open their storage from it (an
    # object store needs its credentials on every executor). None: the local base_path.
    location: StorageLocation | None = None
    # The columns whose base-file pages get a dictionary, chosen once for the whole write from a
    # sample of its batch (:func:`tidemark.write.file_group.dictionary_columns`); None: each file
    # chooses from its own first rows.
    dictionary_columns: tuple[str, ...] | None = None
    # The columns written without the codec (it barely shrinks their values: random ids), chosen
    # as the dictionary columns are (:func:`tidemark.write.column_encoding.uncompressed_columns`).
    uncompressed_columns: tuple[str, ...] | None = None
    # Threads that hash a base file's keys into its bloom filter while its rows are encoded: 2
    # when the write has a core to spare (it writes one file at a time), else 1.
    hash_threads: int = 1

    def storage(self) -> Storage:
        """The table's storage, opened once per process for this location."""
        return storage_of(self.location or StorageLocation(self.base_path))
