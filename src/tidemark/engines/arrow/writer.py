"""The Arrow write pipeline: the write plan run in this process on pyarrow tables.

It produces the same files, commit metadata and timeline as the Spark engine;
it suits tests, small jobs and processes that should not start a JVM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.engines.arrow.file_groups import FileGroupWrites, task_token
from tidemark.engines.arrow.index import FileKeys
from tidemark.engines.arrow.index import tag as tag_keys
from tidemark.engines.arrow.keys import (
    PartitionPaths,
    crc32_of_keys,
    keyless_count,
    may_hold_byte,
    partition_paths,
    record_key_array,
    rows_by_code,
)
from tidemark.engines.arrow.take import ChunkedRows, buffer_identity, even_slices, take_columns
from tidemark.engines.arrow.tasks import WriteTasks, write_threads
from tidemark.errors import InvalidInputError, NullRecordKeyError
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY, new_file_id
from tidemark.format.partition_path import check_partition_paths
from tidemark.fsview import FileSystemView
from tidemark.markers.batch import declare_markers
from tidemark.merge import OP_COLUMN, OP_DELETE, OP_UPSERT, dedup_records, greatest_per_key
from tidemark.write.bucket import BucketAssignment
from tidemark.write.column_encoding import with_encoding_choice
from tidemark.write.engine import FILE_ID_COLUMN, TableLayout, Tagged, WorkloadProfile
from tidemark.write.file_group import (
    WriteSpec,
    new_file_marker,
    write_new_files,
)
from tidemark.write.meta_columns import constant, constant_dictionary
from tidemark.write.operation import WriteOperation
from tidemark.write.plan import InsertBucket, SoleSmallFile
from tidemark.write.validate import (
    ambiguous_key_error,
    plan_columns,
    require_columns,
    storable_arrow_table,
    text_key_fields,
)


def as_arrow_table(data: Any) -> pa.Table:
    """Accept a pyarrow Table or RecordBatch, a pandas DataFrame, or a list of dicts."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, list):
        return pa.Table.from_pylist(data)
    if type(data).__name__ == "DataFrame" and hasattr(data, "to_numpy") and not hasattr(data, "rdd"):
        return pa.Table.from_pandas(data, preserve_index=False)
    raise InvalidInputError(
        f"the Arrow engine (a Table opened with spark=None) writes pyarrow Tables, not {type(data).__name__}; "
        "open the table with spark=... to write Spark DataFrames"
    )


class ArrowWrites:
    """One table's writes on the Arrow engine (:class:`tidemark.write.engine.WritePipelines`)."""

    def __init__(self, layout: TableLayout, *, bulk_threads: int = 0, upsert_threads: int = 0) -> None:
        self.layout = layout
        # Hudi's shuffle parallelism options (0: unset): here, the most file groups written at once.
        self.bulk_threads = bulk_threads
        self.upsert_threads = upsert_threads

    def batch(self, data: object) -> pa.Table:
        """The batch as a pyarrow Table without meta columns, its types made readable by every Hudi
        reader (nanosecond timestamps to microseconds, ...; UnsupportedTypeError if that would
        lose information)."""
        table = as_arrow_table(data)
        return storable_arrow_table(table.drop_columns([c for c in table.column_names if c in META_COLUMNS]))

    def schema_of(self, batch: pa.Table) -> pa.Schema:
        return batch.schema

    def is_empty(self, batch: pa.Table) -> bool:
        return batch.num_rows == 0

    def pipeline(self, user_schema: pa.Schema, operation: WriteOperation) -> ArrowWritePipeline:
        threads = self.bulk_threads if operation is WriteOperation.BULK_INSERT else self.upsert_threads
        return ArrowWritePipeline(self.layout, user_schema, threads=threads)


class ArrowWritePipeline:
    """One write's steps in this process (:class:`tidemark.write.engine.WritePipeline`)."""

    marker_server_host = "127.0.0.1"  # the "tasks" run in this process
    tasks_outlive_failures = False  # a failed write returns once its threads have stopped
    tasks_in_writer_process = True  # its tasks are threads: they write MARKERS files themselves

    def __init__(self, layout: TableLayout, user_schema: pa.Schema, *, threads: int = 0) -> None:
        self.layout = layout
        self.user_schema = user_schema
        self.threads = threads  # > 0: at most this many file groups written at once (else one per core)
        self._tasks = WriteTasks()
        # What the index lookup learnt of the files whose keys it read (the positions of the rows
        # whose keys the batch holds, maybe the keys), so that their rewrites need not again.
        self._touched: dict[tuple[str, str], FileKeys] = {}
        # The partition paths prepare() computed, as (the column it appended, their codes): a
        # bulk_insert of that very column groups its rows by the codes, not by hashing it again.
        self._paths: tuple[pa.Array, PartitionPaths] | None = None

    def file_groups_of(self, rows: pa.Table) -> set[tuple[str, str]]:
        pairs = rows.select([PARTITION_PATH, FILE_ID_COLUMN]).filter(pc.is_valid(rows.column(FILE_ID_COLUMN)))
        return {(p or "", f) for p, f in zip(*(c.to_pylist() for c in pairs.group_by(pairs.column_names)
                                             .aggregate([]).columns), strict=True)}

    def cancel_write(self) -> None:
        """No file group starts after this (those being written finish: a thread cannot be
        stopped); the next marker request would be refused anyway once a conflict is known."""
        self._tasks.cancel()

    # -- frame helpers ------------------------------------------------------------------
    def release(self) -> None:
        self._touched = {}  # nothing else is kept beyond the tables the client holds
        self._paths = None

    def look_up(
        self, batch: pa.Table, view: FileSystemView, *, find_existing: bool, drop_existing: bool = False,
        sole: SoleSmallFile | None = None,
    ) -> Tagged[pa.Table]:
        if find_existing:
            tagged = self.tag(batch, view, sole)
        else:
            tagged = batch.append_column(FILE_ID_COLUMN, pa.nulls(batch.num_rows, pa.string()))
        profile = self.profile(tagged)
        if drop_existing:  # the existing keys' rows are left out: the files they are in are not theirs to rewrite
            self._touched = {}
        return Tagged(self.only_new(tagged) if drop_existing else tagged, profile)

    def assign_buckets(self, batch: pa.Table, view: FileSystemView, assignment: BucketAssignment) -> pa.Table:
        return self.tag_buckets(batch, view, assignment)

    def profile(self, tagged: pa.Table) -> WorkloadProfile:
        # Null keys were rejected by prepare(): this engine has the whole batch in memory.
        # Counted on the two columns it needs: filtering the whole batch would copy its rows.
        tagged = tagged.select([PARTITION_PATH, FILE_ID_COLUMN])
        found = tagged.filter(pc.is_valid(tagged.column(FILE_ID_COLUMN)))
        groups = found.select([PARTITION_PATH, FILE_ID_COLUMN]).group_by([PARTITION_PATH, FILE_ID_COLUMN]).aggregate([])
        updated = zip(groups.column(PARTITION_PATH).to_pylist(), groups.column(FILE_ID_COLUMN).to_pylist(), strict=True)
        return WorkloadProfile(
            inserts=self.partition_counts(self.only_new(tagged)),
            existing=found.num_rows,
            updated=frozenset((partition or "", file_id) for partition, file_id in updated),
        )

    def only_new(self, tagged: pa.Table) -> pa.Table:
        return tagged.filter(pc.is_null(tagged.column(FILE_ID_COLUMN)))

    def split(self, tagged: pa.Table) -> tuple[pa.Table, pa.Table]:
        found = pc.is_valid(tagged.column(FILE_ID_COLUMN))
        return tagged.filter(found), tagged.filter(pc.invert(found))

    def upsert_rows(self, updates: pa.Table, routed: pa.Table | None) -> pa.Table:
        rows = updates if routed is None else pa.concat_tables([updates, routed.select(updates.column_names)])
        return rows.append_column(OP_COLUMN, constant(OP_UPSERT, rows.num_rows))

    def delete_rows(self, tagged: pa.Table) -> pa.Table:
        found = tagged.filter(pc.is_valid(tagged.column(FILE_ID_COLUMN)))
        # A delete keeps its ordering values: a stale delete must not remove a newer record.
        ordering = [c for c in self.layout.ordering_fields if c in found.column_names]
        rows = found.select([RECORD_KEY, PARTITION_PATH, FILE_ID_COLUMN, *ordering])
        return rows.append_column(OP_COLUMN, constant(OP_DELETE, rows.num_rows))

    # -- preparing the batch ------------------------------------------------------------
    def prepare(self, frame: pa.Table, *, allow_missing: bool, keys_only: bool, dedup: bool = False) -> pa.Table:
        layout = self.layout
        names = frame.column_names
        require_columns("record key", layout.record_key_fields, names)
        if keys_only:
            wanted = (*layout.record_key_fields, *layout.partition_fields, *layout.ordering_fields)
            frame = frame.select([c for c in names if c in wanted])
        else:
            require_columns("partition", layout.partition_fields, names)
            # Named as the ordering field it is; only set.null.for.missing.columns (column groups) fills it.
            if not allow_missing:
                require_columns("ordering", layout.ordering_fields, names)
            plan = plan_columns(frame.schema, self.user_schema, allow_missing=allow_missing)
            columns = []
            for field in self.user_schema:
                if field.name in plan.missing:
                    columns.append(pa.nulls(frame.num_rows, field.type))
                else:
                    col = frame.column(field.name)
                    columns.append(col.cast(field.type) if col.type != field.type else col)
            frame = pa.Table.from_arrays(columns, schema=self.user_schema)
        keyless = keyless_count(frame, layout.record_key_fields)
        if keyless:
            raise NullRecordKeyError(layout.record_key_fields, keyless)
        for name in text_key_fields(frame.schema, layout.record_key_fields):
            column = frame.column(name)
            text = column if pa.types.is_string(column.type) or pa.types.is_large_string(column.type) \
                else column.cast(pa.string())
            if may_hold_byte(text, ord(",")):
                bad = frame.filter(pc.match_substring(text, ","))
                if bad.num_rows:
                    raise ambiguous_key_error(name, bad.column(name)[0].as_py())
        frame = frame.append_column(RECORD_KEY, record_key_array(frame, layout.record_key_fields))
        if all(c in frame.column_names for c in layout.partition_fields):
            paths = partition_paths(
                frame, layout.partition_fields, hive_style=layout.hive_style, url_encode=layout.url_encode
            )
            check_partition_paths(
                paths.paths.to_pylist(), layout.partition_fields,
                hive_style=layout.hive_style, url_encode=layout.url_encode,
            )
            column = paths.array()
            frame = frame.append_column(PARTITION_PATH, column)
            self._paths = (column, paths)
        return self.dedup(frame) if dedup else frame

    def dedup(self, frame: pa.Table) -> pa.Table:
        """One record per key, merged with the table's merger (for commit-time and event-time
        ordering: the greatest ordering values, then the last occurrence; nulls lose)."""
        if frame.num_rows <= 1 or _distinct_keys(frame):
            return frame  # nothing to merge: the batch as it is, not a sorted copy of it
        keys = [c for c in (PARTITION_PATH, RECORD_KEY) if c in frame.column_names]
        merge = self.layout.merge
        if not merge.max_by_dedup:
            return dedup_records(merge.merger(self.user_schema), frame, keys=keys)
        ordering = [c for c in self.layout.ordering_fields if c in frame.column_names]
        arrival = pa.array(np.arange(frame.num_rows, dtype=np.int64))
        return frame.take(greatest_per_key([frame.column(k) for k in keys],
                                           [frame.column(c) for c in ordering], arrival))

    # -- index --------------------------------------------------------------------------
    def tag(self, frame: pa.Table, view: FileSystemView, sole: SoleSmallFile | None = None) -> pa.Table:
        """The batch with each row's file id (null: a new key) and, for a batch without partition
        paths, the partition path of the file holding the key (engines/arrow/index.py)."""
        # A merge-on-read table's file groups get log files: no base file is read again.
        lookup = tag_keys(frame, view, self._tasks, self.threads, sole, keep_keys=not self.layout.merge_on_read)
        self._touched = lookup.touched
        return lookup.tagged

    def tag_buckets(self, frame: pa.Table, view: FileSystemView, assignment: BucketAssignment) -> pa.Table:
        if PARTITION_PATH not in frame.column_names:  # a delete without partition columns: look keys up
            return self.tag(frame, view)
        if FILE_ID_COLUMN in frame.column_names:
            frame = frame.drop_columns([FILE_ID_COLUMN])
        return frame.append_column(FILE_ID_COLUMN, assignment.file_ids(frame, PARTITION_PATH))

    # -- routing and writing ------------------------------------------------------------
    def partition_counts(self, rows: pa.Table) -> dict[str, int]:
        if rows.num_rows == 0:
            return {}
        grouped = rows.select([PARTITION_PATH]).group_by(PARTITION_PATH).aggregate([([], "count_all")])
        return dict(zip(grouped.column(PARTITION_PATH).to_pylist(), grouped.column("count_all").to_pylist(),
                        strict=True))

    def route(self, tagged: pa.Table, buckets: Sequence[InsertBucket] | None) -> pa.Table:
        if buckets is None:  # bucket index: every row has its file id
            return self.upsert_rows(tagged, None)
        if not buckets:  # no insert goes anywhere: only the existing keys are written
            return self.upsert_rows(self.split(tagged)[0], None)
        # The inserts' file ids are set in place, not on a filtered copy of the batch joined
        # back to the updates: the rows are not copied at all (write_file_groups orders them).
        found = pc.is_valid(tagged.column(FILE_ID_COLUMN))
        new_rows = np.flatnonzero(~found.to_numpy(zero_copy_only=False))
        if len(new_rows) == 0:
            return self.upsert_rows(tagged, None)
        inserts = tagged.select([RECORD_KEY, PARTITION_PATH]).take(pa.array(new_rows))
        file_ids = np.empty(tagged.num_rows, dtype=object)
        file_ids[new_rows] = self.insert_file_ids(inserts, buckets)
        combined = pc.if_else(found, tagged.column(FILE_ID_COLUMN), pa.array(file_ids, pa.string()))
        return self.upsert_rows(tagged.set_column(tagged.schema.get_field_index(FILE_ID_COLUMN), FILE_ID_COLUMN,
                                                  combined), None)

    def route_inserts(self, inserts: pa.Table, buckets: Sequence[InsertBucket]) -> pa.Table:
        """The inserts with the file id of the bucket :meth:`insert_file_ids` gives each."""
        routed = inserts.drop_columns([FILE_ID_COLUMN])
        return routed.append_column(FILE_ID_COLUMN, pa.array(self.insert_file_ids(inserts, buckets), pa.string()))

    def insert_file_ids(self, inserts: pa.Table, buckets: Sequence[InsertBucket]) -> np.ndarray:
        """Each insert goes to its partition's bucket whose [low, high) holds crc32(key) / 2^32 (the
        partition's last bucket if none does); vectorised: one pass per partition, none per row.
        ``inserts`` needs only the record key and partition path columns."""
        by_partition: dict[str, list[InsertBucket]] = {}
        for b in buckets:
            by_partition.setdefault(b.partition_path, []).append(b)
        positions = crc32_of_keys(inserts.column(RECORD_KEY)) / 2**32
        encoded = inserts.column(PARTITION_PATH).combine_chunks().dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        file_ids = np.empty(inserts.num_rows, dtype=object)
        for code, partition in enumerate(encoded.dictionary.to_pylist()):
            mine = np.flatnonzero(codes == code)
            group = by_partition[partition]
            chosen = np.full(len(mine), len(group) - 1, dtype=np.int64)
            undecided = np.ones(len(mine), dtype=bool)
            for i, b in enumerate(group):  # the first bucket that holds the position wins, as in the plan
                hit = undecided & (positions[mine] >= b.low) & (positions[mine] < b.high)
                chosen[hit] = i
                undecided &= ~hit
            file_ids[mine] = np.array([b.file_id for b in group], dtype=object)[chosen]
        return file_ids

    def write_file_groups(
        self,
        spec: WriteSpec,
        rows: pa.Table,
        base_files: Mapping[tuple[str, str], str],
        weights: Mapping[tuple[str, str], int] | None = None,
    ) -> list[WriteStat]:
        return FileGroupWrites(self._tasks, self.threads, self._touched).write(spec, rows, base_files, weights)

    def write_bulk(self, spec: WriteSpec, frame: pa.Table) -> list[WriteStat]:
        """One task per partition path (in the order the batch first names them), written side
        by side; each task takes its partition's rows in slices, rolling over at the file size."""
        paths, runs = partition_rows(frame, self._known_paths(frame))
        first_file = [(path, new_file_id()) for path in paths]  # a task per partition path, in this order
        spec = with_encoding_choice(spec, frame)
        spec.storage()  # opened (and cached) here, not by the threads at once
        if len(runs) > 1 and frame.nbytes <= BULK_REORDER_BYTES:
            # Many partitions: one take puts the batch in partition order, each task then slices
            # its rows (no copy); a take per partition and chunk costs about twice as much. The
            # partition path is not taken: each slice gets its one value as a one-entry dictionary.
            ordered = take_columns(frame.drop_columns([PARTITION_PATH]),
                                   pa.array(np.concatenate([r for r in runs if r is not None])),
                                   write_threads(self.threads, len(runs)))
            starts = np.cumsum([0, *(len(r) for r in runs if r is not None)])
            sources = [ChunkedRows(ordered.slice(int(a), int(b - a)).append_column(
                           PARTITION_PATH, constant_dictionary(path, int(b - a))))
                       for path, a, b in zip(paths, starts[:-1], starts[1:], strict=True)]
            tasks: list[Callable[[], list[WriteStat]]] = [
                partial(_write_partition, spec, part, None, task, first_file[task])
                for task, part in enumerate(sources)
            ]
        elif len(runs) == 1 and (pieces := _bulk_pieces(frame, write_threads(self.threads, 2))) > 1:
            # One large partition: a file per core, as Spark's tasks would write it (pyarrow
            # encodes a file on one thread, so one file would leave the other cores idle).
            first_file = [(paths[0], new_file_id()) for _ in range(pieces)]
            tasks = [partial(_write_partition, spec, ChunkedRows(frame.slice(offset, length)), None, task,
                             first_file[task])
                     for task, (offset, length) in enumerate(even_slices(frame.num_rows, pieces))]
        else:
            if len(runs) == 1 and write_threads(self.threads, 2) > 1:  # one file at a time: a core for its hashing
                spec = replace(spec, hash_threads=2)
            source = ChunkedRows(frame)
            tasks = [partial(_write_partition, spec, source, rows, task, first_file[task])
                     for task, rows in enumerate(runs)]
        # Each task writes one partition: its first file's id is chosen here and its marker
        # declared with the others', in one write before any task (markers/batch.py).
        declare_markers(spec.markers.batch_id, [
            new_file_marker(spec, partition_path=path, file_id=file_id, token=task_token(task))
            for task, (path, file_id) in enumerate(first_file)
        ])
        written = self._tasks.run(tasks, write_threads(self.threads, len(tasks)))
        return [stat for stats in written for stat in stats]

    def _known_paths(self, frame: pa.Table) -> PartitionPaths | None:
        """The codes of ``frame``'s partition paths if its column is the one prepare() made
        (the same buffers: Arrow arrays do not change), else None."""
        if self._paths is None or PARTITION_PATH not in frame.column_names:
            return None
        made, paths = self._paths
        same = buffer_identity(frame.column(PARTITION_PATH)) == buffer_identity(pa.chunked_array([made]))
        return paths if same else None

BULK_SLICE_ROWS = 65_536  # rows a bulk_insert task takes (copies) at a time
# A batch up to this size is put in partition order by one take before a bulk_insert writes it
# (one copy of it in memory at once); a larger one is taken partition by partition, in slices.
BULK_REORDER_BYTES = 256 * 1024 * 1024


# A one-partition bulk_insert is written as a file per core only if each file gets at least this
# many bytes of the batch (in memory): smaller writes stay one file (readers pay per file).
BULK_SPLIT_BYTES = 16 * 1024 * 1024


def _bulk_pieces(frame: pa.Table, threads: int) -> int:
    """How many files a one-partition bulk_insert of ``frame`` is written as, side by side."""
    return max(1, min(threads, frame.nbytes // BULK_SPLIT_BYTES))


def partition_rows(frame: pa.Table, known: PartitionPaths | None = None) -> tuple[list[str], list[np.ndarray | None]]:
    """Each partition path of ``frame`` and the positions of its rows (ascending; partitions in
    the order of their codes); ``[None]`` as the positions: every row is in one partition (nothing
    to take). ``known``: the codes of the frame's partition paths, if already computed."""
    if frame.num_rows == 0:
        return [], []
    if known is not None:
        codes, paths = known.codes, known.paths
    else:
        encoded = pc.fill_null(frame.column(PARTITION_PATH).combine_chunks(), "").dictionary_encode()
        codes, paths = encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary
    if len(paths) == 1:
        return paths.to_pylist(), [None]
    return paths.to_pylist(), list(rows_by_code(codes, len(paths)))


def _write_partition(
    spec: WriteSpec, frame: ChunkedRows, rows: np.ndarray | None, task: int, first_file: tuple[str, str]
) -> list[WriteStat]:
    """``first_file``: the task's partition path and the file id of its first file there."""
    if rows is None:
        pieces: Any = frame.table.to_batches(max_chunksize=BULK_SLICE_ROWS)
    else:
        pieces = (frame.take(rows[s:s + BULK_SLICE_ROWS]) for s in range(0, len(rows), BULK_SLICE_ROWS))
    return list(write_new_files(spec, pieces, token=task_token(task), task_partition=task, file_ids=dict([first_file])))


def _distinct_keys(frame: pa.Table) -> bool:
    """Whether no record key occurs twice in ``frame`` (then no two rows share a partition and key)."""
    # unique, not count_distinct: the same count (a null is one value in both) at half the cost.
    return len(pc.unique(frame.column(RECORD_KEY))) == frame.num_rows


__all__ = ["ArrowWritePipeline", "ArrowWrites", "FILE_NAME", "as_arrow_table"]
