"""Non-blocking concurrency control (NBCC): what a writer does differently from OCC.

With ``hoodie.write.concurrency.mode=non_blocking_concurrency_control`` (a
merge-on-read table with a bucket index, checked when the table is opened):

* every record's file group is fixed by its key (the bucket index), so writers
  agree where a key lives without looking at each other's files;
* a writer only ever *appends* a log file of its own to those file groups; it
  never rewrites a base file, so two writers never touch the same file;
* a bucket seen for the first time gets its file group (an empty base file) in a
  tiny instant of its own, created under the lock after re-reading the
  timeline (:meth:`CommitProtocol.create_file_groups`): concurrent writers that
  both need it create it once, and every log has a base file to sit on, as
  Hudi readers require;
* the lock is taken only to generate instant times and to publish; deltacommits
  never conflict (:class:`NonBlockingConflictResolution`);
* readers and compaction merge a slice's logs in completion-time order with the
  table's record merger, so the result does not depend on who ran first when the
  merger is commutative (event time with distinct ordering values, column groups).

Operations that create or replace base files with data (``bulk_insert``,
``insert_overwrite``, clustering) are refused: they would need the conflict
checks NBCC exists to avoid.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NoReturn

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.config import WriteConfig
from tidemark.errors import ConfigError
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import base_file_name, join_partition, write_token
from tidemark.format.properties import MERGE_ON_READ, TableConfig
from tidemark.markers import IOType, MarkerSpec, open_marker_writer
from tidemark.storage import Storage

MODE_KEY = "hoodie.write.concurrency.mode"


def refuse_base_file_operation(operation: str) -> NoReturn:
    """Raise ConfigError: ``operation`` (a write operation whose ``replaces_base_files``, or
    ``cluster``) writes or replaces base files, which non-blocking writers cannot run."""
    raise ConfigError(
        f"{operation} writes or replaces base files, which non_blocking_concurrency_control writers never do "
        f"(they only append logs, so they need no conflict checks); use upsert, insert or delete, or run "
        f"{operation} from a writer with {MODE_KEY}=optimistic_concurrency_control while no "
        "non-blocking writer runs",
        key=MODE_KEY,
    )


def empty_base_writer(storage: Storage, schema: pa.Schema, compression: str) -> Callable[[str, str, str], WriteStat]:
    """A ``write_base`` for :meth:`CommitProtocol.create_file_groups`: an empty parquet base file
    (``schema``: meta + user columns) after its marker, so a failed attempt can be rolled back."""
    codec = "none" if compression in ("none", "uncompressed") else compression

    def write_base(partition_path: str, file_id: str, instant_time: str) -> WriteStat:
        started = time.monotonic()
        name = base_file_name(file_id, write_token(0, 0, 0), instant_time)
        rel_path = join_partition(partition_path, name)
        markers = open_marker_writer(storage, instant_time, MarkerSpec())
        try:
            markers.create(rel_path, IOType.CREATE)
        finally:
            markers.close()
        output = storage.open_output(rel_path)
        pq.write_table(schema.empty_table(), output.sink, compression=codec)
        return WriteStat.new_file(partition_path, file_id, rel_path, rows=0, file_size=output.commit(),
                                  write_time_ms=int((time.monotonic() - started) * 1000))

    return write_base


__all__ = ["empty_base_writer", "refuse_base_file_operation"]


def check_table_supports(write_config: WriteConfig, config: TableConfig) -> None:
    """Non-blocking concurrency control needs a merge-on-read table with a bucket index: only
    there can every writer append to a file group fixed by the key, without reading or
    replacing another writer's files."""
    if not write_config.non_blocking:
        return
    missing = []
    if config.table_type != MERGE_ON_READ:
        missing.append(f"table_type=MERGE_ON_READ (this table is {config.table_type})")
    if not config.bucket_index:
        missing.append("hoodie.index.type=BUCKET with hoodie.bucket.index.num.buckets")
    if missing:
        raise ConfigError(
            "hoodie.write.concurrency.mode=non_blocking_concurrency_control needs " + " and ".join(missing)
            + "; use optimistic_concurrency_control for other tables",
            key="hoodie.write.concurrency.mode",
        )
