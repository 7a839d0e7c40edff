"""Deletes for incremental consumers: the records each commit of a range removed.

An incremental read returns the rows that commits in ``(start, end]`` wrote; a record a
commit deleted leaves no row behind, so a downstream mirror would never learn of it. This
module finds them: for each commit that deleted records (a delete, an upsert carrying
deletes, an overwrite or a partition delete), the records visible in the file groups it
touched just before it completed and no longer visible just after. Each comes back with its
last stored values (the "before image"), ``_hoodie_commit_time`` set to the deleting commit
and ``_hoodie_operation`` = ``delete``.

"Before" and "after" are read in completion-time order, as the incremental read itself goes,
and merge-on-read slices are merged with the table's merger, so a stale delete (older than
the stored record by its ordering value) deletes nothing and is not reported. Table services
(compaction, clustering) change no record and are skipped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format.names import COMMIT_TIME, PARTITION_PATH, RECORD_KEY
from tidemark.fsview import FileSystemView
from tidemark.fsview.view import FileGroup
from tidemark.merge import RecordMerger
from tidemark.read.merge import read_slice
from tidemark.storage import Storage
from tidemark.timeline import Instant, Timeline


@dataclass(frozen=True)
class IncrementalResult:
    """Rows of an incremental read, and the checkpoint to pass as ``start`` next time.

    ``deletes`` holds the records the same commits deleted: their last stored values,
    ``_hoodie_commit_time`` of the deleting commit, and ``_hoodie_operation`` = ``delete``.
    Apply ``rows`` and ``deletes`` in ``_hoodie_commit_time`` order to keep a mirror exact.
    """

    rows: Any  # a Spark DataFrame, or a pyarrow Table with spark=None
    checkpoint: str | None
    instants: tuple[Instant, ...]
    find_deletes: Callable[[], Any] | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def deletes(self) -> Any:
        """The deleted records (same kind as ``rows``), found on first use: a consumer that never
        asks pays nothing for them."""
        return self.find_deletes() if self.find_deletes is not None else None

OPERATION_COLUMN = "_hoodie_operation"
DELETE = "delete"
_SERVICE_OPERATIONS = frozenset({"COMPACT", "CLUSTER"})


def _view_at(storage: Storage, timeline: Timeline, completion: str, *, inclusive: bool) -> FileSystemView:
    """The table as it stood once every instant completed before (or at) ``completion`` had."""

    def visible(i: Instant) -> bool:
        done = i.completion_time or ""
        return not i.is_completed or (done <= completion if inclusive else done < completion)

    return FileSystemView(storage, timeline.restricted(i for i in timeline if visible(i)))


def _among(view: FileSystemView, wanted: set[tuple[str, str]]) -> list[FileGroup]:
    partitions = {p for p, _ in wanted}
    return [g for g in view.file_groups(partitions) if (g.partition_path, g.file_id) in wanted]


def _records(
    storage: Storage, groups: Iterable[FileGroup], merger: RecordMerger, schema: pa.Schema,
    delete_ordering_field: str | None,
) -> pa.Table:
    pieces = []
    for group in groups:
        latest = group.latest_slice
        logs = [storage.open_input(log.path) for log in latest.logs]
        pieces.append(read_slice(storage.open_input(latest.base.path), logs, merger, schema,
                                 delete_ordering_field=delete_ordering_field, base_path=latest.base.path))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def _identity(rows: pa.Table) -> pa.Array:
    """(partition path, record key) as one string per row, for set differences."""
    return pc.binary_join_element_wise(
        pc.fill_null(rows.column(PARTITION_PATH), ""), rows.column(RECORD_KEY), "\x00"
    ).combine_chunks() if rows.num_rows else pa.array([], pa.string())


def deleted_records(
    storage: Storage,
    timeline: Timeline,
    instants: Sequence[Instant],
    *,
    merger: RecordMerger,
    schema: pa.Schema,
    delete_ordering_field: str | None = None,
) -> pa.Table:
    """The records that ``instants`` (completed, in completion order) deleted, with their last values.

    ``schema`` is the base files' schema (meta columns and user columns); the result has it
    plus ``_hoodie_operation``, in the order the deletes happened.
    """
    out = []
    for instant in instants:
        metadata = timeline.commit_metadata(instant)
        if metadata.operation in _SERVICE_OPERATIONS:
            continue
        touched = {(s.partition_path, s.file_id) for s in metadata.write_stats if s.num_deletes}
        touched |= {(p, f) for p, ids in metadata.replaced_file_ids.items() for f in ids}
        if not touched:
            continue
        completion = instant.completion_time or ""
        before_view = _view_at(storage, timeline, completion, inclusive=False)
        before = _records(storage, _among(before_view, touched), merger, schema, delete_ordering_field)
        if before.num_rows == 0:
            continue
        after_groups = touched | {(s.partition_path, s.file_id) for s in metadata.write_stats}
        after_view = _view_at(storage, timeline, completion, inclusive=True)
        after = _records(storage, _among(after_view, after_groups), merger, schema, delete_ordering_field)
        gone = before.filter(pc.invert(pc.is_in(_identity(before), value_set=_identity(after))))
        if gone.num_rows == 0:
            continue
        gone = gone.set_column(gone.schema.get_field_index(COMMIT_TIME), COMMIT_TIME,
                               pa.repeat(pa.scalar(instant.requested_time, pa.string()), gone.num_rows))
        out.append(gone.append_column(OPERATION_COLUMN, pa.repeat(pa.scalar(DELETE, pa.string()), gone.num_rows)))
    if not out:
        return schema.append(pa.field(OPERATION_COLUMN, pa.string())).empty_table()
    return pa.concat_tables(out)


__all__ = ["DELETE", "OPERATION_COLUMN", "deleted_records"]


def deleted_by(
    storage: Storage,
    instants: Sequence[Instant],
    user_schema: pa.Schema | None,
    merger: Callable[[], RecordMerger],
    delete_ordering_field: str | None,
) -> pa.Table:
    """:func:`deleted_records` of ``instants`` on the timeline that holds them (the archived
    history too when one is archived); an empty table of the right columns before any write."""
    from tidemark.format.schema import with_meta_columns

    schema = with_meta_columns(user_schema or pa.schema([]))
    if user_schema is None:
        return schema.append(pa.field(OPERATION_COLUMN, pa.string())).empty_table()
    timeline = Timeline.load(storage)
    active = {i.requested_time for i in timeline.instants}
    if any(i.requested_time not in active for i in instants):
        timeline = timeline.with_history()
    return deleted_records(
        storage, timeline, instants, merger=merger(), schema=schema, delete_ordering_field=delete_ordering_field
    )
