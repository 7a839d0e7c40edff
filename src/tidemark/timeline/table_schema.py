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
    for instant in timeline.with_history().completed_data_instants:
        schema_json = timeline.with_history().commit_metadata(instant).schema_json
        if not schema_json or schema_json in seen:
            continue
        seen.add(schema_json)
        schema = arrow_schema_from_avro(schema_json)
        if column in schema.names:
            out.add(schema.field(column).type)
    return out
