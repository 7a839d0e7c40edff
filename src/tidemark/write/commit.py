"""The commit protocol of one write, free of any engine.

Lifecycle of a :class:`PendingWrite`::

    start()        roll back failed writes (EAGER policy); new instant time;
                   <t>.<action>.requested
    inflight()     <t>.inflight with the planned file groups
    ... the engine writes files, each after its marker ...
    complete()     delete partial files of failed task attempts (marked, not reported);
                   partition metafiles; completion time;
                   publish <t>_<c>.<action> atomically; delete markers
    abort()        roll the write back; nothing of it stays visible

Readers see the write only once ``complete`` published the completed file: the
single atomic step of the protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from tidemark.config import WriteConfig
from tidemark.errors import CommitError
from tidemark.format.commit_metadata import (
    CommitMetadata,
    WriteStat,
    inflight_metadata_bytes,
    write_avro,
)
from tidemark.format.names import PARTITION_METAFILE, TIMELINE_DIR, join_partition, partition_metafile_content
from tidemark.services.rollback import RollbackResult, finish_pending_rollbacks, rollback
from tidemark.storage import CreateOutcome, Storage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name, new_instant_time
from tidemark.write.markers import delete_markers, marked_data_files


@dataclass(frozen=True)
class PendingWrite:
    instant_time: str
    action: Action
    operation: str


class CommitProtocol:
    """Runs the protocol for writes to one table."""

    def __init__(self, storage: Storage, config: WriteConfig) -> None:
        self.storage = storage
        self.config = config

    # -- start ---------------------------------------------------------------------------
    def rollback_failed_writes(self, timeline: Timeline | None = None) -> list[RollbackResult]:
        """Roll back every pending data write (single-writer: none of them can be alive)."""
        timeline = timeline or Timeline.load(self.storage)
        results = finish_pending_rollbacks(self.storage, timeline)
        if results:
            timeline = timeline.reload()
        for inst in timeline.pending:
            if inst.action in (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT):
                results.append(rollback(self.storage, inst, timeline=timeline))
                timeline = timeline.reload()
        return results

    def start(self, operation: str, action: Action) -> PendingWrite:
        timeline = Timeline.load(self.storage)
        if self.config.failed_writes_policy == "EAGER":
            self.rollback_failed_writes(timeline)
            timeline = timeline.reload()
        while True:
            instant_time = new_instant_time(floor=timeline.max_time())
            requested = instant_file_name(instant_time, action, State.REQUESTED)
            body = b""
            if action is Action.REPLACE_COMMIT:
                body = write_avro(
                    "requested_replace",
                    {"operationType": operation, "clusteringPlan": None, "extraMetadata": {}, "version": 1},
                )
            if self.storage.create_if_absent(f"{TIMELINE_DIR}/{requested}", body) is CreateOutcome.CREATED:
                return PendingWrite(instant_time, action, operation)
            timeline = timeline.reload()

    def inflight(self, pending: PendingWrite, planned: Iterable[tuple[str, str]] = ()) -> None:
        name = instant_file_name(pending.instant_time, pending.action, State.INFLIGHT)
        self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", inflight_metadata_bytes(pending.operation, planned))

    # -- complete ------------------------------------------------------------------------
    def _remove_partial_files(self, pending: PendingWrite, stats: Sequence[WriteStat]) -> None:
        """Delete files that a failed or speculative task attempt wrote: marked but not reported."""
        reported = {s.path for s in stats}
        for path in marked_data_files(self.storage, pending.instant_time):
            if path not in reported:
                self.storage.delete(path)
        missing = [s.path for s in stats if not self.storage.exists(s.path)]
        if missing:
            raise CommitError(
                f"write {pending.instant_time} reported files that do not exist: {missing[:3]}",
                instant_time=pending.instant_time,
            )

    def _ensure_partition_metafiles(self, pending: PendingWrite, partitions: Iterable[str]) -> None:
        written_at = datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
        for partition in sorted(set(partitions)):
            path = join_partition(partition, PARTITION_METAFILE)
            if not self.storage.exists(path):
                depth = partition.count("/") + 1 if partition else 0
                self.storage.create_if_absent(path, partition_metafile_content(pending.instant_time, depth, written_at))

    def complete(
        self,
        pending: PendingWrite,
        stats: Sequence[WriteStat],
        *,
        schema_json: str | None,
        replaced_file_ids: Mapping[str, Sequence[str]] | None = None,
        extra: Mapping[str, str] | None = None,
    ) -> Instant:
        """Publish the write. Raises CommitError (after rolling back) if it cannot."""
        try:
            self._remove_partial_files(pending, stats)
            self._ensure_partition_metafiles(pending, [s.partition_path for s in stats])
            extra_meta = dict(extra or {})
            if schema_json:
                extra_meta["schema"] = schema_json
            meta = CommitMetadata(
                operation=pending.operation,
                write_stats=tuple(sorted(stats, key=lambda s: (s.partition_path, s.file_id))),
                extra=extra_meta,
                replaced_file_ids={p: tuple(ids) for p, ids in (replaced_file_ids or {}).items()},
                is_replace=pending.action is Action.REPLACE_COMMIT,
            )
            timeline = Timeline.load(self.storage)
            floor = max(filter(None, [timeline.max_time(), pending.instant_time]))
            completion_time = new_instant_time(floor=floor)
            name = instant_file_name(pending.instant_time, pending.action, State.COMPLETED, completion_time)
            outcome = self.storage.create_if_absent(f"{TIMELINE_DIR}/{name}", meta.to_bytes())
            if outcome is not CreateOutcome.CREATED:
                raise CommitError(f"could not publish {name}: {outcome.value}", instant_time=pending.instant_time)
        except BaseException:
            self.abort(pending)
            raise
        delete_markers(self.storage, pending.instant_time)
        return Instant(pending.instant_time, pending.action, State.COMPLETED, completion_time)

    def abort(self, pending: PendingWrite) -> RollbackResult:
        """Roll back a write that will not complete: its files go, a rollback instant records it."""
        timeline = Timeline.load(self.storage)
        inst = Instant(pending.instant_time, pending.action, State.INFLIGHT)
        return rollback(self.storage, inst, timeline=timeline)
