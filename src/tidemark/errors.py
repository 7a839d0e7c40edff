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
    ├── StorageError                the table's object store failed a request (says what to do)
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
        └── HeartbeatExpiredError   this writer's heartbeat expired; it may be rolled back by others

Errors carry the facts as attributes (instant times, file ids, keys) so callers
can branch on them without parsing messages.
"""

from __future__ import annotations

import json
import re
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
    """At least one record has a null value in a record-key field."""

    def __init__(self, fields: Sequence[str], count: int) -> None:
        super().__init__(
            f"{count} record(s) have a null record key (fields {list(fields)}); "
            "every record needs a non-null key. Filter them out or fill them before writing."
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


class CommitError(TidemarkError):
    """The write could not be committed. Its files were rolled back; nothing became visible."""

    def __init__(self, message: str, *, instant_time: str | None = None) -> None:
        super().__init__(message)
        self.instant_time = instant_time


class WriteConflictError(CommitError):
    """Another writer committed to the same file groups after this write started."""

    def __init__(
        self,
        *,
        instant_time: str,
        conflicting_instant: str,
        file_groups: Sequence[tuple[str, str]],
    ) -> None:
        shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in list(file_groups)[:5])
        more = f" and {len(file_groups) - 5} more" if len(file_groups) > 5 else ""
        super().__init__(
            f"write {instant_time} conflicts with instant {conflicting_instant}, which committed "
            f"first to file group(s) {shown}{more}. The write was rolled back; retry it.",
            instant_time=instant_time,
        )
        self.conflicting_instant = conflicting_instant
        self.file_groups = list(file_groups)


class EarlyConflictError(WriteConflictError):
    """Early conflict detection stopped this write at a file group another writer holds.

    ``reason`` is ``"marker"`` (an older writer that is still alive holds a marker
    on the file group) or ``"commit"`` (a write that completed after this one
    planned changed the file group). Raised in the task that was about to write
    the file group, and again in the driver after the write was rolled back.
    """

    _TAG = re.compile(r"\[early-conflict (\{.*?\})\]")

    def __init__(
        self,
        *,
        instant_time: str,
        conflicting_instant: str,
        partition_path: str,
        file_id: str,
        reason: str,
        strategy: str,
    ) -> None:
        CommitError.__init__(self, "", instant_time=instant_time)
        self.conflicting_instant = conflicting_instant
        self.file_groups = [(partition_path, file_id)]
        self.partition_path = partition_path
        self.file_id = file_id
        self.reason = reason
        self.strategy = strategy
        how = (
            f"writer {conflicting_instant} (older, alive) holds a marker on it"
            if reason == "marker"
            else f"instant {conflicting_instant} changed it after this write planned"
        )
        payload = {
            "instant_time": instant_time,
            "conflicting_instant": conflicting_instant,
            "partition_path": partition_path,
            "file_id": file_id,
            "reason": reason,
            "strategy": strategy,
        }
        self.args = (
            f"write {instant_time} stopped early at file group {partition_path or '<root>'}/{file_id}: {how} "
            f"({strategy} early conflict detection). The write was rolled back; retry it. "
            f"[early-conflict {json.dumps(payload, sort_keys=True)}]",
        )

    def __reduce__(self) -> tuple[object, ...]:  # picklable across Spark task boundaries
        return (_early_conflict_from_payload, (self.payload(),))

    def payload(self) -> dict[str, str]:
        return {
            "instant_time": self.instant_time or "",
            "conflicting_instant": self.conflicting_instant,
            "partition_path": self.partition_path,
            "file_id": self.file_id,
            "reason": self.reason,
            "strategy": self.strategy,
        }

    @classmethod
    def from_text(cls, text: str) -> EarlyConflictError | None:
        """The error a task raised, recovered from an engine's error message (or None)."""
        match = cls._TAG.search(text)
        if match is None:
            return None
        try:
            return _early_conflict_from_payload(json.loads(match.group(1)))
        except (ValueError, TypeError, KeyError):
            return None


def _early_conflict_from_payload(payload: dict[str, str]) -> EarlyConflictError:
    return EarlyConflictError(**payload)


class SchemaConflictError(WriteConflictError):
    """A write that committed after this one started recorded a table schema this write's
    schema cannot be reconciled with (the same new column with types neither promotes to, a
    column one writer promoted the other cannot read). The write was rolled back; running it
    again would be refused by the schema check, so it is not retried."""

    def __init__(self, *, instant_time: str, conflicting_instant: str, problems: Sequence[str]) -> None:
        super().__init__(instant_time=instant_time, conflicting_instant=conflicting_instant, file_groups=[])
        self.problems = list(problems)
        self.args = (
            f"write {instant_time} changed the table's schema incompatibly with instant {conflicting_instant}, "
            f"which committed first: {'; '.join(problems)}. The write was rolled back; write the batch with "
            "column types the table's new schema accepts.",
        )

    def __reduce__(self):  # noqa: ANN204 - pickling (errors cross process boundaries)
        return (_schema_conflict, (self.instant_time, self.conflicting_instant, self.problems))


def _schema_conflict(instant_time: str, conflicting_instant: str, problems: list[str]) -> SchemaConflictError:
    return SchemaConflictError(instant_time=instant_time, conflicting_instant=conflicting_instant, problems=problems)


class ClusteringConflictError(WriteConflictError):
    """The write touched file groups of a clustering.

    ``rejected`` True: the clustering is still pending and
    ``hoodie.clustering.updates.strategy=reject`` forbids writing to its file groups.
    ``rejected`` False: the clustering completed after the write planned against
    the table, replacing file groups the write updated; :class:`tidemark.Table`
    runs such a write again against the clustered table (ingestion is never
    failed by clustering under the default ``allow`` strategy).
    """

    def __init__(
        self, *, instant_time: str, clustering_instant: str, file_groups: Sequence[tuple[str, str]], rejected: bool
    ) -> None:
        super().__init__(instant_time=instant_time, conflicting_instant=clustering_instant, file_groups=file_groups)
        self.clustering_instant = clustering_instant
        self.rejected = rejected
        if rejected:
            shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in list(file_groups)[:5])
            self.args = (
                f"write {instant_time} touches file group(s) {shown} of pending clustering "
                f"{clustering_instant} and hoodie.clustering.updates.strategy=reject. The write was rolled "
                "back; retry it after the clustering, or use the allow strategy (ingestion wins).",
            )


class LockLostError(CommitError):
    """This writer no longer safely holds the table lock, so it did not publish.

    Lease-based locks (storage, dynamodb) are held for a validity period that the holder keeps
    renewing; a holder that paused past it, or whose renewals failed, may have been taken over.
    The write is rolled back; running it again is safe.
    """

    def __init__(self, *, provider: str, lock: str, detail: str, instant_time: str | None = None) -> None:
        super().__init__(
            f"the {provider} table lock {lock} is no longer safely held: {detail}. Nothing was published; "
            "the write is rolled back and can be run again (a longer "
            "hoodie.write.lock.storage.validity.timeout.secs / hoodie.write.lock.wait_time_ms gives pauses "
            "more room)",
            instant_time=instant_time,
        )
        self.provider = provider
        self.lock = lock
        self.detail = detail


class ClusteringAbortedError(CommitError):
    """A clustering lost to ingestion: a write touched its file groups after it was planned.

    The clustering was rolled back (its files deleted, a rollback instant records
    it); the table is as if it never ran. Run it again to cluster the new files.
    """

    def __init__(self, *, instant_time: str, conflicting_instant: str, file_groups: Sequence[tuple[str, str]]) -> None:
        shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in list(file_groups)[:5])
        more = f" and {len(file_groups) - 5} more" if len(file_groups) > 5 else ""
        super().__init__(
            f"clustering {instant_time} aborted: write {conflicting_instant} touched its file group(s) "
            f"{shown}{more} after it was planned, and ingestion wins (hoodie.clustering.updates.strategy=allow). "
            "The clustering was rolled back; run it again.",
            instant_time=instant_time,
        )
        self.conflicting_instant = conflicting_instant
        self.file_groups = list(file_groups)


class BaseFileGoneError(WriteConflictError):
    """The base file a write merged against was superseded by another writer's commit and then
    cleaned, before the write read it: the same conflict the commit check reports, found early."""

    def __init__(self, *, base_file: str, conflicting_instant: str, file_group: tuple[str, str]) -> None:
        CommitError.__init__(
            self,
            f"the base file {base_file} that this write merged against was superseded by instant "
            f"{conflicting_instant} (another writer's commit to file group {file_group[0] or '<root>'}/"
            f"{file_group[1]}) and then cleaned. The write was rolled back; retry it.",
        )
        self.conflicting_instant = conflicting_instant
        self.file_groups = [file_group]
        self.base_file = base_file


class RolledBackConflictError(WriteConflictError):
    """The write built on a completed instant that a rollback or restore removed after the write
    planned (or a restore is in progress): publishing it would bring the rolled-back rows back.

    ``conflicting_instant`` is the rollback (or restore) instant, ``rolled_back`` the instant it
    undid (None for a restore in progress), ``base_file`` the removed file the write read, if that
    is how it was found. The write was rolled back; retrying it builds on the table as it is now.
    """

    def __init__(
        self,
        *,
        instant_time: str | None,
        conflicting_instant: str,
        rolled_back: str | None,
        file_groups: Sequence[tuple[str, str]],
        base_file: str | None = None,
    ) -> None:
        shown = ", ".join(f"{p or '<root>'}/{f}" for p, f in list(file_groups)[:5])
        if rolled_back is None:
            what = (
                f"restore {conflicting_instant} is in progress (or was interrupted; the next write or "
                "`tidemark clean` finishes it)"
            )
        elif base_file is not None:
            what = (
                f"the base file {base_file} it merged against was removed by rollback {conflicting_instant} "
                f"of instant {rolled_back}"
            )
        else:
            what = (
                f"it built on instant {rolled_back} (file group(s) {shown}), which rollback "
                f"{conflicting_instant} removed after the write planned"
            )
        CommitError.__init__(
            self,
            f"{f'write {instant_time}' if instant_time else 'this write'} cannot commit: {what}. "
            "The write was rolled back; retry it.",
            instant_time=instant_time,
        )
        self.conflicting_instant = conflicting_instant
        self.rolled_back = rolled_back
        self.file_groups = list(file_groups)
        self.base_file = base_file


class WriterAliveError(TidemarkError):
    """Rolling back a pending write whose writer is alive (its heartbeat is fresh) was refused:
    the writer would fail at commit. Wait for it, or force the rollback (the writer then fails)."""

    def __init__(self, instant_time: str, age_ms: int) -> None:
        super().__init__(
            f"instant {instant_time} is pending and its writer is alive (last heartbeat {age_ms} ms ago): "
            "it may still commit. Wait until it finishes or its heartbeat expires, or force the rollback "
            "(force=True / --force); the writer will then fail."
        )
        self.instant_time = instant_time
        self.age_ms = age_ms


class HeartbeatExpiredError(CommitError):
    """This writer's heartbeat expired before it committed; it aborted rather than race a cleaner."""

    def __init__(self, instant_time: str, detail: str) -> None:
        super().__init__(
            f"write {instant_time} aborted: {detail}. Another writer may roll it back; retry the write.",
            instant_time=instant_time,
        )


class DataFileNotFoundError(TidemarkError):
    """An engine found a data file gone while it wrote (the Arrow engine's FileNotFoundError, a
    Spark job's failure naming the file). Raised between layers: the write turns it into the
    conflict that removed the file (BaseFileGoneError, RolledBackConflictError) or raises
    ``original``, the engine's own error, when it was not that."""

    def __init__(self, paths: tuple[str, ...], original: BaseException) -> None:
        super().__init__(f"data file(s) not found: {', '.join(paths)} ({original})")
        self.paths = paths  # absolute paths (or file: URIs) the engine named
        self.original = original


class StorageError(TidemarkError):
    """A request to the table's storage failed. ``uri`` names the table; secrets never appear."""

    def __init__(self, message: str, *, uri: str) -> None:
        super().__init__(message)
        self.uri = uri


class StorageUnreachableError(StorageError):
    """The storage endpoint did not answer within the configured timeout and retries."""


class StorageAccessDeniedError(StorageError):
    """The storage refused the credentials (wrong, expired, or lacking permission)."""


class BucketNotFoundError(StorageError):
    """The bucket or container of the table's URI does not exist."""


class ConditionalWritesUnsupportedError(StorageError):
    """The store does not support conditional puts, which atomic commits need."""
