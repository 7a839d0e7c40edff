"""tidemark: many concurrent writers, one Apache Hudi (v8) table, from Python and PySpark."""

from tidemark.errors import (
    BaseFileGoneError,
    ClusteringAbortedError,
    ClusteringConflictError,
    CommitError,
    ConfigError,
    CorruptDataFileError,
    CorruptInstantError,
    CorruptPropertiesError,
    CorruptTableError,
    EarlyConflictError,
    HeartbeatExpiredError,
    InstantNotFoundError,
    InvalidInputError,
    LockTimeoutError,
    MissingColumnError,
    MissingDataFileError,
    NotSavepointedError,
    NullRecordKeyError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TidemarkError,
    UnknownOptionError,
    UnsupportedTableError,
    WriteConflictError,
)
from tidemark.services.archive import ArchiveResult
from tidemark.services.clean import CleanResult
from tidemark.services.savepoint import RestoreResult, SavepointResult
from tidemark.table import ClusteringResult, CommitResult, IncrementalResult, Table
from tidemark.timeline import Action, Instant, State

__version__ = "0.1.0"


def register(spark: object) -> None:
    """Make ``spark.read.format("tidemark")`` available in ``spark``.

    Table.create and Table.open with a SparkSession do this for you; call it to
    read with the data source before touching any Table.
    """
    from tidemark.engines.spark.datasource import register as _register

    _register(spark)


def _register_with_active_session() -> None:
    # Only if the user's program already imported pyspark and started a session.
    import sys

    if "pyspark.sql" not in sys.modules:
        return
    try:
        from pyspark.sql import SparkSession

        session = SparkSession.getActiveSession()
        if session is not None:
            register(session)
    except Exception:  # registration is a convenience; never fail the import for it
        pass


_register_with_active_session()

__all__ = [
    "Action",
    "ArchiveResult",
    "BaseFileGoneError",
    "CleanResult",
    "ClusteringAbortedError",
    "ClusteringConflictError",
    "ClusteringResult",
    "CommitError",
    "CommitResult",
    "ConfigError",
    "CorruptDataFileError",
    "CorruptInstantError",
    "CorruptPropertiesError",
    "CorruptTableError",
    "EarlyConflictError",
    "HeartbeatExpiredError",
    "LockTimeoutError",
    "IncrementalResult",
    "Instant",
    "InstantNotFoundError",
    "InvalidInputError",
    "MissingColumnError",
    "MissingDataFileError",
    "NotSavepointedError",
    "NullRecordKeyError",
    "RestoreResult",
    "SavepointResult",
    "SchemaMismatchError",
    "State",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TidemarkError",
    "UnknownOptionError",
    "UnsupportedTableError",
    "WriteConflictError",
    "register",
]
