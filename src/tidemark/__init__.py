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
    InProcessLockError,
    InstantNotFoundError,
    InvalidInputError,
    InvalidPartitionValueError,
    InvalidRecordKeyError,
    LockLostError,
    LockServiceError,
    LockTimeoutError,
    MissingColumnError,
    MissingDataFileError,
    MissingDependencyError,
    NotSavepointedError,
    NullRecordKeyError,
    RolledBackConflictError,
    SchemaConflictError,
    SchemaEvolutionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TableUpgradeRequiredError,
    TidemarkError,
    UnknownOptionError,
    UnsupportedTableError,
    UnsupportedTypeError,
    WriteConflictError,
    WriterAliveError,
    WriterSettingsError,
)
from tidemark.recovery.clean import CleanResult
from tidemark.recovery.savepoint import RestoreResult, SavepointResult
from tidemark.services.archive import ArchiveResult
from tidemark.table import ClusteringResult, CommitResult, IncrementalResult, Table
from tidemark.timeline import Action, Instant, State

__version__ = "0.1.0"


def register(spark: object) -> None:
    """Make ``spark.read.format("tidemark")`` available in ``spark``.

    Table.create and Table.open with a SparkSession do this for you; call it to
    read with the data source before touching any Table. Importing tidemark
    registers nothing: registration is this explicit call.
    """
    from tidemark.engines.spark import register as _register

    _register(spark)


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
    "LockLostError",
    "LockServiceError",
    "LockTimeoutError",
    "IncrementalResult",
    "Instant",
    "InProcessLockError",
    "InstantNotFoundError",
    "InvalidInputError",
    "InvalidPartitionValueError",
    "InvalidRecordKeyError",
    "MissingColumnError",
    "MissingDependencyError",
    "MissingDataFileError",
    "NotSavepointedError",
    "NullRecordKeyError",
    "RestoreResult",
    "RolledBackConflictError",
    "SavepointResult",
    "SchemaConflictError",
    "SchemaEvolutionError",
    "SchemaMismatchError",
    "State",
    "Table",
    "TableExistsError",
    "TableNotFoundError",
    "TidemarkError",
    "UnknownOptionError",
    "UnsupportedTableError",
    "TableUpgradeRequiredError",
    "UnsupportedTypeError",
    "WriteConflictError",
    "WriterAliveError",
    "WriterSettingsError",
    "register",
]
