"""Reading a table's parquet data files, with a damaged file reported as such.

pyarrow raises ``ArrowInvalid`` (or an ``OSError``) for a file that is not parquet or was
cut short; a user must get :class:`~tidemark.errors.CorruptDataFileError` naming the file
instead. A missing file still raises ``FileNotFoundError``: callers decide what a file
removed meanwhile (by clean) means.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.dataset as ds
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
) -> pa.Table:
    """The rows of one parquet data file (a local name, or one from Storage.open_input).

    ``path`` (relative to the table) names it in errors.

    Raises CorruptDataFileError if the file is not readable parquet, FileNotFoundError if it is gone.
    """
    try:
        return pq.read_table(full_path, schema=schema, columns=list(columns) if columns is not None else None)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise _corrupt(exc, path or str(full_path)) from None


def _corrupt(exc: BaseException, where: str) -> CorruptDataFileError:
    """The typed error for a data file pyarrow could not read (the first line of its message)."""
    text = str(exc)
    return CorruptDataFileError(where, text.splitlines()[0] if text else type(exc).__name__)


def iter_data_file(
    full_path: DataSource,
    *,
    path: str | None = None,
    schema: pa.Schema,
    batch_size: int,
) -> Iterator[pa.Table]:
    """The rows of one parquet data file as tables of at most ``batch_size`` rows, read as
    ``schema`` (absent columns null, types cast, as :func:`read_data_file` with a schema).

    Pages are decoded as the batches are taken, so a file is never held decoded whole.
    Raises CorruptDataFileError as :func:`read_data_file` does.
    """
    try:
        # Without pre-buffering: it would hold a whole row group's column chunks in memory at once.
        form = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=False))
        if isinstance(full_path, str):
            fragment = form.make_fragment(full_path, filesystem=pafs.LocalFileSystem())
        else:
            fragment = form.make_fragment(full_path)
        # No read-ahead: the scanner would otherwise decode many slices ahead of the consumer.
        for batch in fragment.to_batches(schema=schema, columns=schema.names, batch_size=batch_size,
                                         batch_readahead=0, fragment_readahead=0):
            yield pa.Table.from_batches([batch], schema=schema)
    except FileNotFoundError:
        raise
    except (pa.ArrowInvalid, OSError) as exc:
        raise _corrupt(exc, path or str(full_path)) from None
