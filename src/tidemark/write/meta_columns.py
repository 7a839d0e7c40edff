"""Hudi's five meta columns on the records a write produces: written once, for base files
(:mod:`tidemark.write.file_group`) and log blocks (:mod:`tidemark.write.log_append`) alike.

``_hoodie_commit_time`` is the write's instant, ``_hoodie_commit_seqno`` is
``<instant>_<task>_<n>``, ``_hoodie_record_key`` and ``_hoodie_partition_path`` come with
the rows, and ``_hoodie_file_name`` is the base file's name (Hudi puts the file id there in
log records: the caller passes what belongs).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Collection

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY


def constant(value: str, n: int) -> pa.Array:
    """``n`` times the string ``value``, its buffers built with numpy (``pa.repeat`` of a string
    copies the value row by row: 40 ms per million rows, for every meta column of every file)."""
    data = value.encode()
    if n == 0 or len(data) * n >= 2**31:
        return pa.repeat(pa.scalar(value, pa.string()), n)
    offsets = np.arange(0, (n + 1) * len(data), len(data), dtype=np.int32) if data else np.zeros(n + 1, np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


def constant_dictionary(value: str, n: int) -> pa.DictionaryArray:
    """``n`` times ``value`` as a dictionary array of one entry: the parquet writer stores it as
    its dictionary page plus run-length indices without hashing ``n`` strings, and nothing
    builds ``n`` copies of the value (80 MB for a million rows of a base file's name)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, dtype=np.int32)), pa.array([value], pa.string()))


# The base files' meta columns that hold one value per file (a write's new rows: one commit
# time; a file group: one partition), given to the parquet writer as dictionary arrays: the
# writer's dictionary encoding of a million equal strings costs about twice as much.
DICTIONARY_COLUMNS = (COMMIT_TIME, PARTITION_PATH, FILE_NAME)
_DICTIONARY_TYPE = pa.dictionary(pa.int32(), pa.string())


def stored_schema(schema: pa.Schema, dictionaries: Collection[str] = ()) -> pa.Schema:
    """The schema a base file's writer is given for rows of ``schema``: the per-file constant
    meta columns as dictionaries, and the string columns ``dictionaries`` (a rewrite's, read
    from the stored file's dictionary pages: :func:`~tidemark.write.column_encoding.stored_dictionaries`).
    The file says ``schema`` (:func:`arrow_schema_entry`)."""
    for name in (*DICTIONARY_COLUMNS, *dictionaries):
        at = schema.get_field_index(name)
        if at >= 0 and schema.field(at).type == pa.string():
            schema = schema.set(at, schema.field(at).with_type(_DICTIONARY_TYPE))
    return schema


@functools.lru_cache(maxsize=64)  # every base file of a write asks for the same one
def _arrow_schema_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


def arrow_schema_entry(schema: pa.Schema) -> dict[str, str]:
    """The ``ARROW:schema`` footer entry pyarrow writes for ``schema`` (base64 of its IPC form):
    written by hand for files whose writer got :func:`stored_schema`, so that Arrow readers
    (pyarrow, hudi-rs) read those columns as the strings they are, not as dictionaries."""
    return {"ARROW:schema": _arrow_schema_text(schema)}


# The last digits of a sequence number come from a table of this many numbers' digits, tiled;
# only the digits above them are computed, once per run of that many numbers.
_LOW_DIGITS = 4
_LOW_TABLE = np.array([list(f"{i:0{_LOW_DIGITS}d}".encode()) for i in range(10**_LOW_DIGITS)], dtype=np.uint8)


def _write_digits(out: np.ndarray, low: int) -> None:
    """Write the decimal digits of ``low``, ``low + 1``, ... into the rows of ``out`` (a
    (numbers, width) uint8 view; every number ``width`` digits long), as ASCII.

    Block copies only: the low digits of consecutive numbers are consecutive rows of a table,
    and the digits above them stay the same for a block of ``10 ** _LOW_DIGITS`` numbers.
    """
    n, width = out.shape
    tail = min(width, _LOW_DIGITS)
    base = 10**tail
    table = _LOW_TABLE[:base, _LOW_DIGITS - tail :]  # 0 .. base - 1, ``tail`` digits each
    at = 0
    while at < n:
        value = low + at
        offset = value % base
        size = min(n - at, base - offset)
        out[at : at + size, width - tail :] = table[offset : offset + size]
        if width > tail:
            out[at : at + size, : width - tail] = np.frombuffer(str(value // base).encode(), dtype=np.uint8)
        at += size


def sequence_numbers(prefix: str, start: int, n: int) -> pa.Array:
    """``<prefix>_<start>``, ``<prefix>_<start+1>``, ... built as bytes with numpy.

    The numbers ascend, so those of one digit count form one run of rows: each run is a
    (rows, width) view of the array's bytes, written in place with the prefix broadcast and
    the digits copied in blocks (:func:`_write_digits`): 15 ms per million, where Arrow's cast
    of integers to text plus a join costs about 250 ms.
    """
    head = np.frombuffer(f"{prefix}_".encode(), dtype=np.uint8)
    if n == 0 or start < 0 or (len(head) + 20) * n >= 2**31:
        numbers = pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)), pa.string())
        return pc.binary_join_element_wise(prefix, numbers, "_")
    runs = []  # (first number, count, digits): the numbers of one digit count
    low, end = start, start + n
    while low < end:
        digits = len(str(low))
        high = min(end, 10**digits)
        runs.append((low, high - low, digits))
        low = high
    lengths = np.concatenate([np.full(count, len(head) + digits, dtype=np.int32) for _, count, digits in runs])
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    at = 0
    for low, count, digits in runs:  # each run written in place: a (count, width) view of the bytes
        width = len(head) + digits
        matrix = data[at : at + count * width].reshape(count, width)
        matrix[:, : len(head)] = head
        _write_digits(matrix[:, len(head) :], low)
        at += count * width
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def with_meta_columns(
    rows: pa.Table, schema: pa.Schema, instant_time: str, file_name: str, seq_prefix: str, start: int = 0,
    partition_path: str | None = None,
) -> pa.Table:
    """``rows`` as records of ``schema`` (meta columns + user columns) written by ``instant_time``:
    commit time, sequence numbers from ``<seq_prefix>_<start>``, record key and partition path
    as strings, ``file_name`` in every row; user columns cast to the schema, absent ones null.
    A meta column the schema types as a dictionary (:func:`stored_schema`) comes as one.
    ``partition_path``: every row's, when the caller knows it (a file group's rows): then the
    rows' own column is not looked at."""
    n = rows.num_rows
    as_dictionary = {f.name for f in schema if pa.types.is_dictionary(f.type)}
    if partition_path is not None and PARTITION_PATH in as_dictionary:
        partition = constant_dictionary(partition_path, n)
    elif partition_path is not None:
        partition = constant(partition_path, n)
    elif PARTITION_PATH in as_dictionary:
        partition = _dictionary_of(rows.column(PARTITION_PATH))
    else:
        partition = _as_string(rows.column(PARTITION_PATH))
    meta = {
        COMMIT_TIME: (constant_dictionary(instant_time, n) if COMMIT_TIME in as_dictionary
                      else constant(instant_time, n)),
        COMMIT_SEQNO: sequence_numbers(seq_prefix, start, n),
        RECORD_KEY: _as_string(rows.column(RECORD_KEY)),
        PARTITION_PATH: partition,
        FILE_NAME: constant_dictionary(file_name, n) if FILE_NAME in as_dictionary else constant(file_name, n),
    }
    arrays = []
    for field in schema:
        if field.name in meta:
            arrays.append(meta[field.name])
        elif field.name in rows.column_names:
            column = rows.column(field.name)
            arrays.append(column if column.type == field.type else column.cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _as_string(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    return column if column.type == pa.string() else column.cast(pa.string())


def _dictionary_of(column: pa.ChunkedArray | pa.Array) -> pa.Array | pa.ChunkedArray:
    """``column`` (strings) as a dictionary array: a one-entry dictionary when every row holds
    the same value (a file group's partition path), else dictionary-encoded."""
    if pa.types.is_dictionary(column.type) and column.type == _DICTIONARY_TYPE and column.null_count == 0:
        dictionary = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if len(dictionary.dictionary) == 1:  # one value already (a bulk_insert's partition slice)
            return dictionary
    text = column.cast(pa.string())
    if len(text) and text.null_count == 0:
        first = text[0].as_py()
        if pc.all(pc.equal(text, first)).as_py():
            return constant_dictionary(first, len(text))
    return pc.dictionary_encode(text)
