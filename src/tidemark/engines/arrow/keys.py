"""Record-key and partition-path columns computed with pyarrow (same rules as the Spark engine)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.engines.arrow.take import even_slices
from tidemark.format.names import DEFAULT_PARTITION, PARTITION_PATH, RECORD_KEY
from tidemark.format.partition_path import escape_value
from tidemark.format.record_key import key_part, missing_key_value, value_text

# Keys cast to text on every core once a batch has this many rows per core: pyarrow's cast
# runs on one thread, and it comes before any file of the write can start (1M integers: 17 ms).
PARALLEL_CAST_ROWS = 256 * 1024


def _as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A key field's values as key text (format/record_key.py)."""
    special = value_text(column)  # timestamps
    return special if special is not None else _cast_text(column)


def _cast_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """Values as text by Arrow's cast (a partition folder's value; most types' key text)."""
    if pa.types.is_boolean(column.type):
        return pc.if_else(column, "true", "false")
    if pa.types.is_string(column.type):
        return column
    pieces = min(os.cpu_count() or 1, len(column) // PARALLEL_CAST_ROWS)
    if pieces < 2:
        return pc.cast(column, pa.string())
    with ThreadPoolExecutor(max_workers=pieces, thread_name_prefix="tidemark-keys") as pool:
        cast = pool.map(lambda piece: pc.cast(column.slice(*piece), pa.string()), even_slices(len(column), pieces))
        return pa.chunked_array([c for part in cast for c in _chunks(part)], pa.string())


def _chunks(array: pa.ChunkedArray | pa.Array) -> list[pa.Array]:
    return array.chunks if isinstance(array, pa.ChunkedArray) else [array]


def record_key_array(table: pa.Table | pa.RecordBatch, fields: Sequence[str]) -> pa.ChunkedArray | pa.Array:
    """Each row's ``_hoodie_record_key`` (format/record_key.py)."""
    if len(fields) == 1:
        return _as_text(table.column(fields[0]))
    parts = [pc.binary_join_element_wise(f"{name}:", key_part(_as_text(table.column(name))), "") for name in fields]
    return pc.binary_join_element_wise(*parts, ",")


def keyless_count(table: pa.Table, fields: Sequence[str]) -> int:
    """How many rows have no record key: their key field null or empty; of several key fields,
    every one (format/record_key.py)."""
    mask = None
    for name in fields:
        missing = missing_key_value(table.column(name))
        mask = missing if mask is None else pc.and_(mask, missing)
    return int(pc.sum(mask).as_py() or 0) if mask is not None else 0


@dataclass(frozen=True)
class PartitionPaths:
    """Each row's partition path as a code into ``paths`` (distinct paths, in no set order):
    the rows' paths are ``paths.take(codes)``, and rows with one code share one path."""

    paths: pa.Array  # string
    codes: np.ndarray  # int32, one per row

    def array(self) -> pa.Array:
        """The path of every row."""
        if len(self.paths) == 1:  # one path (an unpartitioned table): no take of a code per row
            return pa.repeat(self.paths[0], len(self.codes))
        return self.paths.take(pa.array(self.codes))


def stable_order(codes: np.ndarray, distinct: int) -> np.ndarray:
    """The positions of ``codes`` (each below ``distinct``) in a stable sort of them: narrow
    codes by radix (numpy sorts 8- and 16-bit integers in linear time: a third of an int32 sort)."""
    if distinct <= 256:
        return np.argsort(codes.astype(np.uint8), kind="stable")
    if distinct <= 65536:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


def rows_by_code(codes: np.ndarray, distinct: int) -> list[np.ndarray]:
    """The positions (ascending) of the rows of each code ``0 .. distinct - 1``, in code order."""
    return list(np.split(stable_order(codes, distinct), np.cumsum(np.bincount(codes, minlength=distinct))[:-1]))


def _field_folders(column: pa.ChunkedArray | pa.Array, name: str, *, hive_style: bool,
                   url_encode: bool) -> tuple[list[str], np.ndarray]:
    """The distinct folder names of one partition field and each row's code into them.

    The values are hashed once (an integer or a short text, a few ns a row) and every text
    rule (Hudi's default partition for null and empty values, url-encoding, ``field=``) runs
    on the distinct values alone."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    encoded = array.dictionary_encode()  # a null value has a null index
    texts: list[str | None] = _cast_text(encoded.dictionary).to_pylist()
    folders = [t or DEFAULT_PARTITION for t in texts]
    if encoded.indices.null_count:
        folders.append(DEFAULT_PARTITION)  # the code of the null values
    if url_encode:
        folders = [escape_value(f) for f in folders]
    if hive_style:
        folders = [f"{name}={f}" for f in folders]
    codes = pc.fill_null(encoded.indices, len(texts)).to_numpy(zero_copy_only=False).astype(np.int64)
    return folders, codes


def partition_paths(
    table: pa.Table | pa.RecordBatch, fields: Sequence[str], *, hive_style: bool, url_encode: bool = False
) -> PartitionPaths:
    """The partition path of every row of ``table`` (same rules as the Spark engine), as codes
    into the distinct paths: the rows are hashed once per field, the texts made once per path."""
    n = table.num_rows
    if not fields:
        return PartitionPaths(pa.array([""], pa.string()), np.zeros(n, dtype=np.int32))
    folders, codes = _field_folders(table.column(fields[0]), fields[0], hive_style=hive_style,
                                    url_encode=url_encode)
    per_field = [folders]
    # Each distinct combination of the fields so far, as its code into each field's folders.
    combination = [np.arange(len(folders))]
    for name in fields[1:]:
        more, more_codes = _field_folders(table.column(name), name, hive_style=hive_style, url_encode=url_encode)
        # Two codes in one: fewer than 2^31 combinations times 2^31 folders fit an int64.
        encoded = pa.array(codes * len(more) + more_codes).dictionary_encode()
        pairs = encoded.dictionary.to_numpy()
        combination = [c[pairs // len(more)] for c in combination] + [pairs % len(more)]
        per_field.append(more)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    paths = ["/".join(parts) for parts in zip(*(
        [f[i] for i in c.tolist()] for f, c in zip(per_field, combination, strict=True)), strict=True)]
    # Two codes may name one path (a null and an empty value are both the default partition).
    distinct = dict.fromkeys(paths)
    if len(distinct) == len(paths):
        return PartitionPaths(pa.array(paths, pa.string()), codes.astype(np.int32))
    number = {p: i for i, p in enumerate(distinct)}
    renumber = np.array([number[p] for p in paths], dtype=np.int32)
    return PartitionPaths(pa.array(list(distinct), pa.string()), renumber[codes])


def partition_path_array(
    table: pa.Table | pa.RecordBatch, fields: Sequence[str], *, hive_style: bool, url_encode: bool = False
) -> pa.Array:
    """The partition path of every row of ``table`` (:func:`partition_paths`)."""
    if not fields:
        return pa.repeat(pa.scalar("", pa.string()), table.num_rows)
    return partition_paths(table, fields, hive_style=hive_style, url_encode=url_encode).array()


def may_hold_byte(text: pa.ChunkedArray | pa.Array, byte: int) -> bool:
    """Whether some value of a string column may hold ``byte`` (an ASCII character; False:
    surely none does): a scan of the values' bytes, about 30 times faster than matching each
    value, that may also see bytes of a null value's slot (the caller then matches values)."""
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    for chunk in chunks:
        if not (pa.types.is_string(chunk.type) or pa.types.is_binary(chunk.type)) or len(chunk) == 0:
            if len(chunk):
                return True  # another layout (large or view strings): the values decide
            continue
        _, offsets_buffer, data_buffer = chunk.buffers()
        if data_buffer is None:
            continue
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=len(chunk) + 1, offset=4 * chunk.offset)
        data = np.frombuffer(data_buffer, dtype=np.uint8)[offsets[0]:offsets[-1]]
        if (data == byte).any():
            return True
    return False


def text_matches_spark(field_type: pa.DataType) -> bool:
    """Whether Arrow's text form of a value of this type equals Spark's ``cast(x as string)``.

    True for integers and strings. Keys of the other types come from Spark's expressions, which
    define their text for a Spark write (a timestamp's by its Spark type, format/record_key.py).
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
