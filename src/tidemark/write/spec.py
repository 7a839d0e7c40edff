"""The picklable description of one commit's file-group writes, shipped to every task."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from tidemark.markers import MarkerSpec
from tidemark.merge import MergeConfig


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
