"""Hudi's five meta columns on the records a write produces: written once, for base files
(:mod:`tidemark.write.file_group`) and log blocks (:mod:`tidemark.write.log_append`) alike.

``_hoodie_commit_time`` is the write's instant, ``_hoodie_commit_seqno`` is
``<instant>_<task>_<n>``, ``_hoodie_record_key`` and ``_hoodie_partition_path`` come with
the rows, and ``_hoodie_file_name`` is the base file's name (Hudi puts the file id there in
log records: the caller passes what belongs).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import COMMIT_SEQNO, COMMIT_TIME, FILE_NAME, PARTITION_PATH, RECORD_KEY


def constant(value: str, n: int) -> pa.Array:
    """``n`` times the string ``value``."""
    return pa.repeat(pa.scalar(value, pa.string()), n)


def sequence_numbers(prefix: str, start: int, n: int) -> pa.Array:
    """``<prefix>_<start>``, ``<prefix>_<start+1>``, ... computed in Arrow, not per row in Python."""
    numbers = pc.cast(pa.array(np.arange(start, start + n, dtype=np.int64)), pa.string())
    return pc.binary_join_element_wise(prefix, numbers, "_")


def with_meta_columns(
    rows: pa.Table, schema: pa.Schema, instant_time: str, file_name: str, seq_prefix: str, start: int = 0
) -> pa.Table:
    """``rows`` as records of ``schema`` (meta columns + user columns) written by ``instant_time``:
    commit time, sequence numbers from ``<seq_prefix>_<start>``, record key and partition path
    as strings, ``file_name`` in every row; user columns cast to the schema, absent ones null."""
    n = rows.num_rows
    meta = {
        COMMIT_TIME: constant(instant_time, n),
        COMMIT_SEQNO: sequence_numbers(seq_prefix, start, n),
        RECORD_KEY: rows.column(RECORD_KEY).cast(pa.string()),
        PARTITION_PATH: rows.column(PARTITION_PATH).cast(pa.string()),
        FILE_NAME: constant(file_name, n),
    }
    arrays = []
    for field in schema:
        if field.name in meta:
            arrays.append(meta[field.name])
        elif field.name in rows.column_names:
            arrays.append(rows.column(field.name).cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
