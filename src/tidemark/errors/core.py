"""The core of the exception tree: the root, configuration, input, tables, corruption, instants, locks.

Import errors from :mod:`tidemark.errors`, which re-exports every one of them."""


from __future__ import annotations

from collections.abc import Sequence


class TidemarkError(Exception):
    """Base of every error tidemark raises on purpose."""


class ConfigError(TidemarkError):
    """An option key or value is invalid. The message names the key."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class UnknownOptionError(ConfigError):
    """An option key that tidemark does not know; ``suggestion`` is the closest known key."""

    def __init__(self, key: str, suggestion: str | None) -> None:
        hint = f" Did you mean {suggestion!r}?" if suggestion else ""
        super().__init__(
            f"unknown option {key!r}.{hint} Run `tidemark options` to list every option.",
            key=key,
        )
        self.suggestion = suggestion


class WriterSettingsError(ConfigError):
    """A writer's concurrency settings disagree with the ones the table recorded.

    Writers whose locks do not exclude each other would lose each other's commits, so
    the writer is refused before it writes anything. ``recorded`` and ``given`` are
    the two settings as option dicts (``hoodie.write.concurrency.mode``,
    ``hoodie.write.lock.*``); ``recorded`` is empty when the table records none.
    """

    def __init__(self, message: str, *, recorded: dict[str, str], given: dict[str, str]) -> None:
        super().__init__(message, key="hoodie.write.concurrency.mode")
        self.recorded = dict(recorded)
        self.given = dict(given)


class InProcessLockError(ConfigError):
    """The ``in_process`` lock provider is in use on this table by another OS process.

    An in-process lock excludes only the threads of one process; two processes using it
    on one table would not exclude each other at all. ``holder`` names the process
    (host:pid) that uses it, when known.
    """

    def __init__(self, table_path: str, holder: str | None) -> None:
        who = f" ({holder})" if holder else ""
        super().__init__(
            f"the in_process lock provider of table {table_path!r} is already in use by another process{who}: "
            "it only excludes threads of one process. For writers in several processes use "
            "hoodie.write.lock.provider=filesystem (one machine) or zookeeper, and record it on the table "
            "with Table.set_concurrency / `tidemark concurrency PATH --set`",
            key="hoodie.write.lock.provider",
        )
        self.table_path = table_path
        self.holder = holder


class InvalidInputError(TidemarkError):
    """The input batch cannot be written as given. The table is unchanged."""


class NullRecordKeyError(InvalidInputError):
    """At least one record has no record key: its key field null or empty (of several key
    fields, every one), which Hudi's key generators refuse too."""

    def __init__(self, fields: Sequence[str], count: int) -> None:
        which = "null or empty" if len(fields) == 1 else "null or empty in every key field"
        super().__init__(
            f"{count} record(s) have no record key: {which} (fields {list(fields)}); every record "
            "needs a key. Filter them out or fill them before writing."
        )
        self.fields = list(fields)
        self.count = count


class MissingColumnError(InvalidInputError):
    """A column that the table needs (record key, partition or ordering field) is absent."""

    def __init__(self, role: str, columns: Sequence[str], available: Sequence[str]) -> None:
        super().__init__(f"the batch lacks the {role} column(s) {list(columns)}; it has {list(available)}.")
        self.role = role
        self.columns = list(columns)


class SchemaMismatchError(InvalidInputError):
    """The batch's columns or types do not fit the table's schema."""

    def __init__(self, message: str, *, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems = list(problems)


class UnsupportedTypeError(SchemaMismatchError):
    """A column whose type, or one of its values, Hudi readers (Spark, hudi-rs) cannot read back."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(f"column {column!r}: {message}", problems=[message])
        self.column = column


# What Hudi's schema evolution on write allows (tidemark.format.schema_evolution).
SCHEMA_CHANGES_ALLOWED = (
    "allowed: adding nullable columns (also inside structs); promoting int to long, float or double, "
    "long to float or double, float to double, string to bytes and bytes to string; writing a narrower "
    "type than the table's (it is cast up); leaving columns out with "
    "hoodie.write.set.null.for.missing.columns=true. Not allowed: dropping a column, narrowing a type, "
    "other type changes, and changing the type of a record-key, partition or ordering field"
)


class SchemaEvolutionError(SchemaMismatchError):
    """The batch changes the table's schema in a way Hudi's schema evolution on write refuses
    (drops a column, narrows or changes a type, changes a key/partition/ordering field's type).
    Nothing was written. ``problems`` names each column."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(
            "the batch changes the table's schema in a way that is not allowed: " + "; ".join(problems)
            + f". {SCHEMA_CHANGES_ALLOWED}.",
            problems=problems,
        )

    def __reduce__(self):  # noqa: ANN204 - pickling (errors cross process boundaries)
        return (SchemaEvolutionError, (self.problems,))


class InvalidRecordKeyError(InvalidInputError):
    """A record-key field whose type or value cannot be part of a Hudi record key."""

    def __init__(self, field: str, message: str, *, value: object = None) -> None:
        super().__init__(f"record key field {field!r}: {message}")
        self.field = field
        self.value = value


class InvalidPartitionValueError(InvalidInputError):
    """A partition value (or partition field type) that cannot become a folder of the table."""

    def __init__(self, partition_path: str, message: str) -> None:
        super().__init__(
            f"partition path {partition_path!r} cannot be written: {message}. Nothing was written."
        )
        self.partition_path = partition_path


class TableNotFoundError(TidemarkError):
    """The path holds no table (no ``.hoodie/hoodie.properties``)."""

    def __init__(self, path: str, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(f"no Hudi table at {path!r}{extra}. Create one with tidemark.Table.create(...).")
        self.path = path


class TableExistsError(TidemarkError):
    """``create`` was asked for a path that already holds a table or other files."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"cannot create a table at {path!r}: {detail}")
        self.path = path


class UnsupportedTableError(TidemarkError):
    """A table this version of tidemark cannot work with safely (another table version...)."""


class TableUpgradeRequiredError(UnsupportedTableError):
    """A write (or table service) on a table of an older version (6) that tidemark only reads.

    Nothing was changed. ``tidemark upgrade PATH`` or ``Table.upgrade()`` upgrades the table to
    version 8 in place, as Hudi 1.x's upgrade does; then it can be written.
    """

    def __init__(self, path: str, version: str, what: str) -> None:
        super().__init__(
            f"cannot {what} the table at {path!r}: it is a Hudi table version {version} (Hudi 0.x), which "
            f"tidemark reads but does not write; upgrade it to version 8 first with `tidemark upgrade {path}` "
            f"or Table.upgrade() (Hudi 1.x readers and writers read the upgraded table; Hudi 0.x ones do not)"
        )
        self.path = path
        self.version = version


class MissingDependencyError(TidemarkError):
    """What was asked needs a package that is not installed (``package``); the message names the
    extra that brings it, e.g. ``pip install 'tidemark[spark]'`` for PySpark."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs {package}, which is not installed: pip install 'tidemark[{extra}]'"
        )
        self.package = package
        self.extra = extra


class WorkerDependencyError(MissingDependencyError):
    """Spark's Python workers could not import ``module`` (of tidemark or one of its
    dependencies, ``package`` its top level): they run a Python other than the one tidemark is
    installed in, or another version of tidemark. Raised by the Spark engine for a job whose
    tasks failed so. ``completed``: the write that committed before its inline compaction's job
    failed so (else nothing the call wrote became visible)."""

    def __init__(self, module: str, driver_python: str, *, completed: str | None = None) -> None:
        package = module.split(".")[0]
        if package == "tidemark" and module != package:  # tidemark is there, but not this version
            cause = (f"their tidemark lacks {module}: it is another version than this process's; install "
                     "this version of 'tidemark[spark]' into the Python the workers run")
        else:
            cause = (f"they run a Python in which {package} is not installed. With a local Spark session, set "
                     f"the environment variable PYSPARK_PYTHON={driver_python} (the Python running tidemark) "
                     "before the session is created; on a cluster or a Spark Connect server, install "
                     "'tidemark[spark]' into the Python its workers run (or ship it with spark.archives)")
        outcome = (f"{completed}; its inline compaction did not: do not write it again, compact the table once "
                   "the workers can import tidemark" if completed else
                   "Nothing this call wrote became visible: run it again once the workers can import tidemark")
        TidemarkError.__init__(self, f"Spark's Python workers cannot import {module}: {cause}. {outcome}.")
        self.module = module
        self.package = package
        self.extra = "spark"
        self.driver_python = driver_python
        self.completed = completed


class CorruptTableError(TidemarkError):
    """A file of the table is damaged or missing. ``path`` names it (relative to the table).

    Raised instead of serving an older version or skipping the file: the read or write
    that found it changes nothing on disk. The message says how to repair the table.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class CorruptPropertiesError(CorruptTableError):
    """``.hoodie/hoodie.properties`` cannot be used: unreadable, failing its checksum
    (``hoodie.table.checksum``), or naming a field (``field``) the table's schema lacks."""

    def __init__(self, path: str, problem: str, *, fix: str | None = None, field: str | None = None) -> None:
        fix = fix or (
            "Restore the file from a backup or from hoodie.properties.backup beside it; tidemark "
            "does not guess a table's identity and layout."
        )
        super().__init__(f"{path} is corrupt: {problem}. {fix}", path=path)
        self.problem = problem
        self.field = field


class CorruptInstantError(CorruptTableError):
    """A completed instant file of the timeline is empty, truncated or not what its action writes."""

    def __init__(self, path: str, problem: str, *, instant_time: str | None = None) -> None:
        super().__init__(
            f"the completed instant file {path} is corrupt ({problem}): tidemark cannot tell which files "
            "this instant wrote, so it refuses to read or write rather than serve a wrong version. "
            "Restore the file from a backup (or a copy of the table), or restore the table to an "
            "earlier savepoint (`tidemark restore <table> <savepoint>`).",
            path=path,
        )
        self.problem = problem
        self.instant_time = instant_time


class CorruptDataFileError(CorruptTableError):
    """A data file of the version being read is not a readable parquet file (damaged or truncated)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(
            f"the data file {path} is corrupt ({problem}). Restore the file from a backup; or roll back "
            "the instant that wrote it (its time is the last part of the file name) or restore the table "
            "to an earlier savepoint (`tidemark restore <table> <savepoint>`), accepting that its data is lost.",
            path=path,
        )
        self.problem = problem


class MissingDataFileError(CorruptTableError):
    """A data file that a completed commit wrote, and that is still the latest version of its
    file group, is missing: reading would silently serve an older version (or none)."""

    def __init__(self, path: str, *, instant_time: str, instant_file: str, more: int = 0) -> None:
        others = f" (and {more} more file(s))" if more else ""
        super().__init__(
            f"the data file {path}{others} written by completed instant {instant_time} ({instant_file}) is "
            "missing: it holds the latest version of its file group, so reading or writing now would "
            "silently serve or build on an older version. Restore the file from a backup; or roll back "
            f"the instant (`tidemark rollback <table> {instant_time}`, if it is the latest commit) or restore the "
            "table to an earlier savepoint (`tidemark restore <table> <savepoint>`), accepting that its data is lost.",
            path=path,
        )
        self.instant_time = instant_time
        self.instant_file = instant_file


class InstantNotFoundError(TidemarkError):
    """An instant time given by the user does not exist on the timeline in the needed state."""

    def __init__(self, instant_time: str, detail: str = "") -> None:
        extra = f": {detail}" if detail else ""
        super().__init__(f"instant {instant_time} not found{extra}")
        self.instant_time = instant_time


class NotSavepointedError(InstantNotFoundError):
    """Restore was asked for an instant without a completed savepoint."""

    def __init__(self, instant_time: str) -> None:
        super().__init__(
            instant_time,
            "it has no savepoint; only savepointed instants can be restored "
            "(Table.savepoint / `tidemark savepoint`, listed by `tidemark timeline`)",
        )


class LockTimeoutError(TidemarkError):
    """The table lock could not be acquired within the configured waits."""

    def __init__(self, *, provider: str, holder: str | None, waited_ms: int, purpose: str) -> None:
        who = f"held by {holder}" if holder else "holder unknown"
        super().__init__(
            f"could not acquire the {provider} table lock to {purpose} within {waited_ms} ms ({who}). "
            "If the holder is dead its lock expires by itself; otherwise raise "
            "hoodie.write.lock.wait_time_ms / hoodie.write.lock.num_retries."
        )
        self.provider = provider
        self.holder = holder
        self.waited_ms = waited_ms


class LockServiceError(TidemarkError):
    """The lock service cannot be reached or refused a request (credentials, permissions, endpoint)."""

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__(message)
        self.provider = provider
