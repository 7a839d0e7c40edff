"""``df.write.format("tidemark")``: the batch write side of the Python data source.

Spark's Python data source API runs ``write(iterator)`` in executor tasks and
``commit(messages)`` afterwards in a separate Python worker on the driver's machine, with no
SparkSession. tidemark's write needs a global view of the batch (deduplication by key, the
index lookup against the latest base files, file sizing) and its commit protocol; so:

* ``writer(schema, overwrite)`` (planning, on the driver side) resolves Hudi's datasource
  options, creates the table on the first write as Hudi does, and fixes a staging folder
  ``.hoodie/.temp/datasource-<uuid>/``;
* each task stages its rows there as one Parquet file and returns its name (a task that is
  retried, or a speculative copy, stages another file; only the files of the attempts Spark
  reports as successful are read);
* ``commit(messages)`` runs the operation with tidemark's Arrow engine (``spark=None``) over
  the staged rows: validation, dedup, index lookup, the commit protocol with its lock,
  conflict checks and retries; then deletes the staging folder. ``abort`` only deletes it.

The cost of that design: the rows pass through the staging files once more, and the commit
step runs in one process, so a batch must fit that process's memory; table writes of
hundreds of millions of rows belong on ``Table(spark=...)``'s distributed pipeline.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from tidemark.config.datasource_options import DATASOURCE_WRITE_OPTIONS
from tidemark.config.options import ALTERNATIVE_KEYS, OPTIONS_BY_KEY
from tidemark.config.resolve import parse_option
from tidemark.errors import ConfigError, InvalidInputError, TableExistsError
from tidemark.format.names import TEMP_DIR
from tidemark.write.operation import Overwrite, WriteOperation

OPERATION = "hoodie.datasource.write.operation"
RECORD_KEY = "hoodie.datasource.write.recordkey.field"
PARTITION_PATH = "hoodie.datasource.write.partitionpath.field"
PRECOMBINE = "hoodie.datasource.write.precombine.field"
ORDERING = "hoodie.table.ordering.fields"
TABLE_TYPE = "hoodie.datasource.write.table.type"
TABLE_TYPE_ALT = "hoodie.table.type"
PARTITIONS_TO_DELETE = "hoodie.datasource.write.partitions.to.delete"
KEY_GENERATOR = "hoodie.datasource.write.keygenerator.class"

_DATASOURCE_KEYS = {o.key: o for o in DATASOURCE_WRITE_OPTIONS}
# Spark's options arrive lower-cased (CaseInsensitiveDict): map them back to the declared keys.
_CANONICAL = {k.lower(): k for k in (*OPTIONS_BY_KEY, *ALTERNATIVE_KEYS, *_DATASOURCE_KEYS)}
# Keys Spark itself passes to a data source; they are not table options.
_SPARK_KEYS = {"path", "checkpointlocation"}
_KEY_GENERATORS = {"simplekeygenerator", "complexkeygenerator", "nonpartitionedkeygenerator"}
STAGING_PREFIX = "datasource-"
# How long a write into a new table waits for another writer creating that table to finish, and
# for another writer's creation claim to appear.
CREATION_WAIT_SECONDS = 30.0
CLAIM_GRACE_SECONDS = 1.0


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(n.strip() for n in (value or "").split(",") if n.strip())


def split_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """``options`` as (data source keys, table/writer keys for :class:`Table`, Spark's own keys).

    Keys tidemark does not know are kept with the table keys: ``Table`` refuses them with
    UnknownOptionError naming the closest known key.
    """
    datasource: dict[str, str] = {}
    table: dict[str, str] = {}
    spark: dict[str, str] = {}
    for raw_key, value in options.items():
        if raw_key.lower() in _SPARK_KEYS:
            spark[raw_key.lower()] = value
            continue
        key = _CANONICAL.get(raw_key.lower(), raw_key)
        (datasource if key in _DATASOURCE_KEYS else table)[key] = value
    return datasource, table, spark


def parse_datasource(key: str, options: Mapping[str, str]) -> Any:
    return parse_option(key, options, _DATASOURCE_KEYS)


@dataclass(frozen=True)
class WriteRequest:
    """Everything the tasks and the commit step need; built once while planning, then pickled."""

    table_class: Any  # tidemark.Table (pickled by reference)
    path: str
    operation: WriteOperation
    table_options: dict[str, str]
    schema: pa.Schema
    staging: str  # full path of this write's staging folder
    partitions_to_delete: tuple[str, ...] | None = None
    datasource_options: dict[str, str] = field(default_factory=dict)


def resolve_operation(datasource: Mapping[str, str], overwrite: bool) -> WriteOperation:
    """The operation to run: Hudi's key, and mode("overwrite") as Hudi reads it.

    mode("overwrite") replaces the whole table (``insert_overwrite_table``) unless the operation
    already is an overwrite; deleting under mode("overwrite") makes no sense and is refused.
    """
    operation = WriteOperation.parse(parse_datasource(OPERATION, datasource))
    if overwrite and operation.overwrite not in (Overwrite.BATCH_PARTITIONS, Overwrite.TABLE):
        if operation.keys_only:  # delete, delete_partition
            raise ConfigError(
                f"{OPERATION}={operation.value} cannot run with mode('overwrite'); use mode('append')", key=OPERATION
            )
        operation = WriteOperation.INSERT_OVERWRITE_TABLE
    return operation


def _check_key_generator(datasource: Mapping[str, str]) -> None:
    name = datasource.get(KEY_GENERATOR)
    if name is None:
        return
    simple = name.strip().rsplit(".", 1)[-1].lower()
    if simple not in _KEY_GENERATORS:
        raise ConfigError(
            f"{KEY_GENERATOR}={name!r} is not supported: tidemark builds keys as Hudi's Simple, Complex and "
            "NonpartitionedKeyGenerator do; leave the key out or use one of those",
            key=KEY_GENERATOR,
        )


def open_or_create(table_class: Any, path: str, datasource: Mapping[str, str], table_options: Mapping[str, str],
                   schema: pa.Schema | None) -> Any:
    """The table at ``path`` opened with ``table_options``; created first if there is none.

    ``table_class`` is :class:`tidemark.Table`, handed in by the data source (this module sits
    below ``table.py``). Creating needs ``hoodie.datasource.write.recordkey.field``. On an
    existing table the record key and partition fields, if given, must be the table's (Hudi
    refuses a mismatch too).
    """
    from tidemark.format.properties import PROPERTIES_PATH
    from tidemark.write.table_setup import CREATION_CLAIM

    Table = table_class  # noqa: N806 - the class

    keys = _names(datasource.get(RECORD_KEY))
    partitions = _names(datasource.get(PARTITION_PATH))
    if not os.path.exists(os.path.join(path, PROPERTIES_PATH)):
        if not keys:
            raise ConfigError(
                f"there is no table at {path!r} yet: creating it needs {RECORD_KEY} (the record-key column(s))",
                key=RECORD_KEY,
            )
        ordering = _names(datasource.get(ORDERING)) or _names(datasource.get(PRECOMBINE))
        table_type = parse_datasource(TABLE_TYPE_ALT, datasource) or parse_datasource(TABLE_TYPE, datasource)
        try:
            return Table.create(path, spark=None, record_key=keys, partition_by=partitions,
                                ordering_field=ordering or None, table_type=table_type,
                                options=table_options, schema=schema)
        except TableExistsError:
            # Another writer created it first, or is creating it: write into theirs once it is there.
            if not _table_created_by_another(path, PROPERTIES_PATH, CREATION_CLAIM):
                raise
    table = Table.open(path, spark=None, options=table_options)
    cfg = table.config
    for key, given, stored in ((RECORD_KEY, keys, cfg.record_key_fields),
                               (PARTITION_PATH, partitions, cfg.partition_fields)):
        if key in datasource and tuple(given) != tuple(stored):
            raise ConfigError(
                f"{key}={datasource[key]!r} differs from the table's {','.join(stored)!r}; these are fixed when "
                "the table is created", key=key,
            )
    return table


def _table_created_by_another(path: str, properties: str, claim: str) -> bool:
    """Whether another process created the table at ``path``, waiting while it may be creating
    it: while its creation claim is there and fresh (a creation takes well under a second; an
    older claim is one a killed creator left), and a moment for a claim to appear (it is written
    before it is named)."""
    started = time.monotonic()
    while not os.path.exists(os.path.join(path, properties)):
        waited = time.monotonic() - started
        try:
            creating = time.time() - os.path.getmtime(os.path.join(path, claim)) < CREATION_WAIT_SECONDS
        except OSError:
            creating = False
        if waited > CREATION_WAIT_SECONDS or (not creating and waited > CLAIM_GRACE_SECONDS):
            return os.path.exists(os.path.join(path, properties))  # it may have finished between the looks
        time.sleep(0.05)
    return True


def plan_write(table_class: Any, options: Mapping[str, str], spark_schema: Any, overwrite: bool) -> WriteRequest:
    """Resolve the options of ``df.write...save(path)``; create the table if needed."""
    from pyspark.sql.pandas.types import to_arrow_schema

    datasource, table_options, spark_keys = split_options(options)
    path = spark_keys.get("path")
    if not path:
        raise ConfigError("df.write.format('tidemark').save(path) needs a path")
    _check_key_generator(datasource)
    for key in datasource:
        parse_datasource(key, datasource)  # every given data source value is valid
    operation = resolve_operation(datasource, overwrite)
    schema = to_arrow_schema(spark_schema, timezone="UTC")
    table = open_or_create(table_class, path, datasource, table_options, schema if len(schema) else None)
    to_delete = _names(datasource.get(PARTITIONS_TO_DELETE)) if PARTITIONS_TO_DELETE in datasource else None
    if to_delete is not None and operation is not WriteOperation.DELETE_PARTITION:
        raise ConfigError(f"{PARTITIONS_TO_DELETE} needs {OPERATION}=delete_partition", key=PARTITIONS_TO_DELETE)
    staging = os.path.join(table.path, TEMP_DIR, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    return WriteRequest(table_class, table.path, operation, dict(table_options), schema, staging, to_delete,
                        dict(datasource))


# -- tasks: stage rows ------------------------------------------------------------------------
@dataclass(frozen=True)
class StagedRows(WriterCommitMessage):
    """One task attempt's staged file (None: the task had no rows)."""

    file: str | None
    rows: int


def stage(staging: str, batches: Iterator[pa.RecordBatch]) -> StagedRows:
    """Write a task's Arrow batches into one Parquet file under ``staging``."""
    from pyspark import TaskContext

    context = TaskContext.get()
    ident = f"{context.partitionId()}-{context.taskAttemptId()}" if context else uuid.uuid4().hex
    writer: pq.ParquetWriter | None = None
    name = os.path.join(staging, f"part-{ident}-{uuid.uuid4().hex[:8]}.parquet")
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if writer is None:
                os.makedirs(staging, exist_ok=True)
                writer = pq.ParquetWriter(name, batch.schema, compression="zstd")
            writer.write_batch(batch)
            rows += batch.num_rows
    finally:
        if writer is not None:
            writer.close()
    return StagedRows(name if writer is not None else None, rows)


def read_staged(request: WriteRequest, messages: list[Any]) -> pa.Table:
    """The rows the successful task attempts staged (their files only), as one Arrow table."""
    files = [m.file for m in messages if isinstance(m, StagedRows) and m.file]
    if not files:
        return request.schema.empty_table()
    tables = [pq.read_table(f) for f in files]
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def remove_staging(request: WriteRequest) -> None:
    shutil.rmtree(request.staging, ignore_errors=True)


# -- commit: one tidemark write -----------------------------------------------------------------
def run_operation(table: Any, request: WriteRequest, data: pa.Table) -> Any:
    """Run ``request.operation`` on ``table`` (Arrow engine) with ``data``; the CommitResult."""
    operation = request.operation
    if operation is WriteOperation.DELETE_PARTITION:
        if request.partitions_to_delete is not None:
            return table.delete_partitions(list(request.partitions_to_delete))
        if data.num_rows == 0:
            raise InvalidInputError(
                "delete_partition with an empty DataFrame names no partition; give rows of the partitions "
                "to delete or hoodie.datasource.write.partitions.to.delete"
            )
        return table.delete_partitions(data)
    return getattr(table, operation.value)(data)


def commit_write(request: WriteRequest, messages: list[Any]) -> Any:
    """The commit step of a batch write: run the operation over the staged rows, then clean up."""
    try:
        data = read_staged(request, messages)
        table = request.table_class.open(request.path, spark=None, options=request.table_options)
        try:
            return run_operation(table, request, data)
        finally:
            table.close()
    finally:
        remove_staging(request)


class TidemarkBatchWriter(DataSourceArrowWriter):
    """Stages each task's rows; commits them as one tidemark write (see the module docstring)."""

    def __init__(self, request: WriteRequest) -> None:
        self.request = request

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        return stage(self.request.staging, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_write(self.request, list(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        remove_staging(self.request)


# -- format("hudi") -----------------------------------------------------------------------------
HUDI_SOURCE_CLASS = "org.apache.hudi.DefaultSource"


def hudi_bundle_present(spark: Any) -> bool:
    """Whether the session's JVM has Hudi's own data source (a Hudi Spark bundle on the classpath).

    Over Spark Connect there is no JVM handle here: the alias is not registered then, so a
    server with a Hudi bundle is never shadowed.
    """
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return True
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(HUDI_SOURCE_CLASS, False, loader)
        return True
    except Exception:  # py4j's Java ClassNotFoundException
        return False

