"""A Spark job's Python tasks failing, typed: what Spark brings back of a task's exception is
text, so the errors tidemark can name are recognised in it.

* Workers that cannot import tidemark (or one of its dependencies): their Python is not the one
  tidemark is installed in (a session created without ``PYSPARK_PYTHON``, workers without the
  package): :class:`~tidemark.errors.WorkerDependencyError`, saying how to point them at it.
* A task that found a base file damaged raised :class:`~tidemark.errors.CorruptDataFileError`:
  the same error again, on the driver.

Other failures pass as Spark raised them (an early conflict is recognised where the write
collects its tasks' results: :func:`tidemark.engines.spark.stats.run_stats_job`).
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator

from tidemark.errors import CorruptDataFileError, TidemarkError, WorkerDependencyError

# The modules a tidemark task imports (tidemark's own code and what it runs on): a worker
# missing one of them cannot run any of its tasks. (A user's function missing its own module
# is the user's failure, left as Spark raised it.)
_TASK_MODULES = frozenset({"tidemark", "pyarrow", "numpy", "fastavro"})
_MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
# CorruptDataFileError's message, as the task's traceback ends with it (one line).
_CORRUPT = re.compile(
    r"tidemark\.errors(?:\.\w+)?\.CorruptDataFileError: the data file (.+?) is corrupt \((.*)\)\. Restore the file"
)


def typed_task_failure(failure: BaseException) -> TidemarkError | None:
    """The typed error a Spark job's ``failure`` stands for (see the module), or None."""
    text = str(failure)
    missing = _MISSING_MODULE.search(text)
    if missing is not None and missing.group(1).split(".")[0] in _TASK_MODULES:
        return WorkerDependencyError(missing.group(1), sys.executable)
    corrupt = _CORRUPT.search(text)
    if corrupt is not None:
        return CorruptDataFileError(corrupt.group(1), corrupt.group(2))
    return None


@contextlib.contextmanager
def typed_task_failures() -> Iterator[None]:
    """Raise a Spark job's failure that :func:`typed_task_failure` recognises as that error (its
    cause: Spark's); TidemarkErrors and other failures pass."""
    try:
        yield
    except TidemarkError:
        raise
    except Exception as failure:
        typed = typed_task_failure(failure)
        if typed is None:
            raise
        raise typed from failure


__all__ = ["typed_task_failure", "typed_task_failures"]
