"""Recording one data-table instant in the metadata table's ``files`` partition.

What Hudi's metadata writer does for the ``files`` partition, and nothing else: a
``deltacommit`` on the metadata timeline with the *same requested time* as the data-table
instant, whose one log file (``.files-0000-0_<t>.log.1_0-0-0``) holds one HFile data block:
a ``HoodieMetadataRecord`` (type 2) per changed partition, listing added files with their
sizes and deleted ones with ``isDeleted``, and the ``__all_partitions__`` record (type 1)
naming the partitions touched. Completed (``<t>_<c>.deltacommit`` with its commit metadata)
before the data-table instant completes, so a reader never lists a file of a completed
instant that the listing lacks; files of an instant that never completes are ignored by
readers, which select slices through the data timeline.

Called by :func:`tidemark.metadata.maintain.record_if_maintained` for every action tidemark
records, under the table lock (a clean: outside it, see there).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro

from tidemark.errors import UnsupportedTableError
from tidemark.format import hfile
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, inflight_metadata_bytes
from tidemark.format.log_file import BlockType, HeaderKey, LogBlock, encode_block, log_file_name, parse_log_file_name
from tidemark.metadata.disable import METADATA_DIR
from tidemark.metadata.files import ALL_PARTITIONS_KEY, FILES_DIR, HFILE_NAME_RE, NON_PARTITIONED_KEY
from tidemark.storage import Storage
from tidemark.timeline import Action, State, instant_file_name, new_instant_time
from tidemark.timeline.instant import parse_instant_file_name

TIMELINE = f"{METADATA_DIR}/.hoodie/timeline"
_FILES_TYPE = 2
_ALL_PARTITIONS_TYPE = 1


@dataclass(frozen=True)
class PartitionChange:
    """The files one instant added (name -> size in bytes; a log file: its size now) and
    deleted in one data-table partition ("" when the table is not partitioned)."""

    added: Mapping[str, int] = field(default_factory=dict)
    deleted: Iterable[str] = ()


def files_group(storage: Storage) -> tuple[str, str]:
    """(file id of the files partition's file group, the HoodieMetadataRecord schema)."""
    bases = sorted(n for n in storage.list_names(FILES_DIR) if HFILE_NAME_RE.match(n))
    groups = {n.split("_", 1)[0] for n in bases}
    if len(groups) != 1:
        raise UnsupportedTableError(
            f"the metadata table's files partition has {len(groups)} file groups with base files; "
            "tidemark records instants only in a files partition of one file group"
        )
    data = storage.read_bytes(f"{FILES_DIR}/{bases[-1]}")
    schema = hfile.file_info(data, bases[-1]).get(hfile.SCHEMA_KEY)
    if not schema:
        raise UnsupportedTableError(f"{FILES_DIR}/{bases[-1]} names no Avro schema in its file info")
    return groups.pop(), schema.decode("utf-8")


def latest_time(storage: Storage, names: Iterable[str] | None = None) -> str | None:
    """The latest requested or completion time on the metadata timeline (its folder's file
    ``names``, listed here unless given)."""
    times = []
    for name in storage.list_names(TIMELINE) if names is None else names:
        instant = parse_instant_file_name(name)
        if instant is not None:
            times += [instant.requested_time, instant.completion_time or ""]
    return max(times, default=None)


def encode_record(schema: Any, key_type: int, entries: Mapping[str, tuple[int, bool]]) -> bytes:
    value = {
        "key": "",  # Hudi leaves it empty: the HFile key is the record key
        "type": key_type,
        "filesystemMetadata": {name: {"size": size, "isDeleted": gone} for name, (size, gone) in entries.items()},
    }
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, value)
    return buf.getvalue()


@dataclass(frozen=True)
class DeltacommitFiles:
    """The files of one metadata deltacommit, known before its completion time: the log file
    (name and bytes) and the completed instant's commit metadata."""

    instant_time: str
    file_id: str
    log_name: str
    log_data: bytes
    completed: bytes

    @property
    def log_path(self) -> str:
        return f"{FILES_DIR}/{self.log_name}"

    @property
    def pending_names(self) -> tuple[str, str]:
        """The requested and inflight instant files' names."""
        return (instant_file_name(self.instant_time, Action.DELTA_COMMIT, State.REQUESTED),
                instant_file_name(self.instant_time, Action.DELTA_COMMIT, State.INFLIGHT))


def deltacommit_files(storage: Storage, instant_time: str, changes: Mapping[str, PartitionChange]) -> DeltacommitFiles:
    """Encode the deltacommit ``instant_time`` recording ``changes`` (data-table partition ->
    its change); nothing is written. Its log file's name depends only on the file group and
    the instant time (v8 names a log file by its deltacommit), so it holds whatever happens to
    the partition (a compaction, a clean) before it completes."""
    file_id, schema_json = files_group(storage)
    parsed = fastavro.parse_schema(json.loads(schema_json))
    records = []
    for partition, change in changes.items():
        entries = {name: (size, False) for name, size in change.added.items()}
        entries.update({name: (0, True) for name in change.deleted})
        key = partition or NON_PARTITIONED_KEY
        records.append((key, encode_record(parsed, _FILES_TYPE, entries)))
    touched = {(p or NON_PARTITIONED_KEY): (0, False) for p in changes}
    records.append((ALL_PARTITIONS_KEY, encode_record(parsed, _ALL_PARTITIONS_TYPE, touched)))
    content = hfile.write_hfile(records, {hfile.SCHEMA_KEY: schema_json.encode()})
    block = LogBlock(BlockType.HFILE_DATA, ((HeaderKey.SCHEMA, schema_json), (HeaderKey.INSTANT_TIME, instant_time)),
                     content)
    log_name = log_file_name(file_id, instant_time, 1, "0-0-0")
    data = encode_block(block)
    stat = WriteStat("files", file_id, f"files/{log_name}", instant_time, len(records), 0, len(records), 0, len(data),
                     base_file="", log_files=(log_name,), log_version=1, log_offset=0)
    metadata = CommitMetadata("UPSERT_PREPPED", (stat,), extra={"schema": schema_json})
    return DeltacommitFiles(instant_time, file_id, log_name, data, metadata.to_bytes())


def write_pending(storage: Storage, files: DeltacommitFiles) -> None:
    """Write the deltacommit's requested and inflight instant files and its log file (again,
    if a crash left them): a pending deltacommit, which every reader ignores."""
    requested, inflight = files.pending_names
    storage.create_if_absent(f"{TIMELINE}/{requested}")
    inflight_bytes = inflight_metadata_bytes("UPSERT_PREPPED", [("files", files.file_id)])
    storage.write_atomic(f"{TIMELINE}/{inflight}", inflight_bytes)
    storage.write_atomic(files.log_path, files.log_data)


def completed_deltacommit(names: Iterable[str], instant_time: str) -> str | None:
    """The completion time of the deltacommit ``instant_time`` among the metadata timeline's
    file ``names`` (None: not completed)."""
    for name in names:
        instant = parse_instant_file_name(name) if name.startswith(instant_time) else None
        if (instant is not None and instant.requested_time == instant_time and instant.state is State.COMPLETED
                and instant.action is Action.DELTA_COMMIT and instant.completion_time):
            return instant.completion_time
    return None


def record_instant(storage: Storage, instant_time: str, changes: Mapping[str, PartitionChange]) -> str:
    """Publish the deltacommit ``instant_time`` on the metadata timeline recording ``changes``
    (data-table partition -> its change). Returns the completion time. Idempotent: a pending
    instant (a crash in the middle) is written again; one already completed (an interrupted
    clean executed again) is left as it is and its completion time returned."""
    files = deltacommit_files(storage, instant_time, changes)
    done_already = completed_deltacommit(storage.list_names(TIMELINE), instant_time)
    if done_already is not None:
        return done_already
    write_pending(storage, files)
    completion = new_instant_time(floor=latest_time(storage))
    done = instant_file_name(instant_time, Action.DELTA_COMMIT, State.COMPLETED, completion)
    storage.write_atomic(f"{TIMELINE}/{done}", files.completed)
    return completion


def withdraw(storage: Storage, instant_time: str) -> bool:
    """Remove the metadata deltacommit ``instant_time`` if it is pending: its log file first,
    then its inflight and requested files (a completed one stays). Idempotent; returns whether
    anything was removed. For a data instant that will not complete (a rollback, a failed commit)."""
    names = storage.list_names(TIMELINE)
    if completed_deltacommit(names, instant_time) is not None:
        return False
    pending = [n for n in names if n.startswith(instant_time) and (i := parse_instant_file_name(n)) is not None
               and i.requested_time == instant_time and i.action is Action.DELTA_COMMIT]
    removed = False
    for name in storage.list_names(FILES_DIR):
        parsed = parse_log_file_name(name)
        if parsed is not None and parsed.instant_time == instant_time:
            removed = storage.delete(f"{FILES_DIR}/{name}") or removed
    for state in (State.INFLIGHT, State.REQUESTED):
        name = instant_file_name(instant_time, Action.DELTA_COMMIT, state)
        if name in pending:
            removed = storage.delete(f"{TIMELINE}/{name}") or removed
    return removed
