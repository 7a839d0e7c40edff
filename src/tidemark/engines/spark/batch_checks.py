"""What a Spark write learns of its batch before the instant is requested.

Every key must be checked (a key at all: format/record_key.py; no ',' in a text field of a key of several
fields, whose key would read as two) and every partition path too (no '..', no '/', ...) before
anything is written, and the index needs the batch's partition paths and row count. One small
job over the arriving batch finds them all (a small batch's keys are kept by it, for the
index), unless nothing before the tagged batch's own pass needs them; then that pass observes
them and :meth:`BatchChecks.settle` raises for them, still before the instant is requested:

* a write into a non-partitioned table whose batch Spark estimates small (its index needs
  neither the partitions nor a count);
* an upsert that footer tagging may serve from the footers of every partition of the table
  (:meth:`~tidemark.engines.spark.writer.SparkWritePipeline.tag`): the job would only have
  found which partitions' footers to read.

Missing keys pass the dedup and the index harmlessly until then (the dedup keeps one row per
key; a null key matches no file, an empty one is refused before anything is written).
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql.types import BinaryType, StringType

from tidemark.engines.spark.connect import estimated_bytes
from tidemark.engines.spark.expressions import name, named
from tidemark.engines.spark.keys import key_checks, null_key_condition, raise_for_bad_keys
from tidemark.engines.spark.observed import KEPT_KEY_BYTES, kept_with, observable
from tidemark.errors import NullRecordKeyError
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.format.partition_path import check_partition_paths
from tidemark.write.engine import TableLayout
from tidemark.write.operation import WriteOperation
from tidemark.write.validate import text_key_fields

# Without a count, a batch whose keys Spark's plan estimates at most this size is broadcast. Kept
# low because the estimate of a parquet source is its compressed size.
BROADCAST_BATCH_KEY_BYTES = 16 << 20

# The observed metric of the batch's partition paths, when the tagged batch's pass finds them.
PATHS = "paths"


class BatchChecks:
    """The checks of one write's batch and what they found: :attr:`partitions`, :attr:`rows`.

    ``kept`` is the write's list of local checkpoints (released with the write), where the
    arriving keys a check keeps are added.
    """

    def __init__(
        self, layout: TableLayout, user_schema: pa.Schema, operation: WriteOperation, kept: list[DataFrame]
    ) -> None:
        self.layout = layout
        self.user_schema = user_schema
        self.operation = operation
        self._kept = kept
        self.partitions: list[str] | None = None  # the batch's partition paths, once found
        self.rows: int | None = None  # its row count, once counted
        self.rows_by_partition: dict[str, int] | None = None  # its rows per path, when counted
        self.key_bytes: int | None = None  # Spark's estimate, when the batch is not counted
        self.arrived_keys: DataFrame | None = None  # its key columns, kept by the check (small batches)
        self.unchecked: DataFrame | None = None  # the batch, while its key checks wait for the tagged pass
        self.partitions_deferred = False  # its partition paths unknown until then too (only with unchecked)

    def run(self, df: DataFrame, *, footer_taggable: bool, int_key: str | None) -> None:
        """Check ``df`` (the prepared batch: key and partition-path columns added) now, in one
        small job, or leave the checks to the tagged batch's pass where nothing needs them
        sooner (the module's docstring); ``footer_taggable``: the write's index may tag keys by
        their files' footers. A bulk_insert needs neither the partitions nor a count: when
        Spark's schema says no key field can be null, there is nothing to check.

        Raises NullRecordKeyError, the ambiguous-key error or InvalidPartitionPathError."""
        layout = self.layout
        paths_to_check = PARTITION_PATH in df.columns and self._partition_values_checked()
        if (
            self.operation is WriteOperation.BULK_INSERT
            and self._keys_always_present(df)
            and not paths_to_check
            and not self.text_key_fields()
        ):
            return
        if self._can_defer_key_check(df):
            self.unchecked = df
            return
        if footer_taggable and layout.merge.max_by_dedup and layout.partition_fields \
                and PARTITION_PATH in df.columns and observable(df):
            self.unchecked, self.partitions_deferred = df, True
            return
        self.run_now(df, int_key=int_key)

    def run_now(self, df: DataFrame, *, int_key: str | None) -> None:
        """The checks, the partition paths and the row count in a job of their own; a small
        batch of a partitioned table keeps its keys (and ``int_key``, the integer key field) in
        the same job, for the index's bloom probe and broadcast."""
        self.unchecked, self.partitions_deferred = None, False
        if self._keeps_keys(df):
            self._check_and_keep_keys(df, int_key)
            return
        checks = self.key_checks()
        count = named("count(1)", "rows")
        if PARTITION_PATH in df.columns:
            rows = df.groupBy(PARTITION_PATH).agg(*checks, count).collect()
            self.partitions = sorted(r[0] for r in rows)
        else:
            rows = df.agg(*checks, count).collect()
            self.partitions = None
        self.rows = sum(r["rows"] or 0 for r in rows)
        self.rows_by_partition = {r[0]: r["rows"] or 0 for r in rows} if PARTITION_PATH in df.columns else None
        self.raise_for_bad_keys(df, sum(r["nulls"] or 0 for r in rows), sum(r["ambiguous"] or 0 for r in rows))
        if self.partitions is not None:
            self.check_paths(self.partitions)

    def check_paths(self, paths: Iterable[str]) -> None:
        """Refuse a bad partition path (InvalidPartitionPathError); else they are the batch's."""
        layout = self.layout
        found = sorted(paths)
        check_partition_paths(
            found, layout.partition_fields, hive_style=layout.hive_style, url_encode=layout.url_encode)
        self.partitions, self.partitions_deferred = found, False

    def _keeps_keys(self, df: DataFrame) -> bool:
        """Whether the check is the pass that keeps the batch's keys for the index: a simple-index
        lookup in a partitioned table, of a batch whose keys Spark estimates small."""
        if not self.operation.looks_up_keys or self.layout.bucket is not None or not self.layout.partition_fields:
            return False
        if PARTITION_PATH not in df.columns or not observable(df):
            return False
        size = estimated_bytes(df.select(PARTITION_PATH, RECORD_KEY))
        return size is not None and size <= KEPT_KEY_BYTES

    def _check_and_keep_keys(self, df: DataFrame, int_key: str | None) -> None:
        """The batch's (partition path, record key[, integer key field]) kept for the bloom probe
        and the lookup's broadcast, with the row count, the partition paths and the key checks
        observed in the same job (:func:`.observed.kept_with`)."""
        columns = [PARTITION_PATH, RECORD_KEY, *([int_key] if int_key else [])]
        metrics = [named("count(1)", "rows"), named(f"collect_set({name(PARTITION_PATH)})", PATHS),
                   *self.key_checks()]
        kept, counts = kept_with(df, metrics, columns)
        self._kept.append(kept)
        self.arrived_keys = kept
        self.rows = counts["rows"] or 0
        partitions = sorted(counts[PATHS] or ())
        # Per path only an even share: it decides whether the bloom probe runs, never a match.
        self.rows_by_partition = dict.fromkeys(partitions, self.rows // max(1, len(partitions)))
        self.raise_for_bad_keys(df, counts["nulls"] or 0, counts["ambiguous"] or 0)
        self.check_paths(partitions)

    def _partition_values_checked(self) -> bool:
        """Whether a partition field's text can make a bad folder (strings: '/', '..', length;
        anything but integers, booleans and dates): only then must a bulk_insert collect and
        check the batch's partition paths (other writes collect them for the index anyway)."""
        schema = self.user_schema

        def safe(t: pa.DataType) -> bool:
            return pa.types.is_integer(t) or pa.types.is_boolean(t) or pa.types.is_date(t)

        return not all(name in schema.names and safe(schema.field(name).type) for name in self.layout.partition_fields)

    def _keys_always_present(self, df: DataFrame) -> bool:
        """Whether Spark's schema says every row of ``df`` has a record key: one of its key fields
        can be neither null nor empty (a text field can be empty)."""
        return any(not df.schema[name].nullable and not isinstance(df.schema[name].dataType, (StringType, BinaryType))
                   for name in self.layout.record_key_fields)

    def _can_defer_key_check(self, df: DataFrame) -> bool:
        """Whether the key checks can wait for the tagged pass in a non-partitioned table: the
        index must not need the batch's partitions nor its counted size, and the batch dedup
        and index must handle null keys harmlessly (max_by dedup, simple index)."""
        layout = self.layout
        if self.operation is WriteOperation.BULK_INSERT or layout.bucket is not None or not layout.merge.max_by_dedup:
            return False
        if layout.partition_fields and PARTITION_PATH in df.columns:
            return False
        self.key_bytes = estimated_bytes(df.select(RECORD_KEY))
        return self.key_bytes is not None and self.key_bytes <= BROADCAST_BATCH_KEY_BYTES

    def text_key_fields(self) -> tuple[str, ...]:
        return text_key_fields(self.user_schema, self.layout.record_key_fields)

    def key_checks(self) -> list[Column]:
        return key_checks(self.layout.record_key_fields, self.text_key_fields())

    def raise_for_bad_keys(self, df: DataFrame, nulls: int, ambiguous: int) -> None:
        raise_for_bad_keys(df, self.layout.record_key_fields, self.text_key_fields(), nulls, ambiguous)

    def deferred_metrics(self, *, with_paths: bool) -> list[Column]:
        """The aggregates of the checks left to the tagged batch's pass (``with_paths``: the
        partition paths too, where the pass is not grouped by them)."""
        metrics = self.key_checks() if self.unchecked is not None else []
        if with_paths and self.partitions_deferred:
            metrics.append(named(f"collect_set({name(PARTITION_PATH)})", PATHS))
        return metrics

    def settle(self, nulls: int, ambiguous: int, paths: Iterable[str] | None) -> None:
        """Raise for what the deferred checks counted: NullRecordKeyError with the exact count
        of the batch as it arrived (one more small job, only then), the ambiguous-key error,
        InvalidPartitionPathError for a bad path among ``paths``."""
        unchecked = self.unchecked
        if unchecked is not None:
            if nulls:
                null_count = unchecked.filter(null_key_condition(self.layout.record_key_fields)).count()
                raise NullRecordKeyError(self.layout.record_key_fields, null_count)
            if ambiguous:
                self.raise_for_bad_keys(unchecked, 0, ambiguous)
            self.unchecked = None
        if self.partitions_deferred and paths is not None:
            self.check_paths(paths)
