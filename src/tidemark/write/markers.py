"""Direct markers: one empty file per data file, created *before* the data file.

``.hoodie/.temp/<instant>/<partition>/<data file>.marker.<CREATE|MERGE>``

Markers are the write's own record of every file it may have produced, so a
rollback (or the commit's clean-up of partial files from failed or speculative
Spark task attempts) finds them all without listing the table.
"""

from __future__ import annotations

import enum

from tidemark.format.names import data_path_of_marker, marker_dir, marker_path
from tidemark.storage import Storage


class IOType(enum.Enum):
    CREATE = "CREATE"  # a new file group
    MERGE = "MERGE"  # a new version of an existing file group


def create_marker(storage: Storage, instant_time: str, data_file: str, io_type: IOType) -> None:
    storage.create_if_absent(marker_path(instant_time, data_file, io_type.value))


def marked_data_files(storage: Storage, instant_time: str) -> list[str]:
    """Table-relative paths of every data file a write marked (whether or not it exists)."""
    root = marker_dir(instant_time)
    out = []
    for info in storage.walk_files(root, skip_hidden_dirs=False):
        if ".marker." in info.name:
            out.append(data_path_of_marker(instant_time, info.path))
    return sorted(out)


def delete_markers(storage: Storage, instant_time: str) -> None:
    storage.delete_tree(marker_dir(instant_time))
