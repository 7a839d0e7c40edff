"""``df.writeStream.format("tidemark")``: a Structured Streaming sink, one commit per micro-batch.

Tasks stage their rows as the batch writer's do (:mod:`datasource_write`); Spark then calls
``commit(messages, batchId)`` on the driver side, and that runs one tidemark write.

Exactly once. Spark replays a micro-batch whose sink commit it did not record in its
checkpoint (a crash between our commit and Spark's). So every commit records the query's
identity and the batch id in its extra metadata, under Hudi's key
``_hudi_streaming_sink_checkpoint`` (a JSON object ``{identity: batchId}``); before writing,
the sink reads the completed commits, newest first, for the last batch id of its identity and
skips a batch at or below it. The identity is
``hoodie.datasource.write.streaming.checkpoint.identifier`` or, without it, one derived from the
query's checkpointLocation; one identity must belong to one query at a time (Spark itself
refuses two active runs of one checkpoint).

Conflicts: a micro-batch that loses a write conflict is retried by the table's own
``hoodie.write.num.retries.on.conflict.failures``, then by the sink up to
``hoodie.datasource.write.streaming.retry.count`` times, pausing
``...streaming.retry.interval.ms`` between; after that the query fails (and, restarted from
its checkpoint, replays the batch).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from tidemark.engines.spark.datasource_write import (
    STAGING_PREFIX,
    StagedRows,
    WriteRequest,
    parse_datasource,
    plan_write,
    read_staged,
    remove_staging,
    run_operation,
    stage,
)
from tidemark.errors import ConfigError, HeartbeatExpiredError, WriteConflictError
from tidemark.write.commit import CommitProtocol

log = logging.getLogger(__name__)

SINK_CHECKPOINT_KEY = "_hudi_streaming_sink_checkpoint"  # Hudi's extra-metadata key
IDENTIFIER = "hoodie.datasource.write.streaming.checkpoint.identifier"
RETRY_COUNT = "hoodie.datasource.write.streaming.retry.count"
RETRY_INTERVAL = "hoodie.datasource.write.streaming.retry.interval.ms"


@dataclass(frozen=True)
class StreamRequest:
    """A streaming query's write settings; ``write.staging`` is a prefix, one folder per batch."""

    write: WriteRequest
    identity: str
    retries: int
    retry_interval_ms: int

    def for_batch(self, batch_id: int) -> WriteRequest:
        return replace(self.write, staging=f"{self.write.staging}-b{batch_id}")


def query_identity(datasource: Mapping[str, str], checkpoint_location: str | None) -> str:
    """The identity recorded with each commit: the identifier option, else derived from the
    checkpoint folder (absolute path), else a ConfigError: without one a replay is undetectable."""
    given = datasource.get(IDENTIFIER)
    if given:
        return given
    if checkpoint_location:
        location = os.path.abspath(checkpoint_location) if "://" not in checkpoint_location else checkpoint_location
        return "checkpoint-" + hashlib.sha256(location.encode()).hexdigest()[:16]
    raise ConfigError(
        f"the tidemark streaming sink records each micro-batch with its query's identity (exactly once): set "
        f"option('checkpointLocation', ...) or {IDENTIFIER}", key=IDENTIFIER,
    )


def plan_stream(table_class: Any, options: Mapping[str, str], spark_schema: Any, overwrite: bool) -> StreamRequest:
    """Resolve a streaming query's options; create the table if needed."""
    if overwrite:
        raise ConfigError("the tidemark streaming sink supports outputMode('append') only")
    write = plan_write(table_class, options, spark_schema, overwrite=False)
    datasource = write.datasource_options
    checkpoint = next((v for k, v in options.items() if k.lower() == "checkpointlocation"), None)
    identity = query_identity(datasource, checkpoint)
    # Spark builds this writer twice, for the tasks and again in the process that commits: the
    # staging folder must follow from the query, not from a random name.
    slug = hashlib.sha256(identity.encode()).hexdigest()[:16]
    write = replace(write, staging=os.path.join(os.path.dirname(write.staging), f"{STAGING_PREFIX}stream-{slug}"))
    return StreamRequest(
        write,
        identity,
        parse_datasource(RETRY_COUNT, datasource),
        parse_datasource(RETRY_INTERVAL, datasource),
    )


def last_committed_batch(table: Any, identity: str) -> int | None:
    """The last batch id committed under ``identity``: the newest completed commit recording it,
    on the active timeline and then, if none there, in the archived history."""
    from tidemark.timeline import Timeline

    timeline = Timeline.load(table.storage)
    archived = timeline.archived_before is not None
    for candidate in (timeline, timeline.with_history()) if archived else (timeline,):
        for instant in reversed(candidate.by_completion_time()):
            if not instant.action.writes_data:
                continue
            raw = candidate.commit_metadata(instant).extra.get(SINK_CHECKPOINT_KEY)
            if not raw:
                continue
            try:
                batch = json.loads(raw).get(identity)
            except (ValueError, AttributeError):
                continue  # another writer's malformed entry: not ours
            if batch is not None:
                return int(batch)
    return None


class _RecordingProtocol(CommitProtocol):
    """The commit protocol, adding the sink's checkpoint to every commit's extra metadata."""

    checkpoint: dict[str, str] = {}

    def complete(self, pending: Any, stats: Any, **kwargs: Any) -> Any:
        kwargs["extra"] = {**(kwargs.get("extra") or {}), **self.checkpoint}
        return super().complete(pending, stats, **kwargs)


def record_batch_with_commits(table: Any, identity: str, batch_id: int) -> None:
    """Make every later commit of ``table`` (this Table object) record ``batch_id`` for ``identity``."""
    protocol = _RecordingProtocol(table.storage, table.write_config)
    protocol.guard = table._check_writer
    protocol.checkpoint = {SINK_CHECKPOINT_KEY: json.dumps({identity: str(batch_id)})}
    table._commit_protocol = protocol  # Table builds its protocol once and reuses it: use this one


def commit_batch(request: StreamRequest, messages: list[Any], batch_id: int) -> Any:
    """One micro-batch: skip it if its commit is on the table already, else write it as one
    commit recording ``batch_id``. Returns the CommitResult, or None if nothing was written."""
    write = request.for_batch(batch_id)
    try:
        data = read_staged(write, messages)
        attempt = 0
        while True:
            attempt += 1
            table = write.table_class.open(write.path, spark=None, options=write.table_options)
            try:
                last = last_committed_batch(table, request.identity)
                if last is not None and batch_id <= last:
                    log.info("micro-batch %d of %s is committed already (last %d): skipped",
                             batch_id, request.identity, last)
                    return None
                if data.num_rows == 0 and write.partitions_to_delete is None:
                    return None  # nothing to write; a replay of it writes nothing either
                record_batch_with_commits(table, request.identity, batch_id)
                return run_operation(table, write, data)
            except (WriteConflictError, HeartbeatExpiredError) as conflict:
                if attempt > request.retries:
                    raise
                log.warning("micro-batch %d lost a conflict (%s); retry %d of %d",
                            batch_id, conflict, attempt, request.retries)
                time.sleep(request.retry_interval_ms / 1000)
            finally:
                table.close()
    finally:
        remove_staging(write)


class TidemarkStreamWriter(DataSourceStreamArrowWriter):
    """Stages each task's rows; commits each micro-batch once (see the module docstring)."""

    def __init__(self, request: StreamRequest) -> None:
        self.request = request

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedRows:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context else None
        if batch_id is None:
            raise ConfigError("the tidemark streaming sink ran outside a micro-batch (no streaming.sql.batchId)")
        return stage(self.request.for_batch(int(batch_id)).staging, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's
        commit_batch(self.request, list(messages), batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's
        remove_staging(self.request.for_batch(batchId))
