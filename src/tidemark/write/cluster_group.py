"""Rewriting one clustering group in pure pyarrow: what one Spark task (or the Arrow engine) does.

The slices of a group are read, aligned to the table schema, optionally sorted,
and written into ``num_output_groups`` new file groups of about equal rows. Rows
keep their ``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` (clustering
changes where a record lives, not when it was written: incremental readers must
not see it as a change); only ``_hoodie_file_name`` is set to the new file.
Every file gets its marker first, as in every other write.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import FILE_NAME, base_file_name, join_partition, new_file_id
from tidemark.storage import LocalStorage
from tidemark.write.file_group import WriteSpec, parquet_options
from tidemark.write.markers import IOType, create_marker


@dataclass(frozen=True)
class ClusterSpec:
    """Everything a task needs to rewrite groups of one clustering; picklable."""

    write: WriteSpec  # base path, clustering instant, file schema (meta + user columns), codec
    sort_columns: tuple[str, ...]


def _aligned(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: older files may lack columns added since."""
    n = table.num_rows
    arrays = []
    for field in schema:
        if field.name in table.column_names:
            column = table.column(field.name)
            arrays.append(column.cast(field.type) if column.type != field.type else column)
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def read_group(spec: ClusterSpec, group: ClusteringGroup) -> pa.Table:
    storage = LocalStorage(spec.write.base_path)
    schema = spec.write.schema
    pieces = [_aligned(pq.read_table(storage.full_path(s.data_file_path)), schema) for s in group.slices]
    rows = pa.concat_tables(pieces) if pieces else schema.empty_table()
    if spec.sort_columns:
        rows = rows.sort_by([(c, "ascending") for c in spec.sort_columns])
    return rows


def rewrite_group(spec: ClusterSpec, group: ClusteringGroup, *, token: str) -> list[WriteStat]:
    """Write the rows of ``group`` into new file groups; return their statistics."""
    started = time.monotonic()
    rows = read_group(spec, group)
    storage = LocalStorage(spec.write.base_path)
    partition = group.partition_path
    outputs = max(1, min(group.num_output_groups, rows.num_rows or 1))
    per_file = -(-rows.num_rows // outputs) if rows.num_rows else 0  # ceil
    stats: list[WriteStat] = []
    name_index = spec.write.schema.get_field_index(FILE_NAME)
    for i in range(outputs):
        chunk = rows.slice(i * per_file, per_file) if per_file else rows
        if chunk.num_rows == 0 and i > 0:
            break
        file_id = new_file_id()
        name = base_file_name(file_id, token, spec.write.instant_time)
        rel_path = join_partition(partition, name)
        create_marker(storage, spec.write.instant_time, rel_path, IOType.CREATE)
        chunk = chunk.set_column(name_index, FILE_NAME, pa.repeat(pa.scalar(name, pa.string()), chunk.num_rows))
        full = storage.full_path(rel_path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        pq.write_table(chunk, full, **parquet_options(spec.write))
        stats.append(
            WriteStat(
                partition_path=partition,
                file_id=file_id,
                path=rel_path,
                prev_commit=None,
                num_writes=chunk.num_rows,
                # Hudi counts clustered records as inserts into the new file groups.
                num_inserts=chunk.num_rows,
                num_updates=0,
                num_deletes=0,
                file_size=os.path.getsize(full),
                total_write_time_ms=int((time.monotonic() - started) * 1000),
            )
        )
    return stats
