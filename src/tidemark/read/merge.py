"""Merge-on-read: one file slice (base file + log files) folded into its current records.

Snapshot reads (both engines) and compaction call :func:`read_slice`; the table's
:class:`~tidemark.merge.RecordMerger` decides which values win, exactly as it does
for batch dedup and the copy-on-write merge (:mod:`tidemark.merge.base`)::

    records = base rows                                  op "U"
    for block in log blocks, in the order given:         data blocks "U", delete blocks "D"
        records = merge_records(merger, records, dedup_records(merger, block))
    visible = live_records(records)

Records are keyed by ``_hoodie_record_key`` alone: a file group lies in one
partition. The caller gives the log files in merge order (the file-system view's
order); blocks inside a file keep their file order. The fold is always strictly in
that order, whatever the merger claims: it runs over the base records the logs
touch only (the others cannot change), so it costs no more than merging the logs
among themselves first, which associative mergers would allow, and it stays exact
where that would not be: deletes without ordering value fall outside the mergers'
claims, and the commit times of records that a merge mixes from several writes
depend on the grouping.

**Delete blocks** become delete records: op ``D``, the record key, the partition
path, ``_hoodie_commit_time`` = the block's instant, the ordering field (the
table's one ordering field, see :func:`~tidemark.format.log_file.delete_ordering_field`)
set from ``orderingVal``, every other column null; the merger ranks them like any
record, so a stale delete loses against a newer record. An ``orderingVal`` of
integer ``0`` is Hudi's "no ordering value" and becomes null (the delete wins by
position, i.e. by commit time), which is also how hudi-rs reads it; a real
ordering value of 0 therefore deletes whatever is stored. With several ordering
fields, or a value that does not fit the field's type, the ordering is null too.

**Meta columns** follow the copy-on-write rule (``write.file_group``): a merged
record that a newer record changed (its user columns or op differ from the older
record's, or it re-writes identical values) carries the newer record's meta
columns (commit time, sequence number: the latest write that changed it); one a
newer record did not change keeps the older record's. So ``_hoodie_commit_time``
is the same on both table types and incremental reads see a record exactly when
a write in their range changed it. The result has exactly the slice ``schema``
(meta + user columns), no op column.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.log_file import (
    BlockType,
    DeleteRecord,
    OrderingValue,
    decode_avro_records,
    decode_delete_records,
    is_no_ordering_value,
    read_log_file,
)
from tidemark.format.names import COMMIT_TIME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.format.parquet_file import read_data_file
from tidemark.merge.base import (
    OP_COLUMN,
    OP_DELETE,
    OP_UPSERT,
    MergeProperties,
    RecordMerger,
    dedup_records,
    live_records,
    merge_records,
    rebuild,
    same_values,
)
from tidemark.storage.base import DataSource

KEYS = (RECORD_KEY,)  # one file group holds one partition: the record key is the key


@dataclass(frozen=True)
class LogRecords:
    """The records of one log block: ``schema`` plus the op column (``U`` data, ``D`` deletes)."""

    instant_time: str
    records: pa.Table


# -- decoding log blocks ---------------------------------------------------------------------


def _aligned(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``: columns it lacks (written before they existed) become nulls."""
    n = table.num_rows
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type) for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _with_op(table: pa.Table, op: str) -> pa.Table:
    return table.append_column(OP_COLUMN, pa.repeat(pa.scalar(op, pa.string()), table.num_rows))


def _ordering_array(values: Sequence[OrderingValue], dtype: pa.DataType) -> pa.Array:
    """Delete ordering values in the field's type; "no ordering value" and values that do not
    fit the type become null."""
    cleaned = [None if is_no_ordering_value(v) else v for v in values]
    try:
        return pa.array(cleaned).cast(dtype)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
        out = []
        for value in cleaned:  # mixed or odd branches (another writer): value by value
            try:
                out.append(pa.scalar(value).cast(dtype).as_py())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError):
                out.append(None)
        return pa.array(out, dtype)


def delete_records(
    deletes: Sequence[DeleteRecord], instant_time: str, schema: pa.Schema, ordering_field: str | None
) -> pa.Table:
    """The delete records of a delete block, in ``schema`` plus the op column (see the module docstring)."""
    n = len(deletes)
    given: dict[str, pa.Array] = {
        RECORD_KEY: pa.array([d.record_key for d in deletes], pa.string()),
        PARTITION_PATH: pa.array([d.partition_path for d in deletes], pa.string()),
        COMMIT_TIME: pa.repeat(pa.scalar(instant_time, pa.string()), n),
    }
    if ordering_field is not None and ordering_field in schema.names:
        given[ordering_field] = _ordering_array([d.ordering_value for d in deletes], schema.field(ordering_field).type)
    arrays = [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type) for f in schema]
    return _with_op(pa.Table.from_arrays(arrays, schema=schema), OP_DELETE)


def read_log_records(
    full_paths: Sequence[DataSource], schema: pa.Schema, *, delete_ordering_field: str | None = None
) -> list[LogRecords]:
    """Decode the data and delete blocks of log files (given in merge order), block by block.

    ``delete_ordering_field`` is the column that receives a delete's ``orderingVal``.
    """
    out: list[LogRecords] = []
    for path in full_paths:
        for block in read_log_file(path):
            instant = block.instant_time or ""
            if block.block_type == BlockType.AVRO_DATA:
                rows = decode_avro_records(block.content, block.schema_json or "")
                out.append(LogRecords(instant, _with_op(pa.Table.from_pylist(rows, schema=schema), OP_UPSERT)))
            elif block.block_type == BlockType.PARQUET_DATA:
                rows_table = _aligned(pq.read_table(pa.BufferReader(block.content)), schema)
                out.append(LogRecords(instant, _with_op(rows_table, OP_UPSERT)))
            elif block.block_type == BlockType.DELETE:
                deletes = decode_delete_records(block.content)
                out.append(LogRecords(instant, delete_records(deletes, instant, schema, delete_ordering_field)))
            # Command blocks (rollbacks of v6 tables) and corrupt blocks: nothing to apply.
    return out


# -- meta columns: the copy-on-write rule ----------------------------------------------------------


@dataclass(frozen=True)
class StampedMerger:
    """The table's merger, with the meta columns a merged record gets on copy-on-write.

    Where the merge result equals the older record and not the newer one (the newer
    record changed nothing), the older record's meta columns stay; everywhere else
    the newer record's (its nulls filled from the older: a delete record carries no
    sequence number or file name). Values are exactly the wrapped merger's.
    """

    merger: RecordMerger

    @property
    def name(self) -> str:
        return self.merger.name

    @property
    def properties(self) -> MergeProperties:
        return self.merger.properties

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        merged = self.merger.merge(older, newer)
        meta = [c for c in META_COLUMNS if c in merged.column_names]
        if not meta or merged.num_rows == 0:
            return merged
        compared = [c for c in merged.column_names if c not in META_COLUMNS]
        kept = pa.array(same_values(merged, older, compared) & ~same_values(merged, newer, compared))
        stamped = {c: pc.if_else(kept, older.column(c), pc.coalesce(newer.column(c), older.column(c))) for c in meta}
        return rebuild(merged, stamped)


# -- the fold ---------------------------------------------------------------------------------


def merge_slice(base: pa.Table | None, logs: Sequence[LogRecords], merger: RecordMerger, schema: pa.Schema) -> pa.Table:
    """The visible records of a file slice: ``schema`` (meta + user columns), one row per live key.

    ``base`` holds the base file's rows (or None: a slice without base file), ``logs``
    the blocks of its log files in merge order; ``merger`` is the table's.
    """
    stamped = StampedMerger(merger)
    # Within a block every record comes from the same write: dedup in arrival order.
    blocks = [dedup_records(stamped, block.records, keys=KEYS) for block in logs if block.records.num_rows]
    stored = base.select(schema.names) if base is not None else schema.empty_table()
    if not blocks:
        return stored.cast(schema)
    # Only the stored records of keys in the logs can change: fold those, pass the rest through.
    log_keys = pc.unique(pa.chunked_array([b.column(RECORD_KEY) for b in blocks]).combine_chunks())
    touched = pc.is_in(stored.column(RECORD_KEY), value_set=log_keys)
    records = _with_op(stored.filter(touched), OP_UPSERT)
    for block in blocks:
        records = merge_records(stamped, records, block, keys=KEYS)
    merged = live_records(records).select(schema.names).cast(schema)
    return pa.concat_tables([stored.filter(pc.invert(touched)).cast(schema), merged])


def read_slice(
    base_full_path: DataSource | None,
    log_full_paths: Sequence[DataSource],
    merger: RecordMerger,
    schema: pa.Schema,
    *,
    delete_ordering_field: str | None = None,
    base_path: str | None = None,
) -> pa.Table:
    """Read and merge one file slice from files (what an engine task does); see :func:`merge_slice`.

    ``delete_ordering_field``: the table's column for delete ordering values
    (:func:`tidemark.format.log_file.delete_ordering_field` of its ordering fields);
    ``base_path``: the base file's table-relative path, which a CorruptDataFileError names.
    """
    base = read_data_file(base_full_path, path=base_path, schema=schema) if base_full_path is not None else None
    if not log_full_paths:  # a base file alone: its keys are unique, nothing to merge
        return base if base is not None else schema.empty_table()
    logs = read_log_records(log_full_paths, schema, delete_ordering_field=delete_ordering_field)
    return merge_slice(base, logs, merger, schema)


__all__ = [
    "KEYS",
    "LogRecords",
    "StampedMerger",
    "delete_records",
    "merge_slice",
    "read_log_records",
    "read_slice",
]
