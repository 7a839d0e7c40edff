"""Schemas: Arrow is tidemark's working schema; Hudi stores Avro JSON.

``avro_schema_json`` renders an Arrow schema (user columns only, no meta
columns) as the Avro record Hudi keeps in ``hoodie.table.create.schema`` and in
each commit's ``extraMetadata.schema``. ``arrow_schema_from_avro`` reads it
back. Every field is nullable, as in Hudi's Spark writer.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pyarrow as pa

from tidemark.format.names import META_COLUMNS

META_SCHEMA = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS])


def _avro_name(name: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return clean if clean and not clean[0].isdigit() else f"_{clean}"


def _to_avro(t: pa.DataType, name: str, ns: str) -> Any:
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_integer(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_floating(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        unit = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
        if t.tz is None:
            unit = unit.replace("timestamp", "local-timestamp")
        return {"type": "long", "logicalType": unit}
    if pa.types.is_decimal(t):
        size = 1
        while 2 ** (8 * size - 1) - 1 < 10**t.precision - 1:  # bytes to hold the digits
            size += 1
        return {
            "type": "fixed",
            "name": "fixed",
            "namespace": f"{ns}.{name}",
            "size": size,
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "items": _nullable(_to_avro(t.value_type, name, ns))}
    if pa.types.is_map(t):
        return {"type": "map", "values": _nullable(_to_avro(t.item_type, name, ns))}
    if pa.types.is_struct(t):
        return _record(list(t), _avro_name(name), ns)
    raise ValueError(f"type {t} of column {name!r} has no Avro equivalent")


def _nullable(avro_type: Any) -> list[Any]:
    return [avro_type, "null"]


def _record(fields: list[pa.Field], name: str, ns: str) -> dict[str, Any]:
    inner_ns = f"{ns}.{name}"
    return {
        "type": "record",
        "name": name,
        "namespace": ns,
        "fields": [
            {"name": f.name, "type": _nullable(_to_avro(f.type, f.name, inner_ns)), "default": None} for f in fields
        ],
    }


def avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    """Hudi's Avro record schema for the user columns of ``schema``."""
    user = [f for f in schema if f.name not in META_COLUMNS]
    rec = _record(user, f"{_avro_name(table_name)}_record", f"hoodie.{_avro_name(table_name)}")
    for f in rec["fields"]:  # Hudi's Spark writer puts the type first, then null, default null
        f.pop("default")
    return json.dumps(rec, separators=(",", ":"))


def table_name_of(avro_json: str) -> str:
    """The table name :func:`avro_schema_json` rendered into ``avro_json`` (its namespace
    ``hoodie.<name>``), to render an evolved schema under the same record name."""
    rec = json.loads(avro_json)
    namespace = str(rec.get("namespace") or "")
    if namespace.startswith("hoodie."):
        return namespace[len("hoodie."):]
    name = str(rec.get("name") or "table")
    return name[: -len("_record")] if name.endswith("_record") else name


@functools.lru_cache(maxsize=64)  # every base file of a write asks for the same one
def file_avro_schema_json(schema: pa.Schema, table_name: str) -> str:
    """The Avro schema Hudi's writers put in a base file's footer (``parquet.avro.schema``).

    Every column, meta columns included, as ``["null", type]`` with default null: the form
    of Hudi's Avro parquet writer, which its readers and bloom index expect to find there.
    Raises ValueError for a type without an Avro form.
    """
    rec = _record(list(schema), f"{_avro_name(table_name)}_record", f"hoodie.{_avro_name(table_name)}")
    for f in rec["fields"]:
        f["type"] = list(reversed(f["type"]))
    return json.dumps(rec, separators=(",", ":"))


def _from_avro(t: Any) -> pa.DataType:
    if isinstance(t, list):
        non_null = [x for x in t if x != "null"]
        return _from_avro(non_null[0]) if non_null else pa.null()
    if isinstance(t, str):
        return {
            "boolean": pa.bool_(),
            "int": pa.int32(),
            "long": pa.int64(),
            "float": pa.float32(),
            "double": pa.float64(),
            "string": pa.string(),
            "bytes": pa.binary(),
            "null": pa.null(),
        }[t]
    logical = t.get("logicalType")
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-micros", "timestamp-millis"):
        return pa.timestamp("us" if logical.endswith("micros") else "ms", tz="UTC")
    if logical in ("local-timestamp-micros", "local-timestamp-millis"):
        return pa.timestamp("us" if logical.endswith("micros") else "ms")
    if logical == "decimal":
        return pa.decimal128(t["precision"], t.get("scale", 0))
    kind = t["type"]
    if kind == "array":
        return pa.list_(_from_avro(t["items"]))
    if kind == "map":
        return pa.map_(pa.string(), _from_avro(t["values"]))
    if kind == "record":
        return pa.struct([pa.field(f["name"], _from_avro(f["type"])) for f in t["fields"]])
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary(t["size"])
    return _from_avro(kind)


def arrow_schema_from_avro(avro_json: str) -> pa.Schema:
    """The Arrow schema of the user columns stored as Avro JSON by Hudi or tidemark."""
    rec = json.loads(avro_json)
    return pa.schema([pa.field(f["name"], _from_avro(f["type"])) for f in rec["fields"]])


def with_meta_columns(user: pa.Schema) -> pa.Schema:
    """The schema of a base file: the five meta columns, then the user columns."""
    return pa.schema(list(META_SCHEMA) + [f for f in user if f.name not in META_COLUMNS])


def normalize_type(t: pa.DataType) -> pa.DataType:
    """Types equal for schema checks: large variants, timestamp units and zones folded."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_int8(t) or pa.types.is_int16(t):
        return pa.int32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("us", tz="UTC" if t.tz else None)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(normalize_type(t.value_type))
    if pa.types.is_map(t):
        return pa.map_(normalize_type(t.key_type), normalize_type(t.item_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, normalize_type(f.type)) for f in t])
    return t
