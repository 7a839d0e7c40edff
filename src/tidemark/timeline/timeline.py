"""The active timeline: an immutable snapshot of ``.hoodie/timeline/`` at load time.

Only COMPLETED instants make data visible. ``reload()`` returns a fresh snapshot;
a ``Timeline`` object itself never changes.

Archival moves old completed instants into the history (:mod:`.history`), oldest
first. Once anything was archived, an instant time earlier than every
(non-savepoint) instant still on the active timeline belongs to an archived, so
completed, instant: :meth:`Timeline.is_archived`. That is Hudi's "before the
timeline starts" rule, which hudi-rs applies too; it lets the file-system view
see files of archived commits without reading the history. Only callers that
need the archived instants themselves (incremental reads from before the active
timeline, a writer whose snapshot predates an archival) call
:meth:`Timeline.with_history`.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from collections.abc import Set as AbstractSet
from functools import cached_property

from tidemark.errors import CorruptInstantError, InstantNotFoundError, TidemarkError
from tidemark.format.clustering_plan import ClusteringPlan
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.names import TIMELINE_DIR
from tidemark.format.properties import load_properties
from tidemark.storage import Storage
from tidemark.timeline.history import ArchivedTimeline, has_history
from tidemark.timeline.instant import Action, Instant, State, instant_file_name, parse_instant_file_name
from tidemark.timeline.layout_v1 import (
    LAYOUT_V1_DIR,
    LEGACY_LOGS_NAME,
    UPGRADE_MARKER_NAME,
    has_v1_archive,
    is_layout_v1,
    load_v1_instants,
    v1_file_name,
)

_METADATA: dict[str, CommitMetadata] = {}
_METADATA_LIMIT = 20_000


def _read_commit_metadata(full_path: str, storage: Storage, path: str) -> CommitMetadata:
    """Completed instant files never change, so their parsed metadata is cached per process."""
    meta = _METADATA.get(full_path)
    if meta is None:
        meta = CommitMetadata.from_bytes(storage.read_bytes(path), source=path)
        if len(_METADATA) >= _METADATA_LIMIT:
            _METADATA.clear()
        _METADATA[full_path] = meta
    return meta


# Completed files of these actions always hold Avro metadata; an empty one was damaged.
NEVER_EMPTY_WHEN_COMPLETED = frozenset(
    {
        Action.COMMIT,
        Action.DELTA_COMMIT,
        Action.REPLACE_COMMIT,
        Action.CLEAN,
        Action.ROLLBACK,
        Action.SAVEPOINT,
        Action.RESTORE,
    }
)

_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}

# Table-service instants change their action when they complete (as in Hudi 1.x): a
# clustering is pending as ``<t>.clustering.requested/.inflight`` and completes as
# ``<t>_<c>.replacecommit``; a compaction completes as a ``commit``. Their files are one
# instant, so they are matched under the action they complete as.
_COMPLETES_AS = {
    Action.CLUSTERING: Action.REPLACE_COMMIT,
    Action.COMPACTION: Action.COMMIT,
    Action.LOG_COMPACTION: Action.DELTA_COMMIT,
}


def _order(i: Instant) -> tuple[str, str]:
    return (i.requested_time, i.action.value)


class _LoadedTimeline:
    """The parsed state of one listing: file names, the furthest state of each instant, sorted,
    and the largest time on it. Never changed once built: a new listing extends it into a new one,
    parsing only the names that are new (so a reload costs the listing plus the new instants)."""

    def __init__(
        self,
        names: set[str],
        best: dict[tuple[str, Action], Instant],
        instants: list[Instant],
        max_time: str | None,
        pending: list[Instant],
    ) -> None:
        self.names = names
        self.best = best
        self.instants = instants
        self.max_time = max_time
        self.pending = pending  # the instants not completed, in order

    @classmethod
    def build(cls, names: set[str]) -> _LoadedTimeline:
        best: dict[tuple[str, Action], Instant] = {}
        for name in names:
            _keep_furthest(best, parse_instant_file_name(name))
        instants = sorted(best.values(), key=_order)
        return cls(names, best, instants, _max_time(instants), [i for i in instants if not i.is_completed])

    def _with_names(self, names: set[str]) -> _LoadedTimeline:
        return _LoadedTimeline(names, self.best, self.instants, self.max_time, self.pending)

    def extended(self, added: set[str], names: set[str]) -> _LoadedTimeline:
        """This state with the files ``added`` (``names``: the whole new listing)."""
        if not added:
            return self if len(names) == len(self.names) else self._with_names(names)
        changed: dict[tuple[str, Action], Instant] = {}
        for name in added:
            inst = parse_instant_file_name(name)
            if inst is None:
                continue
            key = _key(inst)
            current = changed.get(key) or self.best.get(key)
            if current is None or _RANK[inst.state] > _RANK[current.state]:
                changed[key] = inst
        if not changed:
            return self._with_names(names)
        best = dict(self.best)
        best.update(changed)
        instants, pending = list(self.instants), list(self.pending)
        for key, inst in changed.items():  # only the instants that changed move: no pass over all
            old = self.best.get(key)
            if old is not None:
                instants.pop(bisect.bisect_left(instants, _order(old), key=_order))
                if not old.is_completed:
                    pending.pop(bisect.bisect_left(pending, _order(old), key=_order))
            instants.insert(bisect.bisect_left(instants, _order(inst), key=_order), inst)
            if not inst.is_completed:
                pending.insert(bisect.bisect_left(pending, _order(inst), key=_order), inst)
        new_max = _max_time(changed.values())
        max_time = max(filter(None, [self.max_time, new_max]), default=None)
        return _LoadedTimeline(names, best, instants, max_time, pending)


def _max_time(instants: Iterable[Instant]) -> str | None:
    """The largest requested or completion time of ``instants``."""
    times = [t for i in instants for t in (i.requested_time, i.completion_time) if t]
    return max(times, default=None)


def _key(inst: Instant) -> tuple[str, Action]:
    return (inst.requested_time, _COMPLETES_AS.get(inst.action, inst.action))


def _keep_furthest(best: dict[tuple[str, Action], Instant], inst: Instant | None) -> bool:
    # Several files stand for one instant (requested, inflight, completed): keep the furthest.
    if inst is None:
        return False
    key = _key(inst)
    current = best.get(key)
    if current is None or _RANK[inst.state] > _RANK[current.state]:
        best[key] = inst
        return True
    return False


def _is_temp(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


_LOADED: dict[str, _LoadedTimeline] = {}
_HISTORY: dict[str, bool] = {}  # base path -> whether the table had an archived history at the last load


_ALL_ARCHIVED = "9" * 17  # no instant left on the active timeline: every time is archived


def archive_boundary(instants: Iterable[Instant]) -> str:
    """The earliest requested time of an active instant other than a savepoint.

    Savepoints stay on the active timeline while the instants around them are archived
    (hoodie.archive.beyond.savepoint), so they do not mark where the timeline starts.
    """
    return min((i.requested_time for i in instants if i.action is not Action.SAVEPOINT), default=_ALL_ARCHIVED)


def _on_layout_v1(storage: Storage) -> bool:
    try:
        return is_layout_v1(load_properties(storage.read_bytes))
    except TidemarkError:  # a damaged hoodie.properties is reported by whoever opens the table
        return False


class Timeline:
    """Instants ordered by requested time, with queries by state, action and completion."""

    def __init__(
        self,
        storage: Storage,
        instants: Iterable[Instant],
        *,
        presorted: bool = False,
        archived_before: str | None = None,
        history: ArchivedTimeline | None = None,
        layout_v1: bool = False,
        legacy_log_names: bool = False,
    ) -> None:
        self._storage = storage
        # A version 6 table's timeline (layout 1, read only): instant files in .hoodie/ itself.
        self.layout_v1 = layout_v1
        # Logs may be named the version 6 way (after their base instant, not their deltacommit).
        self.legacy_log_names = layout_v1 or legacy_log_names
        self._instants = list(instants) if presorted else sorted(instants, key=_order)
        # Set once something was archived: times before it are of archived, completed instants.
        self.archived_before = archived_before
        self._history = history
        self._max_time: str | None | bool = False  # False: not known yet (see max_time)
        # The file names of the listing this timeline was loaded from (None: not a plain load).
        self.file_names: AbstractSet[str] | None = None
        self._since: tuple[AbstractSet[str], list[Instant]] | None = None

    @classmethod
    def load(cls, storage: Storage) -> Timeline:
        """List the timeline folder. Only names that changed since the last load of the same
        table in this process are parsed again, so reloading a long timeline stays cheap."""
        names = set(storage.list_names(TIMELINE_DIR))
        # A version 6 table has no timeline folder; one being upgraded has it half written and
        # marked (UPGRADE_MARKER) until hoodie.properties says version 8.
        if (not names or UPGRADE_MARKER_NAME in names) and _on_layout_v1(storage):
            instants = load_v1_instants(storage)
            # Hudi 0.x archived instants (.hoodie/archived/) are before the active timeline, as in v8.
            boundary = archive_boundary(instants) if has_v1_archive(storage) else None
            return cls(storage, instants, presorted=True, archived_before=boundary, layout_v1=True)
        key = storage.base_path
        cached = _LOADED.get(key)
        # Hidden temporary files (a create-if-absent or a staged commit in progress) name no
        # instant: their removal is no instant file removed.
        rebuilt = True
        if cached is not None:
            added = names - cached.names
            removed = len(cached.names) + len(added) - len(names)  # no second set difference unless some were
            rebuilt = removed > 0 and any(not _is_temp(n) for n in cached.names - names)
        if cached is None or rebuilt:  # first load, or instant files were removed
            cached = _LoadedTimeline.build(names)
        else:
            cached = cached.extended(added, names)
        _LOADED[key] = cached
        archived = _HISTORY.get(key)
        if rebuilt or archived is None:
            # Asked again only when instant files were removed since the last load: archival
            # writes the history before it deletes the instants it moved there, so while the
            # listing only grew, whether anything was archived has not changed in a way that
            # matters (every instant is still active). Two requests saved per load on S3.
            archived = _HISTORY[key] = has_history(storage)
        boundary = archive_boundary(cached.instants) if archived else None
        timeline = cls(storage, cached.instants, presorted=True, archived_before=boundary,
                       legacy_log_names=LEGACY_LOGS_NAME in names)
        # What the load knows already, so that the commit's checks under the lock need no pass
        # over every instant: the largest time, the pending instants, the listing itself.
        timeline._max_time = cached.max_time
        timeline.__dict__["pending"] = list(cached.pending)  # the cached_property, filled
        timeline.file_names = cached.names
        return timeline

    def restricted(self, instants: Iterable[Instant]) -> Timeline:
        """A timeline of some of these instants that keeps this one's archive boundary and history."""
        return Timeline(self._storage, instants, archived_before=self.archived_before, history=self._history,
                        layout_v1=self.layout_v1, legacy_log_names=self.legacy_log_names)

    def earliest_active_completion(self) -> str | None:
        """The earliest completion time of an active completed instant, savepoints aside.

        Every archived instant completed before it (archival keeps that so), which tells
        an incremental reader whether its range reaches into the history.
        """
        times = [
            i.completion_time
            for i in self._instants
            if i.is_completed and i.completion_time and i.action is not Action.SAVEPOINT
            and (self._history is None or (i.requested_time, i.action) not in self._history.location)
        ]
        return min(times, default=None)

    def is_archived(self, requested_time: str) -> bool:
        """Whether ``requested_time`` is before the active timeline starts (an archived instant)."""
        return self.archived_before is not None and requested_time < self.archived_before

    @property
    def has_history(self) -> bool:
        return self._history is not None

    def with_history(self) -> Timeline:
        """This timeline plus every archived instant (completed), read from the history.

        The history is read here, so call it only when archived instants are needed.
        """
        if self._history is not None or self.archived_before is None or self.layout_v1:
            return self  # a version 6 table's archive is read by its upgrade only
        history = ArchivedTimeline.load(self._storage)
        active = {(i.requested_time, i.action) for i in self._instants}
        archived = [i for i in history.instants if (i.requested_time, i.action) not in active]
        return Timeline(
            self._storage, [*archived, *self._instants], archived_before=self.archived_before, history=history,
            legacy_log_names=self.legacy_log_names,
        )

    def reload(self) -> Timeline:
        return Timeline.load(self._storage)

    def __iter__(self) -> Iterator[Instant]:
        return iter(self._instants)

    def __len__(self) -> int:
        return len(self._instants)

    @property
    def instants(self) -> list[Instant]:
        return list(self._instants)

    def filter(
        self,
        *,
        actions: Iterable[Action] | None = None,
        states: Iterable[State] | None = None,
    ) -> list[Instant]:
        acts = set(actions) if actions is not None else None
        sts = set(states) if states is not None else None
        return [i for i in self._instants if (acts is None or i.action in acts) and (sts is None or i.state in sts)]

    @cached_property
    def completed(self) -> list[Instant]:
        """Completed instants in requested-time order."""
        return [i for i in self._instants if i.is_completed]

    @cached_property
    def completed_data_instants(self) -> list[Instant]:
        return [i for i in self.completed if i.action.writes_data]

    def by_completion_time(self) -> list[Instant]:
        """Completed instants ordered by completion time (the order incremental readers use)."""
        return sorted(self.completed, key=lambda i: (i.completion_time or "", i.requested_time))

    @cached_property
    def pending(self) -> list[Instant]:
        return [i for i in self._instants if not i.is_completed]

    @cached_property
    def _completed_times(self) -> dict[str, Instant]:
        # A savepoint shares its commit's time: the commit is the instant a time stands for.
        times = {i.requested_time: i for i in self.completed if not i.action.writes_data}
        times.update((i.requested_time, i) for i in self.completed_data_instants)
        return times

    def is_completed(self, requested_time: str) -> bool:
        return requested_time in self._completed_times

    def completed_instant(self, requested_time: str) -> Instant | None:
        return self._completed_times.get(requested_time)

    def get(self, requested_time: str) -> Instant:
        for inst in self._instants:
            if inst.requested_time == requested_time:
                return inst
        raise InstantNotFoundError(requested_time, "no instant with that requested time")

    def last_completed_data_instant(self) -> Instant | None:
        done = self.completed_data_instants
        return max(done, key=lambda i: i.completion_time or "") if done else None

    def latest_schema_json(self) -> str | None:
        """The table schema (Avro JSON) of the latest completed write that recorded one.

        Writes that fix no schema (a delete or an empty write on a table without one yet)
        record none; they are passed over.
        """
        done = sorted(self.completed_data_instants, key=lambda i: i.completion_time or "", reverse=True)
        for instant in done:
            schema_json = self.commit_metadata(instant).schema_json
            if schema_json:
                return schema_json
        return None

    def max_time(self) -> str | None:
        """The largest requested or completion time on the timeline (a load knows it already)."""
        if self._max_time is False:
            self._max_time = _max_time(self._instants)
        return self._max_time  # type: ignore[return-value]

    def completed_since(self, snapshot_files: AbstractSet[str] | None) -> list[Instant] | None:
        """The instants whose completed file is on this timeline's listing but was not on the
        listing ``snapshot_files`` (an earlier load's :attr:`file_names`), in requested-time order:
        the instants that completed since that snapshot, found from the names that are new
        (one set difference) instead of a pass over every instant. None when either timeline
        is not a plain load of the folder (then compare the instants themselves)."""
        if snapshot_files is None or self.file_names is None or self.layout_v1:
            return None
        if self._since is not None and self._since[0] is snapshot_files:  # asked once per check
            return list(self._since[1])
        found = {}
        for name in self.file_names - snapshot_files:
            inst = parse_instant_file_name(name)
            if inst is not None and inst.is_completed:
                found[_key(inst)] = inst
        since = sorted(found.values(), key=_order)
        self._since = (snapshot_files, since)
        return list(since)

    def pending_instant(self, requested_time: str) -> Instant | None:
        """The pending instant requested at ``requested_time`` (a binary search), or None."""
        at = bisect.bisect_left(self._instants, (requested_time, ""), key=_order)
        for inst in self._instants[at:]:
            if inst.requested_time != requested_time:
                return None
            if not inst.is_completed:
                return inst
        return None

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """The commit metadata of a completed data instant (cached per process), archived or not."""
        if not instant.is_completed:
            raise InstantNotFoundError(instant.requested_time, "not completed")
        path = self.instant_path(instant)
        full = self._storage.full_path(path)
        if full not in _METADATA and self._archived_file(instant, path):
            meta = CommitMetadata.from_bytes(self._history_bytes(instant))
            _METADATA[full] = meta
            return meta
        try:
            return _read_commit_metadata(full, self._storage, path)
        except FileNotFoundError:
            # Archived by another process since this snapshot was listed: read it from the history.
            meta = CommitMetadata.from_bytes(self._moved_bytes(instant, path), source=path)
            _METADATA[full] = meta
            return meta

    def instant_bytes(self, instant: Instant) -> bytes:
        """The raw content of a completed instant's file (from the history if it was archived).

        Raises CorruptInstantError for an empty completed file of an action whose completed
        file always has content (Hudi writes some, such as ``indexing``, empty).
        """
        path = self.instant_path(instant)
        if self._archived_file(instant, path):
            return self._history_bytes(instant)
        try:
            data = self._storage.read_bytes(path)
        except FileNotFoundError:
            return self._moved_bytes(instant, path)
        if not data and instant.is_completed and instant.action in NEVER_EMPTY_WHEN_COMPLETED:
            raise CorruptInstantError(path, "the file is empty", instant_time=instant.requested_time)
        return data

    def instant_path(self, instant: Instant) -> str:
        """Where the file of ``instant`` (in its current state) is, relative to the base path."""
        if self.layout_v1:
            return f"{LAYOUT_V1_DIR}/{v1_file_name(instant.requested_time, instant.action, instant.state)}"
        return f"{TIMELINE_DIR}/{instant.file_name}"

    def _history_bytes(self, instant: Instant) -> bytes:
        """The instant's metadata from the loaded history; from a fresh load of it if the
        history was compacted since (its files are replaced, never edited)."""
        assert self._history is not None
        try:
            return self._history.metadata_bytes(instant)
        except FileNotFoundError:
            return self._moved_bytes(instant, self.instant_path(instant))

    def _moved_bytes(self, instant: Instant, path: str) -> bytes:
        """The metadata of a completed instant whose active file is gone since this snapshot.

        Archival writes the history before it deletes the instant files it moved there, so an
        instant file that vanished under a reader is in the history now. Raises
        InstantNotFoundError if it is not there either (a restore removed it).
        """
        if instant.is_completed and not self.layout_v1:
            for _ in range(3):  # the history itself may be compacted while it is read: read it again
                try:
                    history = ArchivedTimeline.load(self._storage)
                    if (instant.requested_time, instant.action) not in history.location:
                        break
                    return history.metadata_bytes(instant)
                except FileNotFoundError:
                    continue
        raise InstantNotFoundError(
            instant.requested_time,
            f"{path} left the timeline while it was read (archived, rolled back or restored by another "
            "writer); load the timeline again",
        )

    def _archived_file(self, instant: Instant, path: str) -> bool:
        """Whether the instant's file left the active timeline for the (loaded) history."""
        history = self._history
        return (
            history is not None
            and (instant.requested_time, instant.action) in history.location
            and not self._storage.exists(path)
        )

    def clustering_plan(self, instant: Instant) -> ClusteringPlan | None:
        """The plan of a clustering instant (pending or completed), or None if it has none."""
        for action in (Action.CLUSTERING, Action.REPLACE_COMMIT):
            path = f"{TIMELINE_DIR}/{instant_file_name(instant.requested_time, action, State.REQUESTED)}"
            try:
                data = self._storage.read_bytes(path)
            except FileNotFoundError:
                continue
            return ClusteringPlan.from_bytes(data, source=path)
        return None

    @cached_property
    def pending_clustering(self) -> list[Instant]:
        return [i for i in self.pending if i.action is Action.CLUSTERING]
