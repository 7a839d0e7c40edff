"""The built-in record mergers.

=====================  ==========================================================  =====================
merger                 newer record vs older record (same key)                     claims (C A I, deletes)
=====================  ==========================================================  =====================
CommitTimeMerger       the newer write wins, always                                 - A I, with deletes
EventTimeMerger        greater ordering values win (lexicographic over the fields;  - A I, with deletes
                       a null is below every value); ties go to the newer write
PartialUpdateMerger    the winner (by event time, or the newer write without        - - I, updates only
                       ordering fields) changes only its non-null columns          (A without ordering)
ColumnGroupMerger      per column group: the values with the greater ordering      C A I, updates only
                       value of that group win (ties: the greater values)
=====================  ==========================================================  =====================

A delete whose ordering fields are all null deletes whatever is stored (commit-time
semantics, like Hudi's deletes without an ordering value); a delete with ordering values
is ranked like any record, so a stale delete never removes a newer record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import META_COLUMNS
from tidemark.merge.base import (
    OP_COLUMN,
    OP_DELETE,
    MergeProperties,
    is_delete,
    newer_ranks_higher,
    no_ordering_value,
    pick,
    rebuild,
)


def _newer_wins(older: pa.Table, newer: pa.Table, ordering: Sequence[str]) -> pa.Array:
    """Record-level winner: ordering values, and a delete without ordering values always wins."""
    if not ordering:
        return pa.array(np.ones(newer.num_rows, dtype=bool))
    wins = newer_ranks_higher(older, newer, ordering)
    return pc.or_(wins, pc.and_(is_delete(newer), no_ordering_value(newer, ordering)))


@dataclass(frozen=True)
class CommitTimeMerger:
    """COMMIT_TIME_ORDERING: the later write replaces the record, whatever its values."""

    name: str = "commit_time"

    @property
    def properties(self) -> MergeProperties:
        return MergeProperties(commutative=False, associative=True, idempotent=True, with_deletes=True)

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        return newer


@dataclass(frozen=True)
class EventTimeMerger:
    """EVENT_TIME_ORDERING on one or several ordering fields, compared lexicographically."""

    ordering_fields: tuple[str, ...]
    name: str = "event_time"

    @property
    def properties(self) -> MergeProperties:
        # Ties go to the later write, so the order of the arguments matters: not commutative.
        return MergeProperties(commutative=False, associative=True, idempotent=True, with_deletes=True)

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        wins = _newer_wins(older, newer, self.ordering_fields)
        return rebuild(older, pick(wins, newer, older, older.column_names))


@dataclass(frozen=True)
class PartialUpdateMerger:
    """Partial update: the winning record changes only the columns it has values for.

    The winner is decided by the ordering fields (event time), or is the newer write
    when there are none. Its non-null columns win; where it has a null, the other
    record's value stays. A winning delete removes the whole record.
    """

    ordering_fields: tuple[str, ...] = ()
    name: str = "partial_update"

    @property
    def properties(self) -> MergeProperties:
        # Without ordering fields a merge is a per-column coalesce(newer, older): associative. With
        # them it is not: a merged record ranks by its winner, while its columns may come from a
        # lower-ranked record (a, b, c ranked 1, 3, 2 with a, c setting x: (a+b)+c keeps a's x,
        # a+(b+c) takes c's). A delete followed by a partial insert looks like an update: updates only.
        return MergeProperties(
            commutative=False, associative=not self.ordering_fields, idempotent=True, with_deletes=False
        )

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        wins = _newer_wins(older, newer, self.ordering_fields)
        winner_deletes = pc.if_else(wins, is_delete(newer), is_delete(older))
        columns: dict[str, pa.Array] = {}
        for name in older.column_names:
            new, old = newer.column(name), older.column(name)
            winner = pc.if_else(wins, new, old)
            if name == OP_COLUMN or name in META_COLUMNS:
                columns[name] = pc.coalesce(winner, pc.if_else(wins, old, new))
                continue
            loser = pc.if_else(wins, old, new)
            # A winning delete takes nothing from the record it deletes.
            columns[name] = pc.if_else(winner_deletes, winner, pc.coalesce(winner, loser))
        return rebuild(older, columns)


@dataclass(frozen=True)
class ColumnGroup:
    """Columns written together by one stream, ordered by their own ordering field."""

    ordering_field: str
    columns: tuple[str, ...]

    @property
    def all_columns(self) -> tuple[str, ...]:
        return (self.ordering_field, *[c for c in self.columns if c != self.ordering_field])


def _orderable(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(dtype)
        or pa.types.is_floating(dtype)
        or pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_binary(dtype)
        or pa.types.is_boolean(dtype)
        or pa.types.is_temporal(dtype)
        or pa.types.is_decimal(dtype)
    )


@dataclass(frozen=True)
class ColumnGroupMerger:
    """The multi-stream join: each column group keeps the values with its greatest ordering value.

    Streams write their own groups (other columns null); a record ends up with, per
    group, the values of the latest event of that group, whatever order the writes
    commit in. Ties on the ordering value are broken by the group's values (greater
    wins, null lowest), so the merge is a join on a total order: commutative,
    associative and idempotent. Columns in no group (keys, partition fields) are
    taken from the newer record where it has them. A record is deleted when a delete
    wins every group (a delete without ordering values wins them all).
    """

    groups: tuple[ColumnGroup, ...]
    orderable: bool = True  # every grouped column can be compared (else ties go to the newer write)
    name: str = "column_groups"

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        return tuple(g.ordering_field for g in self.groups)

    @property
    def properties(self) -> MergeProperties:
        return MergeProperties(commutative=self.orderable, associative=True, idempotent=True, with_deletes=False)

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        columns: dict[str, pa.Array] = {}
        grouped: set[str] = set()
        delete_all = pc.and_(is_delete(newer), no_ordering_value(newer, self.ordering_fields))
        deleted_everywhere = pa.array(np.ones(newer.num_rows, dtype=bool))
        for group in self.groups:
            names = [c for c in group.all_columns if c in older.column_names]
            grouped.update(names)
            ranked = names if self.orderable else names[:1]
            wins = pc.or_(newer_ranks_higher(older, newer, ranked), delete_all)
            winner_deletes = pc.if_else(wins, is_delete(newer), is_delete(older))
            deleted_everywhere = pc.and_(deleted_everywhere, winner_deletes)
            for name in names:
                value = pc.if_else(wins, newer.column(name), older.column(name))
                if name != group.ordering_field:  # a delete clears the group, keeping its ordering value
                    value = pc.if_else(winner_deletes, pa.nulls(len(value), value.type), value)
                columns[name] = value
        for name in older.column_names:
            if name in grouped or name == OP_COLUMN:
                continue
            columns[name] = pc.coalesce(newer.column(name), older.column(name))
        columns[OP_COLUMN] = pc.if_else(deleted_everywhere, OP_DELETE, "U")
        return rebuild(older, columns)

    def check_schema(self, schema: pa.Schema) -> ColumnGroupMerger:
        """This merger with ``orderable`` set from the column types of ``schema``."""
        types = {f.name: f.type for f in schema}
        orderable = all(_orderable(types[c]) for g in self.groups for c in g.all_columns if c in types)
        return ColumnGroupMerger(self.groups, orderable=orderable)
