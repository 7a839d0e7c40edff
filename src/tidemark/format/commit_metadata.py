"""Commit metadata: what a commit wrote, as typed records, and its Avro encoding.

A completed ``commit`` / ``replacecommit`` file holds one Avro record
(object-container file) with the write statistics per partition. Readers use
it to find the file groups a commit touched (incremental queries), and the
commit protocol uses it to find conflicting writers.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro

from tidemark.errors import CorruptInstantError
from tidemark.format import avro_schemas

_PARSED = {
    "commit": fastavro.parse_schema(avro_schemas.COMMIT_METADATA),
    "replace": fastavro.parse_schema(avro_schemas.REPLACE_COMMIT_METADATA),
    "requested_replace": fastavro.parse_schema(avro_schemas.REQUESTED_REPLACE_METADATA),
    "rollback": fastavro.parse_schema(avro_schemas.ROLLBACK_METADATA),
    "rollback_plan": fastavro.parse_schema(avro_schemas.ROLLBACK_PLAN),
    "compaction_plan": fastavro.parse_schema(avro_schemas.COMPACTION_PLAN),
    "cleaner_plan": fastavro.parse_schema(avro_schemas.CLEANER_PLAN),
    "clean": fastavro.parse_schema(avro_schemas.CLEAN_METADATA),
    "savepoint": fastavro.parse_schema(avro_schemas.SAVEPOINT_METADATA),
    "restore_plan": fastavro.parse_schema(avro_schemas.RESTORE_PLAN),
    "restore": fastavro.parse_schema(avro_schemas.RESTORE_METADATA),
}


@dataclass(frozen=True)
class WriteStat:
    """What one file-group write produced: the new file and its counts."""

    partition_path: str
    file_id: str
    path: str  # relative to the table's base path
    prev_commit: str | None  # instant of the base file this one replaces
    num_writes: int  # records in the new file
    num_inserts: int
    num_updates: int
    num_deletes: int
    file_size: int
    prev_base_file: str | None = None
    total_write_time_ms: int = 0
    # Merge-on-read: a deltacommit that appended a log file names the slice's base file and
    # the log files it wrote (file names, not paths); ``path`` is then the log file's path.
    base_file: str | None = None
    log_files: tuple[str, ...] = ()
    log_version: int | None = None
    log_offset: int | None = None
    # Compaction: how many log files / log records it merged into the new base file.
    log_files_compacted: int = 0
    log_records_compacted: int = 0

    @classmethod
    def new_file(
        cls, partition_path: str, file_id: str, path: str, *, rows: int, file_size: int, write_time_ms: int
    ) -> WriteStat:
        """A base file that replaces nothing (a new file group, or a clustered one): as Hudi
        counts it, every row is an insert."""
        return cls(
            partition_path=partition_path,
            file_id=file_id,
            path=path,
            prev_commit=None,
            num_writes=rows,
            num_inserts=rows,
            num_updates=0,
            num_deletes=0,
            file_size=file_size,
            total_write_time_ms=write_time_ms,
        )

    def to_avro(self) -> dict[str, Any]:
        zero_longs = (
            "totalWriteErrors",
            "totalLogRecords",
            "totalUpdatedRecordsCompacted",
            "totalLogBlocks",
            "totalCorruptLogBlock",
            "totalRollbackBlocks",
            "totalLogFilesCompacted",
            "totalLogReadTimeMs",
            "totalLogSizeCompacted",
            "numUpdates",
        )
        rec: dict[str, Any] = {k: 0 for k in zero_longs}
        rec.update(
            fileId=self.file_id,
            path=self.path,
            # Hudi writes the string "null" for a new file group, not an Avro null.
            prevCommit=self.prev_commit or "null",
            numWrites=self.num_writes,
            numDeletes=self.num_deletes,
            numUpdateWrites=self.num_updates,
            totalWriteBytes=self.file_size,
            partitionPath=self.partition_path,
            numInserts=self.num_inserts,
            fileSizeInBytes=self.file_size,
            prevBaseFile=self.prev_base_file,
            baseFile=self.base_file,
            logFiles=list(self.log_files) if self.log_files else None,
            logVersion=self.log_version,
            logOffset=self.log_offset,
            totalLogFilesCompacted=self.log_files_compacted,
            totalLogRecords=self.log_records_compacted,
            totalUpdatedRecordsCompacted=self.log_records_compacted,
            runtimeStats={
                "totalScanTime": 0,
                "totalCreateTime": self.total_write_time_ms if self.prev_commit is None else 0,
                "totalUpsertTime": self.total_write_time_ms if self.prev_commit else 0,
            },
        )
        return rec

    @classmethod
    def from_avro(cls, rec: Mapping[str, Any]) -> WriteStat:
        prev = rec.get("prevCommit")
        runtime = rec.get("runtimeStats") or {}
        return cls(
            partition_path=rec.get("partitionPath") or "",
            file_id=rec.get("fileId") or "",
            path=rec.get("path") or "",
            prev_commit=None if prev in (None, "null") else prev,
            num_writes=rec.get("numWrites") or 0,
            num_inserts=rec.get("numInserts") or 0,
            num_updates=rec.get("numUpdateWrites") or 0,
            num_deletes=rec.get("numDeletes") or 0,
            file_size=rec.get("fileSizeInBytes") or 0,
            prev_base_file=rec.get("prevBaseFile"),
            total_write_time_ms=max(
                (runtime.get("totalCreateTime") or 0, runtime.get("totalUpsertTime") or 0), default=0
            ),
            base_file=rec.get("baseFile"),
            log_files=tuple(rec.get("logFiles") or ()),
            log_version=rec.get("logVersion"),
            log_offset=rec.get("logOffset"),
            log_files_compacted=rec.get("totalLogFilesCompacted") or 0,
            log_records_compacted=rec.get("totalLogRecords") or 0,
        )


@dataclass(frozen=True)
class CommitMetadata:
    """The content of a completed commit or replacecommit."""

    operation: str  # Hudi's operation type name: UPSERT, INSERT, BULK_INSERT, DELETE, ...
    write_stats: tuple[WriteStat, ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)
    replaced_file_ids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    is_replace: bool = False
    compacted: bool = False  # written by a compaction (completes as a ``commit`` in v8)

    @property
    def schema_json(self) -> str | None:
        return self.extra.get("schema")

    def partitions(self) -> set[str]:
        return {s.partition_path for s in self.write_stats} | set(self.replaced_file_ids)

    def file_groups(self) -> set[tuple[str, str]]:
        """(partition, file id) of every file group written or replaced."""
        touched = {(s.partition_path, s.file_id) for s in self.write_stats}
        for partition, ids in self.replaced_file_ids.items():
            touched.update((partition, f) for f in ids)
        return touched

    def to_avro_record(self) -> dict[str, Any]:
        by_partition: dict[str, list[dict[str, Any]]] = {}
        for stat in self.write_stats:
            by_partition.setdefault(stat.partition_path, []).append(stat.to_avro())
        rec: dict[str, Any] = {
            "partitionToWriteStats": by_partition,
            "compacted": self.compacted,
            "extraMetadata": dict(self.extra),
            "version": 1,
            "operationType": self.operation,
        }
        if self.is_replace:
            rec["partitionToReplaceFileIds"] = {p: list(v) for p, v in self.replaced_file_ids.items()}
        return rec

    def to_bytes(self) -> bytes:
        return write_avro("replace" if self.is_replace else "commit", self.to_avro_record())

    @classmethod
    def from_bytes(cls, data: bytes, *, source: str | None = None) -> CommitMetadata:
        """Parse a commit file's content. ``source`` names the completed instant file it came
        from: such a file is never empty, so empty content then raises CorruptInstantError
        (as does content that is not commit metadata, whatever its source)."""
        if not data and source is not None:
            raise CorruptInstantError(source, "the file is empty")
        # Version 6 tables (timeline layout 1) hold commit metadata as JSON, version 8 as Avro.
        rec = read_json(data, source=source) if data.lstrip()[:1] == b"{" else read_avro(data, source=source)
        try:
            stats = tuple(
                WriteStat.from_avro(s)
                for stat_list in (rec.get("partitionToWriteStats") or {}).values()
                for s in stat_list
            )
            replaced_raw = rec.get("partitionToReplaceFileIds")
            return cls(
                operation=rec.get("operationType") or "UNKNOWN",
                write_stats=stats,
                extra=dict(rec.get("extraMetadata") or {}),
                replaced_file_ids={p: tuple(v) for p, v in (replaced_raw or {}).items()},
                is_replace=replaced_raw is not None,
                compacted=bool(rec.get("compacted")),
            )
        except (AttributeError, TypeError, ValueError) as exc:
            raise CorruptInstantError(source or "an instant file", f"not commit metadata: {exc}") from None


def write_avro(kind: str, record: Mapping[str, Any]) -> bytes:
    """One record in an Avro object-container file, with the schema ``kind`` names."""
    buf = io.BytesIO()
    fastavro.writer(buf, _PARSED[kind], [record], codec="null")
    return buf.getvalue()


def read_avro(data: bytes, *, source: str | None = None) -> dict[str, Any]:
    """The first record of an Avro object-container file, or {} for an empty file.

    The whole file is read, so a file cut short or damaged anywhere raises
    CorruptInstantError naming ``source`` (the timeline file the bytes came from).
    """
    if not data:
        return {}
    try:
        records = list(fastavro.reader(io.BytesIO(data)))
    except Exception as exc:  # fastavro raises many types: ValueError, EOFError, struct.error...
        problem = "truncated" if isinstance(exc, EOFError) else f"not a readable Avro file: {type(exc).__name__}: {exc}"
        raise CorruptInstantError(source or "an instant file", problem) from None
    return dict(records[0]) if records else {}  # type: ignore[arg-type]


def read_json(data: bytes, *, source: str | None = None) -> dict[str, Any]:
    """Commit metadata as version 6 (Hudi 0.x) writes it: one JSON object with the Avro field names."""
    try:
        rec = json.loads(data)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptInstantError(source or "an instant file", f"not readable JSON commit metadata: {exc}") from None
    if not isinstance(rec, dict):
        raise CorruptInstantError(source or "an instant file", "JSON commit metadata is not an object")
    return rec


def inflight_metadata_bytes(operation: str, planned: Iterable[tuple[str, str]] = ()) -> bytes:
    """What Hudi puts in an ``.inflight`` commit file: the operation and the planned file groups."""
    stats = tuple(WriteStat(p, f, "", None, 0, 0, 0, 0, 0) for p, f in planned)
    return CommitMetadata(operation, stats).to_bytes()
