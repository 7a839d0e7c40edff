"""Checks of an incoming batch's schema against the table's, engine-free.

Decides, from two Arrow schemas, which columns the batch must be cast or
padded with, or raises :class:`SchemaMismatchError` listing every problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tidemark.errors import MissingColumnError, SchemaMismatchError
from tidemark.format.names import META_COLUMNS
from tidemark.format.schema import normalize_type

# Widening casts that never lose information.
_SAFE_WIDENING = {
    (pa.int32(), pa.int64()),
    (pa.float32(), pa.float64()),
    (pa.int32(), pa.float64()),
}


@dataclass(frozen=True)
class ColumnPlan:
    """How to turn an incoming batch into the table's schema."""

    casts: dict[str, pa.DataType]  # column -> table type
    missing: tuple[str, ...]  # table columns to fill with nulls


def require_columns(role: str, needed: Sequence[str], available: Sequence[str]) -> None:
    absent = [c for c in needed if c not in available]
    if absent:
        raise MissingColumnError(role, absent, [c for c in available if c not in META_COLUMNS])


def plan_columns(incoming: pa.Schema, table: pa.Schema, *, allow_missing: bool) -> ColumnPlan:
    problems: list[str] = []
    casts: dict[str, pa.DataType] = {}
    table_fields = {f.name: f for f in table}
    for field in incoming:
        if field.name in META_COLUMNS:
            continue
        target = table_fields.get(field.name)
        if target is None:
            problems.append(f"column {field.name!r} ({field.type}) is not in the table")
            continue
        have, want = normalize_type(field.type), normalize_type(target.type)
        if have == want:
            continue
        if (have, want) in _SAFE_WIDENING or pa.types.is_null(have):
            casts[field.name] = target.type
        else:
            problems.append(f"column {field.name!r} is {field.type}, the table has {target.type}")
    names = set(incoming.names)
    missing = tuple(f.name for f in table if f.name not in names)
    if missing and not allow_missing:
        problems.append(
            f"column(s) {list(missing)} of the table are missing "
            "(set hoodie.write.set.null.for.missing.columns=true to write nulls)"
        )
    if problems:
        raise SchemaMismatchError(
            "the batch does not fit the table's schema: " + "; ".join(problems), problems=problems
        )
    return ColumnPlan(casts, missing)
