"""File and folder names of the v8 layout: base files, write tokens, markers, partitions."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

HOODIE_DIR = ".hoodie"
TIMELINE_DIR = ".hoodie/timeline"
TEMP_DIR = ".hoodie/.temp"
PARTITION_METAFILE = ".hoodie_partition_metadata"
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME = META_COLUMNS

_BASE_RE = re.compile(r"^([^_/]+)_(\d+-\d+-\d+)_(\d{14}(?:\d{3})?)\.parquet$")


def new_file_id() -> str:
    """A new file-group id: a UUID plus Hudi's ``-0`` suffix; it never contains ``_``."""
    return f"{uuid.uuid4()}-0"


def write_token(task_partition: int, stage: int, attempt: int) -> str:
    """Hudi's write token ``<task partition>-<stage>-<task attempt>``: unique per attempt."""
    return f"{task_partition}-{stage}-{attempt}"


def base_file_name(file_id: str, token: str, instant_time: str) -> str:
    return f"{file_id}_{token}_{instant_time}.parquet"


@dataclass(frozen=True)
class BaseFileName:
    file_id: str
    write_token: str
    instant_time: str


def parse_base_file_name(name: str) -> BaseFileName | None:
    m = _BASE_RE.match(name)
    return BaseFileName(m.group(1), m.group(2), m.group(3)) if m else None


def join_partition(partition: str, name: str) -> str:
    """The table-relative path of ``name`` inside ``partition`` ('' is the table root)."""
    return f"{partition}/{name}" if partition else name


def marker_dir(instant_time: str) -> str:
    return f"{TEMP_DIR}/{instant_time}"


def partition_metafile_content(instant_time: str, depth: int, written_at: str) -> bytes:
    return (f"#partition metadata\n#{written_at}\ncommitTime={instant_time}\npartitionDepth={depth}\n").encode()
