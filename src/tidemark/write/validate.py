"""Checks of an incoming batch's schema against the table's, engine-free.

Decides, from two Arrow schemas, which columns the batch must be cast or
padded with, or raises :class:`SchemaMismatchError` listing every problem.
Also the one place that says which column types a table may hold (what Spark and
hudi-rs read back) and which types can be record-key or partition fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from tidemark.errors import (
    InvalidPartitionValueError,
    InvalidRecordKeyError,
    MissingColumnError,
    SchemaMismatchError,
    UnsupportedTypeError,
)
from tidemark.format.names import META_COLUMNS
from tidemark.format.schema import normalize_type
from tidemark.format.schema_evolution import missing_fields, promotable


@dataclass(frozen=True)
class ColumnPlan:
    """How to turn an incoming batch into the table's schema."""

    casts: dict[str, pa.DataType]  # column -> table type
    missing: tuple[str, ...]  # table columns to fill with nulls


def require_columns(role: str, needed: Sequence[str], available: Sequence[str]) -> None:
    absent = [c for c in needed if c not in available]
    if absent:
        raise MissingColumnError(role, absent, [c for c in available if c not in META_COLUMNS])


def _nested(t: pa.DataType) -> bool:
    return pa.types.is_nested(t) or pa.types.is_dictionary(t) or pa.types.is_null(t)


def check_key_types(schema: pa.Schema, record_key_fields: Sequence[str], partition_fields: Sequence[str]) -> None:
    """Record-key and partition fields must be of a scalar type whose text is the key or folder.

    Raises InvalidRecordKeyError / InvalidPartitionValueError naming the field (fields absent
    from ``schema`` are left to the missing-column checks).
    """
    for name in record_key_fields:
        if name in schema.names and _nested(schema.field(name).type):
            raise InvalidRecordKeyError(
                name,
                f"its type {schema.field(name).type} cannot be a record key; use a string, integer, date or "
                "timestamp column (or several of them)",
            )
        if name in schema.names and pa.types.is_floating(schema.field(name).type):
            # Java's text of a double (Hudi's and Spark's key) changed with Java 19 and is not Arrow's:
            # the same record would get two keys, one per writer (format/record_key.py).
            raise InvalidRecordKeyError(
                name,
                f"its type {schema.field(name).type} (floating point) cannot be a record key: writers on "
                "different JVMs and engines write its value as different text, and a record would be stored "
                "twice; use a decimal, integer or string column",
            )
    for name in partition_fields:
        if name in schema.names and _nested(schema.field(name).type):
            raise InvalidPartitionValueError(
                f"{name}=<{schema.field(name).type}>",
                f"the partition field {name!r} is of type {schema.field(name).type}, which cannot name a folder; "
                "partition by a string, integer or date column",
            )


def text_key_fields(schema: pa.Schema, record_key_fields: Sequence[str]) -> tuple[str, ...]:
    """The fields of a multi-field key whose values may hold ``,`` (strings and bytes).

    Hudi's multi-field key is ``f1:v1,f2:v2``: with a ``,`` inside a value two different
    key tuples can give the same key (``("1,b:2", "3")`` and ``("1", "2,b:3")``), and Hudi's
    own parsers of the key split it at ``,``; such values are refused.
    """
    if len(record_key_fields) < 2:
        return ()
    return tuple(
        name for name in record_key_fields
        if name in schema.names
        and (
            pa.types.is_string(schema.field(name).type)
            or pa.types.is_large_string(schema.field(name).type)
            or pa.types.is_binary(schema.field(name).type)
            or pa.types.is_large_binary(schema.field(name).type)
        )
    )


def ambiguous_key_error(field: str, value: object) -> InvalidRecordKeyError:
    return InvalidRecordKeyError(
        field,
        f"the value {value!r} contains ',', which Hudi's multi-field key format (f1:v1,f2:v2) cannot hold "
        "unambiguously (two different keys could become equal, and a row be lost); remove or replace the ',' "
        "in key values",
        value=value,
    )


def _unstorable(t: pa.DataType) -> str | None:
    """Why a column of type ``t`` cannot be stored so that Spark and hudi-rs read it (None: it can)."""
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return "timestamp[ns] inside a nested column; cast it to timestamp[us] (Hudi and Spark keep microseconds)"
    if pa.types.is_time(t) or pa.types.is_duration(t) or pa.types.is_interval(t):
        return f"type {t} has no Hudi (Avro/Spark) equivalent; store it as an integer or a timestamp"
    if pa.types.is_unsigned_integer(t) or pa.types.is_float16(t) or pa.types.is_dictionary(t):
        return f"type {t} inside a nested column is not readable by Spark; cast it to a signed/plain type"
    if pa.types.is_decimal(t) and t.precision > 38:
        return f"type {t}: Spark and Hudi hold decimals of at most 38 digits"
    if pa.types.is_null(t):
        return "it has no type (every value is null); give the column a type before the first write"
    if pa.types.is_fixed_size_list(t) or pa.types.is_union(t) or pa.types.is_list_view(t) \
            or pa.types.is_large_list_view(t) or pa.types.is_run_end_encoded(t):
        return f"type {t} is not supported; use a list, struct or map"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _unstorable(t.value_type)
    if pa.types.is_map(t):
        return _unstorable(t.key_type) or _unstorable(t.item_type)
    if pa.types.is_struct(t):
        for child in t:
            why = _unstorable(child.type)
            if why:
                return why
    if isinstance(t, pa.ExtensionType):
        return f"extension type {t} is not supported"
    return None


def check_storable(schema: pa.Schema) -> None:
    """Raise UnsupportedTypeError for the first column no Hudi reader could read back."""
    for f in schema:
        if f.name in META_COLUMNS:
            continue
        why = _unstorable(f.type)
        if why:
            raise UnsupportedTypeError(f.name, why)


def storable_schema(schema: pa.Schema) -> pa.Schema:
    """The types :func:`storable_arrow_table` turns ``schema``'s columns into."""
    fields = []
    for f in schema:
        t = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        if pa.types.is_timestamp(t) and t.unit == "ns":
            t = pa.timestamp("us", tz=t.tz)
        t = _SIGNED.get(t, t)
        fields.append(f.with_type(t))
    return pa.schema(fields, metadata=schema.metadata)


_SIGNED = {pa.uint8(): pa.int16(), pa.uint16(): pa.int32(), pa.uint32(): pa.int64(), pa.uint64(): pa.int64(),
           pa.float16(): pa.float32()}


def storable_arrow_table(table: pa.Table) -> pa.Table:
    """``table`` with its top-level columns converted to the types Hudi readers read, losslessly.

    * ``timestamp[ns]`` (pandas' default) becomes ``timestamp[us]`` when no value has digits
      below the microsecond; otherwise UnsupportedTypeError (truncate or round first);
    * unsigned integers become the signed type that holds them (``uint64`` only if every value
      fits in int64); ``float16`` becomes ``float32``; dictionary (pandas category) columns their
      value type.

    Other unreadable types are left for :func:`check_storable` to refuse.
    """
    import pyarrow.compute as pc

    columns = {}
    for f in table.schema:
        t, column = f.type, table.column(f.name)
        if pa.types.is_dictionary(t):
            t = t.value_type
            column = column.cast(t)
        target: pa.DataType | None = None
        if pa.types.is_timestamp(t) and t.unit == "ns":
            micros = pc.cast(column, pa.timestamp("us", tz=t.tz), safe=False)
            back = pc.cast(micros, t)
            if not pc.all(pc.fill_null(pc.equal(back, column), True)).as_py():
                raise UnsupportedTypeError(
                    f.name,
                    "timestamp[ns] values with digits below the microsecond cannot be stored (Hudi and Spark "
                    "keep microseconds, and a nanosecond file would make the table unreadable); truncate or "
                    "round them to microseconds first (pandas: .dt.floor('us'); Arrow: cast to timestamp[us])",
                )
            column = micros
        elif pa.types.is_uint8(t):
            target = pa.int16()
        elif pa.types.is_uint16(t):
            target = pa.int32()
        elif pa.types.is_uint32(t):
            target = pa.int64()
        elif pa.types.is_uint64(t):
            biggest = pc.max(column).as_py()
            if biggest is not None and biggest > 2**63 - 1:
                raise UnsupportedTypeError(
                    f.name,
                    f"uint64 value {biggest} does not fit in a signed 64-bit integer, the widest integer Hudi "
                    "and Spark read; store it as a decimal(20, 0) or a string",
                )
            target = pa.int64()
        elif pa.types.is_float16(t):
            target = pa.float32()
        if target is not None:
            column = column.cast(target)
        if column.type != f.type:
            columns[f.name] = column
    if not columns:
        return table
    return pa.table(
        [columns.get(name, table.column(name)) for name in table.column_names],
        names=table.column_names,
    )


def plan_columns(incoming: pa.Schema, table: pa.Schema, *, allow_missing: bool) -> ColumnPlan:
    """How to bring a batch to ``table`` (the schema the write records, already evolved by
    :func:`tidemark.format.schema_evolution.evolve`): columns to cast up (narrower types,
    structs lacking fields), table columns to fill with null.

    Raises SchemaMismatchError naming the table columns (dotted inside structs) the batch
    lacks unless ``allow_missing`` (``hoodie.write.set.null.for.missing.columns``).
    """
    problems: list[str] = []
    casts: dict[str, pa.DataType] = {}
    table_fields = {f.name: f for f in table}
    for field in incoming:
        if field.name in META_COLUMNS:
            continue
        target = table_fields.get(field.name)
        if target is None:
            problems.append(f"column {field.name!r} ({field.type}) is not in the table's schema")
            continue
        if normalize_type(field.type) == normalize_type(target.type):
            continue
        if promotable(field.type, target.type) or pa.types.is_null(field.type):
            casts[field.name] = target.type
        else:
            problems.append(f"column {field.name!r} is {field.type}, the table has {target.type}")
    names = set(incoming.names)
    missing = tuple(f.name for f in table if f.name not in names)
    absent = missing_fields(incoming, table)
    if absent and not allow_missing:
        problems.append(
            f"column(s) {absent} of the table are missing from the batch "
            "(set hoodie.write.set.null.for.missing.columns=true to write nulls; Hudi never drops a column)"
        )
    if problems:
        raise SchemaMismatchError(
            "the batch does not fit the table's schema: " + "; ".join(problems), problems=problems
        )
    return ColumnPlan(casts, missing)
