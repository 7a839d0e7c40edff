"""Hudi's partition metafile (``.hoodie_partition_metadata``): the file that makes a folder a
partition for Hudi's readers and its partition listing.

Hudi's write handles write it before a partition's first data file; tidemark's file-writing
tasks do the same (:mod:`tidemark.write.file_group`), on their own threads or executors, so a
write of a hundred new partitions does not create a hundred files one after another at commit.
The commit checks every written partition again (:mod:`tidemark.write.commit`): a writer that
skipped it still publishes a readable table.
"""

from __future__ import annotations

from datetime import UTC, datetime

from tidemark.format.names import PARTITION_METAFILE, join_partition, partition_metafile_content
from tidemark.storage import Storage


def ensure_partition_metafile(storage: Storage, partition_path: str, instant_time: str) -> None:
    """Write ``partition_path``'s metafile, naming ``instant_time``, unless one exists.

    Atomic and safe for writers racing on one partition: the file appears whole, and the first
    one written stays (any writer's is as good). Raises what the storage raises."""
    path = join_partition(partition_path, PARTITION_METAFILE)
    if storage.exists(path):
        return
    depth = partition_path.count("/") + 1 if partition_path else 0
    written_at = datetime.now(UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    storage.create_if_absent(path, partition_metafile_content(instant_time, depth, written_at))
