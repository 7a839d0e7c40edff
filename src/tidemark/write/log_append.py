"""Merge-on-read file-group writes: append a log file instead of rewriting the base file.

What one task does for one existing file group of a deltacommit: upserts become
one Avro data block (the five meta columns set as in a base file, with
``_hoodie_commit_time`` = the deltacommit), deletes one delete block, both in a
new log file ``.<fileId>_<instant>.log.1_<token>`` created after its ``APPEND``
marker. Nothing is read: which record wins is decided when the slice is read
(:mod:`tidemark.read.merge`) or compacted.

A delete keeps its ordering value when it has one and the table has exactly one
ordering field of an integer type (:func:`~tidemark.format.log_file.delete_ordering_field`,
:func:`~tidemark.format.log_file.writes_delete_ordering`): then a stale delete loses
against a newer record, as on copy-on-write. Otherwise (several ordering fields,
another type, or a delete given without its ordering value) it carries Hudi's
"no ordering value" and deletes whatever is stored when it is merged.
"""

from __future__ import annotations

import time

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.commit_metadata import WriteStat
from tidemark.format.log_file import (
    NO_ORDERING_VALUE,
    DeleteRecord,
    avro_data_block,
    delete_block,
    delete_ordering_field,
    encode_block,
    log_file_name,
    parquet_data_block,
    writes_delete_ordering,
)
from tidemark.format.names import PARTITION_PATH, RECORD_KEY, join_partition
from tidemark.markers import IOType, open_marker_writer
from tidemark.merge import OP_COLUMN, OP_DELETE, OP_UPSERT
from tidemark.write.meta_columns import with_meta_columns
from tidemark.write.spec import WriteSpec

LOG_VERSION = 1  # table version 8: every deltacommit writes a new log file of its own


def _delete_ordering_values(deletes: pa.Table, spec: WriteSpec) -> list[int]:
    """The ``orderingVal`` of each delete: its ordering value where the table's one integer ordering
    field has a value in the delete's row, else 0 (Hudi's "no ordering value")."""
    field = delete_ordering_field(spec.ordering_fields)
    if (
        field is None
        or field not in deletes.column_names
        or field not in spec.schema.names
        or not writes_delete_ordering(spec.schema.field(field).type)
    ):
        return [NO_ORDERING_VALUE] * deletes.num_rows
    # Deletes come with the column as the caller gave it (only keys and ordering values are kept).
    values = pc.cast(deletes.column(field), pa.int64())
    return pc.fill_null(values, NO_ORDERING_VALUE).to_pylist()


def append_log_file(
    spec: WriteSpec,
    incoming: pa.Table,
    *,
    partition_path: str,
    file_id: str,
    base_file: str,
    token: str,
    task_partition: int,
) -> WriteStat:
    """Append the batch's upserts and deletes of one file group as a new log file."""
    assert spec.log_schema is not None
    started = time.monotonic()
    storage = spec.storage()
    name = log_file_name(file_id, spec.instant_time, LOG_VERSION, token)
    rel_path = join_partition(partition_path, name)
    markers = open_marker_writer(storage, spec.instant_time, spec.markers)
    try:
        markers.create(rel_path, IOType.APPEND)
    finally:
        markers.close()

    ops = incoming.column(OP_COLUMN)
    upserts = incoming.filter(pc.equal(ops, OP_UPSERT))
    deletes = incoming.filter(pc.equal(ops, OP_DELETE))
    chunks = []
    if upserts.num_rows:
        # Hudi puts the file id, not a file name, in the _hoodie_file_name of log records.
        seq_prefix = f"{spec.instant_time}_{task_partition}"
        rows = with_meta_columns(upserts, spec.schema, spec.instant_time, file_id, seq_prefix)
        if spec.log_block_format == "parquet":
            codec = "none" if spec.compression in ("none", "uncompressed") else spec.compression
            block = parquet_data_block(spec.instant_time, spec.log_schema, rows, compression=codec)
        else:
            block = avro_data_block(spec.instant_time, spec.log_schema, rows)
        chunks.append(encode_block(block))
    if deletes.num_rows:
        keys = deletes.column(RECORD_KEY).to_pylist()
        parts = deletes.column(PARTITION_PATH).to_pylist()
        ordering = _delete_ordering_values(deletes, spec)
        records = [
            DeleteRecord(k, p if p is not None else partition_path, o)
            for k, p, o in zip(keys, parts, ordering, strict=True)
        ]
        chunks.append(encode_block(delete_block(spec.instant_time, spec.log_schema, records)))
    # A new log file per write (never appended to): one atomic put on object stores.
    output = storage.open_output(rel_path)
    if isinstance(output.sink, str):
        with open(output.sink, "wb") as f:
            f.write(b"".join(chunks))
    else:
        output.sink.write(b"".join(chunks))
    size = output.commit()
    base_name = base_file.rsplit("/", 1)[-1]
    return WriteStat(
        partition_path=partition_path,
        file_id=file_id,
        path=rel_path,
        prev_commit=base_name.rsplit("_", 1)[-1].removesuffix(".parquet"),
        num_writes=upserts.num_rows + deletes.num_rows,
        num_inserts=0,
        num_updates=upserts.num_rows,
        num_deletes=deletes.num_rows,
        file_size=size,
        total_write_time_ms=int((time.monotonic() - started) * 1000),
        base_file=base_name,
        log_files=(name,),
        log_version=LOG_VERSION,
        log_offset=0,
    )
