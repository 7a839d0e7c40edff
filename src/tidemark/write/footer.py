"""The footer Hudi expects in every base file: the record keys' bloom filter and range, the Avro schema.

Hudi's bloom index reads ``org.apache.hudi.bloomfilter``, ``hoodie_min_record_key`` and
``hoodie_max_record_key`` from each candidate file before it joins keys; Hudi's Avro
readers look for ``parquet.avro.schema``. tidemark writes all of them, in Hudi's form, into
every base file (bulk insert, upsert rewrites, compaction, clustering), so Hudi's writers
sharing the lake can index tidemark's files, and tidemark can prune files by them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.bloom import (
    DEFAULT_NUM_ENTRIES,
    FOOTER_KEY,
    MAX_KEY_KEY,
    MIN_KEY_KEY,
    TYPE_CODE_KEY,
    BloomBuilder,
    BloomFilter,
    BloomFilterError,
    counts_keys,
    footer_metadata,
    range_footer,
    with_added_keys,
)
from tidemark.format.names import RECORD_KEY
from tidemark.format.schema import file_avro_schema_json
from tidemark.write.meta_columns import arrow_schema_entry, stored_schema
from tidemark.write.spec import WriteSpec

AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITE_BUFFER = 1 << 20
WRITER_MODEL_KEY = "writer.model.name"


def base_file_footer(
    record_keys: pa.Array | pa.ChunkedArray,
    schema: pa.Schema,
    table_name: str,
    *,
    bloom_filter: bool = True,
    bloom: BloomBuilder | None = None,
) -> dict[str, str]:
    """Footer entries for a base file of ``schema`` holding ``record_keys`` in file order
    (``bloom_filter``: hoodie.parquet.bloom.filter.enabled; ``bloom``: a builder already given the keys)."""
    keys = record_keys.combine_chunks() if isinstance(record_keys, pa.ChunkedArray) else record_keys
    footer = footer_metadata(keys.cast(pa.string()), with_filter=bloom_filter, bloom=bloom)
    return with_avro_schema(footer, schema, table_name)


def with_avro_schema(footer: dict[str, str], schema: pa.Schema, table_name: str) -> dict[str, str]:
    """``footer`` with the file's Avro schema, as parquet-avro writes it (when it has one)."""
    try:
        footer[AVRO_SCHEMA_KEY] = file_avro_schema_json(schema, table_name)
        footer[WRITER_MODEL_KEY] = "avro"
    except ValueError:  # a type without an Avro form: the file stays readable, only Avro readers lack it
        pass
    return footer


def write_base_file(rows: pa.Table, full_path: str | pa.NativeFile, spec: WriteSpec, **options: Any) -> None:
    """Write ``rows`` as one parquet base file with Hudi's footer.

    The footer goes in as key-value metadata at close, not as schema metadata: pyarrow would
    also copy schema metadata into its own serialized schema, storing the filter twice.
    """
    footer = FooterKeys(spec)
    footer.add(rows)  # hashed on a thread of its own while the rows are encoded
    sink, stream = buffered_sink(full_path)  # the writer closed first, then the stream under it
    with contextlib.nullcontext() if stream is None else stream, \
            pq.ParquetWriter(sink, rows.schema, **options) as writer:
        writer.write_table(rows)
        writer.add_key_value_metadata(footer.footer(rows.schema))


class BaseFileWriter:
    """Writes one base file in pieces (each piece of ``spec.schema``), Hudi's footer added at close.

    The writer opens with the first rows written: ``options`` (a function of those rows) picks
    the encodings. Small pieces are held until they make half of ``min_rows`` (or the file
    closes) and go out as one row group: a small file's kept rows, merged rows and new rows
    become one row group and one write, not three. Only the footer's keys are kept until close.

    Row groups are encoded on a thread of their own while the caller prepares the next (a
    rewrite reads and filters the stored file's next slice; the footer is made while the last
    one is encoded), but for a file of one row group: at most one row group is in flight, and
    an encoding's failure is raised by the next write or by :meth:`close`. Use it as a context
    manager, or call :meth:`close`: leaving the ``with`` block by an exception waits for the row
    group in flight (nothing writes to the sink after).

    ``stored`` and ``stored_range``: what the base file a rewrite replaces brings to the footer
    (:class:`FooterKeys`). ``dictionaries``: user columns of strings the pieces bring as
    dictionaries (:func:`~tidemark.write.meta_columns.stored_schema`).
    """

    def __init__(
        self, sink: str | pa.NativeFile, spec: WriteSpec, options: Any, min_rows: int = 0,
        stored: StoredFilter | None = None, stored_range: tuple[str, str] | None = None,
        dictionaries: Sequence[str] = (),
    ) -> None:
        self._sink = sink
        self._spec = spec
        self._options = options
        self._min_rows = min_rows
        self._dictionary_columns = tuple(dictionaries)
        # What the pieces are given as (file name: a dictionary; see stored_schema).
        self.schema = stored_schema(spec.schema, self._dictionary_columns)
        self._dictionaries = any(pa.types.is_dictionary(f.type) for f in self.schema)
        self._writer: pq.ParquetWriter | None = None
        self._stream: pa.NativeFile | None = None  # the buffered file a local path is written through
        self._footer = FooterKeys(spec, stored, stored_range)
        self._held: list[pa.Table] = []
        self._held_rows = 0
        self._encoder = RowGroupEncoder()
        self.rows = 0

    def __enter__(self) -> BaseFileWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self._encoder.stop(raise_failure=exc[0] is None)
        finally:
            if self._stream is not None and not self._stream.closed:  # left by an exception
                abandon_file(self._writer, self._stream)

    def _open(self, rows: pa.Table | None) -> pq.ParquetWriter:
        sink, self._stream = buffered_sink(self._sink)
        return open_base_file(sink, self._spec.schema, self._options(rows), self._dictionary_columns)

    def write(self, rows: pa.Table, stored_rows: int = 0) -> None:
        """Write ``rows``; their first ``stored_rows`` hold keys of the base file this one
        replaces (see ``stored`` of :class:`FooterKeys`)."""
        if rows.num_rows == 0:
            return
        if rows.schema != self.schema:  # a piece with the file name as plain strings
            rows = rows.cast(self.schema)
        self._footer.add(rows, stored_rows)  # hashed on a thread of its own while the rows are encoded
        self.rows += rows.num_rows
        self._held.append(rows)
        self._held_rows += rows.num_rows
        if 2 * self._held_rows >= self._min_rows:  # a slice of a large file goes out as it is
            self._flush(last=False)

    def write_stored(self, rows: pa.Table) -> None:
        """Write ``rows`` that all hold keys of the base file this one replaces."""
        self.write(rows, rows.num_rows)

    def _flush(self, *, last: bool) -> None:
        if not self._held:
            return
        rows = self._held[0] if len(self._held) == 1 else pa.concat_tables(self._held)
        if self._dictionaries:
            rows = one_dictionary_each(rows)
        self._held, self._held_rows = [], 0
        first = self._writer is None
        if self._writer is None:
            self._writer = self._open(rows)
        if first and last:  # a small file's one row group: no thread to hand it to
            self._writer.write_table(rows)
        else:
            self._encoder.submit(self._writer, rows)

    def close(self) -> None:
        try:
            self._flush(last=True)
            footer = self._footer.footer(self._spec.schema)  # while the last row group is encoded
            self._encoder.settle()
        finally:
            self._encoder.stop(raise_failure=False)
        if self._writer is None:  # no rows: an empty file of the schema
            self._writer = self._open(None)
        self._writer.add_key_value_metadata(footer)
        self._writer.close()
        if self._stream is not None:  # the writer leaves a stream it was given open: the last bytes out
            self._stream.close()


def one_dictionary_each(rows: pa.Table) -> pa.Table:
    """``rows`` with each dictionary column's chunks sharing one dictionary of the values its
    rows hold, and no other.

    One dictionary: the parquet writer keeps a column chunk's dictionary encoding only while
    every piece brings the dictionary it began with, and writes the rest plain (the new rows'
    commit time after the stored rows' ones). Only the values held: the writer stores the
    dictionary it is given as the chunk's dictionary page, whole, and a rewrite's stored rows
    come with the stored file's page, values of rows deleted or replaced since included, which
    would otherwise stay in every later version of the file (a deleted value must leave the
    file; and the page would grow with every value a column ever held).
    """
    at = [i for i, f in enumerate(rows.schema) if pa.types.is_dictionary(f.type)]
    if not at:
        return rows
    if any(rows.column(i).num_chunks > 1 for i in at):
        rows = rows.unify_dictionaries()
    for i in at:
        column = rows.column(i)
        if column.num_chunks == 0:
            continue
        dictionary = column.chunk(0).dictionary
        if len(dictionary) == 1 and column.null_count < len(column):
            continue  # its one value is held (a file's name, its partition path)
        used = np.zeros(len(dictionary), dtype=bool)
        for chunk in column.chunks:
            indices = chunk.indices
            if indices.null_count == 0:  # the indices as they are: a count, no hash table
                used |= np.bincount(indices.to_numpy(), minlength=len(dictionary)) > 0
            else:
                used[pc.unique(indices).drop_null().to_numpy(zero_copy_only=False)] = True
        if used.all():
            continue
        kept = np.flatnonzero(used)
        renumbered = np.full(len(dictionary), -1, dtype=np.int32)
        renumbered[kept] = np.arange(len(kept), dtype=np.int32)
        index_of, values = pa.array(renumbered), dictionary.take(pa.array(kept))
        chunks = [pa.DictionaryArray.from_arrays(pc.take(index_of, chunk.indices).cast(chunk.indices.type), values)
                  for chunk in column.chunks]
        rows = rows.set_column(i, rows.schema.field(i), pa.chunked_array(chunks, column.type))
    return rows


class RowGroupEncoder:
    """Encodes row groups on a thread of its own, one at a time, while the caller prepares the
    next (pyarrow's encoding releases the GIL): at most one row group is in flight.

    :meth:`submit` waits for the one before; an encoding's failure is raised by the next
    :meth:`submit`, :meth:`settle` or :meth:`stop`. :meth:`stop` must be called once the file is
    done or abandoned: nothing writes to the sink after it returns.
    """

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._in_flight: Future[None] | None = None
        self.in_flight_bytes = 0  # the in-memory size of the row group in flight (0: none)

    def submit(self, writer: pq.ParquetWriter, rows: pa.Table) -> None:
        self.settle()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tidemark-encode")
        self._in_flight = self._pool.submit(writer.write_table, rows)
        self.in_flight_bytes = rows.nbytes

    def settle(self, *, raise_failure: bool = True) -> None:
        """Wait for the row group in flight; its failure is raised if ``raise_failure``."""
        in_flight, self._in_flight = self._in_flight, None
        self.in_flight_bytes = 0
        failure = in_flight.exception() if in_flight is not None else None
        if failure is not None and raise_failure:
            raise failure

    def stop(self, *, raise_failure: bool) -> None:
        """Wait for the row group in flight (its failure raised if ``raise_failure``), end the thread."""
        try:
            self.settle(raise_failure=raise_failure)
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None


def buffered_sink(sink: str | pa.NativeFile) -> tuple[pa.NativeFile, pa.NativeFile | None]:
    """Where a base file's parquet writer writes for ``sink`` (a local path, or a stream an
    object store's output gives), and the stream the caller must close once the writer is closed
    (a writer leaves a stream it was given open; None: the output's own). A local path goes
    through a buffer: pyarrow's writer on a path issues a system call and a seek for every page
    and footer part (~40 per small file), through the buffer one per WRITE_BUFFER bytes."""
    if isinstance(sink, str):
        stream = pa.output_stream(sink, buffer_size=WRITE_BUFFER)
        return stream, stream
    return sink, None


def abandon_file(writer: pq.ParquetWriter | None, stream: pa.NativeFile | None) -> None:
    """End a base file left by an exception: its writer closed first (its footer written, as its
    garbage collection would), then the stream of :func:`buffered_sink` under it; a failure of
    either is the exception's, already raised. (The stream closed under an open writer would make
    the writer's own close, at garbage collection, fail noisily.)"""
    with contextlib.suppress(Exception):
        if writer is not None:
            writer.close()
    with contextlib.suppress(Exception):
        if stream is not None:
            stream.close()


def open_base_file(
    sink: str | pa.NativeFile, schema: pa.Schema, options: dict[str, Any], dictionaries: Sequence[str] = ()
) -> pq.ParquetWriter:
    """A parquet writer for a base file of ``schema`` given rows of :func:`stored_schema` (the
    per-file constant meta columns and ``dictionaries`` as dictionaries); the file's
    ``ARROW:schema`` entry says ``schema``, as pyarrow would write it, so every reader sees the
    columns' own types."""
    writer = pq.ParquetWriter(sink, stored_schema(schema, dictionaries), **{**options, "store_schema": False})
    writer.add_key_value_metadata(arrow_schema_entry(schema))
    return writer


@dataclass(frozen=True)
class StoredFilter:
    """The bloom filter in the footer of the base file a rewrite replaces, and the number of
    rows (keys) it was built from."""

    bloom: BloomFilter
    keys: int


def stored_filter(metadata: pq.FileMetaData) -> StoredFilter | None:
    """The bloom filter of a base file from its parquet metadata; None when it has none, or one
    that cannot be carried into a rewrite (unreadable, or not the filter of the file's row count
    in tidemark's and Hudi's sizing, :func:`~tidemark.format.bloom.counts_keys`: the rewrite
    builds anew)."""
    kv = metadata.metadata or {}
    text = kv.get(FOOTER_KEY.encode())
    if text is None:
        return None
    try:
        bloom = BloomFilter.parse(text, kv.get(TYPE_CODE_KEY.encode(), b"").decode())
    except BloomFilterError:
        return None
    return StoredFilter(bloom, metadata.num_rows) if counts_keys(bloom, metadata.num_rows) else None


def stored_key_range(metadata: pq.FileMetaData) -> tuple[str, str] | None:
    """The record-key range a base file's footer states (``hoodie_min_record_key``,
    ``hoodie_max_record_key``), or None when it states none, or one of non-ASCII keys (a Java
    writer orders those by UTF-16 code units, tidemark by code points: the two orders part
    between supplementary characters and U+E000..U+FFFF)."""
    kv = metadata.metadata or {}
    low, high = kv.get(MIN_KEY_KEY.encode()), kv.get(MAX_KEY_KEY.encode())
    if low is None or high is None or not (low.isascii() and high.isascii()):
        return None
    return low.decode(), high.decode()


class FooterKeys:
    """Collects the record keys of a base file written in pieces, for its footer at close.

    The keys' bloom filter is built on threads of their own as pieces arrive (``spec.hash_threads``:
    two when the write has a core to spare): numpy and pyarrow release the GIL, so hashing
    overlaps with encoding the rows.

    ``stored``: the filter of the base file a rewrite replaces (:func:`stored_filter`); the
    caller marks which keys it writes are the stored file's. Then only the other keys are
    hashed, onto the stored filter:

    * a stored file of 60,000 keys or more (the sizing no longer depends on the count): the new
      keys are hashed as they come, placed after the stored ones; the filter is the one Hudi
      builds for the stored keys in their order, then the new ones (as its merge writes them).
      If the rewrite drops stored keys (deletes), the filter still holds them: no key is ever
      missed, a dropped one only tests positive; its count then differs from the file's rows,
      so the file's next rewrite builds its filter anew.
    * a smaller one: the keys are kept, not hashed; at close, when every stored key was written
      again and the file's sizing is the stored filter's, the filter is the stored one with the
      new keys added (:func:`~tidemark.format.bloom.with_added_keys`: the same bytes as a build
      of the file's keys, a fraction of the hashing); otherwise it is built from the kept keys.
      A file that grows past one filter row stops keeping keys and hashes them as they come.

    ``stored_range``: the key range of the base file a rewrite replaces (:func:`stored_key_range`),
    given only when the rewrite writes every one of its keys again: the range of the keys marked
    as stored is then that one, not found again (a min and max over every string of the file).
    """

    def __init__(
        self, spec: WriteSpec, stored: StoredFilter | None = None, stored_range: tuple[str, str] | None = None
    ) -> None:
        self.table_name = table_name_of(spec.base_path, spec.table_name)
        self.bloom_filter = spec.bloom_filter
        self._threads = max(1, spec.hash_threads)
        # The key range, kept as pieces arrive: holding every key until close would cost the
        # keys' bytes again (45 MB for a million UUIDs), and a copy of them to find the range.
        self._min_key: str | None = None
        self._max_key: str | None = None
        self._bloom = BloomBuilder() if spec.bloom_filter else None
        self._hasher: ThreadPoolExecutor | None = None
        self._hashing: list[Future[None]] = []
        self._stored = stored if spec.bloom_filter else None
        # A large stored filter takes the new keys as they come (nothing kept: see the class).
        self._streaming = self._stored is not None and self._stored.keys >= DEFAULT_NUM_ENTRIES
        if self._streaming:
            assert self._stored is not None
            self._bloom = BloomBuilder.resuming(self._stored.bloom, self._stored.keys)
            self._stored = None
        self._kept: list[tuple[pa.Array, int]] = []  # while carrying: (keys, how many lead ones are stored)
        self._kept_count = 0
        self._stored_range = stored_range

    def add(self, rows: pa.Table, stored_rows: int = 0) -> None:
        """Count in the keys of ``rows`` (written in this order); the first ``stored_rows`` of
        them are keys of the stored base file."""
        chunks = [c for c in rows.column(RECORD_KEY).chunks if len(c)]
        if not chunks:
            return
        keys = pa.chunked_array(chunks, pa.string())
        if self._stored_range is not None and stored_rows:  # the stored keys' range is known
            self._widen(*self._stored_range)
            fresh = keys.slice(stored_rows)
            if len(fresh):
                self._widen_by(fresh)
        else:
            self._widen_by(keys)
        if self._bloom is None:
            return
        whole = keys.combine_chunks()
        if self._streaming:  # the stored keys are in the stored filter already
            if stored_rows < len(whole):
                self._hash(whole.slice(stored_rows))
            return
        if self._stored is not None:
            self._kept.append((whole, stored_rows))
            self._kept_count += len(whole)
            if self._kept_count <= DEFAULT_NUM_ENTRIES:
                return
            self._stored = None  # more than one row: the kept keys are hashed as any others
            kept, self._kept = self._kept, []
            for piece, _ in kept:
                self._hash(piece)
            return
        self._hash(whole)

    def _widen_by(self, keys: pa.ChunkedArray) -> None:
        bounds = pc.min_max(keys)
        self._widen(bounds["min"].as_py(), bounds["max"].as_py())

    def _widen(self, low: str, high: str) -> None:
        # Python orders str by code point, which is UTF-8's byte order: the order Hudi compares in.
        self._min_key = low if self._min_key is None or low < self._min_key else self._min_key
        self._max_key = high if self._max_key is None or high > self._max_key else self._max_key

    def _hash(self, keys: pa.Array) -> None:
        assert self._bloom is not None
        if self._hasher is None:
            self._hasher = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="tidemark-bloom")
        # The keys are counted in here, in file order; their bits are set on the hashing threads,
        # in pieces that may run side by side (a key's place in the filter is fixed by its count).
        step = -(-len(keys) // self._threads)
        for start in range(0, len(keys), step):
            for place in self._bloom.reserve(keys.slice(start, step)):
                self._hashing.append(self._hasher.submit(place))

    def _carried(self) -> BloomFilter | None:
        """The stored filter with the new keys added, if it is this file's (see the class)."""
        stored = self._stored
        if stored is None or sum(n for _, n in self._kept) != stored.keys:
            return None
        new = [keys.slice(n) for keys, n in self._kept if n < len(keys)]
        added = pa.concat_arrays(new) if new else pa.array([], pa.string())
        return with_added_keys(stored.bloom, added, self._kept_count)

    def footer(self, schema: pa.Schema) -> dict[str, str]:
        """The footer of a file of ``schema`` holding the keys added."""
        bloom: BloomBuilder | BloomFilter | None = self._bloom
        if self._stored is not None:
            carried = self._carried()
            if carried is not None:
                bloom = carried
            else:
                for keys, _ in self._kept:
                    self._hash(keys)
            self._kept = []
        try:
            for done in self._hashing:
                done.result()
        finally:
            if self._hasher is not None:
                self._hasher.shutdown(wait=True)
                self._hasher = None
        footer = {} if self._min_key is None or self._max_key is None else range_footer(
            self._min_key, self._max_key, bloom if self.bloom_filter else None)
        return with_avro_schema(footer, schema, self.table_name)


def table_name_of(base_path: str, table_name: str = "") -> str:
    """The name Hudi's Avro record is named after: the table's, else its folder's."""
    return table_name or base_path.rstrip("/").rsplit("/", 1)[-1] or "table"
