"""The record-merger seam: what a merger is, and the three ways every write and read path uses one.

A *record* is one row of an Arrow table keyed by ``_hoodie_record_key`` (and,
where keys repeat across partitions, ``_hoodie_partition_path``), with an op
column ``_tm_op`` (``"U"`` upsert / ``"D"`` delete) and the user columns,
ordering fields included. Deletes are records too: they carry their ordering
values, so a stale delete can lose against a newer stored record.

A merger is vectorised: :meth:`RecordMerger.merge` receives two *aligned*
tables (row ``i`` of ``older`` and of ``newer`` hold the same key, same
columns) and returns the merged rows in the same order. Everything else is
done here, once, for every merger::

    merge_records(merger, older, newer)   two sets of records (unique keys each) -> one
    dedup_records(merger, batch)          one batch with repeated keys, in arrival order -> one per key
    live_records(records)                 drop the deletes that won (what a base file keeps)

batch dedup, the copy-on-write merge, merge-on-read reads and compaction all
go through these, so a table merges the same way everywhere. A merge-on-read
reader (or compaction) of one file slice::

    merger = MergeConfig.of_table(table_config).merger(user_schema)
    records = base_rows                                  # op column optional ("U")
    for block in log_blocks_in_commit_order:             # data blocks "U", delete blocks "D"
        records = merge_records(merger, records, dedup_records(merger, block))
    visible = live_records(records)

Fold in commit order: only associative mergers (``merger.properties``) may merge
the logs among themselves first and the base last. :mod:`tidemark.read.merge`
always folds in order, over just the base records the logs touch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import PARTITION_PATH, RECORD_KEY

OP_COLUMN = "_tm_op"  # "U": upsert this record; "D": delete this key
OP_UPSERT = "U"
OP_DELETE = "D"

_KEY = "_tm_merge_key"
_ROW = "_tm_merge_row"


@dataclass(frozen=True)
class MergeProperties:
    """The algebra a merger claims for ``merge(older, newer)``; property tests hold it to them.

    ``commutative``: merge(a, b) == merge(b, a). ``associative``: merge(merge(a, b), c)
    == merge(a, merge(b, c)). ``idempotent``: merge(a, a) == a. ``with_deletes``: the
    claims also hold when the records include deletes that carry ordering values
    (otherwise they are claimed for updates only).
    """

    commutative: bool = False
    associative: bool = False
    idempotent: bool = False
    with_deletes: bool = False


@runtime_checkable
class RecordMerger(Protocol):
    """Merges aligned older and newer records; implementations must be picklable (Spark ships them)."""

    @property
    def name(self) -> str: ...

    @property
    def properties(self) -> MergeProperties: ...

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        """Row ``i`` of the result merges row ``i`` of ``older`` with row ``i`` of ``newer``.

        Both tables have the same schema and the same key in each row; the result has
        that schema too. ``newer`` is the later write (later in the batch, later commit).
        """
        ...


# -- helpers for mergers -----------------------------------------------------------------


def pick(
    mask: pa.Array | pa.ChunkedArray, newer: pa.Table, older: pa.Table, columns: Sequence[str]
) -> dict[str, pa.Array]:
    """Per column: the newer value where ``mask`` is true, else the older one."""
    return {c: pc.if_else(mask, newer.column(c), older.column(c)) for c in columns}


def newer_ranks_higher(older: pa.Table, newer: pa.Table, fields: Sequence[str]) -> pa.Array:
    """Whether each newer row ranks at least as high as the older one, comparing ``fields``
    lexicographically; a null is below every value; ties go to the newer (later) record."""
    wins = pa.array(np.ones(older.num_rows, dtype=bool))
    for name in reversed(fields):
        old, new = older.column(name), newer.column(name)
        old_valid, new_valid = pc.is_valid(old), pc.is_valid(new)
        greater = pc.fill_null(pc.greater(new, old), False)
        greater = pc.or_(greater, pc.and_(new_valid, pc.invert(old_valid)))
        equal = pc.fill_null(pc.equal(new, old), False)
        equal = pc.or_(equal, pc.and_(pc.invert(new_valid), pc.invert(old_valid)))
        wins = pc.or_(greater, pc.and_(equal, wins))
    return wins


def is_delete(records: pa.Table) -> pa.Array:
    return pc.fill_null(pc.equal(records.column(OP_COLUMN), OP_DELETE), False)


def no_ordering_value(records: pa.Table, fields: Sequence[str]) -> pa.Array:
    """Rows whose ordering fields are all null (for a delete: "delete whatever is there")."""
    mask = pa.array(np.ones(records.num_rows, dtype=bool))
    for name in fields:
        mask = pc.and_(mask, pc.is_null(records.column(name)))
    return mask


def rebuild(template: pa.Table, columns: dict[str, pa.Array]) -> pa.Table:
    """A table with ``template``'s schema: ``columns`` where given, the template's column elsewhere."""
    arrays = []
    for field in template.schema:
        if field.name in columns:
            arrays.append(pc.cast(columns[field.name], field.type))
        else:
            arrays.append(template.column(field.name))
    return pa.Table.from_arrays(arrays, schema=template.schema)


def same_values(a: pa.Table, b: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """Row by row: whether ``a`` and ``b`` hold equal values (null equals null) in ``columns``."""
    same = np.ones(a.num_rows, dtype=bool)
    for name in columns:
        x, y = a.column(name), b.column(name)
        if x.type != y.type:
            y = pc.cast(y, x.type)
        try:
            if x.null_count == 0 and y.null_count == 0:  # the common case: one kernel, not five
                column_same = pc.equal(x, y).to_numpy(zero_copy_only=False)
            else:
                equal = pc.fill_null(pc.equal(x, y), False)
                both_null = pc.and_(pc.is_null(x), pc.is_null(y))
                column_same = pc.or_(equal, both_null).to_numpy(zero_copy_only=False)
        except pa.ArrowNotImplementedError:  # nested types (lists, maps, structs) have no equal kernel
            column_same = np.array([p == q for p, q in zip(x.to_pylist(), y.to_pylist(), strict=True)], dtype=bool)
        same &= column_same
    return same


# -- the three entry points -----------------------------------------------------------------


def _key_array(table: pa.Table, keys: Sequence[str]) -> pa.Array:
    if len(keys) == 1:
        return table.column(keys[0]).combine_chunks().cast(pa.string())
    parts = [pc.fill_null(table.column(k).cast(pa.string()), "") for k in keys]
    return pc.binary_join_element_wise(*parts, "\x00").combine_chunks()


def _default_keys(*tables: pa.Table) -> tuple[str, ...]:
    if all(PARTITION_PATH in t.column_names for t in tables):
        return (PARTITION_PATH, RECORD_KEY)
    return (RECORD_KEY,)


def _with_op(table: pa.Table) -> pa.Table:
    if OP_COLUMN in table.column_names:
        return table
    return table.append_column(OP_COLUMN, pa.repeat(pa.scalar(OP_UPSERT, pa.string()), table.num_rows))


def conform(older: pa.Table, newer: pa.Table) -> tuple[pa.Table, pa.Table]:
    """Both tables with the same columns, in older's order then newer's extra ones; a column
    one side lacks is null there; types follow ``older`` where both have the column."""
    older, newer = _with_op(older), _with_op(newer)
    fields = []
    for field in older.schema:
        if pa.types.is_null(field.type) and field.name in newer.column_names:
            field = newer.schema.field(field.name)
        fields.append(field)
    fields += [f for f in newer.schema if f.name not in older.column_names]
    schema = pa.schema(fields)

    def fit(table: pa.Table) -> pa.Table:
        arrays = []
        for field in schema:
            if field.name in table.column_names:
                col = table.column(field.name)
                arrays.append(col if col.type == field.type else pc.cast(col, field.type))
            else:
                arrays.append(pa.nulls(table.num_rows, field.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    return fit(older), fit(newer)


def merge_records(
    merger: RecordMerger, older: pa.Table, newer: pa.Table, *, keys: Sequence[str] | None = None
) -> pa.Table:
    """Merge two sets of records (each with unique keys): one record per key of either side.

    Keys only on one side pass through unchanged; keys on both are merged by ``merger``
    (``newer`` is the later write). Deletes stay in the result as records with op ``D``
    (merge-on-read needs them to shadow older files); :func:`live_records` drops them.
    ``keys`` defaults to partition path + record key when both tables have a partition
    path, else the record key. The result has the columns of both (op column included).
    """
    older, newer = conform(older, newer)
    keys = tuple(keys) if keys is not None else _default_keys(older, newer)
    if older.num_rows == 0 or newer.num_rows == 0:
        return pa.concat_tables([older, newer])
    old_keys, new_keys = _key_array(older, keys), _key_array(newer, keys)
    old_matched = pc.is_in(old_keys, value_set=new_keys)
    new_matched = pc.is_in(new_keys, value_set=old_keys)
    pieces = [older.filter(pc.invert(old_matched))]
    if pc.any(new_matched).as_py():
        o = (
            older.filter(old_matched)
            .append_column(_KEY, old_keys.filter(old_matched))
            .sort_by(_KEY)
            .drop_columns([_KEY])
        )
        n = (
            newer.filter(new_matched)
            .append_column(_KEY, new_keys.filter(new_matched))
            .sort_by(_KEY)
            .drop_columns([_KEY])
        )
        merged = merger.merge(o, n)
        pieces.append(merged.select(older.column_names).cast(older.schema))
    pieces.append(newer.filter(pc.invert(new_matched)))
    return pa.concat_tables(pieces)


def dedup_records(merger: RecordMerger, batch: pa.Table, *, keys: Sequence[str] | None = None) -> pa.Table:
    """One record per key, merging repeated keys in arrival (row) order: a left fold of
    ``merge_records`` over the first, second, ... occurrence of each key.

    Adds the op column (``U``) if the batch has none; rows keep the batch's columns.
    """
    had_op = OP_COLUMN in batch.column_names
    batch = _with_op(batch)
    keys = tuple(keys) if keys is not None else _default_keys(batch)
    if batch.num_rows <= 1:
        return batch if had_op else batch.drop_columns([OP_COLUMN])
    key = _key_array(batch, keys)
    rows = np.arange(batch.num_rows, dtype=np.int64)
    order = pa.table({_KEY: key, _ROW: rows}).sort_by([(_KEY, "ascending"), (_ROW, "ascending")])
    sorted_keys = order.column(_KEY).combine_chunks()
    sorted_rows = order.column(_ROW).to_numpy()
    starts = np.ones(len(sorted_rows), dtype=bool)
    if len(sorted_rows) > 1:
        starts[1:] = pc.not_equal(sorted_keys.slice(1), sorted_keys.slice(0, len(sorted_rows) - 1)).to_numpy(
            zero_copy_only=False
        )
    if starts.all():
        return batch if had_op else batch.drop_columns([OP_COLUMN])
    positions = np.arange(len(sorted_rows))
    group_start = np.maximum.accumulate(np.where(starts, positions, 0))
    occurrence = np.empty(len(sorted_rows), dtype=np.int64)
    occurrence[sorted_rows] = positions - group_start
    result = batch.filter(pa.array(occurrence == 0))
    for k in range(1, int(occurrence.max()) + 1):
        layer = batch.filter(pa.array(occurrence == k))
        result = merge_records(merger, result, layer, keys=keys)
    return result if had_op else result.drop_columns([OP_COLUMN])


def greatest_per_key(
    keys: Sequence[pa.Array | pa.ChunkedArray],
    ordering: Sequence[pa.Array | pa.ChunkedArray],
    arrival: pa.Array | pa.ChunkedArray,
) -> pa.Array:
    """The positions of one row per distinct ``keys`` tuple: the row with the greatest
    ``ordering`` values (a null below every value), then the greatest ``arrival``. The positions
    come in key order. One sort of the ranking columns only; the caller takes the rows.

    This is the whole-record dedup of commit-time and event-time ordering (``max_by``), the
    same in every engine.
    """
    columns = [*keys, *ordering, arrival]
    ranking = pa.table(columns, names=[f"_{i}" for i in range(len(columns))])
    try:  # pyarrow >= 25: null placement per sort key
        order = pc.sort_indices(ranking, sort_keys=[(c, "ascending", "at_start") for c in ranking.column_names])
    except (TypeError, ValueError, pa.ArrowInvalid):
        order = pc.sort_indices(ranking, sort_keys=[(c, "ascending") for c in ranking.column_names],
                                null_placement="at_start")
    n = len(order)
    if n <= 1:
        return order
    last = None  # the last row of each key's run in sorted order
    for i in range(len(keys)):
        ranked = ranking.column(i).take(order).combine_chunks()
        differs = pc.not_equal(ranked.slice(0, n - 1), ranked.slice(1))
        last = differs if last is None else pc.or_(last, differs)
    if last is None:
        return order.slice(n - 1)
    return order.filter(pa.concat_arrays([last, pa.array([True])]))


def live_records(records: pa.Table) -> pa.Table:
    """The records that are not deletes, without the op column."""
    if OP_COLUMN not in records.column_names:
        return records
    return records.filter(pc.invert(is_delete(records))).drop_columns([OP_COLUMN])
