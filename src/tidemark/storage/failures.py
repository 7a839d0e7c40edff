"""The storage under a table failing to take a write, typed as :class:`StorageError`.

A full disk or quota, a file past the process's size limit, a folder the process may not write,
a read-only or failing disk: an ``OSError`` of the file system or pyarrow with one of
:data:`STORAGE_ERRNOS`. Raised inside :func:`storage_failures_typed` (or a method decorated with
:func:`storage_failures_typed_as`), it becomes a StorageError whose message says what the
failure may have left and what to do; its cause is the ``OSError``. Other errors pass as they
are: an ``OSError`` of another kind (a socket's, ...) says what it is itself.
"""

from __future__ import annotations

import contextlib
import errno
import functools
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

from tidemark.errors import StorageError
from tidemark.storage.base import Storage

# The errors of a file system that cannot take a write.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS,
                            errno.EIO})

_REMEDY = ("Free space on the disk (or raise the process's file-size limit), or let this process write the "
           "table's folder and its files")

F = TypeVar("F", bound=Callable[..., Any])


def storage_failure(storage: Storage, failure: OSError, work: str = "write") -> StorageError:
    """The typed error of ``work`` (``"write"``: a write of rows; else a table service or an
    admin call, named as a noun: ``"compaction"``) whose storage failed with ``failure``. The
    failure may have come after the work completed: the message says how to tell."""
    timeline = f"`tidemark timeline {storage.base_path}`"
    if work == "write":
        message = (
            f"the table's storage failed during the write: {failure}. If the write had not completed, what it "
            "wrote is rolled back (by this write, or, if that failed too, by the next write or `tidemark clean`); "
            f"{timeline} shows whether it completed. {_REMEDY}, then write again if it had not completed (an "
            "insert written twice is stored twice)."
        )
    else:
        message = (
            f"the table's storage failed during the {work}: {failure}. Readers see the table as it was before "
            f"the {work}, or as far as it completed; what it left pending is finished or rolled back when it runs "
            f"again, and {timeline} shows where it stopped. {_REMEDY}, then run the {work} again."
        )
    return StorageError(message, uri=storage.base_path)


def is_storage_failure(error: BaseException) -> bool:
    """Whether ``error`` is a file system's failure to take a write (an ``OSError`` with one of
    :data:`STORAGE_ERRNOS`)."""
    return isinstance(error, OSError) and error.errno in STORAGE_ERRNOS


@contextlib.contextmanager
def storage_failures_typed(storage: Storage, work: str = "write") -> Iterator[None]:
    """Raise a file system's failure to take a write (:func:`is_storage_failure`) as
    :func:`storage_failure`'s StorageError; other errors pass."""
    try:
        yield
    except OSError as failure:
        if not is_storage_failure(failure):
            raise
        raise storage_failure(storage, failure, work) from failure


def storage_failures_typed_as(work: str) -> Callable[[F], F]:
    """Decorate a method of an object with a ``storage`` (a Table): its storage failing is
    raised as :func:`storage_failures_typed` raises it, for ``work``."""

    def decorate(method: F) -> F:
        @functools.wraps(method)
        def typed(self: Any, *args: Any, **kwargs: Any) -> Any:
            with storage_failures_typed(self.storage, work):
                return method(self, *args, **kwargs)

        return cast(F, typed)

    return decorate


__all__ = ["STORAGE_ERRNOS", "is_storage_failure", "storage_failure", "storage_failures_typed",
           "storage_failures_typed_as"]
