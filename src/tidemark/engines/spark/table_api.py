"""The Table API, handed to the data source's writers.

``df.write.format("tidemark")`` and the streaming sink create and write tables through
:class:`tidemark.Table`, yet the data source lives in the Spark engine, a layer below the
Table API. ``tidemark.table`` therefore hands the class over here when it is imported;
importing any part of tidemark (Spark's Python workers import the data source's module)
imports the package first, and with it ``tidemark.table``, so the hand-over has always
happened before a writer asks. No PySpark here: ``tidemark.table`` imports this module.
"""

from __future__ import annotations

from typing import Any

_table_class: Any = None


def provide_table_api(table_class: Any) -> None:
    """Called once by ``tidemark.table`` with the ``Table`` class."""
    global _table_class
    _table_class = table_class


def table_api() -> Any:
    """The ``Table`` class (RuntimeError if ``tidemark.table`` was never imported, which importing
    ``tidemark`` rules out)."""
    if _table_class is None:  # pragma: no cover - importing tidemark.engines imports tidemark first
        raise RuntimeError("tidemark.table was not imported: import tidemark before using its data source")
    return _table_class
