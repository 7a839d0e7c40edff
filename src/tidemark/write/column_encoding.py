"""How a base file's columns are encoded: which get a dictionary, which the codec, which statistics.

The choices are made from a sample of the rows, once per write where the engine has the whole
batch (the Arrow engine: :func:`with_encoding_choice`), else per file from its first rows; they
never change what a reader reads, only what writing (and reading) the file costs.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.names import COMMIT_SEQNO, FILE_NAME, META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.write.spec import WriteSpec

# Sequence numbers and record keys are unique per row: trying a dictionary for them is wasted
# work. Min/max statistics of the sequence number, file name and partition path serve no
# reader. (Record key and commit time keep theirs: readers prune by them.)
_NO_DICTIONARY = {COMMIT_SEQNO, RECORD_KEY}
_NO_STATISTICS = {COMMIT_SEQNO, FILE_NAME, PARTITION_PATH}

# A dictionary is tried only for columns whose first rows repeat values: for mostly distinct
# values (ids, amounts, timestamps, free text) the writer builds one, finds it too large and
# falls back to plain encoding, which costs about as much as encoding the column again.
SAMPLE_ROWS = 10_000

# A plain-encoded column gets the codec only if the codec shrinks its sampled values by at least
# this share. Random ids (UUIDs, hashes, tokens) do not shrink under snappy or lz4 (their pages
# then shrink by their 4-byte length prefixes only, ~10 %), yet compressing them is the most
# expensive part of encoding them: 88 ms per million UUIDs, where writing them takes 52 ms.
MIN_COMPRESSION_GAIN = 1 / 8
# Fewer sampled bytes than this are no evidence: the column keeps the codec.
MIN_SAMPLE_BYTES = 4096


def codec(name: str) -> str:
    """pyarrow's name of the codec ``hoodie.parquet.compression.codec`` names."""
    return "none" if name in ("none", "uncompressed") else name


def _repeats_values(column: pa.ChunkedArray) -> bool:
    sample = column.slice(0, SAMPLE_ROWS)
    if len(sample) == 0 or pa.types.is_nested(sample.type):
        return True  # nothing to judge by: the writer's own fallback decides
    try:  # unique, not count_distinct: the same count at half the cost (per column of every file)
        distinct = len(pc.unique(sample))
    except pa.ArrowNotImplementedError:  # a type without a hash kernel
        return True
    return 2 * distinct <= len(sample)


def dictionary_columns(schema: pa.Schema, rows: pa.Table | None = None) -> tuple[str, ...]:
    """The columns of ``schema`` worth a dictionary: every column but the unique meta columns,
    less the user columns whose values in ``rows`` (a sample, if known) are mostly distinct.
    (The partition path is one value per base file: always a dictionary.)"""
    chosen = [n for n in schema.names if n not in _NO_DICTIONARY]
    if rows is not None:
        chosen = [n for n in chosen
                  if n not in rows.column_names or n in META_COLUMNS or _repeats_values(rows.column(n))]
    return tuple(chosen)


def _values(array: pa.Array) -> pa.Buffer | None:
    """The bytes of ``array``'s values as plain encoding lays them out (without the lengths of
    strings), or None for a type whose values are not one buffer (nested, dictionary, boolean)."""
    kind = array.type
    buffers = array.buffers()
    if pa.types.is_string(kind) or pa.types.is_binary(kind) or pa.types.is_large_string(kind) \
            or pa.types.is_large_binary(kind):
        if buffers[2] is None:
            return None
        wide = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
        offset_type = np.int64 if wide else np.int32
        width = np.dtype(offset_type).itemsize
        offsets = np.frombuffer(buffers[1], dtype=offset_type, count=len(array) + 1, offset=array.offset * width)
        return buffers[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if pa.types.is_nested(kind) or pa.types.is_dictionary(kind) or pa.types.is_boolean(kind) \
            or len(buffers) != 2 or buffers[1] is None:
        return None
    try:
        width = kind.bit_width // 8
    except ValueError:  # not a fixed-width type
        return None
    return buffers[1].slice(array.offset * width, len(array) * width) if width else None


def _codec_pays(column: pa.ChunkedArray, name: str) -> bool:
    """Whether ``name`` shrinks the values of ``column`` (a sample) by MIN_COMPRESSION_GAIN."""
    values = _values(column.slice(0, SAMPLE_ROWS).combine_chunks())
    if values is None or values.size < MIN_SAMPLE_BYTES:
        return True
    try:
        compressed = pa.compress(values, codec=name, asbytes=True)
    except (pa.ArrowNotImplementedError, ValueError):  # a codec pyarrow cannot run by itself
        return True
    return len(compressed) <= (1 - MIN_COMPRESSION_GAIN) * values.size


def uncompressed_columns(
    schema: pa.Schema, codec_name: str, dictionary: tuple[str, ...], rows: pa.Table | None = None
) -> tuple[str, ...]:
    """The columns of ``schema`` written without the codec: the plain-encoded ones (not in
    ``dictionary``) whose values in ``rows`` (a sample, if known) the codec barely shrinks."""
    name = codec(codec_name)
    if rows is None or name == "none":
        return ()
    chosen = set(dictionary)
    return tuple(n for n in schema.names
                 if n not in chosen and n in rows.column_names and not _codec_pays(rows.column(n), name))


def leaf_paths(field: pa.Field) -> list[str]:
    """The paths of the parquet columns ``field`` is stored as (pyarrow's compliant nested
    layout: ``name.list.element``, ``name.key_value.key``, ``name.child``), which is how
    per-column writer options name them."""
    kind = field.type
    if pa.types.is_dictionary(kind):
        return leaf_paths(pa.field(field.name, kind.value_type))
    if pa.types.is_map(kind):
        return [f"{field.name}.key_value.{p}"
                for child in (pa.field("key", kind.key_type), pa.field("value", kind.item_type))
                for p in leaf_paths(child)]
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind) \
            or pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        return [f"{field.name}.list.{p}" for p in leaf_paths(pa.field("element", kind.value_type))]
    if pa.types.is_struct(kind):
        return [f"{field.name}.{p}" for i in range(kind.num_fields) for p in leaf_paths(kind.field(i))]
    return [field.name]


def parquet_options(spec: WriteSpec, rows: pa.Table | None = None) -> dict[str, object]:
    """Writer options for a base file. The columns that get a dictionary, and those written
    without the codec, are the write's choice (``spec.dictionary_columns``,
    ``spec.uncompressed_columns``), else chosen from ``rows`` (the file's first rows, if known).
    The options are a function of those choices alone, made once for each (walking every
    column's leaves cost ~60 µs for each of a hundred files of one write); each caller gets a
    dict of its own over them, which it must not change in place."""
    chosen = spec.dictionary_columns if spec.dictionary_columns is not None else dictionary_columns(spec.schema, rows)
    plain = spec.uncompressed_columns if spec.uncompressed_columns is not None else \
        uncompressed_columns(spec.schema, spec.compression, tuple(chosen), rows)
    return dict(_options(spec.schema, spec.compression, tuple(chosen), tuple(plain)))


@functools.lru_cache(maxsize=64)
def _options(schema: pa.Schema, compression: str, chosen: tuple[str, ...], plain: tuple[str, ...]) -> dict[str, object]:
    name = codec(compression)
    return {
        # Per column, every leaf named: a codec given per column has no default for the others.
        "compression": {path: "none" if f.name in plain else name for f in schema for path in leaf_paths(f)}
        if plain else name,
        "use_dictionary": list(chosen),
        "write_statistics": [n for n in schema.names if n not in _NO_STATISTICS],
    }


def stored_dictionaries(spec: WriteSpec, stored: pq.FileMetaData | None = None) -> tuple[str, ...]:
    """The user columns of strings a rewrite writes as dictionaries: those the write
    dictionary-encodes (``spec.dictionary_columns``, when chosen). With ``stored``, the footer of
    the file it rewrites: those of them the file stores dictionary-encoded in every row group,
    which the rewrite reads as dictionaries. Read as the file's dictionary pages, their stored
    rows are neither decoded to strings nor hashed again by the writer (the pieces of a row
    group are given one dictionary), and the split of the stored rows copies their indices only;
    a column the file stores plain (its values too many to repeat) is read as strings, not
    hashed into a dictionary of every stored value."""
    if spec.dictionary_columns is None:
        return ()
    chosen = set(spec.dictionary_columns)
    names = tuple(f.name for f in spec.schema if f.name in chosen and f.name not in META_COLUMNS
                  and f.type == pa.string())
    if stored is None or not names:
        return names
    at = {stored.schema.column(i).path: i for i in range(stored.num_columns)}
    return tuple(name for name in names if name in at and all(
        _DICTIONARY_ENCODINGS & set(stored.row_group(g).column(at[name]).encodings)
        for g in range(stored.num_row_groups)))


# The encodings of a column chunk's data pages that refer to its dictionary page.
_DICTIONARY_ENCODINGS = {"RLE_DICTIONARY", "PLAIN_DICTIONARY"}


def with_encoding_choice(spec: WriteSpec, batch: pa.Table) -> WriteSpec:
    """``spec`` with the write's dictionary and uncompressed columns chosen once from
    ``batch``'s first rows: a write of many small files (a hundred partitions) would otherwise
    sample every file's columns again, which costs about as much as hashing its keys."""
    sample = batch.slice(0, SAMPLE_ROWS)
    chosen = dictionary_columns(spec.schema, sample)
    return replace(spec, dictionary_columns=chosen,
                   uncompressed_columns=uncompressed_columns(spec.schema, spec.compression, chosen, sample))
