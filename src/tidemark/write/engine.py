"""What an engine must provide to run a write: the data-parallel steps of the plan.

The write client (:mod:`tidemark.write.client`) decides *what* happens, in
which order, and runs the commit protocol; an engine decides *how* the rows
move. ``Frame`` is the engine's batch type (a Spark DataFrame, a pyarrow Table).
Every engine gives the rows the same columns: the user columns, then
``_hoodie_record_key``, ``_hoodie_partition_path``, and during planning the
file id (``_tm_file_id``) and the op (``_tm_op``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from tidemark.format.commit_metadata import WriteStat
from tidemark.fsview import FileSystemView
from tidemark.merge import MergeConfig
from tidemark.write.bucket import BucketAssignment, BucketSpec
from tidemark.write.file_group import WriteSpec
from tidemark.write.plan import InsertBucket

Frame = Any
FILE_ID_COLUMN = "_tm_file_id"


@dataclass(frozen=True)
class TableLayout:
    """What a pipeline needs to know about the table's keys and partitions."""

    record_key_fields: tuple[str, ...]
    partition_fields: tuple[str, ...]
    ordering_fields: tuple[str, ...]
    hive_style: bool
    merge: MergeConfig = MergeConfig()  # batch dedup merges repeated keys with the table's merger
    bucket: BucketSpec | None = None  # bucket index (None: simple index)
    url_encode: bool = False  # hoodie.datasource.write.partitionpath.urlencode: escape partition values


@dataclass(frozen=True)
class WorkloadProfile:
    """What a tagged batch holds, counted in one pass before the instant is requested."""

    inserts: Mapping[str, int]  # rows of new keys, per partition path
    existing: int  # rows whose key is already in the table
    updated: frozenset[tuple[str, str]] = frozenset()  # the (partition path, file id) those rows are in


class WritePipeline(Protocol):
    spec: WriteSpec
    marker_server_host: str  # where the engine's tasks can reach a server in this process

    def schema_of(self, frame: Frame) -> pa.Schema: ...

    def drop_meta_columns(self, frame: Frame) -> Frame: ...

    def is_empty(self, frame: Frame) -> bool:
        """Whether the batch has no rows (may run a small job)."""
        ...

    def prepare(self, frame: Frame, *, allow_missing: bool, keys_only: bool) -> Frame:
        """Validate, align to the table schema, reject null keys, add key and partition columns."""
        ...

    def dedup(self, frame: Frame) -> Frame: ...

    def tag(self, frame: Frame, view: FileSystemView) -> Frame:
        """Add the file id of each key's current file group (null for new keys)."""
        ...

    def tag_buckets(self, frame: Frame, view: FileSystemView, assignment: BucketAssignment) -> Frame:
        """Bucket index: set the file id of every row from its key's bucket (no lookup; rows
        without a partition path, a delete lacking the partition columns, are looked up in ``view``)."""
        ...

    def untagged(self, frame: Frame) -> Frame:
        """Add a null file id to every row (inserts only)."""
        ...

    def persist(self, frame: Frame) -> Frame: ...

    def release(self) -> None:
        """Drop everything kept for this write: the frames of :meth:`persist` and whatever the
        index lookup kept. Called once the write is over, whatever its outcome."""
        ...

    def persist_profiled(self, tagged: Frame) -> tuple[Frame, WorkloadProfile]:
        """:meth:`persist` and :meth:`profile` in one: the kept frame and its counts.

        On an error (null keys) nothing stays kept.
        """
        ...

    def profile(self, tagged: Frame) -> WorkloadProfile:
        """Count the tagged batch's new keys per partition and its existing keys.

        Raises NullRecordKeyError if :meth:`prepare` left the null-key check to this pass; a
        write runs it before anything is written.
        """
        ...

    def only_new(self, tagged: Frame) -> Frame: ...

    def split(self, tagged: Frame) -> tuple[Frame, Frame]:
        """(rows of existing keys, rows of new keys)."""
        ...

    def insert_counts(self, inserts: Frame) -> dict[str, int]: ...

    def route_inserts(self, inserts: Frame, buckets: Sequence[InsertBucket]) -> Frame: ...

    def upsert_rows(self, updates: Frame, routed: Frame | None) -> Frame: ...

    def route(self, tagged: Frame, buckets: Sequence[InsertBucket]) -> Frame:
        """The upsert rows to write: existing keys keep their file id, new keys get the file id
        of the bucket whose hash range holds them (rows no bucket takes are dropped)."""
        ...

    def delete_rows(self, tagged: Frame) -> Frame: ...

    def write_file_groups(
        self,
        rows: Frame,
        base_files: Mapping[tuple[str, str], str],
        weights: Mapping[tuple[str, str], int] | None = None,
    ) -> list[WriteStat]:
        """Write the rows of every file group (merged with its base file, if it has one).

        ``weights``, if known: the file groups the rows hold, each with the bytes its write is
        expected to cost, for the engine to spread the work evenly.
        """
        ...

    def write_bulk(self, frame: Frame) -> list[WriteStat]: ...

    def file_groups_of(self, rows: Frame) -> set[tuple[str, str]]:
        """The distinct (partition path, file id) of rows that carry a file id."""
        ...

    def cancel_write(self) -> None:
        """Stop the running write tasks as soon as possible (called from another thread)."""
        ...
