"""Early conflict detection: stop a doomed write at its first conflicting file group.

Under optimistic concurrency a write normally learns of a conflict only when it
commits. With early detection (``hoodie.write.concurrency.early.conflict.detection.enable``)
it checks before it writes a file group — before the marker, so before the file:

* **marker conflict**: an *active* writer holds a marker on the same file group.
  Active means pending, with a requested time *smaller* than ours (so two
  writers never stop each other: the younger yields), and with a live heartbeat
  (a crashed writer's markers stop counting once its heartbeat expired);
* **commit conflict** (``...early.conflict.check.commit.conflict``): a write
  that completed after our snapshot changed the file group (its markers are
  gone, so only the timeline tells).

Strategies (``...early.conflict.detection.strategy``):

* ``simple_direct``: the check before each direct marker. Two writers checking
  the same file group at the same moment can both pass; the commit-time check
  then catches it.
* ``transactional_direct``: the same check and the marker creation under a lock
  on ``partition/fileId``, so no race slips through.
* ``async_timeline_server``: the marker server checks this writer's markers
  against the other active writers' persisted markers periodically
  (``...async.conflict.detector.period_ms``) and refuses marker requests once
  it found a conflict.

The check reads only what it needs: the timeline, the heartbeats of older
pending writers, and the marker folder of the one partition of each of them.
It lives with the markers because it is a check over markers: the marker writers
and the marker server call it. Its settings (the strategy and the options that tune
it) are in :mod:`tidemark.config.early_conflict`, where the option resolver reads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings
from tidemark.errors import EarlyConflictError
from tidemark.format.names import marker_dir
from tidemark.markers.base import Marker
from tidemark.markers.listing import markers_in_partitions
from tidemark.storage import Storage, exclusive_flock
from tidemark.timeline import Action, Timeline
from tidemark.timeline.instant_time import parse_instant_time

log = logging.getLogger(__name__)

_WRITE_ACTIONS = (Action.COMMIT, Action.DELTA_COMMIT, Action.REPLACE_COMMIT)
FILE_GROUP_LOCK_DIR = ".hoodie/.locks/file-groups"
FILE_GROUP_LOCK_STRIPES = 256
CONFLICT_SIGNAL = "EARLY_CONFLICT"  # in the write's marker folder


@dataclass(frozen=True)
class EarlyConflict:
    """A conflict found early: which file group, held or changed by which instant."""

    conflicting_instant: str
    partition_path: str
    file_id: str
    reason: str  # "marker" | "commit"

    def error(self, settings: EarlyConflictSettings) -> EarlyConflictError:
        return EarlyConflictError(
            instant_time=settings.instant_time,
            conflicting_instant=self.conflicting_instant,
            partition_path=self.partition_path,
            file_id=self.file_id,
            reason=self.reason,
            strategy=settings.strategy.value,
        )


FileGroup = tuple[str, str]  # (partition path, file id)


class ConflictDetector:
    """Finds early conflicts for one write; cheap to build, safe to use from many threads."""

    def __init__(self, storage: Storage, settings: EarlyConflictSettings) -> None:
        if not settings.instant_time:
            raise ValueError("EarlyConflictSettings.for_write() first: the write's instant is not set")
        self.storage = storage
        self.settings = settings
        self._heartbeats = HeartbeatPolicy(settings.heartbeat_expiry_ms, 1)

    def active_older_writers(self, timeline: Timeline) -> list[str]:
        """Pending writes older than ours whose writer is alive (heartbeat not expired)."""
        mine = self.settings.instant_time
        out = []
        for inst in timeline.pending:
            if inst.action not in _WRITE_ACTIONS or inst.requested_time >= mine:
                continue
            requested_ms = int(parse_instant_time(inst.requested_time).timestamp() * 1000)
            if not self._heartbeats.is_expired(self.storage, inst.requested_time, requested_ms=requested_ms):
                out.append(inst.requested_time)
        return out

    def find(
        self, file_groups: Iterable[FileGroup], *, also_committed: Iterable[FileGroup] = ()
    ) -> EarlyConflict | None:
        """The first conflict on any of ``file_groups``, or None.

        ``also_committed``: more file groups to test against completed writes only (the
        ones this process marked earlier: a commit may have changed them since).
        """
        by_partition = _by_partition(file_groups)
        if not by_partition:
            return None
        timeline = Timeline.load(self.storage)
        for writer in self.active_older_writers(timeline):
            for marker in markers_in_partitions(self.storage, writer, by_partition):
                if marker.file_id in by_partition[marker.partition_path]:
                    return EarlyConflict(writer, marker.partition_path, marker.file_id, "marker")
        if self.settings.check_commit_conflict:
            for partition, file_ids in _by_partition(also_committed).items():
                by_partition.setdefault(partition, set()).update(file_ids)
            return self._commit_conflict(timeline, by_partition)
        return None

    def _commit_conflict(self, timeline: Timeline, by_partition: dict[str, set[str]]) -> EarlyConflict | None:
        mine, seen = self.settings.instant_time, self.settings.seen
        for inst in timeline.completed_data_instants:
            if inst.requested_time == mine or inst.requested_time in seen:
                continue
            meta = timeline.commit_metadata(inst)
            if meta.compacted:
                continue  # our logs land on the compacted slices: no conflict (see conflict.py)
            touched = [(s.partition_path, s.file_id) for s in meta.write_stats]
            touched += [(p, f) for p, ids in meta.replaced_file_ids.items() for f in ids]
            for partition, file_id in touched:
                if file_id in by_partition.get(partition, ()):
                    return EarlyConflict(inst.requested_time, partition, file_id, "commit")
        return None

    def check(self, file_groups: Iterable[FileGroup]) -> None:
        """Raise EarlyConflictError if any of ``file_groups`` conflicts."""
        conflict = self.find(file_groups)
        if conflict is not None:
            raise conflict.error(self.settings)

    def guarded_create(self, marker: Marker, create: Callable[[], None]) -> None:
        """Check ``marker``'s file group, then create the marker (both under the file-group
        lock for the transactional strategy). Raises EarlyConflictError, creating nothing.

        With the commit-conflict check on, the file groups this process marked earlier
        for the same write are checked against completed writes too, so a commit that
        changed a file group after its marker was made is found at the next marker.
        """
        group = (marker.partition_path, marker.file_id)
        earlier = _marked_here.setdefault(self.settings.instant_time, set())
        while len(_marked_here) > _MARKED_HERE_WRITES:  # finished writes of a long-lived worker
            del _marked_here[next(iter(_marked_here))]

        def check_then_create() -> None:
            conflict = self.find([group], also_committed=earlier)
            if conflict is not None:
                error = conflict.error(self.settings)
                signal_conflict(self.storage, error)
                raise error
            create()
            earlier.add(group)

        if self.settings.strategy is DetectionStrategy.TRANSACTIONAL_DIRECT:
            with file_group_lock(self.storage, *group):
                check_then_create()
        else:
            check_then_create()


def conflict_signal_path(instant_time: str) -> str:
    return f"{marker_dir(instant_time)}/{CONFLICT_SIGNAL}"


def signal_conflict(storage: Storage, error: EarlyConflictError) -> None:
    """Tell the write's driver, wherever it runs, that a task stopped at a conflict.

    The task's exception reaches the driver only when the engine gives up on the task
    (after its retries); the driver's :class:`ConflictSignalWatcher` sees this file at
    once and cancels the whole job.
    """
    payload = json.dumps(error.payload()).encode()
    storage.create_if_absent(conflict_signal_path(error.instant_time or ""), payload)


def read_conflict_signal(storage: Storage, instant_time: str) -> EarlyConflictError | None:
    try:
        payload = json.loads(storage.read_bytes(conflict_signal_path(instant_time)))
    except (FileNotFoundError, ValueError):
        return None
    return EarlyConflictError(**payload)


class ConflictSignalWatcher:
    """In the driver, for direct markers: cancel the write's job as soon as a task signals a conflict."""

    def __init__(self, storage: Storage, instant_time: str, on_conflict: Callable[[], None],
                 *, poll_ms: int = 200) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.on_conflict = on_conflict
        self.poll_ms = poll_ms
        self.conflict: EarlyConflictError | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidemark-conflict-watcher", daemon=True)

    def start(self) -> ConflictSignalWatcher:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.poll_ms / 1000):
            found = read_conflict_signal(self.storage, self.instant_time)
            if found is not None:
                self.conflict = found
                self.on_conflict()
                return

    def stop(self) -> EarlyConflictError | None:
        """Stop watching; the conflict a task signalled, if any (also one signalled just now)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        return self.conflict or read_conflict_signal(self.storage, self.instant_time)


# File groups this process (a Spark Python worker lives across tasks) marked per write.
_marked_here: dict[str, set[FileGroup]] = {}
_MARKED_HERE_WRITES = 16


def _by_partition(file_groups: Iterable[FileGroup]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for partition, file_id in file_groups:
        out.setdefault(partition, set()).add(file_id)
    return out


@contextlib.contextmanager
def file_group_lock(storage: Storage, partition_path: str, file_id: str) -> Iterator[None]:
    """An exclusive lock on ``partition/fileId`` across processes (``flock``, local file systems).

    Locks are striped over a fixed set of lock files, so no lock file is ever created
    per file group or deleted (deleting a flock file races with its next user); two
    file groups sharing a stripe only wait for each other briefly.
    """
    digest = hashlib.sha1(f"{partition_path}/{file_id}".encode()).digest()
    stripe = int.from_bytes(digest[:4], "big") % FILE_GROUP_LOCK_STRIPES
    path = f"{FILE_GROUP_LOCK_DIR}/{stripe:03d}.lock"
    if not storage.is_local:  # no flock on object stores: a short lease object instead
        with _stripe_lease(storage, path):
            yield
        return
    with exclusive_flock(storage.full_path(path)):
        yield


STRIPE_LEASE_MS = 30_000  # far above the check-then-create it guards; a dead holder's lease lapses


@contextlib.contextmanager
def _stripe_lease(storage: Storage, path: str) -> Iterator[None]:
    """Hold the lease object ``path``: created with put-if-absent, taken over (If-Match) only once
    it is older than STRIPE_LEASE_MS (its holder died), deleted on exit if still ours."""
    import time
    import uuid

    from tidemark.storage import CreateOutcome

    token = uuid.uuid4().hex.encode()
    pause = 0.01
    while True:
        if storage.create_if_absent(path, token) is CreateOutcome.CREATED:
            break
        seen = storage.read_versioned(path)
        written = storage.modified_ms(path) if seen is not None else None
        if seen is not None and written is not None and time.time() * 1000 - written > STRIPE_LEASE_MS \
                and storage.replace_if_match(path, token, seen.version):
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.2)
    try:
        yield
    finally:
        current = storage.read_versioned(path)
        if current is not None and current.data == token:
            storage.delete(path)


class AsyncConflictChecker:
    """The marker server's checker thread: this writer's markers vs. everybody else's.

    Every ``async_period_ms`` (after ``async_initial_delay_ms``) it compares the file
    groups of ``own_markers()`` with the persisted markers of older active writers
    (and, if configured, with commits completed since the write planned). The first
    conflict found is kept in :attr:`conflict` and passed to ``on_conflict``; the
    checker then stops.
    """

    def __init__(
        self,
        detector: ConflictDetector,
        own_markers: Callable[[], Iterable[Marker]],
        on_conflict: Callable[[EarlyConflict], None],
    ) -> None:
        self.detector = detector
        self.own_markers = own_markers
        self.on_conflict = on_conflict
        self.conflict: EarlyConflict | None = None
        self.checks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tidemark-conflict-checker", daemon=True)

    def start(self) -> AsyncConflictChecker:
        self._thread.start()
        return self

    def check_now(self) -> EarlyConflict | None:
        groups = {(m.partition_path, m.file_id) for m in self.own_markers()}
        self.checks += 1
        conflict = self.detector.find(groups)
        if conflict is not None and self.conflict is None:
            self.conflict = conflict
            self.on_conflict(conflict)
        return conflict

    def _run(self) -> None:
        settings = self.detector.settings
        if self._stop.wait(settings.async_initial_delay_ms / 1000):
            return
        while not self._stop.is_set():
            try:
                if self.check_now() is not None:
                    return
            except Exception:  # a torn read or a vanished folder: the next round makes up for it
                log.debug("early conflict check failed; retrying next period", exc_info=True)
            if self._stop.wait(settings.async_period_ms / 1000):
                return

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
