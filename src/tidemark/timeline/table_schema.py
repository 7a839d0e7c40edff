"""The table's schema as the timeline records it, as Hudi derives it.

Hudi keeps no schema registry: each commit carries the writer's schema in its extra
metadata (``schema``), and the table's schema is the one the latest completed commit
recorded. Under schema evolution every commit records the whole evolved schema (the
commit protocol reconciles it with concurrent commits), so the latest one reads every
file of the table. Older schemas stay in older commits, which readers consult to know
which columns changed type (:func:`recorded_types`).
"""

from __future__ import annotations

import pyarrow as pa

from tidemark.format.schema import arrow_schema_from_avro
from tidemark.timeline.timeline import Timeline


def latest_table_schema(timeline: Timeline, fallback: pa.Schema | None = None) -> pa.Schema | None:
    """The user columns' schema of the latest completed commit that recorded one, else ``fallback``
    (the table's create schema, or what the caller already knew)."""
    schema_json = timeline.latest_schema_json()
    return arrow_schema_from_avro(schema_json) if schema_json else fallback


def recorded_types(timeline: Timeline, column: str) -> set[pa.DataType]:
    """Every type ``column`` had in a schema recorded by a completed commit (archived included)."""
    out: set[pa.DataType] = set()
    seen: set[str] = set()
    history = timeline.with_history()
    for instant in history.completed_data_instants:
        schema_json = history.commit_metadata(instant).schema_json
        if not schema_json or schema_json in seen:
            continue
        seen.add(schema_json)
        schema = arrow_schema_from_avro(schema_json)
        if column in schema.names:
            out.add(schema.field(column).type)
    return out


def _narrower_long(old: pa.DataType, new: pa.DataType) -> bool:
    if pa.types.is_int64(old) and pa.types.is_floating(new):
        return True
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        names = {f.name for f in new}
        return any(f.name in names and _narrower_long(f.type, new.field(f.name).type) for f in old)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return _narrower_long(old.value_type, new.value_type)
    if pa.types.is_map(old) and pa.types.is_map(new):
        return _narrower_long(old.item_type, new.item_type)
    return False


def promoted_from_long(timeline: Timeline, schema: pa.Schema) -> list[str]:
    """Columns of ``schema`` holding a float or double that some commit recorded as a long.

    Spark's parquet reader widens int to long or double and float to double in files, but
    refuses to read a long column as a float or double: such files need another reader.
    """
    candidates = [f for f in schema if _has_floating(f.type)]
    return [f.name for f in candidates if any(_narrower_long(t, f.type) for t in recorded_types(timeline, f.name))]


def _has_floating(t: pa.DataType) -> bool:
    if pa.types.is_floating(t):
        return True
    if pa.types.is_struct(t):
        return any(_has_floating(f.type) for f in t)
    if pa.types.is_list(t):
        return _has_floating(t.value_type)
    if pa.types.is_map(t):
        return _has_floating(t.item_type)
    return False
