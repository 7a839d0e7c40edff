"""The Spark write pipeline: dedup, index lookup, file sizing, file-group writes in tasks.

One write, as Spark jobs (the driver only ever collects small aggregates and
write statistics, never keys or rows; a small batch's lookup uses Spark's
broadcast joins)::

    batch ── validate + key/partition columns ── dedup by key (an upsert: in the write tasks)
          ── index: each key's one possible file from the latest base files' footers (an upsert
             of a copy-on-write table; :func:`.bloom_index.tag_by_footers`), or a left join
             with their stored keys (otherwise, and for keys several footers allow)
          ── keep (local checkpoint) + count: new keys per partition, existing keys, null keys
          ── route: updates to their file group; inserts to small files / new groups by key hash
          ── groupBy(partition, file group).applyInArrow(write_file_group)  -> WriteStats
             (the driver lays the file groups out over the tasks by the size of their base files)
          ── commit protocol (engine-free)

bulk_insert skips the index and the shuffle: each task writes its rows into new
file groups with ``mapInArrow``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from tidemark.engines.spark.batch_checks import BROADCAST_BATCH_KEY_BYTES, PATHS, BatchChecks
from tidemark.engines.spark.bloom_index import (
    BLOOM_PRUNE_MAX_KEYS,
    SEVERAL_FILES_COLUMN,
    SeveralFiles,
    candidate_files,
    every_file_hit,
    several_files_count,
    tag_by_footers,
)
from tidemark.engines.spark.bulk import write_bulk
from tidemark.engines.spark.conform import arrow_schema_of, conform, spark_schema_of
from tidemark.engines.spark.connect import (
    JobHandle,
    release_checkpoint,
    task_reachable_host,
)
from tidemark.engines.spark.dedup import batch_dedup
from tidemark.engines.spark.expressions import (
    name,
)
from tidemark.engines.spark.group_writes import file_group_writes
from tidemark.engines.spark.keys import (
    partition_path_sql,
    record_key_sql,
    timestamp_kinds,
)
from tidemark.engines.spark.object_files import read_columns_of
from tidemark.engines.spark.observed import (
    OBSERVED_PARTITIONS,
    ProfileMetrics,
    kept_with,
    observable,
)
from tidemark.engines.spark.routing import bucket_file_ids, route
from tidemark.engines.spark.stats import run_stats_job
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import FILE_NAME, PARTITION_PATH, RECORD_KEY
from tidemark.fsview import FileSystemView
from tidemark.merge import OP_COLUMN, OP_DELETE
from tidemark.write.bucket import BucketAssignment
from tidemark.write.engine import FILE_ID_COLUMN, TableLayout, Tagged, WorkloadProfile
from tidemark.write.file_group import WriteSpec
from tidemark.write.key_pruning import PruneStats
from tidemark.write.operation import WriteOperation
from tidemark.write.plan import InsertBucket, SoleSmallFile
from tidemark.write.validate import plan_columns, require_columns

log = logging.getLogger(__name__)

# Batches up to this many rows have their keys broadcast to filter the table's keys map-side.
BROADCAST_BATCH_KEYS = 2_000_000
# Batches up to this many rows also have the table's keys that match them broadcast.
BROADCAST_MATCHED_KEYS = 500_000
# Tagging a batch of unknown partitions by every partition's footers reads at most this many.
FOOTER_TAG_ALL_FILES = 256

class SparkWritePipeline:
    """Runs the data-parallel part of one write on Spark and returns the write statistics."""

    def __init__(
        self,
        spark: SparkSession,
        layout: TableLayout,
        user_schema: pa.Schema,
        *,
        parallelism: int,
        operation: WriteOperation = WriteOperation.UPSERT,
    ) -> None:
        self.spark = spark
        self.operation = operation
        self.layout = layout
        self.user_schema = user_schema
        self.prune_stats: PruneStats | None = None  # what the bloom index ruled out (small batches)
        self._kept: list[DataFrame] = []  # local checkpoints, dropped by release()
        self.checks = BatchChecks(layout, user_schema, operation, self._kept)  # its keys, partitions, count
        self._arrived: DataFrame | None = None  # the prepared batch, before dedup
        self._footer_partitions: list[str] = []  # the partitions whose footers tagged it (deferred checks)
        self._several = SeveralFiles()  # keys that several files' footers may hold (tag_by_footers), once counted
        self.parallelism = parallelism
        self._job: JobHandle | None = None

    tasks_outlive_failures = True  # a failed job's other tasks run until Spark kills them
    tasks_in_writer_process = False  # executors: direct markers, or the marker server

    @functools.cached_property
    def marker_server_host(self) -> str:
        """Where tasks reach a server in this process (see ``connect.task_reachable_host``).
        Looked up only when a write runs a marker server."""
        return task_reachable_host(self.spark)

    # -- running write jobs -----------------------------------------------------------------
    def _run_write_job(self, frame: DataFrame, instant: str) -> list[WriteStat]:
        """Collect the stats of a write job, run under a name (job group, or operation tag on
        Spark Connect) so that :meth:`cancel_write` can stop it
        (:func:`~tidemark.engines.spark.stats.run_stats_job`)."""
        if self.checks.unchecked is not None:  # pragma: no cover - a client that skipped profile()
            raise RuntimeError("the batch's null-key check was deferred to profile(), which never ran")
        job = JobHandle(self.spark, f"tidemark-write-{instant}", f"tidemark write {instant}")
        self._job = job
        try:
            return run_stats_job(frame, job)
        finally:
            self._job = None

    def cancel_write(self) -> None:
        job = self._job
        if job is not None:
            job.cancel()

    def file_groups_of(self, rows: DataFrame) -> set[tuple[str, str]]:
        pairs = rows.filter(F.col(FILE_ID_COLUMN).isNotNull()).select(PARTITION_PATH, FILE_ID_COLUMN).distinct()
        return {(r[0] or "", r[1]) for r in pairs.collect()}

    # -- preparing the batch -----------------------------------------------------------
    def prepare(self, df: DataFrame, *, allow_missing: bool, keys_only: bool = False, dedup: bool = False) -> DataFrame:
        """Validate the batch and add the key and partition-path columns; with ``dedup``, then
        one record per key (:meth:`dedup`).

        Raises MissingColumnError or SchemaMismatchError; raises NullRecordKeyError here, after
        one small Spark job, or later from :meth:`profile` / :meth:`persist_profiled` when the
        check can ride on the count of the tagged batch (:mod:`.batch_checks`).
        Either way, before the write's instant is requested.
        """
        layout = self.layout
        require_columns("record key", layout.record_key_fields, df.columns)
        if keys_only:
            wanted = (*layout.record_key_fields, *layout.partition_fields, *layout.ordering_fields)
            columns = [c for c in df.columns if c in wanted]
        else:
            require_columns("partition", layout.partition_fields, df.columns)
            # Named as the ordering field it is; only set.null.for.missing.columns (column groups) fills it.
            if not allow_missing:
                require_columns("ordering", layout.ordering_fields, df.columns)
            incoming = arrow_schema_of(df)
            plan = plan_columns(incoming, self.user_schema, allow_missing=allow_missing)
            # One projection per step: every DataFrame Spark builds is analysed again on the driver.
            aligned = {
                column: conform(F.col(column), incoming.field(column).type, target)
                for column, target in plan.casts.items()
            }
            for column in plan.missing:
                field_type = spark_schema_of(pa.schema([self.user_schema.field(column)]))[0].dataType
                aligned[column] = F.lit(None).cast(field_type)
            if aligned:
                df = df.withColumns(aligned)
            columns = list(self.user_schema.names)
        # The columns and the keys in one projection of SQL text (see engines/spark/expressions.py).
        # A timestamp key field's text depends on its Spark type: read from the DataFrame (one more
        # analysis) only for a table that has one.
        timestamps = timestamp_kinds(df.schema, layout.record_key_fields) if any(
            f.name in layout.record_key_fields and pa.types.is_timestamp(f.type) for f in self.user_schema) else {}
        keys = [f"{record_key_sql(layout.record_key_fields, timestamps)} AS {name(RECORD_KEY)}"]
        if all(c in columns for c in layout.partition_fields):
            path = partition_path_sql(
                layout.partition_fields, hive_style=layout.hive_style, url_encode=layout.url_encode)
            keys.append(f"{path} AS {name(PARTITION_PATH)}")
        df = df.selectExpr(*(name(c) for c in columns if c not in (RECORD_KEY, PARTITION_PATH)), *keys)
        self.checks.run(df, footer_taggable=self._tags_by_footers(), int_key=self._integer_key())
        self._arrived = df
        return self.dedup(df) if dedup else df

    def persist_profiled(self, tagged: DataFrame) -> tuple[DataFrame, WorkloadProfile]:
        """The tagged batch kept (as :meth:`persist`) and counted.

        The counts are observed metrics of the very pass that computes and keeps the batch: no
        job of their own (:mod:`.observed`). A partitioned table whose batch paths are not known
        or too many (or hold a path the batch's keys did not) is counted by a grouped job
        (:meth:`profile`) over the kept batch instead.
        """
        checks = self.checks
        partitions = checks.partitions if self.layout.partition_fields else None
        if checks.partitions_deferred:  # tagged by every partition's footers
            partitions = self._footer_partitions
        if not observable(tagged) or (
                self.layout.partition_fields and (partitions is None or len(partitions) > OBSERVED_PARTITIONS)):
            kept = self.persist(tagged)
            return kept, self.profile(kept)
        metrics = ProfileMetrics(partitions)
        deferred = checks.deferred_metrics(with_paths=True)
        kept, counts = kept_with(tagged, [*metrics.columns(), *deferred, *several_files_count(tagged)], tagged.columns)
        self._kept.append(kept)
        if SEVERAL_FILES_COLUMN in tagged.columns:
            self._several = SeveralFiles.of([counts])
        if deferred:
            checks.settle(counts["nulls"] or 0, counts["ambiguous"] or 0,
                          counts[PATHS] or () if checks.partitions_deferred else None)
        found = metrics.profile(counts)
        return kept, found if found is not None else self.profile(kept)

    def profile(self, tagged: DataFrame) -> WorkloadProfile:
        """One job over the tagged batch: new keys per partition, existing keys, and the null-key
        check if :meth:`prepare` left it here (then with the exact count of the undeduplicated
        batch in the error)."""
        new = F.col(FILE_ID_COLUMN).isNull().alias("new")
        aggs = [F.count(F.lit(1)).alias("rows"), F.collect_set(FILE_ID_COLUMN).alias("groups")]
        aggs.extend(self.checks.deferred_metrics(with_paths=False))
        aggs.extend(several_files_count(tagged))
        rows = tagged.groupBy(F.col(PARTITION_PATH), new).agg(*aggs).collect()
        if SEVERAL_FILES_COLUMN in tagged.columns:
            self._several = SeveralFiles.of(rows)
        if self.checks.unchecked is not None or self.checks.partitions_deferred:
            self.checks.settle(sum(r["nulls"] or 0 for r in rows), sum(r["ambiguous"] or 0 for r in rows),
                               {r[PARTITION_PATH] for r in rows})
        return WorkloadProfile(
            inserts={r[PARTITION_PATH]: r["rows"] for r in rows if r["new"]},
            existing=sum(r["rows"] for r in rows if not r["new"]),
            updated=frozenset((r[PARTITION_PATH] or "", f) for r in rows if not r["new"] for f in r["groups"]),
        )

    def dedup(self, df: DataFrame) -> DataFrame:
        """One record per key, merged by the table merger, now or by the write tasks (:func:`.dedup.batch_dedup`)."""
        return batch_dedup(df, self.layout, self.user_schema, self.operation)

    # -- the seam's tagging steps (tidemark.write.engine.WritePipeline) -----------------
    def look_up(
        self, batch: DataFrame, view: FileSystemView, *, find_existing: bool, drop_existing: bool = False,
        sole: SoleSmallFile | None = None,
    ) -> Tagged[DataFrame]:
        """:meth:`tag` (or every key new), kept and counted by :meth:`persist_profiled`. (``sole``
        is not used: one join tags every partition at once, a partition left out saves nothing.)"""
        if find_existing:
            tagged = self.tag(batch, view)
        else:
            tagged = batch.withColumn(FILE_ID_COLUMN, F.lit(None).cast("string"))
        kept, profile = self.persist_profiled(tagged)
        if SEVERAL_FILES_COLUMN in kept.columns:
            kept, profile = self._settle_several_files(kept, profile, view)
        return Tagged(kept.filter(F.col(FILE_ID_COLUMN).isNull()) if drop_existing else kept, profile)

    def _settle_several_files(
        self, kept: DataFrame, profile: WorkloadProfile, view: FileSystemView
    ) -> tuple[DataFrame, WorkloadProfile]:
        """A batch tagged by its footers, with the keys that several files may hold (a filter's
        false positive: rare) looked up by reading the stored keys, and counted again."""
        several, found = F.col(SEVERAL_FILES_COLUMN), self._several
        if not found.count:
            return kept.drop(SEVERAL_FILES_COLUMN), profile
        log.debug("bloom index: %d keys that several files' footers may hold, looked up by their keys", found.count)
        on_driver = found.settle_on_driver(self.spark, view, kept, profile)
        if on_driver is not None:  # few: their files' keys read on the driver
            return on_driver
        rows = kept.filter(several).drop(SEVERAL_FILES_COLUMN, FILE_ID_COLUMN)
        # The lookup's scope becomes those keys: the bloom probe keeps only the files that may
        # hold one of them (in their partitions), and only those files' keys are read.
        self.checks.rows, self.checks.partitions, self.checks.rows_by_partition = found.count, list(found.paths), None
        self._arrived, self.checks.arrived_keys = rows, None
        looked_up = self.tag(rows, view, by_footers=False)
        settled = self.persist(kept.filter(~several).drop(SEVERAL_FILES_COLUMN).unionByName(looked_up))
        return settled, self.profile(settled)

    def assign_buckets(self, batch: DataFrame, view: FileSystemView, assignment: BucketAssignment) -> DataFrame:
        """:meth:`tag_buckets`, kept (:meth:`persist`)."""
        return self.persist(self.tag_buckets(batch, view, assignment))

    def persist(self, frame: DataFrame) -> DataFrame:
        """``frame`` computed once, at its first use, and kept (memory, then disk) until
:meth:`release`.

        A local checkpoint rather than ``persist()``: later steps then plan on a leaf instead
        of analysing the whole dedup and index join again at every step, which cost about a
        second of driver time per upsert. The rows can never be computed twice, so the batch's
        arrival order (dedup) is read once.
        """
        kept = frame.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self._kept.append(kept)
        return kept

    def release(self) -> None:
        """Drop the blocks of every local checkpoint of this write now, rather than when the
        JVM's collector finds them."""
        kept = list(self._kept)
        self._kept.clear()  # the list BatchChecks adds to
        for frame in kept:
            release_checkpoint(frame)

    def delete_rows(self, tagged: DataFrame) -> DataFrame:
        found = tagged.filter(F.col(FILE_ID_COLUMN).isNotNull())
        # A delete keeps its ordering values: a stale delete must not remove a newer record.
        ordering = [c for c in self.layout.ordering_fields if c in found.columns]
        rows = found.select(RECORD_KEY, PARTITION_PATH, FILE_ID_COLUMN, *ordering)
        return rows.withColumn(OP_COLUMN, F.lit(OP_DELETE))

    # -- index --------------------------------------------------------------------------
    def _existing_keys(
        self, view: FileSystemView, partitions: Sequence[str] | None, key: str = RECORD_KEY
    ) -> DataFrame | None:
        """The ``key`` column (the record key, or its one integer field), partition path and
        file name (:func:`_with_file_id` makes it the file id) of every row of the latest base
        files of ``partitions`` (None: all) that may hold a batch key (bloom index:
        engines/spark/bloom_index.py, probed in the tasks)."""
        files = view.latest_base_files(partitions)
        batch = self.checks.arrived_keys if self.checks.arrived_keys is not None else self._arrived
        # Probed whenever the lookup itself stays map-side (counted or estimated small batches).
        if len(files) > 1 and batch is not None and self._small_batch() \
                and (self.checks.rows is None or self.checks.rows <= BLOOM_PRUNE_MAX_KEYS) \
                and not every_file_hit(files, self.checks.rows_by_partition if partitions is not None else None):
            by_partition = partitions is not None and PARTITION_PATH in batch.columns
            files, self.prune_stats = candidate_files(
                view.storage, files, batch, by_partition=by_partition, int_key=self._integer_key()
            )
        if not files:
            return None
        key_type = pa.string() if key == RECORD_KEY else self.user_schema.field(key).type
        key_arrow = pa.schema([(key, key_type), (PARTITION_PATH, pa.string()), (FILE_NAME, pa.string())])
        existing = read_columns_of(self.spark, view.storage, [f.path for f in files], key_arrow)
        return existing

    def _integer_key(self) -> str | None:
        """The record key's one field, if it is an integer: its text is the record key, one to
        one, and a long is cheaper to read, hash and broadcast than its text (the 1M-key scan
        of a broadcast lookup took about a third less). Otherwise None."""
        fields = self.layout.record_key_fields
        if len(fields) != 1 or fields[0] not in self.user_schema.names:
            return None
        return fields[0] if pa.types.is_signed_integer(self.user_schema.field(fields[0]).type) else None

    def _broadcast_lookup(self) -> bool:
        """Whether the lookup is broadcasts only: the batch's keys, then the matching table keys."""
        return self._small_batch() and (self.checks.rows is None or self.checks.rows <= BROADCAST_MATCHED_KEYS)

    def tag(self, df: DataFrame, view: FileSystemView, *, by_footers: bool = True) -> DataFrame:
        """Add the file id of the current location of each key (null for new keys).

        An upsert of a copy-on-write table finds the files from their footers where that is
        certain (``by_footers``: :meth:`_tag_by_footers`); otherwise the keys are joined with the
        keys stored in the files.
        """
        if PARTITION_PATH in df.columns:
            if self.checks.partitions_deferred and by_footers:
                tagged = self._tag_every_partition(df, view)
                if tagged is not None:
                    return tagged
                assert self._arrived is not None  # the job the deferral saved: the join needs the partitions
                self.checks.run_now(self._arrived, int_key=self._integer_key())
            partitions = self.checks.partitions
            if partitions is None and not self.layout.partition_fields:
                partitions = [""]  # a non-partitioned table's one partition path
            elif partitions is None:
                partitions = sorted(r[0] for r in df.select(PARTITION_PATH).distinct().collect())
            tagged = self._tag_by_footers(df, view, partitions) if by_footers else None
            if tagged is not None:
                return tagged
            # A shuffled join stays on the record key, which the dedup shuffled the batch by.
            key = (self._integer_key() if self._broadcast_lookup() else None) or RECORD_KEY
            existing = self._existing_keys(view, partitions, key)
            on = [PARTITION_PATH, key]
            if not self.layout.partition_fields and existing is not None:
                on = [key]  # one partition path: join on the key alone
                existing = existing.drop(PARTITION_PATH)
        else:  # delete without partition columns: look the keys up in every partition
            partitions = view.partitions()
            existing = self._existing_keys(view, None)
            on = [RECORD_KEY]
        if existing is None:
            tagged = df.withColumn(FILE_ID_COLUMN, F.lit(None).cast("string"))
            if PARTITION_PATH not in tagged.columns:
                tagged = tagged.withColumn(PARTITION_PATH, F.lit(None).cast("string"))
            return tagged
        if self._small_batch():
            # Keep only the table's keys that the batch has, map-side against the broadcast batch
            # keys (as they arrived: duplicates do no harm, and Spark need not shuffle them to
            # take them distinct). What is left is at most one row per batch key; for a batch of
            # moderate size it is broadcast in turn, so that neither the table's keys nor the
            # batch are shuffled for the lookup.
            if self.checks.arrived_keys is not None:  # kept by the check, already a plan of its own
                arrived = self.checks.arrived_keys.select(*on)
            else:
                arrived = (self._arrived if self._arrived is not None else df).select(*on)
                # A (lazy) local checkpoint gives the keys a plan of their own: joining two plans that
                # share the batch's relations makes Spark re-analyse one side, about 0.2 s of driver.
                arrived = arrived.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)
                self._kept.append(arrived)
            # The file id is cut from the names of the rows the batch kept only (Spark does not
            # move the projection above the semi-join: a spread batch cut all 1M names).
            existing = _with_file_id(existing.join(F.broadcast(arrived), on=on, how="left_semi"))
            if self._broadcast_lookup():
                return df.join(F.broadcast(existing), on=on, how="left")
            return df.join(existing, on=on, how="left")
        return df.join(_with_file_id(existing), on=on, how="left")

    def _tag_by_footers(self, df: DataFrame, view: FileSystemView, partitions: Sequence[str]) -> DataFrame | None:
        """Each key's file id from the footers of its partition's files
        (:func:`.bloom_index.tag_by_footers`), or None where the join must look keys up.

        Only for an upsert of a copy-on-write table with the simple index: its file-group
        writes insert a tagged key the file does not hold, and nothing but the key's file
        depends on the tag. (A merge-on-read table would append such a key to a log, where the
        next lookup, which reads base files, would not find it; insert and delete count or
        drop the keys found.) And for a text key: an integer key's stored column is cheaper.
        """
        if not self._tags_by_footers():
            return None
        files = view.latest_base_files(partitions)
        if not files:
            return None
        return tag_by_footers(view.storage, files, df, by_partition=True, int_key=self._integer_key())

    def _tags_by_footers(self) -> bool:
        layout = self.layout  # (a long key column is cheaper to read and join than rows to move)
        return self.operation is WriteOperation.UPSERT and not layout.merge_on_read and layout.bucket is None \
            and not self._integer_key()

    def _tag_every_partition(self, df: DataFrame, view: FileSystemView) -> DataFrame | None:
        """:meth:`_tag_by_footers` over every partition of the table, when the metadata table
        lists them (no walk) and they are few (:data:`FOOTER_TAG_ALL_FILES` base files at most)."""
        known = view.known_partitions()
        if not known or len(known) > OBSERVED_PARTITIONS or len(view.latest_base_files(known)) > FOOTER_TAG_ALL_FILES:
            return None
        self._footer_partitions = known
        return self._tag_by_footers(df, view, known)

    def _small_batch(self) -> bool:
        """Whether the batch's keys are few enough to broadcast: counted, or estimated by Spark."""
        if self.checks.rows is not None:
            return self.checks.rows <= BROADCAST_BATCH_KEYS
        return self.checks.key_bytes is not None and self.checks.key_bytes <= BROADCAST_BATCH_KEY_BYTES

    def tag_buckets(self, df: DataFrame, view: FileSystemView, assignment: BucketAssignment) -> DataFrame:
        """Every row's file id from its key's bucket, computed in the tasks: no join, no lookup."""
        if PARTITION_PATH not in df.columns:  # a delete without partition columns: look keys up
            return self.tag(df, view)
        return bucket_file_ids(df, assignment)

    # -- routing ------------------------------------------------------------------------
    def partition_counts(self, rows: DataFrame) -> dict[str, int]:
        return {r[0]: r[1] for r in rows.groupBy(PARTITION_PATH).count().collect()}

    def route(self, tagged: DataFrame, buckets: Sequence[InsertBucket] | None) -> DataFrame:
        """The rows to write, each with its file group (:func:`.routing.route`)."""
        return route(self.spark, tagged, buckets)

    # -- writing ------------------------------------------------------------------------
    def write_file_groups(
        self,
        spec: WriteSpec,
        rows: DataFrame,
        base_files: Mapping[tuple[str, str], str],
        weights: Mapping[tuple[str, str], int] | None = None,
    ) -> list[WriteStat]:
        """Write every (partition, file group) of ``rows`` in a Spark task; collect the stats.

        With ``weights`` (the file groups the write touches, each with its estimated cost), up
        to :data:`BALANCE_GROUPS` of them are laid out over the tasks by the driver
        (:mod:`tidemark.engines.spark.tasks`); otherwise, or for a group not in ``weights``,
        Spark hashes the file ids onto the tasks.
        """
        job = file_group_writes(self.spark, spec, rows, base_files, weights, self.parallelism)
        return self._run_write_job(job, spec.instant_time)

    def write_bulk(self, spec: WriteSpec, df: DataFrame) -> list[WriteStat]:
        """bulk_insert: each task writes its rows into new file groups (:mod:`.bulk`)."""
        return write_bulk(df, spec, self.layout, self.user_schema, self.parallelism,
                          functools.partial(self._run_write_job, instant=spec.instant_time))


def _with_file_id(existing: DataFrame) -> DataFrame:
    """``existing`` (``_existing_keys``) with the file id (its name's first part) for the file name."""
    columns = [name(c) for c in existing.columns if c != FILE_NAME]
    return existing.selectExpr(*columns, f"substring_index({name(FILE_NAME)}, '_', 1) AS {name(FILE_ID_COLUMN)}")
