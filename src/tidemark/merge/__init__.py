"""Record merging: mergers (engine-free, vectorised over Arrow tables) and the table's choice of one."""

from tidemark.merge.base import (
    OP_COLUMN,
    OP_DELETE,
    OP_UPSERT,
    MergeProperties,
    RecordMerger,
    dedup_records,
    greatest_per_key,
    live_records,
    merge_records,
)
from tidemark.merge.config import (
    COMMIT_TIME_ORDERING,
    CUSTOM,
    EVENT_TIME_ORDERING,
    MergeConfig,
    load_custom_merger,
    parse_column_groups,
)
from tidemark.merge.mergers import (
    ColumnGroup,
    ColumnGroupMerger,
    CommitTimeMerger,
    EventTimeMerger,
    PartialUpdateMerger,
)

__all__ = [
    "COMMIT_TIME_ORDERING",
    "CUSTOM",
    "EVENT_TIME_ORDERING",
    "OP_COLUMN",
    "OP_DELETE",
    "OP_UPSERT",
    "ColumnGroup",
    "ColumnGroupMerger",
    "CommitTimeMerger",
    "EventTimeMerger",
    "MergeConfig",
    "MergeProperties",
    "PartialUpdateMerger",
    "RecordMerger",
    "dedup_records",
    "greatest_per_key",
    "live_records",
    "load_custom_merger",
    "merge_records",
    "parse_column_groups",
]
