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

# A URI's scheme name (``file``, ``s3a``, ...), as a pattern; and a name's scheme with the
# slashes after it (or none).
URI_SCHEME = r"[a-zA-Z][a-zA-Z0-9+.-]*"
_SCHEME = re.compile(rf"^(?:({URI_SCHEME}):)?/*")
# Schemes that name the same store (Spark says ``s3a://`` where the table says ``s3://``).
_STORE = {"s3a": "s3", "s3n": "s3", "gcs": "gs", "azure": "az", "abfs": "az", "abfss": "az"}


def _split(name: str) -> tuple[str | None, str]:
    """``name``'s store (None: no scheme given) and its path as an absolute one: ``s3a://b/t/x``
    is ``("s3", "/b/t/x")``, ``//b/t/x`` ``(None, "/b/t/x")``, ``file:///t/x`` ``("file", "/t/x")``."""
    match = _SCHEME.match(name)
    scheme = match.group(1).lower() if match is not None and match.group(1) else None
    rest = name[match.end():] if match is not None else name
    return (_STORE.get(scheme, scheme) if scheme else None), "/" + rest


def table_file_named(storage: Storage, name: str) -> str | None:
    """The table-relative path of the file ``name`` names (an absolute path, or a URI of the
    table's store in any of its schemes), or None for a file outside the table."""
    base_store, base = _split(storage.full_path(""))
    store, path = _split(name)
    if store is not None and store != (base_store or "file"):
        return None
    base = base.rstrip("/") + "/"
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


__all__ = ["URI_SCHEME", "table_file_named", "unreadable_data_file"]
