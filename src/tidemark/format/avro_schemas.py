"""Avro schemas of the timeline's metadata files, as Hudi v8 writes them.

Field names, order and types follow the schemas found in files written by Apache
Hudi 1.x (see ``shared/reference/hudi-format/HoodieCommitMetadata.avsc``); every
field is a nullable union so Java readers resolve them the way they expect.
"""

from __future__ import annotations

from typing import Any

_NS = "org.apache.hudi.avro.model"
_STR = {"type": "string", "avro.java.string": "String"}


def _opt(t: Any, default: Any = None) -> dict[str, Any]:
    return {"type": ["null", t], "default": default}


def _field(name: str, t: Any) -> dict[str, Any]:
    return {"name": name, **_opt(t)}


_LONG_STATS = [
    "numWrites",
    "numDeletes",
    "numUpdateWrites",
    "totalWriteBytes",
    "totalWriteErrors",
]
WRITE_STAT: dict[str, Any] = {
    "type": "record",
    "name": "HoodieWriteStat",
    "fields": [
        _field("fileId", _STR),
        _field("path", _STR),
        _field("prevCommit", _STR),
        *[_field(n, "long") for n in _LONG_STATS],
        _field("partitionPath", _STR),
        _field("totalLogRecords", "long"),
        _field("totalLogFiles", "long"),
        _field("totalUpdatedRecordsCompacted", "long"),
        _field("numInserts", "long"),
        _field("totalLogBlocks", "long"),
        _field("totalCorruptLogBlock", "long"),
        _field("totalRollbackBlocks", "long"),
        _field("fileSizeInBytes", "long"),
        _field("logVersion", "int"),
        _field("logOffset", "long"),
        _field("baseFile", _STR),
        _field("logFiles", {"type": "array", "items": _STR}),
        _field("cdcStats", {"type": "map", "values": "long", "avro.java.string": "String"}),
        _field("prevBaseFile", _STR),
        _field("minEventTime", "long"),
        _field("maxEventTime", "long"),
        _field(
            "runtimeStats",
            {
                "type": "record",
                "name": "HoodieRuntimeStats",
                "fields": [
                    _field("totalScanTime", "long"),
                    _field("totalCreateTime", "long"),
                    _field("totalUpsertTime", "long"),
                ],
            },
        ),
        _field("totalLogFilesCompacted", "long"),
        _field("totalLogReadTimeMs", "long"),
        _field("totalLogSizeCompacted", "long"),
        _field("tempPath", _STR),
        _field("numUpdates", "long"),
    ],
}

_COMMON_FIELDS: list[dict[str, Any]] = [
    _field(
        "partitionToWriteStats",
        {"type": "map", "values": {"type": "array", "items": WRITE_STAT}, "avro.java.string": "String"},
    ),
    _field("compacted", "boolean"),
    _field("extraMetadata", {"type": "map", "values": _STR, "avro.java.string": "String"}),
    {"name": "version", "type": ["int", "null"], "default": 1},
    _field("operationType", _STR),
]

COMMIT_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCommitMetadata",
    "namespace": _NS,
    "fields": _COMMON_FIELDS,
}

REPLACE_COMMIT_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieReplaceCommitMetadata",
    "namespace": _NS,
    "fields": [
        *_COMMON_FIELDS,
        _field(
            "partitionToReplaceFileIds",
            {"type": "map", "values": {"type": "array", "items": _STR}, "avro.java.string": "String"},
        ),
    ],
}

_STR_MAP = {"type": "map", "values": _STR, "avro.java.string": "String"}

# A clustering plan (HoodieClusteringPlan): groups of file slices, each rewritten into
# ``numOutputFileGroups`` new file groups by the named strategy with its parameters.
SLICE_INFO: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSliceInfo",
    "fields": [
        _field("dataFilePath", _STR),
        _field("deltaFilePaths", {"type": "array", "items": _STR}),
        _field("fileId", _STR),
        _field("partitionPath", _STR),
        _field("bootstrapFilePath", _STR),
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

CLUSTERING_GROUP: dict[str, Any] = {
    "type": "record",
    "name": "HoodieClusteringGroup",
    "fields": [
        _field("slices", {"type": "array", "items": SLICE_INFO}),
        _field("metrics", {"type": "map", "values": "double", "avro.java.string": "String"}),
        {"name": "numOutputFileGroups", "type": ["int", "null"], "default": 1},
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

CLUSTERING_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieClusteringPlan",
    "fields": [
        _field("inputGroups", {"type": "array", "items": CLUSTERING_GROUP}),
        _field(
            "strategy",
            {
                "type": "record",
                "name": "HoodieClusteringStrategy",
                "fields": [
                    _field("strategyClassName", _STR),
                    _field("strategyParams", _STR_MAP),
                    {"name": "version", "type": ["int", "null"], "default": 1},
                ],
            },
        ),
        _field("extraMetadata", _STR_MAP),
        {"name": "version", "type": ["int", "null"], "default": 1},
        _field("preserveHoodieMetadata", "boolean"),
    ],
}

REQUESTED_REPLACE_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRequestedReplaceMetadata",
    "namespace": _NS,
    "fields": [
        _field("operationType", _STR),
        _field("clusteringPlan", CLUSTERING_PLAN),
        _field("extraMetadata", {"type": "map", "values": _STR, "avro.java.string": "String"}),
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

ROLLBACK_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "startRollbackTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "commitsRollback", "type": {"type": "array", "items": _STR}},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "avro.java.string": "String",
                "values": {
                    "type": "record",
                    "name": "HoodieRollbackPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": _STR},
                        {"name": "successDeleteFiles", "type": {"type": "array", "items": _STR}},
                        {"name": "failedDeleteFiles", "type": {"type": "array", "items": _STR}},
                    ],
                },
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "instantsRollback",
            "default": [],
            "type": {
                "type": "array",
                "default": [],
                "items": {
                    "type": "record",
                    "name": "HoodieInstantInfo",
                    "fields": [
                        {"name": "commitTime", "type": _STR},
                        {"name": "action", "type": _STR},
                    ],
                },
            },
        },
    ],
}

ROLLBACK_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRollbackPlan",
    "namespace": _NS,
    "fields": [
        {
            "name": "instantToRollback",
            "type": _opt(
                {
                    "type": "record",
                    "name": "HoodieInstantInfo",
                    "fields": [
                        {"name": "commitTime", "type": _STR},
                        {"name": "action", "type": _STR},
                    ],
                }
            )["type"],
            "default": None,
        },
        _field("filesToDelete", {"type": "array", "items": _STR}),
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

# The compaction plan of ``<t>.compaction.requested``, as found in a file written by Hudi 1.x.
_MAP_STR = {"type": "map", "values": _STR, "avro.java.string": "String"}
COMPACTION_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCompactionPlan",
    "namespace": _NS,
    "fields": [
        {
            "name": "operations",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieCompactionOperation",
                        "fields": [
                            {"name": "baseInstantTime", "type": ["null", _STR]},
                            _field("deltaFilePaths", {"type": "array", "items": _STR}),
                            _field("dataFilePath", _STR),
                            {"name": "fileId", "type": ["null", _STR]},
                            _field("partitionPath", _STR),
                            _field("metrics", {"type": "map", "values": "double", "avro.java.string": "String"}),
                            _field("bootstrapFilePath", _STR),
                        ],
                    },
                },
            ],
            "default": None,
        },
        _field("extraMetadata", _MAP_STR),
        {"name": "version", "type": ["int", "null"], "default": 1},
        _field(
            "strategy",
            {
                "type": "record",
                "name": "HoodieCompactionStrategy",
                "fields": [
                    _field("compactorClassName", _STR),
                    _field("strategyParams", _MAP_STR),
                    {"name": "version", "type": ["int", "null"], "default": 1},
                ],
            },
        ),
        {"name": "preserveHoodieMetadata", "type": ["boolean", "null"], "default": False},
        _field("missingSchedulePartitions", {"type": "array", "items": _STR}),
    ],
}

# -- table services (cleaning, savepoint, restore, archived timeline) ----------------------

_STR_ARRAY = {"type": "array", "items": _STR}

CLEANER_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanerPlan",
    "namespace": _NS,
    "fields": [
        {
            "name": "earliestInstantToRetain",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "HoodieActionInstant",
                    "fields": [
                        {"name": "timestamp", "type": _STR},
                        {"name": "action", "type": _STR},
                        {"name": "state", "type": _STR},
                    ],
                },
            ],
            "default": None,
        },
        {"name": "policy", "type": _STR},
        # Deprecated by Hudi in favour of filePathsToBeDeletedPerPartition; written as null.
        _field("filesToBeDeletedPerPartition", {"type": "map", "values": _STR_ARRAY}),
        {"name": "version", "type": ["int", "null"], "default": 1},
        _field(
            "filePathsToBeDeletedPerPartition",
            {
                "type": "map",
                "values": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "HoodieCleanFileInfo",
                        "fields": [_field("filePath", _STR), _field("isBootstrapBaseFile", "boolean")],
                    },
                },
            },
        ),
        _field("partitionsToBeDeleted", _STR_ARRAY),
    ],
}

_CLEAN_PARTITION: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanPartitionMetadata",
    "fields": [
        {"name": "partitionPath", "type": _STR},
        {"name": "policy", "type": _STR},
        {"name": "deletePathPatterns", "type": _STR_ARRAY},
        {"name": "successDeleteFiles", "type": _STR_ARRAY},
        {"name": "failedDeleteFiles", "type": _STR_ARRAY},
        {"name": "isPartitionDeleted", "type": ["null", "boolean"], "default": None},
    ],
}

CLEAN_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieCleanMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "policy", "type": _STR, "default": ""},
        {"name": "startCleanTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "totalFilesDeleted", "type": "int"},
        {"name": "earliestCommitToRetain", "type": _STR},
        {"name": "lastCompletedCommitTimestamp", "type": _STR, "default": ""},
        {"name": "partitionMetadata", "type": {"type": "map", "values": _CLEAN_PARTITION}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        {
            "name": "bootstrapPartitionMetadata",
            "type": ["null", {"type": "map", "values": "HoodieCleanPartitionMetadata"}],
            "default": None,
        },
    ],
}

SAVEPOINT_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieSavepointMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "savepointedBy", "type": _STR},
        {"name": "savepointedAt", "type": "long"},
        {"name": "comments", "type": _STR},
        {
            "name": "partitionMetadata",
            "type": {
                "type": "map",
                "values": {
                    "type": "record",
                    "name": "HoodieSavepointPartitionMetadata",
                    "fields": [
                        {"name": "partitionPath", "type": _STR},
                        {"name": "savepointDataFile", "type": _STR_ARRAY},
                    ],
                },
            },
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
    ],
}

_INSTANT_INFO: dict[str, Any] = {
    "type": "record",
    "name": "HoodieInstantInfo",
    "fields": [{"name": "commitTime", "type": _STR}, {"name": "action", "type": _STR}],
}

RESTORE_PLAN: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRestorePlan",
    "namespace": _NS,
    "fields": [
        {"name": "instantsToRollback", "default": [], "type": {"type": "array", "items": _INSTANT_INFO}},
        {"name": "version", "type": ["int", "null"], "default": 1},
        _field("savepointToRestoreTimestamp", _STR),
    ],
}

RESTORE_METADATA: dict[str, Any] = {
    "type": "record",
    "name": "HoodieRestoreMetadata",
    "namespace": _NS,
    "fields": [
        {"name": "startRestoreTime", "type": _STR},
        {"name": "timeTakenInMillis", "type": "long"},
        {"name": "instantsToRollback", "type": _STR_ARRAY},
        {
            "name": "hoodieRestoreMetadata",
            "type": {"type": "map", "values": {"type": "array", "items": ["null", ROLLBACK_METADATA]}},
        },
        {"name": "version", "type": ["int", "null"], "default": 1},
        # HoodieInstantInfo is defined inside the rollback metadata above: refer to it by name.
        {"name": "restoreInstantInfo", "default": [], "type": {"type": "array", "items": "HoodieInstantInfo"}},
        _field("extraMetadata", {"type": "map", "values": _STR}),
    ],
}

LSM_TIMELINE_INSTANT: dict[str, Any] = {
    "type": "record",
    "name": "HoodieLSMTimelineInstant",
    "namespace": _NS,
    "fields": [
        _field("instantTime", "string"),
        _field("completionTime", "string"),
        _field("action", "string"),
        _field("metadata", "bytes"),
        _field("plan", "bytes"),
        {"name": "version", "type": "int", "default": 1},
    ],
}
