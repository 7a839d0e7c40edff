"""The single exception tree of tidemark.

Every error tidemark raises on purpose derives from :class:`TidemarkError`::

    TidemarkError
    ├── ConfigError                 an option key or value is wrong
    │   └── UnknownOptionError      a key nobody declared (names the closest known key)
    ├── InvalidInputError           the batch cannot be written as given
    │   ├── NullRecordKeyError      a record-key field is null
    │   ├── MissingColumnError      a key, partition or ordering column is absent
    │   └── SchemaMismatchError     the batch does not fit the table's schema
    ├── TableNotFoundError          the path holds no tidemark/Hudi table
    ├── TableExistsError            create() on a path that already holds something
    ├── UnsupportedTableError       a Hudi table this version cannot write safely
    ├── InstantNotFoundError        an instant named by the user is not on the timeline
    │   └── NotSavepointedError     restore to an instant that has no savepoint
    ├── LockTimeoutError            the table lock could not be had in time (names the holder)
    └── CommitError                 the write could not be committed; nothing became visible
        ├── WriteConflictError      another writer committed to the same file groups first
        │   └── BaseFileGoneError   ... and the version this write merged against was cleaned meanwhile
        └── HeartbeatExpiredError   this writer's heartbeat expired; it may be rolled back by others

Errors carry the facts as attributes (instant times, file ids, keys) so callers
can branch on them without parsing messages.
"""

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


class HeartbeatExpiredError(CommitError):
    """This writer's heartbeat expired before it committed; it aborted rather than race a cleaner."""

    def __init__(self, instant_time: str, detail: str) -> None:
        super().__init__(
            f"write {instant_time} aborted: {detail}. Another writer may roll it back; retry the write.",
            instant_time=instant_time,
        )
