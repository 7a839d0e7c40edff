"""File-group writes in pure pyarrow: what one Spark task (or the Arrow engine) does.

:func:`write_file_group` produces the next version of one file group: it keeps
the rows of the current base file that the batch does not touch (with their own
``_hoodie_commit_time``), applies updates and deletes, appends inserts, and
writes one new base file after creating its marker. :func:`write_new_files`
writes fresh file groups from a stream of batches (bulk insert), rolling over
at the target file size. Both return :class:`WriteStat` records only. On a
merge-on-read table an existing file group gets a log file instead
(:mod:`tidemark.write.log_append`). Many small file groups of one write may be
rewritten with one merge instead (:mod:`tidemark.write.small_rewrites`), from the
same parts: :func:`merge_touched`, :func:`write_fresh`, :func:`with_file_name`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import (
    COMMIT_SEQNO,
    COMMIT_TIME,
    FILE_NAME,
    META_COLUMNS,
    PARTITION_PATH,
    RECORD_KEY,
    base_file_name,
    join_partition,
    new_file_id,
)
from tidemark.format.parquet_file import iter_data_file, read_file_metadata
from tidemark.markers import IOType, Marker, MarkerWriter, open_marker_writer
from tidemark.merge import OP_COLUMN, OP_DELETE, OP_UPSERT
from tidemark.merge.base import RecordMerger, same_values
from tidemark.storage.base import DataSource
from tidemark.write.column_encoding import parquet_options, stored_dictionaries
from tidemark.write.footer import (
    BaseFileWriter,
    FooterKeys,
    RowGroupEncoder,
    abandon_file,
    buffered_sink,
    open_base_file,
    stored_filter,
)
from tidemark.write.log_append import append_log_file
from tidemark.write.meta_columns import constant, constant_dictionary, stored_schema, with_meta_columns
from tidemark.write.partition_meta import ensure_partition_metafile
from tidemark.write.spec import WriteSpec

# Rows of a stored base file read per slice while it is rewritten: the file is never decoded whole.
STREAM_ROWS = 65_536


def conform_incoming(incoming: pa.Table, schema: pa.Schema) -> pa.Table:
    """The batch's rows with every column of ``schema`` (absent ones null: a delete carries only
    its key and ordering values) plus the op column."""
    n = incoming.num_rows
    arrays, fields = [], []
    for field in schema:
        if field.name in (COMMIT_TIME, COMMIT_SEQNO, FILE_NAME):
            continue
        if field.name in incoming.column_names:
            col = incoming.column(field.name)
            arrays.append(col if col.type == field.type else pc.cast(col, field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
        fields.append(field)
    ops = incoming.column(OP_COLUMN) if OP_COLUMN in incoming.column_names else constant(OP_UPSERT, n)
    return pa.Table.from_arrays([*arrays, ops], schema=pa.schema([*fields, pa.field(OP_COLUMN, pa.string())]))


def base_file_marker(
    spec: WriteSpec, *, partition_path: str, file_id: str, base_file: str | None, token: str
) -> Marker | None:
    """The marker :func:`write_file_group` creates for these arguments: its new base file's, or
    None where it appends a log file instead (a merge-on-read table's existing file group), whose
    name only the append learns. An engine may declare it before the task runs
    (:mod:`tidemark.markers.batch`)."""
    if spec.log_schema is not None and base_file is not None:
        return None
    return _marker(spec, partition_path, file_id, token, IOType.MERGE if base_file else IOType.CREATE)


def _marker(spec: WriteSpec, partition_path: str, file_id: str, token: str, io_type: IOType) -> Marker:
    """The marker of the base file ``file_id`` that task ``token`` writes for the write's instant."""
    return Marker(join_partition(partition_path, base_file_name(file_id, token, spec.instant_time)), io_type)


def write_file_group(
    spec: WriteSpec,
    incoming: pa.Table,
    *,
    partition_path: str,
    file_id: str,
    base_file: str | None,
    token: str,
    task_partition: int,
    touched_rows: np.ndarray | None = None,
    stored_keys: pa.Array | None = None,
    base_footer: pq.FileMetaData | None = None,
) -> WriteStat:
    """Write the next version of one file group and return its statistics.

    ``incoming`` holds the user columns, ``_hoodie_record_key``,
    ``_hoodie_partition_path`` and the op column; keys are unique. ``base_file``
    is the table-relative path of the current version, or None for a new group.
    ``touched_rows``, if the caller knows them (the Arrow engine's index lookup read the
    file's keys): the ascending positions of the base file's rows whose keys the batch may
    hold (a superset is fine), so that each slice of it is not probed with the batch's keys;
    ``stored_keys``, if it kept them: every record key of the base file in file order (strings),
    which the rewrite then does not decode again; ``base_footer``: the base file's parquet
    footer, if the caller read it (not read again).
    """
    if spec.log_schema is not None and base_file is not None:
        return append_log_file(spec, incoming, partition_path=partition_path, file_id=file_id,
                               base_file=base_file, token=token, task_partition=task_partition)
    started = time.monotonic()
    storage = spec.storage()
    marker = base_file_marker(spec, partition_path=partition_path, file_id=file_id, base_file=base_file, token=token)
    assert marker is not None  # a base file is written: not a log append
    name, rel_path = marker.file_name, marker.data_file
    # The marker goes first: with early conflict detection this is where a doomed write stops.
    create_marker(spec, marker)

    merger = spec.merge.merger(spec.schema)
    user_columns = [f.name for f in spec.schema if f.name not in META_COLUMNS]
    incoming = conform_incoming(incoming, spec.schema)
    num_updates = num_deletes = 0
    prev_commit = None
    source = metadata = None
    if base_file is not None:
        source = storage.open_input(base_file)
        metadata = base_footer if base_footer is not None else read_file_metadata(source, path=base_file)
    else:  # a new file group, maybe the first file of its partition
        ensure_partition_metafile(storage, partition_path, spec.instant_time)
    output = storage.open_output(rel_path)
    # The base file's bloom filter comes along: only the keys this write adds get hashed. (Not
    # held here: the writer keeps what it needs of it, a large filter's bits only once.)
    with BaseFileWriter(output.sink, spec, lambda rows: parquet_options(spec, rows), min_rows=STREAM_ROWS,
                        stored=stored_filter(metadata) if metadata is not None and spec.bloom_filter else None,
                        dictionaries=stored_dictionaries(spec) if base_file is not None else ()) as out:
        if base_file is not None:
            prev_commit = base_file.rsplit("_", 1)[-1].removesuffix(".parquet")
            # The stored rows stream through in slices: the ones the batch does not touch go
            # straight to the new file (with its name), the touched ones are kept for the merge.
            plain_schema = spec.schema.remove(spec.schema.get_field_index(FILE_NAME))
            assert metadata is not None  # read with the base file
            batch_keys = incoming.column(RECORD_KEY).combine_chunks()
            touched_pieces = []
            for touched_piece, untouched_piece in stored_slices(
                    spec, source, base_file, metadata, batch_keys, stored_keys, touched_rows):
                touched_pieces.append(touched_piece)
                out.write_stored(with_file_name(untouched_piece, out.schema, name))
            # The touched rows (few) as plain strings, as the batch's rows they meet in the merge.
            touched = (as_schema(pa.concat_tables(touched_pieces), plain_schema) if touched_pieces
                       else plain_schema.empty_table())
            if touched_rows is not None:  # a superset: rows whose key the batch does not hold stay as they are
                held = pc.is_in(touched.column(RECORD_KEY), value_set=batch_keys)
                if not pc.all(held).as_py():
                    out.write_stored(with_file_name(touched.filter(pc.invert(held)), out.schema, name))
                    touched = touched.filter(held)
            touched = with_file_name(touched, out.schema, name).sort_by(RECORD_KEY)
            # The stored keys the batch has: a far smaller set to probe than all of the file's keys.
            matched_mask = pc.is_in(incoming.column(RECORD_KEY), value_set=touched.column(RECORD_KEY).combine_chunks())
            matched = incoming.filter(matched_mask).sort_by(RECORD_KEY)
            fresh_mask = pc.invert(matched_mask)
            outcome = merge_touched(merger, user_columns, touched, matched)
            num_deletes = int(outcome.deleted.sum())
            updates = outcome.merged.filter(pa.array(outcome.changed))
            num_updates = updates.num_rows
            out.write_stored(touched.filter(pa.array(outcome.unchanged)))
        else:
            updates = incoming.slice(0, 0)
            fresh_mask = None
        # A delete of a key this file group does not hold has nothing to delete. One filter (none
        # if every row is an insert) keeps the batch's rows of new keys: each filter is a copy.
        is_delete = pc.equal(incoming.column(OP_COLUMN), OP_DELETE)
        if pc.any(is_delete).as_py():
            fresh_mask = pc.invert(is_delete) if fresh_mask is None else pc.and_(fresh_mask, pc.invert(is_delete))
        inserts = incoming if fresh_mask is None or pc.all(fresh_mask).as_py() else incoming.filter(fresh_mask)
        write_fresh(out, spec, name, task_partition, updates, inserts)
        out.close()
    file_size = output.commit()
    return WriteStat(
        partition_path=partition_path,
        file_id=file_id,
        path=rel_path,
        prev_commit=prev_commit,
        num_writes=out.rows,
        num_inserts=inserts.num_rows,
        num_updates=num_updates,
        num_deletes=num_deletes,
        file_size=file_size,
        prev_base_file=base_file.rsplit("/", 1)[-1] if base_file else None,
        total_write_time_ms=int((time.monotonic() - started) * 1000),
    )


def stored_slices(
    spec: WriteSpec, source: DataSource, base_file: str, metadata: pq.FileMetaData, batch_keys: pa.Array,
    stored_keys: pa.Array | None = None, touched_rows: np.ndarray | None = None,
) -> Iterator[tuple[pa.Table, pa.Table]]:
    """The base file's rows in STREAM_ROWS slices, each split into (the rows whose keys the
    batch's ``batch_keys`` hold, the others), without the file-name column (every kept row gets
    the new file's name) and with the per-file meta columns (commit time, partition path) as
    the dictionaries the file stores them as: untouched rows go to the writer without a string
    decoded. ``stored_keys``: the file's keys in file order, if known (not decoded again);
    ``touched_rows``: the ascending positions of the rows the batch may touch, if known (a
    superset is fine; then no slice is probed with the batch's keys)."""
    # The columns the file stores as dictionaries come as such (the rewrite's writer takes them so).
    schema = stored_schema(spec.schema, stored_dictionaries(spec, metadata))
    read_schema = schema.remove(schema.get_field_index(FILE_NAME))
    key_at = read_schema.get_field_index(RECORD_KEY)
    if stored_keys is not None and (len(stored_keys) != metadata.num_rows or stored_keys.type != pa.string()):
        stored_keys = None  # not this file's keys as the rewrite reads them: decoded after all
    first_row = 0
    for piece in iter_data_file(source, path=base_file, batch_size=STREAM_ROWS, metadata=metadata,
                                schema=read_schema if stored_keys is None else read_schema.remove(key_at)):
        if stored_keys is not None:
            piece = piece.add_column(key_at, read_schema.field(key_at), stored_keys.slice(first_row, piece.num_rows))
        if touched_rows is None:
            hit = pc.is_in(piece.column(RECORD_KEY), value_set=batch_keys)
        else:  # the known positions of this slice: no hash table of the batch's keys per slice
            mine = touched_rows[np.searchsorted(touched_rows, first_row):
                                np.searchsorted(touched_rows, first_row + piece.num_rows)]
            mask = np.zeros(piece.num_rows, dtype=bool)
            mask[mine - first_row] = True
            hit = pa.array(mask)
        first_row += piece.num_rows
        yield piece.filter(hit), piece.filter(pc.invert(hit))


@dataclass(frozen=True)
class MergeOutcome:
    """What the table's merger made of the stored records a batch touches, row by row (aligned
    with the stored rows and the batch's rows merged with them)."""

    merged: pa.Table  # the merged records (the batch's columns, the op column last)
    deleted: np.ndarray  # the record is deleted
    unchanged: np.ndarray  # the stored row stays as it is, its commit time included
    changed: np.ndarray  # the merged record replaces the stored one (an update)


def merge_touched(merger: RecordMerger, user_columns: list[str], touched: pa.Table, matched: pa.Table) -> MergeOutcome:
    """Merge the stored rows ``touched`` with the batch's rows ``matched`` (conformed, the op
    column last), aligned row by row: the same key in each row."""
    # The table's merger decides, per stored record, what the batch's record makes of it.
    older = touched.select(matched.column_names[:-1])
    older = older.append_column(OP_COLUMN, constant(OP_UPSERT, older.num_rows))
    newer = matched.cast(older.schema)
    merged = merger.merge(older, newer) if touched.num_rows else older
    deleted = pc.fill_null(pc.equal(merged.column(OP_COLUMN), OP_DELETE), False).to_numpy(zero_copy_only=False)
    # A merge that the batch's record did not change (a stale update or delete) keeps the
    # stored row as it is, commit time included; an identical re-write counts as an update.
    kept_as_is = same_values(merged, older, user_columns) & ~same_values(merged, newer, user_columns)
    unchanged = ~deleted & kept_as_is
    return MergeOutcome(merged, deleted, unchanged, ~deleted & ~unchanged)


def write_fresh(
    out: BaseFileWriter, spec: WriteSpec, name: str, task_partition: int, updates: pa.Table, inserts: pa.Table,
    partition_path: str | None = None,
) -> None:
    """Write a file group's new records: the merged ``updates`` of its stored keys, then the
    ``inserts``, with their meta columns (sequence numbers of task ``task_partition``).
    ``partition_path``: every record's, if the caller knows it (not taken from their column)."""
    fresh = pa.concat_tables([updates.select(inserts.column_names), inserts]) if updates.num_rows else inserts
    seq_prefix = f"{spec.instant_time}_{task_partition}"
    # In slices, as the stored rows: the meta columns (the file name in every row) and the
    # writer's row group are built for one slice at a time, not for all the new rows at once.
    for start in range(0, fresh.num_rows, STREAM_ROWS):
        piece = fresh.slice(start, STREAM_ROWS)
        # The updates lead ``fresh``: their keys are the base file's.
        stored_rows = min(max(updates.num_rows - start, 0), piece.num_rows)
        out.write(with_meta_columns(piece, out.schema, spec.instant_time, name, seq_prefix, start, partition_path),
                  stored_rows)


def as_schema(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows.cast(schema)``, casting only the columns whose type differs: ``Table.cast`` calls
    the cast kernel from Python for every column, with the GIL held between them, and a
    rewrite's touched rows differ in a few (its dictionaries). Raises ValueError as it does:
    for other column names, or nulls in a field the schema says has none."""
    if rows.column_names != schema.names:
        raise ValueError(f"the rows' columns {rows.column_names} are not the schema's {schema.names}")
    columns = []
    for column, field in zip(rows.columns, schema, strict=True):
        if not field.nullable and column.null_count:
            raise ValueError(f"column {field.name!r} holds nulls, which its field does not allow")
        columns.append(column if column.type == field.type else column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def with_file_name(rows: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """Stored ``rows`` (read without the file-name column) with ``name`` in that column, at its
    place in ``schema`` (a base file writer's)."""
    at = schema.get_field_index(FILE_NAME)
    columns = rows.columns
    columns.insert(at, constant_dictionary(name, rows.num_rows))
    return pa.Table.from_arrays(columns, schema=rows.schema.insert(at, schema.field(at)))


def create_marker(spec: WriteSpec, marker: Marker) -> None:
    """Create ``marker`` as the write's markers are kept (before its data file is)."""
    markers = open_marker_writer(spec.storage(), spec.instant_time, spec.markers)
    try:
        markers.create(marker.data_file, marker.io_type)
    finally:
        markers.close()


ROW_GROUP_BYTES = 64 * 1024 * 1024  # in memory, before encoding and compression
ROW_GROUP_ROWS = 1_000_000


class RowGroupBuffer:
    """Collects the small batches engines hand over (Spark: 10,000 rows) into row groups of a
    useful size; written batch by batch, every batch would become a tiny row group."""

    def __init__(self, max_bytes: int = ROW_GROUP_BYTES, max_rows: int = ROW_GROUP_ROWS) -> None:
        self.max_bytes = max_bytes
        self.max_rows = max_rows
        self._batches: list[pa.Table] = []
        self._bytes = self._rows = 0

    def add(self, rows: pa.Table) -> pa.Table | None:
        """Buffer ``rows``; returns the buffered rows to write once they make a row group."""
        self._batches.append(rows)
        self._rows += rows.num_rows
        self._bytes += rows.nbytes
        if self._bytes >= self.max_bytes or self._rows >= self.max_rows:
            return self.take()
        return None

    def take(self) -> pa.Table | None:
        """Everything buffered (None if nothing), and an empty buffer."""
        if not self._batches:
            return None
        rows = pa.concat_tables(self._batches)
        self._batches, self._bytes, self._rows = [], 0, 0
        return rows


class _RollingFile:
    def __init__(
        self, spec: WriteSpec, partition_path: str, token: str, task_partition: int, markers: MarkerWriter,
        partitions_ready: set[str], file_id: str | None = None,
    ) -> None:
        self.spec = spec
        self.partition_path = partition_path
        self.file_id = file_id or new_file_id()
        marker = new_file_marker(spec, partition_path=partition_path, file_id=self.file_id, token=token)
        self.name, self.rel_path = marker.file_name, marker.data_file
        markers.create(marker.data_file, marker.io_type)
        if partition_path not in partitions_ready:  # the task's first file in this partition
            ensure_partition_metafile(spec.storage(), partition_path, spec.instant_time)
            partitions_ready.add(partition_path)
        self.output = spec.storage().open_output(self.rel_path)
        self.writer: pq.ParquetWriter | None = None  # opened with the first rows, which pick the encodings
        self._stream: pa.NativeFile | None = None  # the buffered local file the writer writes through
        self.rows = 0
        self.seq_prefix = f"{spec.instant_time}_{task_partition}"
        self.started = time.monotonic()
        self._buffer = RowGroupBuffer(max_bytes=min(ROW_GROUP_BYTES, spec.max_file_size))
        self._footer = FooterKeys(spec)
        # Row groups are encoded on a thread while the next one's meta columns are made.
        self._encoder = RowGroupEncoder()
        self._disk = 0  # bytes on disk once the row groups before the one in flight were written

    def write(self, rows: pa.Table) -> None:
        full = self._buffer.add(rows)
        if full is not None:
            self._write(full)

    def flush(self, *, last: bool = False) -> None:
        rows = self._buffer.take()
        if rows is not None:
            self._write(rows, last=last)

    def _write(self, rows: pa.Table, *, last: bool = False) -> None:
        first = self.writer is None
        if self.writer is None:
            self.writer = self._open(rows)
        stored = with_meta_columns(rows, stored_schema(self.spec.schema), self.spec.instant_time, self.name,
                                   self.seq_prefix, self.rows)
        if first and last:  # a small file's one row group: no thread to hand it to
            self.writer.write_table(stored)
            self._footer.add(stored)
            self.rows += rows.num_rows
            return
        self._encoder.settle()
        self._disk = self._written()
        self._encoder.submit(self.writer, stored)
        self._footer.add(stored)  # while they are encoded
        self.rows += rows.num_rows

    def _open(self, rows: pa.Table | None) -> pq.ParquetWriter:
        sink, self._stream = buffered_sink(self.output.sink)
        return open_base_file(sink, self.spec.schema, parquet_options(self.spec, rows))

    def _written(self) -> int:
        """Bytes written to the file so far, those still in its buffer included."""
        return self._stream.tell() if self._stream is not None else self.output.size()

    def size(self) -> int:
        """Bytes of the file so far (rows held for the next row group not included; bytes in the
        file's write buffer included). A row group being encoded is waited for only if it could
        take the file to its target size (its rows' size in memory bounds what they take on
        disk); until then the size is the one before it."""
        if self.writer is None:
            return 0
        if self._encoder.in_flight_bytes:
            if self._disk + self._encoder.in_flight_bytes < self.spec.max_file_size:
                return self._disk
            self._encoder.settle()
        self._disk = self._written()
        return self._disk

    def abandon(self) -> None:
        """Stop writing (the write failed): nothing writes to the file after this returns, and
        the file is closed (left for the rollback to delete)."""
        self._encoder.stop(raise_failure=False)
        abandon_file(self.writer, self._stream)

    def close(self) -> WriteStat:
        try:
            self.flush(last=True)
            if self.writer is None:  # pragma: no cover - a rolling file is opened for rows
                self.writer = self._open(None)
            footer = self._footer.footer(self.spec.schema)  # while the last row group is encoded
            self._encoder.settle()
            self.writer.add_key_value_metadata(footer)
            self.writer.close()
            if self._stream is not None:  # the writer leaves a stream it was given open: the last bytes out
                self._stream.close()
        except BaseException:
            self.abandon()
            raise
        finally:
            self._encoder.stop(raise_failure=False)
        return WriteStat.new_file(self.partition_path, self.file_id, self.rel_path, rows=self.rows,
                                  file_size=self.output.commit(),
                                  write_time_ms=int((time.monotonic() - self.started) * 1000))


def write_new_files(
    spec: WriteSpec, batches: Iterable[pa.RecordBatch | pa.Table], *, token: str, task_partition: int,
    file_ids: Mapping[str, str] | None = None,
) -> Iterator[WriteStat]:
    """Write every batch (or table) into new file groups, one open file per partition path at a time.

    A file is closed and a new file group started once it reaches ``max_file_size``
    on disk; sizes are checked after each batch, so files overshoot by at most one batch.
    ``file_ids``: the file id of the first file of some partition paths, chosen by the caller
    (who may have declared its marker, :func:`new_file_marker`); other files get new ones.
    """
    markers = open_marker_writer(spec.storage(), spec.instant_time, spec.markers)
    try:
        yield from _write_rolling(spec, batches, markers, token=token, task_partition=task_partition,
                                  file_ids=dict(file_ids or {}))
    finally:
        markers.close()


def new_file_marker(spec: WriteSpec, *, partition_path: str, file_id: str, token: str) -> Marker:
    """The marker :func:`write_new_files` creates for the file ``file_id`` it was given."""
    return _marker(spec, partition_path, file_id, token, IOType.CREATE)


def _write_rolling(
    spec: WriteSpec,
    batches: Iterable[pa.RecordBatch | pa.Table],
    markers: MarkerWriter,
    *,
    token: str,
    task_partition: int,
    file_ids: dict[str, str],
) -> Iterator[WriteStat]:
    open_files: dict[str, _RollingFile] = {}
    partitions_ready: set[str] = set()  # whose metafile this task made sure of
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            partitions = table.column(PARTITION_PATH)
            unique = pc.unique(partitions).to_pylist()
            for partition in unique:
                rows = table if len(unique) == 1 else table.filter(pc.equal(partitions, partition))
                current = open_files.get(partition)
                if current is None:
                    current = open_files[partition] = _RollingFile(spec, partition, token, task_partition, markers,
                                                                    partitions_ready, file_ids.pop(partition, None))
                current.write(rows)
                if current.size() >= spec.max_file_size:
                    del open_files[partition]
                    yield current.close()
        for partition in list(open_files):  # in the order they were opened
            yield open_files.pop(partition).close()
    finally:  # a failed (or abandoned) write: no row group of it is still being encoded
        for current in open_files.values():
            current.abandon()


META_AND_OP = (*META_COLUMNS, OP_COLUMN)
