"""The active timeline: an immutable snapshot of ``.hoodie/timeline/`` at load time.

Only COMPLETED instants make data visible. ``reload()`` returns a fresh snapshot;
a ``Timeline`` object itself never changes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from functools import cached_property

from tidemark.errors import InstantNotFoundError
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.names import TIMELINE_DIR
from tidemark.storage import Storage
from tidemark.timeline.instant import Action, Instant, State, parse_instant_file_name

_METADATA: dict[str, CommitMetadata] = {}
_METADATA_LIMIT = 20_000


def _read_commit_metadata(full_path: str, storage: Storage, path: str) -> CommitMetadata:
    """Completed instant files never change, so their parsed metadata is cached per process."""
    meta = _METADATA.get(full_path)
    if meta is None:
        meta = CommitMetadata.from_bytes(storage.read_bytes(path))
        if len(_METADATA) >= _METADATA_LIMIT:
            _METADATA.clear()
        _METADATA[full_path] = meta
    return meta


_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


def _order(i: Instant) -> tuple[str, str]:
    return (i.requested_time, i.action.value)


class _LoadedTimeline:
    """The parsed state of one listing: file names, the furthest state of each instant, sorted."""

    def __init__(self, names: set[str], best: dict[tuple[str, Action], Instant], instants: list[Instant]) -> None:
        self.names = names
        self.best = best
        self.instants = instants

    @classmethod
    def build(cls, names: set[str]) -> _LoadedTimeline:
        best: dict[tuple[str, Action], Instant] = {}
        for name in names:
            _keep_furthest(best, parse_instant_file_name(name))
        return cls(names, best, sorted(best.values(), key=_order))

    def extended(self, added: set[str]) -> _LoadedTimeline:
        if not added:
            return self
        best = dict(self.best)
        changed = False
        for name in added:
            changed |= _keep_furthest(best, parse_instant_file_name(name))
        if not changed:
            return _LoadedTimeline(self.names | added, best, self.instants)
        instants = list(self.instants)
        for key, inst in best.items():
            old = self.best.get(key)
            if old is inst:
                continue
            if old is not None:
                instants.pop(bisect.bisect_left(instants, _order(old), key=_order))
            instants.insert(bisect.bisect_left(instants, _order(inst), key=_order), inst)
        return _LoadedTimeline(self.names | added, best, instants)


def _keep_furthest(best: dict[tuple[str, Action], Instant], inst: Instant | None) -> bool:
    # Several files stand for one instant (requested, inflight, completed): keep the furthest.
    if inst is None:
        return False
    # v8: a compaction is planned as ``<t>.compaction.requested`` and completes as
    # ``<t>_<c>.commit``; both stand for one instant, pending as compaction, done as commit.
    action = Action.COMMIT if inst.action is Action.COMPACTION else inst.action
    key = (inst.requested_time, action)
    current = best.get(key)
    if current is None or _RANK[inst.state] > _RANK[current.state]:
        best[key] = inst
        return True
    return False


_LOADED: dict[str, _LoadedTimeline] = {}


class Timeline:
    """Instants ordered by requested time, with queries by state, action and completion."""

    def __init__(self, storage: Storage, instants: Iterable[Instant], *, presorted: bool = False) -> None:
        self._storage = storage
        self._instants = list(instants) if presorted else sorted(instants, key=_order)

    @classmethod
    def load(cls, storage: Storage) -> Timeline:
        """List the timeline folder. Only names that changed since the last load of the same
        table in this process are parsed again, so reloading a long timeline stays cheap."""
        names = set(storage.list_names(TIMELINE_DIR))
        key = storage.base_path
        cached = _LOADED.get(key)
        if cached is None or not cached.names <= names:  # first load, or files were removed
            cached = _LoadedTimeline.build(names)
        else:
            cached = cached.extended(names - cached.names)
        _LOADED[key] = cached
        return cls(storage, cached.instants, presorted=True)

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
        return {i.requested_time: i for i in self.completed}

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

    def max_time(self) -> str | None:
        """The largest requested or completion time on the timeline."""
        times = [i.requested_time for i in self._instants]
        times += [i.completion_time for i in self._instants if i.completion_time]
        return max(times) if times else None

    def commit_metadata(self, instant: Instant) -> CommitMetadata:
        """The commit metadata of a completed data instant (cached per snapshot)."""
        if not instant.is_completed:
            raise InstantNotFoundError(instant.requested_time, "not completed")
        path = f"{TIMELINE_DIR}/{instant.file_name}"
        return _read_commit_metadata(self._storage.full_path(path), self._storage, path)
