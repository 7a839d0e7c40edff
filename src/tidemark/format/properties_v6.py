"""``hoodie.properties`` of a version 6 table (Hudi 0.14 / 0.15), and its version 8 form.

Version 6 names the record merging by payload class (``hoodie.compaction.payload.class``)
and the key generator by class (``hoodie.table.keygenerator.class``); it has no
``hoodie.record.merge.mode``, no ``hoodie.timeline.path`` and timeline layout 1.
The upgrade's ``upgraded_properties`` (:mod:`tidemark.services.upgrade`) is what
Hudi 1.x's upgrade (six to eight) changes: the table and layout versions, the timeline
folder, the initial version, the merge mode and strategy chosen from the payload class the
way Hudi chooses them, and the key generator
type; every other key is kept as it was. (This module imports nothing of
:mod:`tidemark.format.properties`, which uses it.)
"""

from __future__ import annotations

from collections.abc import Mapping

SUPPORTED_OLD_VERSIONS = ("6",)

PAYLOAD_KEY = "hoodie.compaction.payload.class"
DEFAULT_PAYLOAD = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
_EVENT_TIME_PAYLOAD = "org.apache.hudi.common.model.EventTimeAvroPayload"
_OVERWRITE_PAYLOAD = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"

KEYGEN_TYPES = {
    "org.apache.hudi.keygen.SimpleKeyGenerator": "SIMPLE",
    "org.apache.hudi.keygen.SimpleAvroKeyGenerator": "SIMPLE_AVRO",
    "org.apache.hudi.keygen.ComplexKeyGenerator": "COMPLEX",
    "org.apache.hudi.keygen.ComplexAvroKeyGenerator": "COMPLEX_AVRO",
    "org.apache.hudi.keygen.NonpartitionedKeyGenerator": "NON_PARTITION",
    "org.apache.hudi.keygen.NonpartitionedAvroKeyGenerator": "NON_PARTITION_AVRO",
    "org.apache.hudi.keygen.CustomKeyGenerator": "CUSTOM",
    "org.apache.hudi.keygen.CustomAvroKeyGenerator": "CUSTOM_AVRO",
    "org.apache.hudi.keygen.TimestampBasedKeyGenerator": "TIMESTAMP",
    "org.apache.hudi.keygen.TimestampBasedAvroKeyGenerator": "TIMESTAMP_AVRO",
    "org.apache.hudi.keygen.GlobalDeleteKeyGenerator": "GLOBAL_DELETE",
}


def merge_settings_v6(props: Mapping[str, str]) -> tuple[str, str | None]:
    """(hoodie.record.merge.mode, payload class to record) of a version 6 table, as Hudi's upgrade
    derives them: a custom payload keeps its class (CUSTOM); merge-on-read with an ordering field
    orders by event time; otherwise ``DefaultHoodieRecordPayload`` orders by event time and every
    other payload (``OverwriteWithLatestAvroPayload``, Hudi 0.x's default) by commit time."""
    payload = props.get(PAYLOAD_KEY) or ""
    ordering = props.get("hoodie.table.precombine.field") or props.get("hoodie.table.ordering.fields")
    if payload and payload not in (DEFAULT_PAYLOAD, _EVENT_TIME_PAYLOAD, _OVERWRITE_PAYLOAD):
        return "CUSTOM", payload
    if props.get("hoodie.table.type") == "MERGE_ON_READ" and ordering:
        return "EVENT_TIME_ORDERING", DEFAULT_PAYLOAD
    if payload == DEFAULT_PAYLOAD:
        return "EVENT_TIME_ORDERING", DEFAULT_PAYLOAD
    return "COMMIT_TIME_ORDERING", _OVERWRITE_PAYLOAD
