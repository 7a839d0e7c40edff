"""Compacting the files partition: fold its base file and log files into a new HFile base file.

Every recorded instant adds a log file to the latest file slice, and readers (hudi-rs,
tidemark) read them all; so, as Hudi's metadata writer compacts its table every
``hoodie.metadata.compact.max.delta.commits`` (default 10) deltacommits, tidemark writes a
``compaction`` on the metadata timeline: ``<c>.compaction.requested`` (the plan: the slice's
base and log files), ``.inflight``, the new base file ``files-0000-0_0-0-0_<c>.hfile``
holding one record per data partition (its live files) and ``__all_partitions__``, and the
completed ``<c>_<d>.commit``. Readers take the newest base file whose instant completed, plus
the logs that completed after ``c`` was requested, so until the commit completes they read
the old slice; a crash leaves a pending compaction nobody reads (tidemark writes the next
one at a new time).

Call under the table lock, right after recording an instant, and never while a clean is
pending on the data table (a cleaner of an older tidemark recorded outside the lock; its
deltacommit could complete before ``c`` yet after the fold read the listing).
"""

from __future__ import annotations

import json

import fastavro

from tidemark.format import hfile
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, write_avro
from tidemark.metadata.files import (
    ALL_PARTITIONS_KEY,
    FILES_DIR,
    NON_PARTITIONED_KEY,
    latest_slice,
    read_files_partition,
)
from tidemark.metadata.files_writer import TIMELINE, encode_record, files_group, latest_time
from tidemark.storage import Storage
from tidemark.timeline import Action, State, Timeline, instant_file_name, new_instant_time

COMPACT_AFTER = 10  # Hudi's hoodie.metadata.compact.max.delta.commits default
_FILES_TYPE = 2
_ALL_PARTITIONS_TYPE = 1


def compaction_due(storage: Storage, after: int = COMPACT_AFTER) -> bool:
    file_slice = latest_slice(storage)
    return file_slice is not None and len(file_slice.log_names) >= after


def compact_files_partition(storage: Storage, *, after: int = COMPACT_AFTER) -> str | None:
    """Compact the files partition if its latest slice has ``after`` log files or more and no
    clean is pending on the data table. Returns the compaction's instant time (None: not due)."""
    file_slice = latest_slice(storage)
    if file_slice is None or len(file_slice.log_names) < after:
        return None
    if Timeline.load(storage).filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT]):
        return None
    listing = read_files_partition(storage)
    if listing is None:
        return None
    file_id, schema_json = files_group(storage)
    schema = fastavro.parse_schema(json.loads(schema_json))
    instant = new_instant_time(floor=latest_time(storage))
    plan = {
        "operations": [{
            "baseInstantTime": file_slice.base_instant,
            "deltaFilePaths": list(file_slice.log_names),
            "dataFilePath": file_slice.base_name,
            "fileId": file_id,
            "partitionPath": "files",
            "metrics": {"TOTAL_LOG_FILES": float(len(file_slice.log_names))},
            "bootstrapFilePath": None,
        }],
        "extraMetadata": {},
        "version": 2,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": [],
    }
    storage.write_atomic(f"{TIMELINE}/{instant_file_name(instant, Action.COMPACTION, State.REQUESTED)}",
                         write_avro("compaction_plan", plan))
    storage.write_atomic(f"{TIMELINE}/{instant_file_name(instant, Action.COMPACTION, State.INFLIGHT)}", b"")

    records = [
        ((p or NON_PARTITIONED_KEY), encode_record(schema, _FILES_TYPE, {n: (s, False) for n, s in files.items()}))
        for p, files in listing.files.items()
    ]
    partitions = {(p or NON_PARTITIONED_KEY): (0, False) for p in {*listing.partitions, *listing.files}}
    records.append((ALL_PARTITIONS_KEY, encode_record(schema, _ALL_PARTITIONS_TYPE, partitions)))
    keys = sorted(k for k, _ in records)
    data = hfile.write_hfile(records, {hfile.SCHEMA_KEY: schema_json.encode(), b"minRecordKey": keys[0].encode(),
                                       b"maxRecordKey": keys[-1].encode()})
    base = f"{file_id}_0-0-0_{instant}.hfile"
    storage.write_atomic(f"{FILES_DIR}/{base}", data)
    stat = WriteStat("files", file_id, f"files/{base}", file_slice.base_instant, len(records), 0, len(records), 0,
                     len(data), prev_base_file=file_slice.base_name, log_files_compacted=len(file_slice.log_names))
    meta = CommitMetadata("COMPACT", (stat,), extra={"schema": schema_json}, compacted=True)
    done = instant_file_name(instant, Action.COMMIT, State.COMPLETED, new_instant_time(floor=latest_time(storage)))
    storage.write_atomic(f"{TIMELINE}/{done}", meta.to_bytes())
    return instant
