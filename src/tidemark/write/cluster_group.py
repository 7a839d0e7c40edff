"""Rewriting one clustering group in pure pyarrow: what one Spark task (or the Arrow engine) does.

The slices of a group are read, aligned to the table schema, and written into
``num_output_groups`` new file groups of about equal rows: streamed a batch at a
time, or (with sort columns) read whole and sorted in memory. Rows
keep their ``_hoodie_commit_time`` and ``_hoodie_commit_seqno`` (clustering
changes where a record lives, not when it was written: incremental readers must
not see it as a change); only ``_hoodie_file_name`` is set to the new file.
Every file gets its marker first, as in every other write.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.errors import CorruptDataFileError
from tidemark.format.clustering_plan import ClusteringGroup
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import FILE_NAME, base_file_name, join_partition, new_file_id
from tidemark.format.parquet_file import read_data_file
from tidemark.markers import IOType
from tidemark.markers.direct import DirectMarkerWriter
from tidemark.write.column_encoding import parquet_options
from tidemark.write.file_group import ROW_GROUP_ROWS, RowGroupBuffer, WriteSpec
from tidemark.write.footer import FooterKeys


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
    """All rows of ``group`` in memory, sorted by the sort columns (needed to sort them)."""
    storage = spec.write.storage()
    schema = spec.write.schema
    pieces = [
        _aligned(read_data_file(storage.open_input(s.data_file_path), path=s.data_file_path), schema)
        for s in group.slices
    ]
    rows = pa.concat_tables(pieces) if pieces else schema.empty_table()
    if spec.sort_columns:
        rows = rows.sort_by([(c, "ascending") for c in spec.sort_columns])
    return rows


def _batches(spec: ClusterSpec, group: ClusteringGroup) -> Iterator[pa.Table]:
    """The rows of ``group`` in order, a record batch at a time (memory: one batch)."""
    if spec.sort_columns:
        yield read_group(spec, group)
        return
    storage = spec.write.storage()
    for s in group.slices:
        with _damaged_as_corrupt(s.data_file_path):
            batches = pq.ParquetFile(storage.open_input(s.data_file_path)).iter_batches(batch_size=65_536)
            for batch in batches:
                yield _aligned(pa.Table.from_batches([batch]), spec.write.schema)


def _rows_in(spec: ClusterSpec, group: ClusteringGroup) -> int:
    storage = spec.write.storage()
    total = 0
    for s in group.slices:
        with _damaged_as_corrupt(s.data_file_path):
            total += pq.read_metadata(storage.open_ranged(s.data_file_path)).num_rows  # the footer only
    return total


@contextlib.contextmanager
def _damaged_as_corrupt(path: str) -> Iterator[None]:
    """A file that is not readable parquet raises CorruptDataFileError naming it (a gone one stays
    FileNotFoundError: the clustering then lost to a concurrent clean or rollback)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        text = str(exc)
        raise CorruptDataFileError(path, text.splitlines()[0] if text else type(exc).__name__) from None


class _Output:
    """One new file group of the clustering, written batch by batch."""

    def __init__(self, spec: ClusterSpec, partition: str, token: str) -> None:
        self.spec = spec
        self.partition = partition
        self.file_id = new_file_id()
        self.name = base_file_name(self.file_id, token, spec.write.instant_time)
        self.rel_path = join_partition(partition, self.name)
        storage = spec.write.storage()
        # A service writes direct markers: no marker server runs for it.
        DirectMarkerWriter(storage, spec.write.instant_time).create(self.rel_path, IOType.CREATE)
        self.output = storage.open_output(self.rel_path)
        self.full = self.output.sink
        self.writer: pq.ParquetWriter | None = None  # opened with the first rows, which pick the encodings
        self.rows = 0
        self._name_index = spec.write.schema.get_field_index(FILE_NAME)
        self._buffer = RowGroupBuffer()  # row groups of a useful size, as bulk inserts write them
        self._footer = FooterKeys(spec.write)

    def write(self, rows: pa.Table) -> None:
        self.rows += rows.num_rows
        full = self._buffer.add(rows)
        if full is not None:
            self._write(full)

    def _flush(self) -> None:
        rows = self._buffer.take()
        if rows is not None:
            self._write(rows)

    def _write(self, rows: pa.Table) -> None:
        name = pa.repeat(pa.scalar(self.name, pa.string()), rows.num_rows)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.full, self.spec.write.schema, **parquet_options(self.spec.write, rows))
        self.writer.write_table(rows.set_column(self._name_index, FILE_NAME, name), row_group_size=ROW_GROUP_ROWS)
        self._footer.add(rows)

    def close(self, started: float) -> WriteStat:
        self._flush()
        if self.writer is None:  # a group that received no rows still gets its (empty) file
            self.writer = pq.ParquetWriter(self.full, self.spec.write.schema, **parquet_options(self.spec.write))
        self.writer.add_key_value_metadata(self._footer.footer(self.spec.write.schema))
        self.writer.close()
        # Hudi counts clustered records as inserts into the new file groups.
        return WriteStat.new_file(self.partition, self.file_id, self.rel_path, rows=self.rows,
                                  file_size=self.output.commit(),
                                  write_time_ms=int((time.monotonic() - started) * 1000))


def rewrite_group(spec: ClusterSpec, group: ClusteringGroup, *, token: str) -> list[WriteStat]:
    """Write the rows of ``group`` into ``num_output_groups`` new file groups of about equal rows.

    Without sort columns the rows stream through a batch at a time; with them the
    group is sorted in memory (``max.bytes.per.group`` bounds it).
    """
    started = time.monotonic()
    total = _rows_in(spec, group)
    outputs = max(1, min(group.num_output_groups, total))
    per_file = max(1, -(-total // outputs))  # ceil
    stats: list[WriteStat] = []
    current: _Output | None = None
    for rows in _batches(spec, group):
        offset = 0
        while offset < rows.num_rows:
            if current is None:
                current = _Output(spec, group.partition_path, token)
            take = min(rows.num_rows - offset, per_file - current.rows)
            current.write(rows.slice(offset, take))
            offset += take
            if current.rows >= per_file:
                stats.append(current.close(started))
                current = None
    if current is not None:
        stats.append(current.close(started))
    if not stats:  # a group of empty files: one empty file group keeps the plan's shape
        stats.append(_Output(spec, group.partition_path, token).close(started))
    return stats
