"""Hudi log files (merge-on-read): names, the block codec, data and delete blocks.

A log file is a sequence of blocks; each block, big-endian::

    #HUDI#                      magic (6 bytes)
    int64  block length         everything after this field, footer and tail included
    int32  format version       1
    int32  block type           1 delete, 3 Avro data, 5 parquet data (0 command, ...)
    int32  header entries       then per entry: int32 key, int32 length, utf-8 value
    int64  content length       then the content
    int32  footer entries       (same layout as the header; Hudi writes none)
    int64  tail                 total bytes of the block before this field (block length + 6)

Header keys: 0 INSTANT_TIME (the deltacommit), 1 TARGET_INSTANT_TIME (command
blocks), 2 SCHEMA (Avro JSON of the records, meta columns included).

Content of an Avro data block: int32 3 | int32 record count | per record an int32
length and the Avro binary datum. Content of a delete block: int32 3 | int32 byte
count | one ``HoodieDeleteRecordList`` datum. The ordering value of a delete goes
in the union's ``long`` branch (hudi-rs fails on the ``int`` branch), but only while it
fits 32 bits: hudi-rs 0.5 decodes that branch with a 32-bit varint and cannot read a table
holding a larger one ("varint overflow", e.g. an epoch-millisecond ``ts``), so a larger
value is written as no ordering value (the delete wins by commit time, as Hudi's own
deletes without one do). A delete without one carries ``0``, as Hudi's writers do (hudi-rs rejects a delete block
whose first record has a null ordering value, and reads an integer ``0`` as "no
ordering value": the delete wins by commit time). See :func:`delete_ordering_field`
for which tables put a real ordering value there.

A log file is named ``.<fileId>_<deltacommit requested time>.log.<version>_<writeToken>``;
in table version 8 each deltacommit writes its own log file (version 1).
"""

from __future__ import annotations

import enum
import io
import json
import re
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa

from tidemark.format.names import META_COLUMNS
from tidemark.format.schema import avro_schema_json
from tidemark.storage.base import DataSource

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
CONTENT_VERSION = 3  # of Avro data and delete block contents


class BlockType(enum.IntEnum):
    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(enum.IntEnum):
    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3


# -- names ---------------------------------------------------------------------------------
_LOG_RE = re.compile(r"^\.([^_/]+)_(\d{14}(?:\d{3})?)\.log\.(\d+)_(\d+-\d+-\d+)$")


@dataclass(frozen=True)
class LogFileName:
    file_id: str
    instant_time: str  # the requested time of the deltacommit that wrote it
    version: int
    write_token: str


def log_file_name(file_id: str, instant_time: str, version: int, token: str) -> str:
    return f".{file_id}_{instant_time}.log.{version}_{token}"


def parse_log_file_name(name: str) -> LogFileName | None:
    m = _LOG_RE.match(name)
    return LogFileName(m.group(1), m.group(2), int(m.group(3)), m.group(4)) if m else None


# -- blocks --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogBlock:
    block_type: int
    header: tuple[tuple[int, str], ...]  # in file order
    content: bytes
    footer: tuple[tuple[int, str], ...] = ()

    def header_value(self, key: int) -> str | None:
        for k, v in self.header:
            if k == key:
                return v
        return None

    @property
    def instant_time(self) -> str | None:
        return self.header_value(HeaderKey.INSTANT_TIME)

    @property
    def schema_json(self) -> str | None:
        return self.header_value(HeaderKey.SCHEMA)


def _entries(entries: Sequence[tuple[int, str]]) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for key, value in entries:
        raw = value.encode()
        out.append(struct.pack(">ii", int(key), len(raw)))
        out.append(raw)
    return b"".join(out)


def encode_block(block: LogBlock) -> bytes:
    body = b"".join(
        [
            struct.pack(">ii", LOG_FORMAT_VERSION, int(block.block_type)),
            _entries(block.header),
            struct.pack(">q", len(block.content)),
            block.content,
            _entries(block.footer),
        ]
    )
    length = len(body) + 8  # the tail follows the footer
    return MAGIC + struct.pack(">q", length) + body + struct.pack(">q", length + 6)


class _Cursor:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data, self.pos = data, pos

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("truncated block")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def entries(self) -> tuple[tuple[int, str], ...]:
        count = self.unpack(">i")
        out = []
        for _ in range(count):
            key, length = struct.unpack(">ii", self.take(8))
            out.append((key, self.take(length).decode()))
        return tuple(out)


def decode_blocks(data: bytes) -> list[LogBlock]:
    """Every complete block of a log file. A torn block at the end (a writer that died
    mid-append) ends the file: Hudi treats it as a corrupt block and skips it too."""
    blocks = []
    pos = 0
    while pos + len(MAGIC) + 8 <= len(data):
        if data[pos : pos + len(MAGIC)] != MAGIC:
            break
        (length,) = struct.unpack(">q", data[pos + 6 : pos + 14])
        end = pos + 14 + length
        if length <= 0 or end > len(data):
            break
        cur = _Cursor(data[:end], pos + 14)
        try:
            _version = cur.unpack(">i")
            block_type = cur.unpack(">i")
            header = cur.entries()
            content = cur.take(cur.unpack(">q"))
            footer = cur.entries()
        except (ValueError, struct.error, UnicodeDecodeError):
            break
        blocks.append(LogBlock(block_type, header, content, footer))
        pos = end
    return blocks


def read_log_file(path: DataSource) -> list[LogBlock]:
    """The blocks of one log file: a local file name, or a file from ``Storage.open_input``."""
    if not isinstance(path, str):
        return decode_blocks(path.read())
    with open(path, "rb") as f:
        return decode_blocks(f.read())


# -- schemas -------------------------------------------------------------------------------
def log_schema_json(user_schema: pa.Schema, table_name: str) -> str:
    """The Avro schema written in the SCHEMA header: meta columns (nullable strings) + user columns."""
    rec = json.loads(avro_schema_json(user_schema, table_name))
    meta = [{"name": c, "type": ["null", "string"], "doc": "", "default": None} for c in META_COLUMNS]
    rec["fields"] = meta + rec["fields"]
    return json.dumps(rec, separators=(",", ":"))


# Hudi's union for a delete's ordering value, branch by branch (the position is what is encoded):
# tidemark writes only the long branch, and reads every branch other writers may use.
_ORDERING_BRANCHES: tuple[Any, ...] = (
    "null", "int", "long", "float", "double", "bytes", "string",
    {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
    {"type": "int", "logicalType": "date"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "long", "logicalType": "time-micros"},
    {"type": "long", "logicalType": "timestamp-millis"},
    {"type": "long", "logicalType": "timestamp-micros"},
)
def _delete_record_list(branches: Sequence[Any]) -> dict[str, Any]:
    return {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {
                "name": "deleteRecordList",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieDeleteRecord",
                        "fields": [
                            {"name": "recordKey", "type": ["null", "string"], "default": None},
                            {"name": "partitionPath", "type": ["null", "string"], "default": None},
                            {"name": "orderingVal", "type": list(branches), "default": None},
                        ],
                    },
                },
            }
        ],
    }


_DELETE_RECORD_LIST = _delete_record_list(_ORDERING_BRANCHES)
_PARSED_DELETE = fastavro.parse_schema(_DELETE_RECORD_LIST)
_PARSED_DATA: dict[str, Any] = {}


def _parsed(schema_json: str) -> Any:
    parsed = _PARSED_DATA.get(schema_json)
    if parsed is None:
        parsed = _PARSED_DATA[schema_json] = fastavro.parse_schema(json.loads(schema_json))
    return parsed


# -- Avro data blocks ----------------------------------------------------------------------
def _avro_value(value: Any) -> Any:
    if isinstance(value, list) and value and isinstance(value[0], tuple) and len(value[0]) == 2:
        return dict(value)  # an Arrow map comes out as (key, value) pairs
    return value


def encode_avro_records(schema_json: str, rows: Iterable[dict[str, Any]]) -> bytes:
    parsed = _parsed(schema_json)
    buf = io.BytesIO()
    parts = []
    count = 0
    for row in rows:
        buf.seek(0)
        buf.truncate()
        fastavro.schemaless_writer(buf, parsed, {k: _avro_value(v) for k, v in row.items()})
        datum = buf.getvalue()
        parts.append(struct.pack(">i", len(datum)))
        parts.append(datum)
        count += 1
    return struct.pack(">ii", CONTENT_VERSION, count) + b"".join(parts)


def _zigzag(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


_PARSED_ARRAYS: dict[str, Any] = {}


def decode_avro_records(content: bytes, schema_json: str) -> list[dict[str, Any]]:
    _version, count = struct.unpack(">ii", content[:8])
    pos = 8
    datums = []
    for _ in range(count):
        (length,) = struct.unpack(">i", content[pos : pos + 4])
        datums.append(content[pos + 4 : pos + 4 + length])
        pos += 4 + length
    if not datums:
        return []
    # One call for the whole block: the datums, re-framed as one Avro array (count, items, 0),
    # decode in fastavro's C loop instead of one Python call per record.
    parsed = _PARSED_ARRAYS.get(schema_json)
    if parsed is None:
        parsed = _PARSED_ARRAYS[schema_json] = fastavro.parse_schema(
            {"type": "array", "items": json.loads(schema_json)}
        )
    framed = _zigzag(len(datums)) + b"".join(datums) + b"\x00"
    return fastavro.schemaless_reader(io.BytesIO(framed), parsed, None)  # type: ignore[return-value]


def avro_data_block(instant_time: str, schema_json: str, rows: pa.Table) -> LogBlock:
    """A data block of ``rows`` (meta columns + user columns, in the schema's order)."""
    content = encode_avro_records(schema_json, rows.to_pylist())
    header = ((HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, schema_json))
    return LogBlock(BlockType.AVRO_DATA, header, content)


def parquet_data_block(instant_time: str, schema_json: str, rows: pa.Table, *, compression: str = "snappy") -> LogBlock:
    """A data block holding ``rows`` as one parquet file (block type 5)."""
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(rows, sink, compression=compression)
    header = ((HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, schema_json))
    return LogBlock(BlockType.PARQUET_DATA, header, sink.getvalue())


# -- delete blocks -------------------------------------------------------------------------
NO_ORDERING_VALUE = 0  # what Hudi writes in a delete that carries no ordering value

# What a decoded orderingVal can be: tidemark writes longs; other writers may use other branches.
OrderingValue = int | float | str | bytes | datetime | date | Decimal | None


@dataclass(frozen=True)
class DeleteRecord:
    record_key: str
    partition_path: str | None
    ordering_value: OrderingValue = NO_ORDERING_VALUE


def delete_ordering_field(ordering_fields: Sequence[str]) -> str | None:
    """The column whose value a delete record's ``orderingVal`` stands for: the table's ordering
    field when it has exactly one. A delete record holds one value, so with several ordering
    fields (or none) deletes carry no ordering value and delete whatever is stored."""
    return ordering_fields[0] if len(ordering_fields) == 1 else None


def writes_delete_ordering(dtype: pa.DataType) -> bool:
    """Whether tidemark writes real ordering values for an ordering field of this type: integers
    that fit the union's ``long`` branch. hudi-rs 0.5 reads no other branch: it rejects ``int``,
    cannot compare ``string``, and misreads ``double`` (checked), so a table with deletes in those
    branches would stop being readable by it; other types' deletes carry no ordering value."""
    return bool(pa.types.is_integer(dtype) and not pa.types.is_uint64(dtype))


def is_no_ordering_value(value: OrderingValue) -> bool:
    """A null, or the integer 0 Hudi writes for "no ordering value" (hudi-rs reads an integer 0
    that way too, so a delete whose real ordering value is 0 also deletes whatever is stored)."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value == 0)


# The ordering values hudi-rs 0.5 can decode from the long branch (it reads 32-bit varints).
_READABLE_ORDERING = range(-(2**31), 2**31)


def _ordering_datum(value: OrderingValue) -> Any:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"tidemark writes delete ordering values as longs, not {type(value).__name__}")
    if value not in _READABLE_ORDERING:
        value = NO_ORDERING_VALUE  # else hudi-rs could not read the table at all
    return ("long", value)


def encode_delete_records(records: Iterable[DeleteRecord]) -> bytes:
    datum = {
        "deleteRecordList": [
            {
                "recordKey": r.record_key,
                "partitionPath": r.partition_path,
                "orderingVal": _ordering_datum(r.ordering_value),
            }
            for r in records
        ]
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _PARSED_DELETE, datum)
    raw = buf.getvalue()
    return struct.pack(">ii", CONTENT_VERSION, len(raw)) + raw


def decode_delete_records(content: bytes) -> list[DeleteRecord]:
    _version, length = struct.unpack(">ii", content[:8])
    datum: Any = fastavro.schemaless_reader(io.BytesIO(content[8 : 8 + length]), _PARSED_DELETE, None)
    out = []
    for rec in datum["deleteRecordList"]:
        value = rec.get("orderingVal")
        out.append(DeleteRecord(rec["recordKey"], rec.get("partitionPath"), value))
    return out


def delete_block(instant_time: str, schema_json: str, records: Iterable[DeleteRecord]) -> LogBlock:
    header = ((HeaderKey.INSTANT_TIME, instant_time), (HeaderKey.SCHEMA, schema_json))
    return LogBlock(BlockType.DELETE, header, encode_delete_records(records))


__all__ = [
    "BlockType",
    "DeleteRecord",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "NO_ORDERING_VALUE",
    "OrderingValue",
    "avro_data_block",
    "decode_avro_records",
    "decode_blocks",
    "decode_delete_records",
    "delete_block",
    "delete_ordering_field",
    "encode_avro_records",
    "encode_block",
    "encode_delete_records",
    "is_no_ordering_value",
    "log_file_name",
    "log_schema_json",
    "parquet_data_block",
    "parse_log_file_name",
    "read_log_file",
    "writes_delete_ordering",
]
