"""Record-key and partition-path columns computed with pyarrow (same rules as the Spark engine)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import DEFAULT_PARTITION, PARTITION_PATH, RECORD_KEY
from tidemark.format.partition_path import escape_value


def _as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    if pa.types.is_boolean(column.type):
        return pc.if_else(column, "true", "false")
    return pc.cast(column, pa.string())


def record_key_array(table: pa.Table | pa.RecordBatch, fields: Sequence[str]) -> pa.ChunkedArray | pa.Array:
    if len(fields) == 1:
        return _as_text(table.column(fields[0]))
    parts = [pc.binary_join_element_wise(f"{name}:", _as_text(table.column(name)), "") for name in fields]
    return pc.binary_join_element_wise(*parts, ",")


def null_key_count(table: pa.Table, fields: Sequence[str]) -> int:
    mask = None
    for name in fields:
        nulls = pc.is_null(table.column(name))
        mask = nulls if mask is None else pc.or_(mask, nulls)
    return int(pc.sum(mask).as_py() or 0) if mask is not None else 0


def _escaped(value: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Hudi's url-encoding of each value, computed once per distinct value (partitions are few)."""
    distinct = pc.unique(value)
    texts = distinct.to_pylist()
    escaped = [escape_value(t) for t in texts]
    if escaped == texts:
        return value
    return pc.take(pa.array(escaped, pa.string()), pc.index_in(value, value_set=distinct))


def partition_path_array(
    table: pa.Table | pa.RecordBatch, fields: Sequence[str], *, hive_style: bool, url_encode: bool = False
) -> pa.ChunkedArray | pa.Array:
    if not fields:
        return pa.repeat(pa.scalar("", pa.string()), table.num_rows)
    parts = []
    for name in fields:
        value = _as_text(table.column(name))
        value = pc.if_else(pc.fill_null(pc.equal(value, ""), True), DEFAULT_PARTITION, value)
        if url_encode:
            value = _escaped(value)
        parts.append(pc.binary_join_element_wise(f"{name}=", value, "") if hive_style else value)
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "/")


def text_matches_spark(field_type: pa.DataType) -> bool:
    """Whether Arrow's text form of a value of this type equals Spark's ``cast(x as string)``.

    True for integers and strings; floats, decimals and timestamps are written differently
    (``1e+10`` vs ``1.0E10``), so keys of those types must come from Spark's expressions.
    """
    return pa.types.is_integer(field_type) or pa.types.is_string(field_type) or pa.types.is_large_string(field_type)


def with_key_columns(
    batch: pa.RecordBatch,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str],
    *,
    hive_style: bool,
    url_encode: bool = False,
) -> pa.RecordBatch:
    """``batch`` with ``_hoodie_record_key`` and ``_hoodie_partition_path`` appended."""
    key = record_key_array(batch, record_key_fields)
    path = partition_path_array(batch, partition_fields, hive_style=hive_style, url_encode=url_encode)
    return batch.append_column(RECORD_KEY, key).append_column(PARTITION_PATH, path)


def _crc32_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[i] = c
    return table


_CRC32 = _crc32_table()


def crc32_of_keys(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``zlib.crc32`` of each key's UTF-8 bytes, as uint32, computed for all keys at once:
    keys of one byte length are a byte matrix, hashed one byte column at a time."""
    array = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    binary = array.cast(pa.string()).cast(pa.binary())
    binary = pa.concat_arrays([binary]) if binary.offset else binary  # offsets start at 0
    offsets = np.frombuffer(binary.buffers()[1], dtype=np.int32, count=len(binary) + 1)
    data_buffer = binary.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.zeros(len(binary), dtype=np.uint32)
    for length in np.unique(lengths):
        rows = np.flatnonzero(lengths == length)
        starts = offsets[rows]
        crc = np.full(len(rows), 0xFFFFFFFF, dtype=np.uint32)
        for j in range(int(length)):
            crc = _CRC32[(crc ^ data[starts + j]) & 0xFF] ^ (crc >> np.uint32(8))
        out[rows] = crc ^ np.uint32(0xFFFFFFFF)
    return out
