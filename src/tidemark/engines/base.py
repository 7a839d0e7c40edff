"""The engine seam: what ``Table`` asks of an engine, chosen once when a table is opened.

An engine runs the data-parallel work and nothing else: the write pipeline (the client in
:mod:`tidemark.write.client` runs the write and the commit protocol), reads of a read plan,
and the executors of compaction and clustering (the services in :mod:`tidemark.services`
plan, lock and commit). Two engines implement it: :class:`~tidemark.engines.arrow.engine.ArrowEngine`
(in this process, on pyarrow tables) and :class:`~tidemark.engines.spark.engine.SparkEngine`
(Spark jobs; a Spark Connect session can be a variant of it). ``Table`` never asks which one
it has.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any, Protocol
from urllib.parse import unquote

import pyarrow as pa

from tidemark.config import WriteConfig
from tidemark.errors import DataFileNotFoundError, TidemarkError
from tidemark.merge import RecordMerger
from tidemark.read.plan import ReadPlan
from tidemark.recovery.named_files import URI_SCHEME
from tidemark.services.cluster import ClusteringExecutor
from tidemark.services.compaction import SliceRunner
from tidemark.storage import Storage
from tidemark.write.engine import TableLayout, WritePipelines

__all__ = ["Engine", "missing_data_files", "read_failure_problem", "typed_engine_errors"]


class Engine(Protocol):
    """Arrow or Spark: the write pipelines, the reader, and the services' executors."""

    @property
    def session(self) -> Any:
        """The engine's session (a SparkSession), or None for the in-process engine."""

    def pipelines(self, layout: TableLayout, config: WriteConfig) -> WritePipelines[Any]:
        """One table's writes: its batches, and a new pipeline for each write (pipelines hold
        per-write state). Typed over the engine's frame (see :mod:`tidemark.write.engine`)."""

    def write_session(self) -> contextlib.AbstractContextManager[None]:
        """The engine's settings for the span of one write, and its errors made typed: a data
        file the write found gone raises :class:`DataFileNotFoundError`
        (:func:`typed_engine_errors`)."""

    def read(
        self,
        storage: Storage,
        plan: ReadPlan,
        schema: pa.Schema | None,
        *,
        merger: RecordMerger | None,
        delete_ordering_field: str | None,
    ) -> Any:
        """The rows of ``plan`` as the engine's frame (meta columns, then user columns)."""

    def frame(self, rows: pa.Table) -> Any:
        """A small pyarrow table computed in this process, as the engine's frame."""

    def slice_runner(self) -> SliceRunner | None:
        """How compaction runs its file slices (None: one after the other in this process)."""

    def clustering_executor(self) -> ClusteringExecutor:
        """How clustering rewrites its groups."""


# A parquet path in an engine's error message (a Spark job's FAILED_READ_FILE.FILE_NOT_EXIST).
_PARQUET_PATH = re.compile(r"(?:file:)?/[^\s'\"]+?\.parquet")
# A Spark job's failure to read a file it was given, naming it by its URI (percent-encoded: no
# space in it); and Spark's or parquet's words for a footer it could not read.
_FAILED_READ = re.compile(r"\[FAILED_READ_FILE\.(\w+)\][^\n]*? reading file (\S+?)\.?(?=\s|$)")
_FOOTER = re.compile(r"CANNOT_READ_FILE_FOOTER|Could not read footer")
# The exceptions a Java stack trace ends with, the root cause last.
_CAUSE = re.compile(r"Caused by: ([\w.$]+): ([^\n]+)")
# A root cause that is the file's: its bytes are not parquet as the reader expects them (not a
# connection reset, an out-of-memory or a cancelled job, which leave the file as it was).
_DAMAGE = re.compile(r"parquet|magic number|snappy|compress|thrift|TProtocol|EOFException|corrupt", re.IGNORECASE)


def _named_by_spark(text: str) -> list[str]:
    """The files a Spark job's FAILED_READ_FILE names, their URIs decoded (``%20`` a space)."""
    return [unquote(m.group(2)) for m in _FAILED_READ.finditer(text)]


def missing_data_files(failure: BaseException) -> tuple[str, ...]:
    """The data files an engine's error names: a FileNotFoundError's file, or the parquet paths
    in the message of an error an engine raises in its own words (a Spark job's Java exception
    reaches Python as text only: its FAILED_READ_FILE's URI first, decoded)."""
    if isinstance(failure, FileNotFoundError) and failure.filename:
        return (str(failure.filename),)
    text = str(failure)
    # pyarrow's FileNotFoundError (a streamed read of a base file) names the file in its text only.
    named = tuple(dict.fromkeys([*_named_by_spark(text), *(m.group(0) for m in _PARQUET_PATH.finditer(text))]))
    if named or not isinstance(failure, FileNotFoundError) or not failure.args:
        return named
    return (str(failure.args[0]),)


def read_failure_problem(failure: BaseException) -> str | None:
    """What kept an engine from reading a data file that is there, in its words: the root cause
    of a Spark job's FAILED_READ_FILE.NO_HINT (Spark's wrapper of the reader's exception) or of a
    footer it could not read, when that cause is the file's bytes. None for any other failure:
    a file not found (gone, not damaged), a schema the file does not match
    (PARQUET_COLUMN_DATA_TYPE_MISMATCH), a failure of the connection or the job."""
    text = str(failure)
    failed = _FAILED_READ.search(text)
    if failed is not None and failed.group(1) != "NO_HINT" or failed is None and _FOOTER.search(text) is None:
        return None
    if "FileNotFoundException" in text:
        return None
    causes = _CAUSE.findall(text)
    if causes and not any(_DAMAGE.search(f"{kind}: {words}") for kind, words in causes):
        return None
    problem = causes[-1][1] if causes else ""
    for path in _named_by_spark(text):  # the file's own name, as the cause may repeat it
        bare = re.sub(f"^{URI_SCHEME}:", "", path).lstrip("/")
        problem = re.sub(f"(?:{URI_SCHEME}:)?/*{re.escape(bare)}:?\\s*", "", problem)
    problem = problem.strip()
    return (problem or (f"FAILED_READ_FILE.{failed.group(1)}" if failed else "its footer could not be read"))[:300]


@contextlib.contextmanager
def typed_engine_errors() -> Iterator[None]:
    """Raise an engine's error that names data files as :class:`DataFileNotFoundError` (the
    write decides whether a file was superseded, or is there but damaged: its ``problem``);
    TidemarkErrors and other errors pass."""
    try:
        yield
    except TidemarkError:
        raise
    except Exception as failure:
        paths = missing_data_files(failure)
        if not paths:
            raise
        raise DataFileNotFoundError(paths, failure, read_failure_problem(failure)) from failure
