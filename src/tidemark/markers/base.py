"""The records of the marker mechanism: marker types, IO types, parsed markers, the writer contract."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tidemark.format.names import parse_base_file_name

if TYPE_CHECKING:
    from tidemark.config.early_conflict import EarlyConflictSettings
    from tidemark.markers.fence import WriteFence

MARKER_INFIX = ".marker."


class MarkerType(str, enum.Enum):
    DIRECT = "DIRECT"
    TIMELINE_SERVER_BASED = "TIMELINE_SERVER_BASED"


class IOType(str, enum.Enum):
    CREATE = "CREATE"  # a new file group
    MERGE = "MERGE"  # a new version of an existing file group
    APPEND = "APPEND"  # a log file appended to a file group (merge-on-read)


@dataclass(frozen=True)
class Marker:
    """One marker: the table-relative data file it stands for, and how that file is written."""

    data_file: str  # e.g. ``city=sf/<fileId>_<token>_<instant>.parquet``
    io_type: IOType

    @property
    def partition_path(self) -> str:
        return self.data_file.rsplit("/", 1)[0] if "/" in self.data_file else ""

    @property
    def file_name(self) -> str:
        return self.data_file.rsplit("/", 1)[-1]

    @property
    def file_id(self) -> str:
        parsed = parse_base_file_name(self.file_name)
        if parsed is not None:
            return parsed.file_id
        # log files: .<fileId>_<instant>.log.<version>_<token>
        return self.file_name.lstrip(".").split("_", 1)[0]

    @property
    def name(self) -> str:
        """The marker's own relative name: ``<data file>.marker.<IO>``."""
        return f"{self.data_file}{MARKER_INFIX}{self.io_type.value}"


def parse_marker(name: str) -> Marker | None:
    """``<data file>.marker.<IO>`` -> Marker, or None for anything else."""
    data_file, sep, io = name.rpartition(MARKER_INFIX)
    if not sep:
        return None
    try:
        return Marker(data_file, IOType(io.strip()))
    except ValueError:
        return None


@dataclass(frozen=True)
class MarkerSpec:
    """How the tasks of one write keep markers; picklable, shipped with the write spec.

    ``server_url`` is set for TIMELINE_SERVER_BASED markers kept by the marker server,
    ``batch_id`` for ones the tasks write themselves (:mod:`.batch`: tasks that are threads of
    the writing process); ``early_conflict``
    when early conflict detection is on; ``fence`` when the engine's tasks can outlive a
    failed write (Spark's), to check before each marker that the write was not rolled back
    (:mod:`.fence`).
    """

    type: MarkerType = MarkerType.DIRECT
    server_url: str | None = None
    batch_id: str | None = None
    early_conflict: EarlyConflictSettings | None = None
    fence: WriteFence | None = None


class MarkerWriter(Protocol):
    def create(self, data_file: str, io_type: IOType) -> None:
        """Record the marker of ``data_file`` durably, before the file is written.

        Raises EarlyConflictError when early conflict detection finds that another
        writer holds the file group (the file must then not be written).
        """
        ...

    def close(self) -> None: ...
