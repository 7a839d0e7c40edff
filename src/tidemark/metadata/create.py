"""Creating a metadata table with a ``files`` partition, as Hudi initialises one.

What Hudi's metadata writer does when it bootstraps the ``files`` partition, for a table
tidemark creates (or one without a metadata table): a merge-on-read table at
``.hoodie/metadata`` (its own ``hoodie.properties``: HFile base files, no meta fields, the
metadata key generator and payload), the deltacommit ``00000000000000000`` writing the one
file group ``files-0000-0`` as an HFile base file listing every data-table partition and
file, then ``files`` in the data table's ``hoodie.table.metadata.partitions``. The property
comes last: readers trust the metadata table only once it names ``files``, and a folder left
by a crash before that is removed by the next writer (:mod:`tidemark.metadata.maintain`).

The records are written with the part of Hudi's ``HoodieMetadataRecord`` schema that the
``files`` partition uses (the five meta fields, ``key``, ``type``, ``filesystemMetadata``),
under Hudi's record names; the schema travels in every HFile and log block, readers decode
with it (hudi-rs does), and Hudi's own reader schema gives the fields left out a null default.
Call under the table lock.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import fastavro

from tidemark.concurrency.writer_settings import properties_mutex, read_properties
from tidemark.format import hfile
from tidemark.format.commit_metadata import CommitMetadata, WriteStat, inflight_metadata_bytes
from tidemark.format.names import PARTITION_METAFILE, partition_metafile_content
from tidemark.format.properties import PROPERTIES_PATH, format_properties, table_checksum
from tidemark.metadata.disable import INFLIGHT_PARTITIONS_KEY, METADATA_DIR, PARTITIONS_KEY
from tidemark.metadata.files import ALL_PARTITIONS_KEY, FILES_DIR, NON_PARTITIONED_KEY
from tidemark.metadata.files_writer import TIMELINE
from tidemark.storage import Storage
from tidemark.timeline import Action, State, instant_file_name, new_instant_time

BOOTSTRAP_INSTANT = "00000000000000000"
FILE_ID = "files-0000-0"
_NS = "org.apache.hudi.avro.model"


def _meta(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


FILES_RECORD_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieMetadataRecord",
    "namespace": _NS,
    "doc": "A record saved within the Metadata Table",
    "fields": [
        *(_meta(f"_hoodie_{n}") for n in ("commit_time", "commit_seqno", "record_key", "partition_path", "file_name")),
        {"name": "key", "type": {"type": "string", "avro.java.string": "String"}},
        {"name": "type", "type": "int", "doc": "Type of the metadata record"},
        {
            "name": "filesystemMetadata",
            "type": ["null", {
                "type": "map",
                "values": {"type": "record", "name": "HoodieMetadataFileInfo", "fields": [
                    {"name": "size", "type": "long", "doc": "Size of the file"},
                    {"name": "isDeleted", "type": "boolean", "doc": "True if this file has been deleted"},
                ]},
                "avro.java.string": "String",
            }],
            "doc": "Contains information about partitions and files within the dataset",
        },
    ],
}


def _metadata_properties(table_name: str) -> dict[str, str]:
    name = f"{table_name}_metadata"
    return {
        "hoodie.table.name": name,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "8",
        "hoodie.table.initial.version": "8",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.archivelog.folder": "history",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.populate.meta.fields": "false",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": table_checksum("", name),
    }


def _encode(schema: Any, key_type: int, entries: Mapping[str, int]) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {
        "key": "", "type": key_type,
        "filesystemMetadata": {n: {"size": size, "isDeleted": False} for n, size in entries.items()},
    })
    return buf.getvalue()


def write_metadata_table(storage: Storage, table_name: str, listing: Mapping[str, Mapping[str, int]], *,
                         completed_after: str | None = None) -> None:
    """Write the metadata table listing ``listing`` (data partition, "" if not partitioned ->
    file name -> size): the data table's files as of now. Nothing trusts it until ``files`` is
    declared (:func:`declare_files`, or in the properties of a table being created).
    ``completed_after``: the data timeline's latest time; the deltacommit completes after it, so
    every data instant on it completed before the metadata table began."""
    schema_json = json.dumps(FILES_RECORD_SCHEMA)
    schema = fastavro.parse_schema(json.loads(schema_json))
    props = _metadata_properties(table_name)
    storage.write_atomic(f"{METADATA_DIR}/{PROPERTIES_PATH}", format_properties(props).encode())
    written_at = datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    storage.write_atomic(f"{FILES_DIR}/{PARTITION_METAFILE}",
                         partition_metafile_content(BOOTSTRAP_INSTANT, 1, written_at))
    storage.write_atomic(f"{TIMELINE}/{instant_file_name(BOOTSTRAP_INSTANT, Action.DELTA_COMMIT, State.REQUESTED)}",
                         b"")
    storage.write_atomic(f"{TIMELINE}/{instant_file_name(BOOTSTRAP_INSTANT, Action.DELTA_COMMIT, State.INFLIGHT)}",
                         inflight_metadata_bytes("UPSERT_PREPPED", [("files", FILE_ID)]))
    records = [((p or NON_PARTITIONED_KEY), _encode(schema, 2, files)) for p, files in listing.items()]
    records.append((ALL_PARTITIONS_KEY, _encode(schema, 1, {(p or NON_PARTITIONED_KEY): 0 for p in listing})))
    keys = sorted(k for k, _ in records)
    data = hfile.write_hfile(records, {
        hfile.SCHEMA_KEY: schema_json.encode(),
        b"minRecordKey": keys[0].encode(),
        b"maxRecordKey": keys[-1].encode(),
    })
    base = f"{FILE_ID}_0-0-0_{BOOTSTRAP_INSTANT}.hfile"
    storage.write_atomic(f"{FILES_DIR}/{base}", data)
    stat = WriteStat("files", FILE_ID, f"files/{base}", None, len(records), len(records), 0, 0, len(data))
    meta = CommitMetadata("BULK_INSERT", (stat,), extra={"schema": schema_json})
    done = instant_file_name(BOOTSTRAP_INSTANT, Action.DELTA_COMMIT, State.COMPLETED,
                             new_instant_time(floor=completed_after))
    storage.write_atomic(f"{TIMELINE}/{done}", meta.to_bytes())


def declare_files(storage: Storage) -> None:
    """Name ``files`` in ``hoodie.table.metadata.partitions``: from here on readers trust it."""
    with properties_mutex(storage):
        data_props = read_properties(storage)
        data_props[PARTITIONS_KEY] = "files"
        data_props[INFLIGHT_PARTITIONS_KEY] = ""
        storage.write_atomic(PROPERTIES_PATH, format_properties(data_props).encode())
