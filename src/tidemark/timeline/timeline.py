"""The active timeline: an immutable snapshot of ``.hoodie/timeline/`` at load time.

Only COMPLETED instants make data visible. ``reload()`` returns a fresh snapshot;
a ``Timeline`` object itself never changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import cached_property

from tidemark.errors import InstantNotFoundError
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.names import TIMELINE_DIR
from tidemark.storage import Storage
from tidemark.timeline.instant import Action, Instant, State, parse_instant_file_name


class Timeline:
    """Instants ordered by requested time, with queries by state, action and completion."""

    def __init__(self, storage: Storage, instants: Iterable[Instant]) -> None:
        self._storage = storage
        self._instants = sorted(instants, key=lambda i: (i.requested_time, i.action.value))
        self._metadata_cache: dict[str, CommitMetadata] = {}

    @classmethod
    def load(cls, storage: Storage) -> Timeline:
        # Several files stand for one instant (requested, inflight, completed): keep the furthest.
        rank = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}
        best: dict[tuple[str, Action], Instant] = {}
        for info in storage.list_dir(TIMELINE_DIR):
            inst = parse_instant_file_name(info.name)
            if inst is None:
                continue
            key = (inst.requested_time, inst.action)
            if key not in best or rank[inst.state] > rank[best[key].state]:
                best[key] = inst
        return cls(storage, best.values())

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
        name = instant.file_name
        meta = self._metadata_cache.get(name)
        if meta is None:
            meta = CommitMetadata.from_bytes(self._storage.read_bytes(f"{TIMELINE_DIR}/{name}"))
            self._metadata_cache[name] = meta
        return meta
