"""Reading the ``files`` partition of a metadata table: the data table's file listing.

The partition is one file group (``files-0000-0``) of the merge-on-read metadata table:
an HFile base file and log files of HFile data blocks. Every record is an Avro
``HoodieMetadataRecord`` keyed by a data-table partition path (``.`` for a non-partitioned
table) or by ``__all_partitions__``; its ``filesystemMetadata`` maps file names to
``{size, isDeleted}`` (for ``__all_partitions__``: partition paths to size 0). Newer records
of a key are folded into older ones as Hudi's metadata payload does: a deleted entry
removes the name, a live one adds it (a log file that grew keeps the larger size).

The latest file slice is the newest base file whose instant completed, plus the log
files whose instants completed after that base file's instant was requested (version 8
slices by completion time). Only blocks of completed metadata-table instants count.

tidemark's writes keep this partition true (:mod:`tidemark.metadata.maintain`); this module
lets the compaction fold it, the file-system view list files through it
(:mod:`tidemark.metadata.listing`), and tests check it against the folders.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fastavro

from tidemark.errors import UnsupportedTableError
from tidemark.format import hfile
from tidemark.format.log_file import BlockType, HeaderKey, decode_blocks, decode_delete_records, parse_log_file_name
from tidemark.metadata.disable import METADATA_DIR
from tidemark.storage import Storage
from tidemark.timeline import State
from tidemark.timeline.instant import parse_instant_file_name

FILES_DIR = f"{METADATA_DIR}/files"
ALL_PARTITIONS_KEY = "__all_partitions__"
NON_PARTITIONED_KEY = "."
HFILE_NAME_RE = re.compile(r"^(?P<file_id>[^_]+)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{17})\.hfile$")


@dataclass(frozen=True)
class FilesListing:
    """The listing the ``files`` partition holds: partition path ("" when not partitioned) ->
    live file name -> size in bytes; and the partitions ``__all_partitions__`` names."""

    files: Mapping[str, Mapping[str, int]]
    partitions: frozenset[str]


def _completed(storage: Storage) -> dict[str, str]:
    """Completed instants of the metadata table: requested time -> completion time."""
    out = {}
    for name in storage.list_names(f"{METADATA_DIR}/.hoodie/timeline"):
        instant = parse_instant_file_name(name)
        if instant is not None and instant.state is State.COMPLETED and instant.completion_time:
            out[instant.requested_time] = instant.completion_time
    return out


def _fold(older: dict[str, int], newer: Mapping[str, Any]) -> None:
    for name, info in newer.items():
        if info.get("isDeleted"):
            older.pop(name, None)
        else:
            older[name] = max(int(info.get("size") or 0), older.get(name, 0))


@dataclass(frozen=True)
class FileSlice:
    """The latest file slice of the files partition: its base file's instant and name, and its
    log files (names) in the order their instants completed."""

    base_instant: str
    base_name: str
    log_names: tuple[str, ...]


def latest_slice(storage: Storage, completed: Mapping[str, str] | None = None,
                 names: list[str] | None = None) -> FileSlice | None:
    """The latest file slice of the files partition (None when it has no completed base file).
    ``completed`` (the metadata table's completed instants) and ``names`` (the partition
    folder's listing) are listed here unless the caller listed them already."""
    completed = _completed(storage) if completed is None else completed
    names = storage.list_names(FILES_DIR) if names is None else names
    bases = sorted(
        (m.group("instant"), n) for n in names if (m := HFILE_NAME_RE.match(n)) and m.group("instant") in completed
    )
    if not bases:
        return None
    base_instant, base_name = bases[-1]
    logs = []
    for name in names:
        parsed = parse_log_file_name(name)
        if parsed is None or parsed.instant_time not in completed:
            continue
        if completed[parsed.instant_time] > base_instant:  # completed after the base was requested
            logs.append((completed[parsed.instant_time], parsed.version, name))
    return FileSlice(base_instant, base_name, tuple(name for *_, name in sorted(logs)))


def read_files_partition(storage: Storage, completed: Mapping[str, str] | None = None,
                         names: list[str] | None = None) -> FilesListing | None:
    """The listing of the table's metadata table (None when it has no ``files`` partition).
    ``completed`` and ``names``: as for :func:`latest_slice`."""
    completed = _completed(storage) if completed is None else completed
    file_slice = latest_slice(storage, completed, names)
    if file_slice is None:
        return None
    base_name = file_slice.base_name

    records: dict[str, dict[str, int]] = {}
    kinds: dict[str, int] = {}

    def apply(data: bytes, path: str, schema_json: str | None) -> None:
        info = hfile.file_info(data, path)
        schema = fastavro.parse_schema(json.loads(schema_json or info[hfile.SCHEMA_KEY]))
        for record in hfile.read_records(data, path):
            if record.deleted:
                records.pop(record.key, None)
                continue
            value: Any = fastavro.schemaless_reader(io.BytesIO(record.value), schema, None)
            kinds[record.key] = value["type"]
            _fold(records.setdefault(record.key, {}), value.get("filesystemMetadata") or {})

    base_path = f"{FILES_DIR}/{base_name}"
    apply(storage.read_bytes(base_path), base_path, None)
    for name in file_slice.log_names:
        path = f"{FILES_DIR}/{name}"
        for block in decode_blocks(storage.read_bytes(path)):
            header = dict(block.header)
            if header.get(HeaderKey.INSTANT_TIME) not in completed:
                continue
            if block.block_type == BlockType.DELETE:
                for deleted in decode_delete_records(block.content):
                    records.pop(deleted.record_key, None)
            elif block.block_type == BlockType.HFILE_DATA:
                apply(block.content, path, header.get(HeaderKey.SCHEMA))
            else:
                raise UnsupportedTableError(
                    f"{path}: a {BlockType(block.block_type).name} block in the metadata table's files "
                    "partition; tidemark reads only HFile data and delete blocks there"
                )
    files = {
        ("" if key == NON_PARTITIONED_KEY else key): dict(entries)
        for key, entries in records.items()
        if key != ALL_PARTITIONS_KEY
    }
    partitions = frozenset("" if p == NON_PARTITIONED_KEY else p for p in records.get(ALL_PARTITIONS_KEY, {}))
    return FilesListing(files, partitions)
