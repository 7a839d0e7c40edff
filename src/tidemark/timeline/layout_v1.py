"""Timeline layout version 1: the timeline of a version 6 table (Hudi 0.14 / 0.15).

Layout 1 keeps instant files directly in ``.hoodie/``, named without a completion time::

    <t>.<action>.requested     REQUESTED
    <t>.<action>.inflight      INFLIGHT  (``<t>.inflight`` for a commit)
    <t>.<action>               COMPLETED

A layout-1 instant has no completion time in its name. Hudi 1.x, reading a version 6
table, takes the completion time of a completed instant from its file's modification
time (and its upgrade to version 8 writes that time into the new file name); tidemark
does the same, formatted in UTC. A completion is never before its requested time (a
v6 writer may have used local time for instant times), so it is raised to the
requested time when the clock says otherwise.

Completed commit files of version 6 hold JSON commit metadata, which
:meth:`tidemark.format.commit_metadata.CommitMetadata.from_bytes` reads as well as Avro.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from tidemark.format.names import HOODIE_DIR, TIMELINE_DIR
from tidemark.storage import Storage
from tidemark.timeline.instant import Action, Instant, State
from tidemark.timeline.instant_time import format_instant_time

LAYOUT_V1_DIR = HOODIE_DIR
ARCHIVED_DIR = f"{HOODIE_DIR}/archived"
# Present in .hoodie/timeline/ while an upgrade to version 8 writes that folder: until
# hoodie.properties says version 8, the layout-1 timeline in .hoodie/ is the table's.
UPGRADE_MARKER_NAME = ".upgrade_from_layout_v1"
UPGRADE_MARKER = f"{TIMELINE_DIR}/{UPGRADE_MARKER_NAME}"
# Left in .hoodie/timeline/ by the upgrade of a merge-on-read table: its older log files are
# named the version 6 way, after their file slice's base instant instead of the deltacommit
# that wrote them, so readers find their writer in the deltacommits' metadata.
LEGACY_LOGS_NAME = ".legacy_log_names_v6"
LEGACY_LOGS_MARKER = f"{TIMELINE_DIR}/{LEGACY_LOGS_NAME}"

_TIME = r"\d{14}(?:\d{3})?"
_NAME_RE = re.compile(rf"^({_TIME})\.(?:([a-z]+)(?:\.(requested|inflight))?|(inflight))$")
_ACTIONS = {a.value: a for a in Action}
# Version 6 names a pending clustering ``replacecommit``; version 8 names it ``clustering``.
PENDING_RENAMES = {Action.REPLACE_COMMIT: Action.CLUSTERING}


def parse_v1_file_name(name: str) -> tuple[str, Action, State] | None:
    """(requested time, action, state) of a layout-1 instant file name, or None for other files."""
    m = _NAME_RE.match(name)
    if m is None:
        return None
    if m.group(4):  # "<t>.inflight": a commit in flight
        return m.group(1), Action.COMMIT, State.INFLIGHT
    action = _ACTIONS.get(m.group(2) or "")
    if action is None:
        return None
    state = State(m.group(3)) if m.group(3) else State.COMPLETED
    return m.group(1), action, state


def v1_file_name(requested_time: str, action: Action, state: State) -> str:
    """The layout-1 name of an instant file."""
    if state is State.COMPLETED:
        return f"{requested_time}.{action.value}"
    if state is State.INFLIGHT and action is Action.COMMIT:
        return f"{requested_time}.inflight"
    return f"{requested_time}.{action.value}.{state.value}"


def completion_from_mtime(requested_time: str, modified_ms: int | None) -> str:
    """The completion time Hudi 1.x gives a layout-1 completed instant: its file's mtime."""
    if modified_ms is None:
        return requested_time
    moment = datetime.fromtimestamp(modified_ms / 1000, UTC)
    return max(format_instant_time(moment), requested_time.ljust(17, "0"))


_RANK = {State.REQUESTED: 0, State.INFLIGHT: 1, State.COMPLETED: 2}


def load_v1_instants(storage: Storage) -> list[Instant]:
    """Every instant of a layout-1 timeline, in its furthest state, by requested time."""
    best: dict[tuple[str, Action], tuple[Instant, str]] = {}
    for name in storage.list_names(LAYOUT_V1_DIR):
        parsed = parse_v1_file_name(name)
        if parsed is None:
            continue
        requested, action, state = parsed
        key = (requested, action)
        current = best.get(key)
        if current is not None and _RANK[current[0].state] >= _RANK[state]:
            continue
        best[key] = (Instant(requested, action, state), name)
    out = []
    for inst, name in best.values():
        if inst.is_completed:
            mtime = storage.modified_ms(f"{LAYOUT_V1_DIR}/{name}")
            inst = Instant(inst.requested_time, inst.action, State.COMPLETED,
                           completion_from_mtime(inst.requested_time, mtime))
        out.append(inst)
    return sorted(out, key=lambda i: (i.requested_time, i.action.value))


def has_v1_archive(storage: Storage) -> bool:
    """Whether Hudi 0.x archived anything (``.hoodie/archived/.commits_.archive.<n>_<token>``)."""
    return any(name.startswith(".commits_.archive.") for name in storage.list_names(ARCHIVED_DIR))


def is_layout_v1(props: dict[str, str] | None) -> bool:
    """Whether ``hoodie.properties`` describes a table on timeline layout 1 (table version < 8)."""
    if not props:
        return False
    version = props.get("hoodie.table.version", "")
    layout = props.get("hoodie.timeline.layout.version", "")
    return layout == "1" or (version.isdigit() and int(version) < 8 and layout != "2")
