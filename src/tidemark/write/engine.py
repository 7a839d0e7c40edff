"""What an engine must provide to run a write: the data-parallel steps of the plan.

The write client (:mod:`tidemark.write.client`) decides *what* happens, in
which order, and runs the commit protocol; an engine decides *how* the rows
move. The seam is typed over the engine's frame (``FrameT``: a pyarrow Table, a Spark
DataFrame): :class:`WritePipelines` is one table's writes on one engine, :class:`WritePipeline`
one write's steps. Every engine gives the rows the same columns: the user columns, then
``_hoodie_record_key``, ``_hoodie_partition_path``, and during planning the
file id (``_tm_file_id``) and the op (``_tm_op``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import pyarrow as pa

from tidemark.format.commit_metadata import WriteStat
from tidemark.fsview import FileSystemView
from tidemark.merge import MergeConfig
from tidemark.write.bucket import BucketAssignment, BucketSpec
from tidemark.write.operation import WriteOperation
from tidemark.write.plan import InsertBucket, SoleSmallFile
from tidemark.write.spec import WriteSpec

# The engine's batch type: a pyarrow Table (Arrow engine), a Spark DataFrame (Spark engine).
FrameT = TypeVar("FrameT")
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
    merge_on_read: bool = False  # updates go to logs, which the index (base files only) does not read


@dataclass(frozen=True)
class WorkloadProfile:
    """What a tagged batch holds, counted in one pass before the instant is requested."""

    inserts: Mapping[str, int]  # rows of new keys, per partition path
    existing: int  # rows whose key is already in the table
    updated: frozenset[tuple[str, str]] = frozenset()  # the (partition path, file id) those rows are in


@dataclass(frozen=True)
class Tagged(Generic[FrameT]):
    """A batch after the index lookup, kept (computed once) until :meth:`WritePipeline.release`."""

    rows: FrameT  # every row with its file id (null: a new key)
    profile: WorkloadProfile  # counted before ``drop_existing`` took the existing keys out


class WritePipeline(Protocol[FrameT]):
    """The data-parallel steps of one write, over the engine's frames (``FrameT``).

    One pipeline serves one write attempt (it may keep frames and a running job) and knows the
    table's layout and the write's user schema. The client calls the steps in this order, each
    at most as listed; everything up to :meth:`look_up` / :meth:`assign_buckets` runs before the
    write's instant is requested, so bad input raises there and changes nothing:

    1. :meth:`prepare`: validate, add key and partition columns, dedup;
    2. :meth:`look_up` (simple index) or :meth:`assign_buckets` (bucket index): each row's
       file id, the batch kept;
    3. the client plans inserts (engine-free), then :meth:`route` or :meth:`delete_rows`
       gives the rows to write, with their op;
    4. :meth:`write_file_groups` or :meth:`write_bulk` write them with the commit's
       :class:`WriteSpec` (passed in: the instant and markers are known only by then) and
       return only write statistics (``WriteStat``);
    5. :meth:`release`, whatever the outcome.

    :meth:`partition_counts` and :meth:`file_groups_of` are small aggregates the client plans
    with; :meth:`cancel_write` may be called from another thread while step 4 runs.
    """

    @property
    def marker_server_host(self) -> str:
        """Where the engine's tasks can reach a server in this process (the marker server)."""
        ...

    @property
    def tasks_in_writer_process(self) -> bool:
        """Whether the engine's tasks run in this process (threads): they can then write the
        write's MARKERS files themselves (``markers/batch.py``), the default for their markers."""
        ...

    @property
    def tasks_outlive_failures(self) -> bool:
        """Whether a task may still be writing after the write failed (Spark's: a cancelled task
        runs on until it is killed): its files are then fenced (``markers/fence.py``)."""
        ...

    def prepare(self, batch: FrameT, *, allow_missing: bool, keys_only: bool, dedup: bool) -> FrameT:
        """Validate the batch, align it to the user schema (``keys_only``: keep only key,
        partition and ordering columns), add ``_hoodie_record_key`` and (if the batch has the
        partition columns) ``_hoodie_partition_path``; with ``dedup``, one record per key,
        merged with the table's merger.

        Raises a TidemarkError for bad input (missing columns, unstorable types, bad partition
        values, null or ambiguous keys). The null-key check may be left to :meth:`look_up`,
        which is still before anything is written.
        """
        ...

    def look_up(
        self, batch: FrameT, view: FileSystemView, *, find_existing: bool, drop_existing: bool = False,
        sole: SoleSmallFile | None = None,
    ) -> Tagged[FrameT]:
        """Simple index: each row's file id (``FILE_ID_COLUMN``) from the latest base files of
        ``view`` (null: a new key; without ``find_existing`` every row is new), the batch kept
        and counted. ``drop_existing``: the rows of existing keys are left out (insert's
        ``drop`` dup policy); the profile still counts them.

        ``sole`` (an upsert's, see :class:`~tidemark.write.plan.SoleSmallFile`): the engine may
        tag every row of a partition whose one file group takes them all with that file group,
        its keys not looked up; the profile then counts those rows as existing keys.

        A batch without partition paths (a delete of keys only) is looked up in every partition
        and gets the partition path of the file it was found in. Raises NullRecordKeyError if
        :meth:`prepare` left that check here.
        """
        ...

    def assign_buckets(self, batch: FrameT, view: FileSystemView, assignment: BucketAssignment) -> FrameT:
        """Bucket index: each row's file id from its key's bucket (no lookup), the batch kept.
        Rows without a partition path (a delete lacking the partition columns) are looked up
        in ``view`` instead."""
        ...

    def partition_counts(self, rows: FrameT) -> dict[str, int]:
        """Rows per partition path (one small aggregate)."""
        ...

    def file_groups_of(self, rows: FrameT) -> set[tuple[str, str]]:
        """The distinct (partition path, file id) of rows that carry a file id."""
        ...

    def route(self, tagged: FrameT, buckets: Sequence[InsertBucket] | None) -> FrameT:
        """The upsert rows to write (op column set): existing keys keep their file id, new keys
        get the file id of the insert bucket whose hash range holds them (rows no bucket takes
        are dropped). ``None``: every row already carries its file id (bucket index)."""
        ...

    def delete_rows(self, tagged: FrameT) -> FrameT:
        """The delete rows to write: the found keys with their ordering values (a stale delete
        must not remove a newer record), op column set."""
        ...

    def write_file_groups(
        self,
        spec: WriteSpec,
        rows: FrameT,
        base_files: Mapping[tuple[str, str], str],
        weights: Mapping[tuple[str, str], int] | None = None,
    ) -> list[WriteStat]:
        """Write the rows of every file group (merged with its base file, if it has one) as
        ``spec`` says, each file after its marker.

        ``weights``, if known: the file groups the rows hold, each with the bytes its write is
        expected to cost, for the engine to spread the work evenly.
        """
        ...

    def write_bulk(self, spec: WriteSpec, batch: FrameT) -> list[WriteStat]:
        """bulk_insert: write the prepared batch into new file groups, no index, no shuffle."""
        ...

    def cancel_write(self) -> None:
        """Stop the running write tasks as soon as possible (called from another thread)."""
        ...

    def release(self) -> None:
        """Drop everything kept for this write (the kept batches, whatever the index lookup
        kept). Called once the write is over, whatever its outcome."""
        ...


class WritePipelines(Protocol[FrameT]):
    """One table's writes on one engine: what the client asks of a batch before it knows the
    write's schema, and the pipeline of each write (from :meth:`Engine.pipelines`)."""

    def batch(self, data: object) -> FrameT:
        """The user's data as the engine's frame, without Hudi's meta columns. Raises
        InvalidInputError for data the engine cannot write (the Arrow engine converts pandas
        and lists of dicts; nanosecond timestamps become microseconds, or UnsupportedTypeError)."""
        ...

    def schema_of(self, batch: FrameT) -> pa.Schema:
        """The batch's columns as an Arrow schema (no job runs)."""
        ...

    def is_empty(self, batch: FrameT) -> bool:
        """Whether the batch has no rows (may run a small job)."""
        ...

    def pipeline(self, user_schema: pa.Schema, operation: WriteOperation) -> WritePipeline[FrameT]:
        """A new pipeline for one attempt of ``operation`` writing rows of ``user_schema``."""
        ...
