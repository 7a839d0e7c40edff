"""Reading a table's parquet data files, with a damaged file reported as such.

pyarrow raises ``ArrowInvalid`` (or an ``OSError``) for a file that is not parquet or was
cut short; a user must get :class:`~tidemark.errors.CorruptDataFileError` naming the file
instead. A missing file still raises ``FileNotFoundError``: callers decide what a file
removed meanwhile (by clean) means.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from tidemark.errors import CorruptDataFileError
from tidemark.storage.base import DataSource


def read_data_file(
    full_path: DataSource,
    *,
    path: str | None = None,
    schema: pa.Schema | None = None,
    columns: Sequence[str] | None = None,
    metadata: pq.FileMetaData | None = None,
) -> pa.Table:
    """The rows of one parquet data file (a local name, or one from Storage.open_input).

    ``path`` (relative to the table) names it in errors; ``metadata``: its footer, if the
    caller read it already (:func:`read_file_metadata`).

    Raises CorruptDataFileError if the file is not readable parquet, FileNotFoundError if it is gone.
    """
    wanted = list(columns) if columns is not None else None
    # One column of a local file (a lookup's record keys): no pre-buffering (a copy of what a
    # local read gets anyway) and no threads (pyarrow decodes a column on one): ~0.15 ms less
    # per file, which a lookup over a hundred small files pays a hundred times.
    one_local_column = wanted is not None and len(wanted) == 1 and isinstance(full_path, str)
    try:
        stored = pq.ParquetFile(full_path, metadata=metadata, pre_buffer=not one_local_column)
        quick = _read_directly(stored, schema, wanted, use_threads=not one_local_column)
        if quick is not None:
            return quick
        if not isinstance(full_path, str):
            full_path.seek(0)
        return pq.read_table(full_path, schema=schema, columns=wanted)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise _corrupt(exc, path or str(full_path)) from None


def _read_directly(
    stored: pq.ParquetFile, schema: pa.Schema | None, columns: list[str] | None, *, use_threads: bool = True
) -> pa.Table | None:
    """The file's rows read straight from its reader, or None when pyarrow's dataset layer is
    needed (a column type to cast, a requested column the file lacks: it raises for those).

    The direct read avoids importing pyarrow.dataset, which loads pandas (~45 MiB) into a
    process that may never need it.
    """
    stored_schema = stored.schema_arrow  # built anew on every access
    names = stored_schema.names
    if schema is None:
        if columns is not None and not set(columns) <= set(names):
            return None
        return stored.read(columns=columns, use_threads=use_threads)
    wanted = [schema.field(c) for c in columns] if columns is not None else list(schema)
    present = [f for f in wanted if f.name in names]
    if any(stored_schema.field(f.name).type != f.type for f in present):
        return None
    rows = stored.read(columns=[f.name for f in present], use_threads=use_threads)
    arrays = [rows.column(f.name) if f.name in names else pa.nulls(rows.num_rows, f.type) for f in wanted]
    return pa.Table.from_arrays(arrays, schema=pa.schema(wanted, metadata=schema.metadata))


def _corrupt(exc: BaseException, where: str) -> CorruptDataFileError:
    """The typed error for a data file pyarrow could not read (the first line of its message)."""
    text = str(exc)
    return CorruptDataFileError(where, text.splitlines()[0] if text else type(exc).__name__)


# Bytes read at a time from a column chunk while a file streams through (pages are ~1 MB).
STREAM_BUFFER = 1 << 20


def iter_data_file(
    full_path: DataSource,
    *,
    path: str | None = None,
    schema: pa.Schema,
    batch_size: int,
    metadata: pq.FileMetaData | None = None,
) -> Iterator[pa.Table]:
    """The rows of one parquet data file as tables of at most ``batch_size`` rows, read as
    ``schema`` (absent columns null, types cast, as :func:`read_data_file` with a schema).
    ``metadata``: the file's, if the caller read it already (:func:`read_file_metadata`).

    Pages are decoded as the batches are taken, so a file is never held decoded whole.
    Raises CorruptDataFileError as :func:`read_data_file` does.
    """
    try:
        # Pages read through a buffered stream, without pre-buffering: either would otherwise
        # hold a whole row group's column chunks in memory at once (pyarrow's dataset scanner
        # decodes a row group's columns ahead of the batches: ~4x the slice's size).
        stored: pq.ParquetFile | None = None
        if metadata is None:
            stored = pq.ParquetFile(full_path, pre_buffer=False, buffer_size=STREAM_BUFFER)
            metadata = stored.metadata
        stored_schema = metadata.schema.to_arrow_schema()
        present = [f for f in schema if f.name in stored_schema.names]
        # String columns asked for as dictionaries come straight from the file's dictionary pages:
        # no string decoded, nothing hashed again (a base file's commit times, its partition path).
        as_dictionary = [f.name for f in present if _dictionary_of_strings(f.type)
                         and stored_schema.field(f.name).type == f.type.value_type]
        if any(stored_schema.field(f.name).type != f.type for f in present if f.name not in as_dictionary):
            plain = pa.schema([f.with_type(f.type.value_type) if _dictionary_of_strings(f.type) else f for f in schema],
                              metadata=schema.metadata)
            for piece in _iter_by_dataset(full_path, plain, batch_size):  # evolved types: the scanner casts
                yield piece.cast(schema)
            return
        if as_dictionary or stored is None:  # opened once, with the dictionaries it is to keep
            stored = pq.ParquetFile(full_path, metadata=metadata, pre_buffer=False, buffer_size=STREAM_BUFFER,
                                    read_dictionary=as_dictionary or None)
        names = [f.name for f in present]
        for batch in stored.iter_batches(batch_size=batch_size, columns=names, use_threads=False):
            columns = [batch.column(f.name) if f.name in names else pa.nulls(batch.num_rows, f.type) for f in schema]
            yield pa.Table.from_arrays(columns, schema=schema)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise _corrupt(exc, path or str(full_path)) from None


def read_file_metadata(full_path: DataSource, *, path: str | None = None) -> pq.FileMetaData:
    """The parquet metadata (footer) of one data file. Raises CorruptDataFileError as
    :func:`read_data_file` does, FileNotFoundError if the file is gone."""
    try:
        return pq.read_metadata(full_path)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise _corrupt(exc, path or str(full_path)) from None


def _dictionary_of_strings(data_type: pa.DataType) -> bool:
    return pa.types.is_dictionary(data_type) and data_type.value_type == pa.string()


def _iter_by_dataset(full_path: DataSource, schema: pa.Schema, batch_size: int) -> Iterator[pa.Table]:
    """:func:`iter_data_file` through pyarrow's dataset scanner, which casts evolved column types."""
    import pyarrow.dataset as ds  # only here: importing it loads pandas (~45 MiB, 0.2 s)

    options = ds.ParquetFragmentScanOptions(pre_buffer=False, use_buffered_stream=True, buffer_size=STREAM_BUFFER)
    form = ds.ParquetFileFormat(default_fragment_scan_options=options)
    if isinstance(full_path, str):
        fragment = form.make_fragment(full_path, filesystem=pafs.LocalFileSystem())
    else:
        full_path.seek(0)
        fragment = form.make_fragment(full_path)
    # No read-ahead: the scanner would otherwise decode many slices ahead of the consumer.
    for batch in fragment.to_batches(schema=schema, columns=schema.names, batch_size=batch_size,
                                     batch_readahead=0, fragment_readahead=0):
        yield pa.Table.from_batches([batch], schema=schema)
