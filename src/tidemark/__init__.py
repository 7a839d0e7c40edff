"""tidemark: many concurrent writers, one Apache Hudi (v8) table, from Python and PySpark."""

from tidemark.errors import (
    CommitError,
    ConfigError,
    InstantNotFoundError,
    InvalidInputError,
    MissingColumnError,
    NullRecordKeyError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TidemarkError,
    UnknownOptionError,
    UnsupportedTableError,
    WriteConflictError,
)
from tidemark.table import CommitResult, IncrementalResult, Table
from tidemark.timeline import Action, Instant, State

__version__ = "0.1.0"

__all__ = [
    "Action",
    "CommitError",
    "CommitResult",
    "ConfigError",
    "IncrementalResult",
    "Instant",
    "InstantNotFoundError",
    "InvalidInputError",
    "MissingColumnError",
    "NullRecordKeyError",
    "SchemaMismatchError",
    "State",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TidemarkError",
    "UnknownOptionError",
    "UnsupportedTableError",
    "WriteConflictError",
]
