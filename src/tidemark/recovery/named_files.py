"""The table's files that an engine's failure names, and what a failure to read one means.

An engine reports a data file it could not read in its own words: a Spark job's Java exception
reaches Python as text (``file:///...``, ``s3a://...``), pyarrow names the path it was given.
:func:`table_file_named` maps such a name to the table-relative path it is, whatever its
scheme; :func:`unreadable_data_file` types a read failure of a file that is there as the
damage it is (:class:`~tidemark.errors.CorruptDataFileError`). A file that is gone instead is
:func:`tidemark.recovery.clean.superseded_base_file`'s to explain.
"""

from __future__ import annotations

import re

from tidemark.errors import CorruptDataFileError, DataFileNotFoundError
from tidemark.storage import Storage

# A URI's scheme and the slashes after it: ``file:``, ``file://``, ``s3a://``, ... (or none).
_SCHEME = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:)?/*")


def _path_part(name: str) -> str:
    """``name`` without its scheme, as an absolute path: ``s3a://b/t/x`` and ``//b/t/x`` are ``/b/t/x``."""
    return "/" + _SCHEME.sub("", name)


def table_file_named(storage: Storage, name: str) -> str | None:
    """The table-relative path of the file ``name`` (an absolute path or a URI of any scheme:
    Spark says ``s3a://`` where the table says ``s3://``) names, or None for a file outside the
    table."""
    base = _path_part(storage.full_path("")).rstrip("/") + "/"
    path = _path_part(name)
    return path[len(base):] if path.startswith(base) and len(path) > len(base) else None


def unreadable_data_file(storage: Storage, failure: DataFileNotFoundError) -> CorruptDataFileError | None:
    """The damage behind an engine's failure to read a data file of the table that is there
    (``failure.problem``: the engine's words for what kept it from reading), or None when the
    failure was not a read's, or names no such file (a file gone is not damage)."""
    if failure.problem is None:
        return None
    for name in failure.paths:
        path = table_file_named(storage, name)
        if path is not None and storage.exists(path):
            return CorruptDataFileError(path, failure.problem)
    return None


__all__ = ["table_file_named", "unreadable_data_file"]
