"""Many small file groups of one copy-on-write write, rewritten with one merge.

:func:`~tidemark.write.file_group.write_file_group` rewrites one file group: it reads the base
file, finds the stored rows the batch touches, merges them with the batch's rows and writes the
new base file. For a small file group most of that is fixed cost, not rows: ~25 short pyarrow
calls and the interpreter between them, per file group (an upsert of 100 partitions of 10,000
rows: ~2 ms of a ~10 ms rewrite, and on two threads the interpreter is taken in turn). Here the
same rewrite of many small file groups is done in three steps:

1. :func:`read_stored`, per file group (the engine's threads): its marker, then its base file
   read whole, its rows split into those the batch's keys touch (in key order) and the others;
2. :func:`merge_stored`, once for all of them: the table's merger, the stale-record checks and
   the split into unchanged rows, updates, deletes and inserts, each one call over every group;
3. :func:`write_merged`, per file group (the engine's threads): its new base file, written as
   ``write_file_group`` writes it (its marker was created before its base file was read).

The files are those ``write_file_group`` writes for the same arguments: the same rows in the same
order and row groups, the same footers and statistics. Only base files are rewritten here (a
merge-on-read table's file groups get log files), and only file groups whose touched rows hold
each key once and that get each key at most once from the batch (``read_stored`` says which;
the engine writes the others with ``write_file_group``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import FILE_NAME, META_COLUMNS, RECORD_KEY
from tidemark.format.parquet_file import read_file_metadata
from tidemark.merge import OP_COLUMN, OP_DELETE
from tidemark.write.column_encoding import parquet_options, stored_dictionaries
from tidemark.write.file_group import (
    STREAM_ROWS,
    as_schema,
    base_file_marker,
    create_marker,
    merge_touched,
    stored_slices,
    with_file_name,
    write_fresh,
)
from tidemark.write.footer import BaseFileWriter, stored_filter, stored_key_range
from tidemark.write.spec import WriteSpec


@dataclass(frozen=True)
class GroupRewrite:
    """One file group to rewrite: where it is, and what the batch brings it."""

    partition_path: str
    file_id: str
    base_file: str  # its current base file (table-relative)
    token: str  # the write token of its task
    task_partition: int  # its task's number (the prefix of its new rows' sequence numbers)
    # The record keys of the batch's rows of this file group, in key order (as its rows come
    # in the incoming table of :func:`merge_stored`).
    keys: pa.Array
    stored_keys: pa.Array | None = None  # its base file's record keys in file order, if known
    footer: pq.FileMetaData | None = None  # its base file's parquet footer, if known


@dataclass(frozen=True)
class StoredGroup:
    """A file group's base file as :func:`read_stored` split it."""

    rewrite: GroupRewrite
    footer: pq.FileMetaData
    untouched: list[pa.Table]  # per slice of the file: the rows the batch does not touch
    touched: pa.Table  # the rows it touches, in key order, as plain strings
    matched: np.ndarray  # which of the batch's rows of the group (its keys) meet a stored row
    seconds: float  # spent reading and splitting
    keys_once: bool  # no key twice among the touched rows, nor among the batch's rows

    @property
    def mergeable(self) -> bool:
        """Whether each touched row meets exactly one batch row (keys held once on both sides):
        else the group is written by ``write_file_group``."""
        return self.keys_once and int(self.matched.sum()) == self.touched.num_rows


@dataclass(frozen=True)
class MergedGroup:
    """A file group's rows to write, as :func:`merge_stored` decided them."""

    stored: StoredGroup
    unchanged: pa.Table  # touched rows kept as they are (key order)
    updates: pa.Table  # merged records replacing stored ones (key order)
    inserts: pa.Table  # the batch's rows of keys the file does not hold, deletes left out
    num_deletes: int


def read_stored(spec: WriteSpec, rewrite: GroupRewrite) -> StoredGroup:
    """Read ``rewrite``'s base file whole (in STREAM_ROWS slices, as ``write_file_group``) and
    split its rows by whether the batch holds their keys. Raises CorruptDataFileError for a
    base file that cannot be read."""
    started = time.monotonic()
    marker = base_file_marker(spec, partition_path=rewrite.partition_path, file_id=rewrite.file_id,
                              base_file=rewrite.base_file, token=rewrite.token)
    assert marker is not None  # a base file is written: a copy-on-write rewrite
    # The marker goes first, as write_file_group's: with early conflict detection a doomed write
    # stops here, before reading (created again by write_file_group, if the group falls back to
    # it: creating a marker that exists is a no-op).
    create_marker(spec, marker)
    source = spec.storage().open_input(rewrite.base_file)
    footer = rewrite.footer if rewrite.footer is not None else read_file_metadata(source, path=rewrite.base_file)
    batch_keys = rewrite.keys
    untouched, touched = [], []
    for touched_piece, untouched_piece in stored_slices(
            spec, source, rewrite.base_file, footer, batch_keys, rewrite.stored_keys):
        touched.append(touched_piece)
        untouched.append(untouched_piece)
    plain = spec.schema.remove(spec.schema.get_field_index(FILE_NAME))
    rows = as_schema(pa.concat_tables(touched), plain) if touched else plain.empty_table()
    rows = rows.sort_by(RECORD_KEY)
    touched_keys = rows.column(RECORD_KEY).combine_chunks()
    matched = pc.is_in(batch_keys, value_set=touched_keys)
    keys_once = len(pc.unique(touched_keys)) == len(touched_keys) and len(pc.unique(batch_keys)) == len(batch_keys)
    return StoredGroup(rewrite, footer, untouched, rows, matched.to_numpy(zero_copy_only=False),
                       time.monotonic() - started, keys_once)


def merge_stored(spec: WriteSpec, groups: Sequence[StoredGroup], incoming: pa.Table) -> list[MergedGroup]:
    """Merge every :attr:`~StoredGroup.mergeable` group's touched rows with the batch's rows of
    their keys, in one merge; the other groups are left out (``write_file_group`` writes them).

    ``incoming``: the batch's rows of every group, conformed (``conform_incoming``), the groups'
    rows one after another in the order of ``groups``, each group's as its keys
    (:attr:`GroupRewrite.keys`). A group's touched rows and its batch's rows are both in key
    order, so the groups' rows concatenated meet row by row.
    """
    sizes = np.array([len(g.rewrite.keys) for g in groups], dtype=np.int64)
    if len(incoming) != int(sizes.sum()):
        raise ValueError("the incoming rows are not the groups' rows")
    keep = np.array([g.mergeable for g in groups], dtype=bool)
    if not keep.all():
        incoming = incoming.filter(pa.array(np.repeat(keep, sizes)))
        groups, sizes = [g for g in groups if g.mergeable], sizes[keep]
    if not groups:
        return []
    merger = spec.merge.merger(spec.schema)
    user_columns = [f.name for f in spec.schema if f.name not in META_COLUMNS]
    # One chunk each: every kernel below would otherwise loop over a hundred chunks per column.
    incoming = incoming.combine_chunks()
    touched = pa.concat_tables([g.touched for g in groups]).combine_chunks()
    matched_mask = np.concatenate([g.matched for g in groups])
    outcome = merge_touched(merger, user_columns, touched, incoming.filter(pa.array(matched_mask)))
    count = len(groups)
    group_of_row = np.repeat(np.arange(count), sizes)
    group_of_touched = np.repeat(np.arange(count), [g.touched.num_rows for g in groups])
    unchanged = touched.filter(pa.array(outcome.unchanged))
    updates = outcome.merged.filter(pa.array(outcome.changed))
    is_delete = pc.fill_null(pc.equal(incoming.column(OP_COLUMN), OP_DELETE), False).to_numpy(zero_copy_only=False)
    fresh = ~matched_mask & ~is_delete  # a delete of a key the file group does not hold has nothing to delete
    inserts = incoming.filter(pa.array(fresh))
    unchanged_at = _offsets(group_of_touched[outcome.unchanged], count)
    updates_at = _offsets(group_of_touched[outcome.changed], count)
    inserts_at = _offsets(group_of_row[fresh], count)
    deletes = np.bincount(group_of_touched[outcome.deleted], minlength=count)
    return [
        MergedGroup(
            g,
            unchanged.slice(unchanged_at[i], unchanged_at[i + 1] - unchanged_at[i]),
            updates.slice(updates_at[i], updates_at[i + 1] - updates_at[i]),
            inserts.slice(inserts_at[i], inserts_at[i + 1] - inserts_at[i]),
            int(deletes[i]),
        )
        for i, g in enumerate(groups)
    ]


def _offsets(groups: np.ndarray, count: int) -> list[int]:
    """Where each of ``count`` groups' rows start in rows ordered by group (``groups``: each
    row's group), and the end: ``count + 1`` offsets."""
    return [0, *np.cumsum(np.bincount(groups, minlength=count)).tolist()]


def write_merged(spec: WriteSpec, merged: MergedGroup) -> WriteStat:
    """Write ``merged``'s new base file (its marker was created by :func:`read_stored`) and
    return its statistics."""
    started = time.monotonic()
    stored, rewrite = merged.stored, merged.stored.rewrite
    marker = base_file_marker(spec, partition_path=rewrite.partition_path, file_id=rewrite.file_id,
                              base_file=rewrite.base_file, token=rewrite.token)
    assert marker is not None  # created by read_stored
    name = marker.file_name
    output = spec.storage().open_output(marker.data_file)
    # Every stored key is written again unless some are deleted: then their range is the stored file's.
    stored_range = stored_key_range(stored.footer) if merged.num_deletes == 0 else None
    with BaseFileWriter(output.sink, spec, lambda rows: parquet_options(spec, rows), min_rows=STREAM_ROWS,
                        stored=stored_filter(stored.footer) if spec.bloom_filter else None,
                        stored_range=stored_range, dictionaries=stored_dictionaries(spec)) as out:
        for piece in stored.untouched:
            out.write_stored(with_file_name(piece, out.schema, name))
        out.write_stored(with_file_name(merged.unchanged, out.schema, name))
        # The batch's rows were routed to the group by their partition path: the group's.
        write_fresh(out, spec, name, rewrite.task_partition, merged.updates, merged.inserts, rewrite.partition_path)
        out.close()
    file_size = output.commit()
    return WriteStat(
        partition_path=rewrite.partition_path,
        file_id=rewrite.file_id,
        path=marker.data_file,
        prev_commit=rewrite.base_file.rsplit("_", 1)[-1].removesuffix(".parquet"),
        num_writes=out.rows,
        num_inserts=merged.inserts.num_rows,
        num_updates=merged.updates.num_rows,
        num_deletes=merged.num_deletes,
        file_size=file_size,
        prev_base_file=rewrite.base_file.rsplit("/", 1)[-1],
        total_write_time_ms=int((stored.seconds + time.monotonic() - started) * 1000),
    )


__all__ = ["GroupRewrite", "MergedGroup", "StoredGroup", "merge_stored", "read_stored", "write_merged"]
