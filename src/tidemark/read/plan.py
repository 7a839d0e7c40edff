"""Read planning, engine-free: which base files a query reads and which rows it keeps.

* snapshot: the latest file slice of every live file group (base file, plus
  its log files on merge-on-read tables, merged by :mod:`tidemark.read.merge`);
* read-optimized: the latest base files only (no logs: fast, possibly stale);
* time travel (``as_of``): the same, counting only instants requested at or
  before ``as_of`` (Hudi's rule, shared with hudi-rs);
* incremental: file groups touched by instants whose *completion* time lies in
  ``(start, end]``, read at their latest version as of ``end``, keeping only the
  rows those instants wrote. Ordering by completion time means a commit that
  started early but finished late is still seen exactly once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidemark.errors import InvalidInputError
from tidemark.format.partition_path import partition_values
from tidemark.fsview import BaseFile, FileSystemView
from tidemark.fsview.view import FileGroup, LogFile
from tidemark.metadata.listing import table_view
from tidemark.storage import Storage
from tidemark.timeline import Instant, Timeline
from tidemark.timeline.instant_time import parse_instant_time

PartitionFilter = tuple[str, str, Any]


@dataclass(frozen=True)
class ReadPlan:
    files: tuple[BaseFile, ...]
    commit_times: frozenset[str] | None  # keep only rows with these _hoodie_commit_time values
    instants: tuple[Instant, ...] = ()  # incremental: the instants read, by completion time
    end: str | None = None  # incremental: the checkpoint to resume from
    # merge-on-read: the log files to merge over each base file (by base file path), in merge order
    logs: Mapping[str, tuple[LogFile, ...]] = field(default_factory=dict)

    @property
    def merges(self) -> bool:
        return any(self.logs.values())

    def logs_of(self, base: BaseFile) -> tuple[LogFile, ...]:
        return self.logs.get(base.path, ())


def _slice_logs(groups: Sequence[FileGroup]) -> dict[str, tuple[LogFile, ...]]:
    return {g.latest.path: tuple(g.latest_slice.logs) for g in groups if g.latest_slice.logs}


def check_instant_time(value: str, what: str) -> str:
    try:
        parse_instant_time(str(value))
    except ValueError as exc:
        raise InvalidInputError(f"{what}: {exc}") from None
    return str(value)


def _matches(value: str, op: str, target: Any) -> bool:
    def typed(v: Any) -> Any:
        if isinstance(target, (int, float)) and not isinstance(target, bool):
            try:
                return type(target)(v)
            except ValueError:
                return v
        return str(v)

    if op in ("in", "not in"):
        hit = any(typed(value) == (t if isinstance(t, (int, float)) else str(t)) for t in target)
        return hit if op == "in" else not hit
    left, right = typed(value), target if isinstance(target, (int, float)) else str(target)
    ops = {
        "=": lambda: left == right,
        "==": lambda: left == right,
        "!=": lambda: left != right,
        "<": lambda: left < right,
        "<=": lambda: left <= right,
        ">": lambda: left > right,
        ">=": lambda: left >= right,
    }
    if op not in ops:
        raise InvalidInputError(f"unknown filter operator {op!r}; use one of {sorted(ops)}, in, not in")
    return bool(ops[op]())


def prune(
    files: Sequence[BaseFile],
    filters: Sequence[PartitionFilter] | None,
    fields: Sequence[str],
    hive_style: bool,
    *,
    url_encode: bool = False,
) -> list[BaseFile]:
    """The files whose partition values (decoded as written) pass every filter."""
    if not filters:
        return list(files)
    for column, _, _ in filters:
        if column not in fields:
            raise InvalidInputError(
                f"filters prune partitions: {column!r} is not a partition field {list(fields)}; "
                "filter the returned DataFrame for other columns"
            )
    out = []
    for f in files:
        values = partition_values(f.partition_path, fields, hive_style, url_encode=url_encode)
        if all(_matches(values[c], op, v) for c, op, v in filters):
            out.append(f)
    return out


def snapshot_plan(
    storage: Storage, timeline: Timeline, *, as_of: str | None = None, read_optimized: bool = False
) -> ReadPlan:
    if as_of is not None:
        as_of = check_instant_time(as_of, "as_of")
    view = table_view(storage, timeline, as_of=as_of)  # the metadata table's listing when it can be trusted
    groups = view.file_groups()
    logs = {} if read_optimized else _slice_logs(groups)
    return ReadPlan(tuple(g.latest for g in groups), None, logs=logs)


def _starts_before(timeline: Timeline, start: str) -> bool:
    """Whether an archived commit could have completed after ``start``.

    Archival guarantees that every archived instant completed before every completed
    instant still active (savepoints aside), so only a ``start`` before the earliest
    active completion time can reach archived commits.
    """
    if timeline.archived_before is None:
        return False
    earliest = timeline.earliest_active_completion()
    return earliest is None or start < earliest


def incremental_plan(storage: Storage, timeline: Timeline, *, start: str | None, end: str | None) -> ReadPlan:
    """Rows written by instants that completed in ``(start, end]``; ``end`` defaults to now."""
    if start is not None:
        start = check_instant_time(start, "start")
    if end is not None:
        end = check_instant_time(end, "end")
    if start is None or timeline.is_archived(start) or _starts_before(timeline, start):
        # The range reaches back before the active timeline: the archived commits count too.
        timeline = timeline.with_history()
    ordered = [i for i in timeline.by_completion_time() if i.action.writes_data]
    chosen = [
        i
        for i in ordered
        if (start is None or (i.completion_time or "") > start) and (end is None or (i.completion_time or "") <= end)
    ]
    checkpoint = end or (ordered[-1].completion_time if ordered else start)
    if not chosen:
        return ReadPlan((), frozenset(), (), checkpoint)
    # The latest version of each touched file group among instants completed by `end`.
    last = chosen[-1].completion_time or ""
    horizon = timeline.restricted(i for i in timeline if not i.is_completed or (i.completion_time or "") <= last)
    view = FileSystemView(storage, horizon)
    touched: set[tuple[str, str]] = set()
    for inst in chosen:
        touched |= {(s.partition_path, s.file_id) for s in timeline.commit_metadata(inst).write_stats}
    groups = [g for g in view.file_groups() if (g.partition_path, g.file_id) in touched]
    return ReadPlan(
        tuple(g.latest for g in groups),
        frozenset(i.requested_time for i in chosen),
        tuple(chosen),
        checkpoint,
        logs=_slice_logs(groups),
    )
