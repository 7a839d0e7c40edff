"""The commit errors: conflicts, lost locks, aborted clusterings, expired heartbeats; storage errors.

Import errors from :mod:`tidemark.errors`, which re-exports every one of them."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from tidemark.errors.core import TidemarkError


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


class WriteRolledBackError(CommitError):
    """A task of this write finished a file after the write was rolled back (a task that
    outlived its failed job, or a writer that paused until others rolled it back): the task
    deleted the file instead of leaving it behind, and stopped."""

    def __init__(self, instant_time: str, files: Sequence[str]) -> None:
        shown = ", ".join(list(files)[:3]) or "no file"
        super().__init__(
            f"write {instant_time} was rolled back while its tasks were still writing; what they wrote "
            f"or were about to write afterwards ({shown}) was deleted or never started. Nothing of the "
            "write is visible; retry the write.",
            instant_time=instant_time,
        )
        self.files = list(files)


class DataFileNotFoundError(TidemarkError):
    """An engine found a data file gone while it wrote (the Arrow engine's FileNotFoundError, a
    Spark job's failure naming the file). Raised between layers: the write turns it into the
    conflict that removed the file (BaseFileGoneError, RolledBackConflictError), or, for a file
    that is there but could not be read (``problem``), into CorruptDataFileError; else it raises
    ``original``, the engine's own error."""

    def __init__(self, paths: tuple[str, ...], original: BaseException, problem: str | None = None) -> None:
        super().__init__(f"data file(s) not found: {', '.join(paths)} ({original})")
        self.paths = paths  # absolute paths (or URIs) the engine named
        self.original = original
        # The engine's words for what kept it from reading a file (None: not a failed read).
        self.problem = problem


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
