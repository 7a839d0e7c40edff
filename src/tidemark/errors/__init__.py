"""The single exception tree of tidemark.

Every error tidemark raises on purpose derives from :class:`TidemarkError`::

    TidemarkError
    ├── ConfigError                 an option key or value is wrong
    │   ├── UnknownOptionError      a key nobody declared (names the closest known key)
    │   ├── WriterSettingsError     a writer's concurrency mode or lock disagrees with the table's
    │   │                           recorded ones (their locks would not exclude each other)
    │   └── InProcessLockError      the in_process lock is already used on the table by another process
    ├── InvalidInputError           the batch cannot be written as given
    │   ├── NullRecordKeyError      a record-key field is null
    │   ├── MissingColumnError      a key, partition or ordering column is absent
    │   ├── SchemaMismatchError     the batch does not fit the table's schema
    │   │   ├── UnsupportedTypeError  a column's type (or value) no Hudi reader can read back
    │   │   └── SchemaEvolutionError  a schema change Hudi's evolution on write does not allow
    │   ├── InvalidRecordKeyError   a record-key value or type that cannot be a Hudi key
    │   └── InvalidPartitionValueError  a partition value that cannot be a folder of the table
    ├── TableNotFoundError          the path holds no tidemark/Hudi table
    ├── TableExistsError            create() on a path that already holds something
    ├── UnsupportedTableError       a Hudi table this version cannot write safely
    │   └── TableUpgradeRequiredError  a version 6 table: readable, written only after `tidemark upgrade`
    ├── MissingDependencyError      an optional dependency (an extra) is not installed
    │   └── WorkerDependencyError   Spark's Python workers cannot import tidemark (their Python lacks it)
    ├── LockServiceError            the lock service (DynamoDB) is unreachable or refused the request
    ├── CorruptTableError           a file of the table is damaged or missing (names it)
    │   ├── CorruptPropertiesError  hoodie.properties is unreadable, fails its checksum, or names
    │   │                           a record-key/partition/ordering field the schema lacks
    │   ├── CorruptInstantError     a completed instant file is empty, truncated or garbage
    │   ├── CorruptDataFileError    a data file the read needs is not a readable parquet file
    │   └── MissingDataFileError    a data file a completed commit wrote (still the latest) is gone
    ├── InstantNotFoundError        an instant named by the user is not on the timeline
    │   └── NotSavepointedError     restore to an instant that has no savepoint
    ├── LockTimeoutError            the table lock could not be had in time (names the holder)
    ├── StorageError                the table's storage failed: an object store's request, a full disk (says what to do)
    │   ├── StorageUnreachableError     the endpoint did not answer in the configured time
    │   ├── StorageAccessDeniedError    the credentials were refused
    │   ├── BucketNotFoundError         the bucket (or container) does not exist
    │   └── ConditionalWritesUnsupportedError  the store has no If-None-Match / If-Match puts
    ├── WriterAliveError            rollback of a pending write whose writer's heartbeat is alive
    └── CommitError                 the write could not be committed; nothing became visible
        ├── WriteConflictError      another writer committed to the same file groups first
        │   ├── EarlyConflictError  ... or is writing them: found while writing, not at commit
        │   ├── BaseFileGoneError   ... and the version this write merged against was cleaned meanwhile
        │   ├── RolledBackConflictError  a rollback or restore removed what the write built on
        │   ├── SchemaConflictError  a concurrent commit changed the schema incompatibly with this write
        │   └── ClusteringConflictError  the write touched file groups a clustering replaced
        │                                (retried by Table) or has planned (reject strategy)
        ├── ClusteringAbortedError  a clustering lost to ingestion and was rolled back
        ├── LockLostError           the writer's lease on the table lock ran out (it paused past
        │                           it) or was taken over, so it must not publish
        ├── HeartbeatExpiredError   this writer's heartbeat expired; it may be rolled back by others
        └── WriteRolledBackError    a task finished a file after its write was rolled back (and
                                    deleted it): a straggler of a failed job, or a paused writer

Errors carry the facts as attributes (instant times, file ids, keys) so callers
can branch on them without parsing messages.
"""

from tidemark.errors.commit import (
    BaseFileGoneError,
    BucketNotFoundError,
    ClusteringAbortedError,
    ClusteringConflictError,
    CommitError,
    ConditionalWritesUnsupportedError,
    DataFileNotFoundError,
    EarlyConflictError,
    HeartbeatExpiredError,
    LockLostError,
    RolledBackConflictError,
    SchemaConflictError,
    StorageAccessDeniedError,
    StorageError,
    StorageUnreachableError,
    WriteConflictError,
    WriterAliveError,
    WriteRolledBackError,
)
from tidemark.errors.core import (
    SCHEMA_CHANGES_ALLOWED,
    ConfigError,
    CorruptDataFileError,
    CorruptInstantError,
    CorruptPropertiesError,
    CorruptTableError,
    InProcessLockError,
    InstantNotFoundError,
    InvalidInputError,
    InvalidPartitionValueError,
    InvalidRecordKeyError,
    LockServiceError,
    LockTimeoutError,
    MissingColumnError,
    MissingDataFileError,
    MissingDependencyError,
    NotSavepointedError,
    NullRecordKeyError,
    SchemaEvolutionError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TableUpgradeRequiredError,
    TidemarkError,
    UnknownOptionError,
    UnsupportedTableError,
    UnsupportedTypeError,
    WorkerDependencyError,
    WriterSettingsError,
)

__all__ = [
    "BaseFileGoneError",
    "BucketNotFoundError",
    "ClusteringAbortedError",
    "ClusteringConflictError",
    "CommitError",
    "ConditionalWritesUnsupportedError",
    "ConfigError",
    "CorruptDataFileError",
    "CorruptInstantError",
    "CorruptPropertiesError",
    "CorruptTableError",
    "DataFileNotFoundError",
    "EarlyConflictError",
    "HeartbeatExpiredError",
    "WriteRolledBackError",
    "InProcessLockError",
    "InstantNotFoundError",
    "InvalidInputError",
    "InvalidPartitionValueError",
    "InvalidRecordKeyError",
    "LockLostError",
    "LockServiceError",
    "LockTimeoutError",
    "MissingColumnError",
    "MissingDataFileError",
    "MissingDependencyError",
    "WorkerDependencyError",
    "NotSavepointedError",
    "NullRecordKeyError",
    "RolledBackConflictError",
    "SCHEMA_CHANGES_ALLOWED",
    "SchemaConflictError",
    "SchemaEvolutionError",
    "SchemaMismatchError",
    "StorageAccessDeniedError",
    "StorageError",
    "StorageUnreachableError",
    "TableExistsError",
    "TableNotFoundError",
    "TableUpgradeRequiredError",
    "TidemarkError",
    "UnknownOptionError",
    "UnsupportedTableError",
    "UnsupportedTypeError",
    "WriteConflictError",
    "WriterAliveError",
    "WriterSettingsError",
]

# The classes live in two modules but are one tree: tracebacks, reprs and pickles name them
# tidemark.errors.<Name>, the one place they are imported from.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type):
        _value.__module__ = __name__
del _name, _value
