"""Merge-on-read: one file slice (base file + log files) merged into its current records.

:func:`merge_slice` is the single place that decides which version of a record
wins; snapshot reads (both engines) and compaction call it. The rule, the same
as hudi-rs for table version 8:

* data records (base rows and log data blocks) compete per record key: the
  greatest ordering value wins (event-time ordering; nulls lose), ties go to
  the later commit (``_hoodie_commit_time``), then to the later block;
  without ordering fields only commit time and block order count;
* a delete (delete blocks carry ordering value 0: commit-time semantics)
  removes the winner when it comes from a later commit than the winner.

The record-merger API (``tidemark.merge``) is meant to replace the body of
:func:`merge_slice`; its inputs are already in the shape a merger needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.log_file import BlockType, decode_avro_records, decode_delete_records, read_log_file
from tidemark.format.names import COMMIT_TIME, RECORD_KEY

_RANK = "_tm_rank"
_TIME = "_tm_time"


@dataclass(frozen=True)
class LogRecords:
    """The records of one log block, in merge order."""

    instant_time: str
    data: pa.Table | None  # meta + user columns (data blocks)
    deleted_keys: pa.Array | None  # record keys (delete blocks)


def read_log_records(full_paths: Sequence[str], schema: pa.Schema) -> list[LogRecords]:
    """Decode the data and delete blocks of log files (already in merge order)."""
    out: list[LogRecords] = []
    for path in full_paths:
        for block in read_log_file(path):
            instant = block.instant_time or ""
            if block.block_type == BlockType.AVRO_DATA:
                rows = decode_avro_records(block.content, block.schema_json or "")
                out.append(LogRecords(instant, pa.Table.from_pylist(rows, schema=schema), None))
            elif block.block_type == BlockType.DELETE:
                keys = [r.record_key for r in decode_delete_records(block.content)]
                out.append(LogRecords(instant, None, pa.array(keys, pa.string())))
            elif block.block_type == BlockType.PARQUET_DATA:
                out.append(LogRecords(instant, _aligned(pq.read_table(pa.BufferReader(block.content)), schema), None))
            # Command blocks (rollbacks of v6 tables) and corrupt blocks: nothing to apply.
    return out


def _aligned(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` in ``schema``: columns it lacks (written before they existed) become nulls."""
    n = table.num_rows
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type) for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _last_per_key(table: pa.Table) -> pa.Table:
    """Rows sorted by key (then by precedence): keep the last row of each key."""
    n = table.num_rows
    if n <= 1:
        return table
    keys = table.column(RECORD_KEY).combine_chunks()
    differs = pc.not_equal(keys.slice(0, n - 1), keys.slice(1))
    return table.filter(pa.concat_arrays([differs, pa.array([True])]))


def _sorted(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """Ascending, nulls first (a null ordering value loses)."""
    try:  # pyarrow >= 25: null placement per key
        return table.sort_by([(c, "ascending", "at_start") for c in columns])
    except (TypeError, ValueError, pa.ArrowInvalid):
        return table.sort_by([(c, "ascending") for c in columns], null_placement="at_start")


def merge_slice(base: pa.Table | None, logs: Sequence[LogRecords], ordering_fields: Sequence[str],
                schema: pa.Schema) -> pa.Table:
    """The current records of a file slice: ``schema`` (meta + user columns), one row per live key."""
    pieces = []
    if base is not None and base.num_rows:
        pieces.append(base.append_column(_RANK, pa.repeat(pa.scalar(0, pa.int64()), base.num_rows)))
    deletes: list[pa.Table] = []
    for rank, block in enumerate(logs, start=1):
        if block.data is not None and block.data.num_rows:
            rows = block.data.select(schema.names)
            pieces.append(rows.append_column(_RANK, pa.repeat(pa.scalar(rank, pa.int64()), rows.num_rows)))
        if block.deleted_keys is not None and len(block.deleted_keys):
            n = len(block.deleted_keys)
            deletes.append(pa.table({
                RECORD_KEY: block.deleted_keys,
                _TIME: pa.repeat(pa.scalar(block.instant_time, pa.string()), n),
                _RANK: pa.repeat(pa.scalar(rank, pa.int64()), n),
            }))
    if not pieces:
        return schema.empty_table()
    data = pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]
    if len(pieces) == 1 and not deletes:
        return data.drop_columns([_RANK])  # a base file alone, or one block: keys are unique
    ordering = [c for c in ordering_fields if c in data.column_names]
    winners = _last_per_key(_sorted(data, [RECORD_KEY, *ordering, COMMIT_TIME, _RANK]))
    if deletes:
        dels = _last_per_key(_sorted(pa.concat_tables(deletes), [RECORD_KEY, _TIME, _RANK]))
        joined = winners.select([RECORD_KEY, COMMIT_TIME, _RANK]).append_column(
            "_tm_i", pa.array(range(winners.num_rows), pa.int64())
        ).join(dels.rename_columns([RECORD_KEY, _TIME, "_tm_del_rank"]), RECORD_KEY, join_type="left outer")
        later_time = pc.greater(joined.column(_TIME), joined.column(COMMIT_TIME))
        same_time = pc.equal(joined.column(_TIME), joined.column(COMMIT_TIME))
        later_block = pc.greater(joined.column("_tm_del_rank"), joined.column(_RANK))
        deleted = pc.fill_null(pc.or_(later_time, pc.and_(same_time, later_block)), False)
        gone = joined.filter(deleted).column("_tm_i")
        if len(gone):
            keep = pc.invert(pc.is_in(pa.array(range(winners.num_rows), pa.int64()), value_set=gone.combine_chunks()))
            winners = winners.filter(keep)
    return winners.drop_columns([_RANK])


def read_slice(base_full_path: str | None, log_full_paths: Sequence[str], ordering_fields: Sequence[str],
               schema: pa.Schema) -> pa.Table:
    """Read and merge one file slice from files (what an engine task does)."""
    base = pq.read_table(base_full_path, schema=schema) if base_full_path else None
    if not log_full_paths:
        return base if base is not None else schema.empty_table()
    return merge_slice(base, read_log_records(log_full_paths, schema), ordering_fields, schema)


__all__ = ["LogRecords", "merge_slice", "read_log_records", "read_slice"]
