"""Instants: the records of the timeline.

An instant moves through three states, each a file in ``.hoodie/timeline/``::

    <requested>.<action>.requested            REQUESTED   (the write is planned)
    <requested>.<action>.inflight             INFLIGHT    (files may be being written)
    <requested>_<completion>.<action>         COMPLETED   (published atomically; now visible)

For the ``commit`` action the inflight file is just ``<requested>.inflight``
(Hudi's historical name). Times are 17 digits, ``yyyyMMddHHmmssSSS`` in UTC.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass


class Action(str, enum.Enum):
    """Timeline actions; members compare equal to Hudi's names (``Action.COMMIT == "commit"``)."""

    COMMIT = "commit"
    DELTA_COMMIT = "deltacommit"
    REPLACE_COMMIT = "replacecommit"
    CLEAN = "clean"
    ROLLBACK = "rollback"
    SAVEPOINT = "savepoint"
    RESTORE = "restore"
    COMPACTION = "compaction"
    CLUSTERING = "clustering"
    LOG_COMPACTION = "logcompaction"
    INDEXING = "indexing"

    def __str__(self) -> str:
        return self.value

    @property
    def writes_data(self) -> bool:
        """Whether completed instants of this action make data files visible."""
        return self in _DATA_ACTIONS


_DATA_ACTIONS = {
    Action.COMMIT,
    Action.DELTA_COMMIT,
    Action.REPLACE_COMMIT,
    Action.COMPACTION,
    Action.CLUSTERING,
    Action.LOG_COMPACTION,
}


class State(str, enum.Enum):
    """Instant states; members compare equal to their names (``State.COMPLETED == "completed"``)."""

    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"

    def __str__(self) -> str:
        return self.value


_TIME = r"\d{14}(?:\d{3})?"
_COMPLETED_RE = re.compile(rf"^({_TIME})_({_TIME})\.([a-z]+)$")
_PENDING_RE = re.compile(rf"^({_TIME})\.(?:([a-z]+)\.)?(requested|inflight)$")
_ACTIONS = {a.value: a for a in Action}


@dataclass(frozen=True, order=True)
class Instant:
    """One action on the timeline. ``completion_time`` is None unless ``state`` is COMPLETED."""

    requested_time: str
    action: Action
    state: State
    completion_time: str | None = None

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def file_name(self) -> str:
        """The name of the file that represents this instant in its current state."""
        return instant_file_name(self.requested_time, self.action, self.state, self.completion_time)

    def __str__(self) -> str:
        done = f" -> {self.completion_time}" if self.completion_time else ""
        return f"{self.requested_time}{done} {self.action.value} {self.state.value}"


def instant_file_name(requested_time: str, action: Action, state: State, completion_time: str | None = None) -> str:
    if state is State.COMPLETED:
        if not completion_time:
            raise ValueError("a completed instant needs a completion time")
        return f"{requested_time}_{completion_time}.{action.value}"
    if state is State.INFLIGHT and action is Action.COMMIT:
        return f"{requested_time}.inflight"
    return f"{requested_time}.{action.value}.{state.value}"


@functools.lru_cache(maxsize=131_072)
def parse_instant_file_name(name: str) -> Instant | None:
    """The instant a timeline file name stands for, or None for files that are not instants."""
    m = _COMPLETED_RE.match(name)
    if m:
        action = _ACTIONS.get(m.group(3))
        if action is None:
            return None
        return Instant(m.group(1), action, State.COMPLETED, m.group(2))
    m = _PENDING_RE.match(name)
    if m:
        action_name = m.group(2) or "commit"
        action = _ACTIONS.get(action_name)
        if action is None:
            return None
        return Instant(m.group(1), action, State(m.group(3)))
    return None
