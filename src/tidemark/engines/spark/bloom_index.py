"""Hudi's bloom index in the Spark engine: base files ruled out by their footers before the join.

Before the batch's keys are joined with the keys stored in the latest base files, the files
whose footer (``hoodie_min_record_key`` / ``hoodie_max_record_key``, an integer key's column
statistics, and Hudi's bloom filter: :mod:`tidemark.write.key_pruning`, the tests the Arrow
engine applies) rules out every batch key of their partition are dropped from the lookup:
Spark never reads their keys. Pruning never loses a match (every test only ever says "surely
not here").

The footers are read on the driver (one read per candidate file, no rows) and travel to the
tasks with the probe; the tasks test the batch's keys where they are and send back one verdict
per file. The driver collects those verdicts (a few bytes per file and task), never a key.

An upsert of a copy-on-write table goes further (:func:`tag_by_footers`): the tasks give each
key the one file its footers allow, and no stored key is read at all.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType

from tidemark.engines.spark.expressions import name, named
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.format.parquet_file import read_data_file
from tidemark.fsview import BaseFile, FileSystemView
from tidemark.storage import Storage
from tidemark.write.engine import FILE_ID_COLUMN, WorkloadProfile
from tidemark.write.key_pruning import (
    MAY_HOLD,
    NOT_IN_BLOOM,
    OUT_OF_RANGE,
    SEVERAL_FILES,
    KeyLocator,
    KeyProbe,
    PruneStats,
    files_that_may_hold,
    footers_locate_keys,
    read_key_footers,
)

log = logging.getLogger(__name__)

# Batches up to this many rows are probed (beyond, the lookup's broadcasts stop anyway).
BLOOM_PRUNE_MAX_KEYS = 2_000_000

# A partition whose batch has at least this many keys per base file is not probed: spread
# keys hit every file (a spread 10 % upsert of 1M rows in 10 partitions has 5,000 per file),
# and the probe would cost a pass over the batch to rule out nothing.
KEYS_PER_FILE_ALWAYS_HIT = 4096

_VERDICTS = "file int, verdict byte"

# The column :func:`tag_by_footers` marks the keys with that several files' footers may hold.
SEVERAL_FILES_COLUMN = "_tm_several_files"
# The footers travel to the tasks with the tagging function: beyond this many bytes of
# filters, the keys are looked up by the join instead.
FOOTER_TAG_MAX_BYTES = 32 << 20


def every_file_hit(files: Sequence[BaseFile], rows_by_partition: Mapping[str, int] | None) -> bool:
    """Whether the batch's row count per partition (None: not counted) says the probe would
    keep every file: each partition with files has at least :data:`KEYS_PER_FILE_ALWAYS_HIT`
    batch rows per file. A guess that only decides whether to probe, never what matches."""
    if not rows_by_partition:
        return False
    per_partition: dict[str, int] = {}
    for f in files:
        per_partition[f.partition_path] = per_partition.get(f.partition_path, 0) + 1
    return all(
        rows_by_partition.get(path, 0) >= KEYS_PER_FILE_ALWAYS_HIT * count for path, count in per_partition.items()
    )


def candidate_files(
    storage: Storage,
    files: Sequence[BaseFile],
    batch: DataFrame,
    *,
    by_partition: bool,
    int_key: str | None = None,
) -> tuple[list[BaseFile], PruneStats]:
    """The files of ``files`` that may hold one of ``batch``'s record keys (one Spark job over
    the batch's keys; only verdicts come back).

    ``by_partition``: a key is looked for only in its own partition's files (the batch has
    partition paths); otherwise every file is checked against every key. ``int_key``: the
    record key's one integer field, whose value ranges the file statistics give (then the
    key text is made in the tasks only for the bloom test).
    """
    footers = read_key_footers(storage, files, int_key)
    cols = ([PARTITION_PATH] if by_partition else []) + [int_key or RECORD_KEY]

    def probe(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        prober = KeyProbe(footers)
        for b in batches:
            if b.column(cols[-1]).null_count:  # a null key (rejected later, by the profile) matches nothing
                b = b.filter(pc.is_valid(b.column(cols[-1])))
            key = b.column(cols[-1])
            prober.add(
                None if int_key else key,
                b.column(PARTITION_PATH) if by_partition else None,
                key if int_key else None,
            )
        yield pa.record_batch(
            [pa.array(np.arange(len(footers), dtype=np.int32)), pa.array(prober.verdicts, pa.int8())],
            names=["file", "verdict"],
        )

    best = np.full(len(files), OUT_OF_RANGE, dtype=np.int8)
    for row in batch.select(*cols).mapInArrow(probe, _VERDICTS).collect():
        best[row[0]] = max(best[row[0]], row[1])
    kept = [f for f, v in zip(files, best, strict=True) if v == MAY_HOLD]
    stats = PruneStats(len(files), int((best == OUT_OF_RANGE).sum()), int((best == NOT_IN_BLOOM).sum()))
    log.debug(
        "bloom index: %d of %d base files read (%d ruled out by key range, %d by bloom filter)",
        stats.read, stats.candidates, stats.by_range, stats.by_bloom,
    )
    return kept, stats


def tag_by_footers(
    storage: Storage,
    files: Sequence[BaseFile],
    batch: DataFrame,
    *,
    by_partition: bool,
    int_key: str | None = None,
) -> DataFrame | None:
    """``batch`` with each key's file id from the files' footers alone, in the tasks where
    the keys are (:class:`~tidemark.write.key_pruning.KeyLocator`): no stored key is read and
    nothing is shuffled or collected.

    A key that one file of its partition may hold gets that file's id (if the file turns out
    not to hold it, the file group's write inserts it: it is in no other file). A key no file
    may hold gets null (new). A key several files may hold gets null and
    :data:`SEVERAL_FILES_COLUMN` true: its file must be found by reading keys.

    Returns None, to look keys up by reading them, when some file has no bloom filter tidemark
    reads (its every key in range would look like its own, and inserts would pile into it),
    lets through so many keys that a partition's files add up to more than
    :data:`~tidemark.write.key_pruning.FOOTER_TAG_MAX_FALSE_POSITIVES` (filters filled far past their sizing: many keys
    would need their files read), or the filters are too large to travel with the tasks.
    """
    footers = read_key_footers(storage, files, int_key)
    if sum(len(f.bloom or b"") for f in footers) > FOOTER_TAG_MAX_BYTES:
        return None
    if not footers_locate_keys(footers):
        return None
    log.debug("bloom index: keys located by the footers of %d base files, no stored key read", len(files))
    file_ids = pa.array([f.file_id for f in files], pa.string())
    # A new StructType: ``add`` would change the batch's own (cached) schema in place.
    schema = StructType([*batch.schema.fields, StructField(FILE_ID_COLUMN, StringType()),
                         StructField(SEVERAL_FILES_COLUMN, BooleanType(), nullable=False)])
    added = [pa.field(FILE_ID_COLUMN, pa.string()), pa.field(SEVERAL_FILES_COLUMN, pa.bool_(), nullable=False)]

    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        locator = KeyLocator(footers)
        for b in batches:
            found = locator.locate(
                b.column(RECORD_KEY),
                b.column(PARTITION_PATH) if by_partition else None,
                b.column(int_key) if int_key else None,
            )
            # NO_FILE and SEVERAL_FILES (both negative) become a null file id.
            ids = file_ids.take(pa.array(np.maximum(found, 0), mask=found < 0))
            several = pa.array(found == SEVERAL_FILES)
            yield pa.RecordBatch.from_arrays([*b.columns, ids, several], schema=pa.schema([*b.schema, *added]))

    return batch.mapInArrow(tag, schema)


# Up to this many keys that several footers allow are settled on the driver: their files' keys
# are read there (ranged reads of one column), and the answer joins the batch as a broadcast.
SETTLE_ON_DRIVER = 10_000


def several_files_count(tagged: DataFrame) -> list[Column]:
    """The aggregates that count the keys several files' footers may hold (``several``), and
    collect their partition paths (``several_paths``) and up to :data:`SETTLE_ON_DRIVER` of
    them (``several_keys``); none when ``tagged`` was not tagged by :func:`tag_by_footers`."""
    if SEVERAL_FILES_COLUMN not in tagged.columns:
        return []
    several, path, key = name(SEVERAL_FILES_COLUMN), name(PARTITION_PATH), name(RECORD_KEY)
    return [named(f"count_if({several})", "several"),
            named(f"collect_set(CASE WHEN {several} THEN {path} END)", "several_paths"),
            named(f"slice(collect_list(CASE WHEN {several} THEN struct({path}, {key}) END), 1, {SETTLE_ON_DRIVER})",
                  "several_keys")]


@dataclass(frozen=True)
class SeveralFiles:
    """What :func:`several_files_count` found: how many rows' keys several files may hold, their
    partition paths, and (partition path, key) of each when there are few enough."""

    count: int = 0
    paths: tuple[str, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, rows: Sequence[Any]) -> SeveralFiles:
        """From the aggregates' values in one or more rows (observed metrics, grouped rows)."""
        count = sum(r["several"] or 0 for r in rows)
        paths = sorted({p for r in rows for p in r["several_paths"] or ()})
        keys = tuple((k[0] or "", k[1]) for r in rows for k in r["several_keys"] or ())
        return cls(count, tuple(paths), keys if len(keys) == count else ())

    def settle_on_driver(
        self, spark: SparkSession, view: FileSystemView, kept: DataFrame, profile: WorkloadProfile
    ) -> tuple[DataFrame, WorkloadProfile] | None:
        """``kept`` with each of these keys tagged with the file that really holds it (null: in
        none), found by reading the keys of the files whose footers allow them, on the driver;
        and ``profile`` counted again. None when the keys were too many to collect."""
        if not self.keys:
            return None
        wanted: dict[str, set[str]] = {}
        for path, key in self.keys:
            wanted.setdefault(path, set()).add(key)
        probes = {p: pa.array(sorted(keys), pa.string()) for p, keys in wanted.items()}
        files, _ = files_that_may_hold(view.storage, view.latest_base_files(sorted(wanted)), probes)
        homes: dict[tuple[str, str], str] = {}
        for f in files:
            stored = read_data_file(view.storage.open_ranged(f.path, f.size or None), path=f.path,
                                    columns=[RECORD_KEY]).column(0).combine_chunks()
            probe = probes[f.partition_path]
            for key in probe.filter(pc.is_in(probe, value_set=stored)).to_pylist():
                homes[(f.partition_path, key)] = f.file_id
        log.debug("bloom index: %d keys settled on the driver from the keys of %d base files", len(self.keys),
                  len(files))
        rows = kept.filter(F.col(SEVERAL_FILES_COLUMN)).drop(SEVERAL_FILES_COLUMN, FILE_ID_COLUMN)
        found = spark.createDataFrame([(p, k, fid) for (p, k), fid in homes.items()],
                                      f"{PARTITION_PATH} string, {RECORD_KEY} string, {FILE_ID_COLUMN} string")
        on = [PARTITION_PATH, RECORD_KEY]
        settled = kept.filter(~F.col(SEVERAL_FILES_COLUMN)).drop(SEVERAL_FILES_COLUMN).unionByName(
            rows.join(F.broadcast(found), on=on, how="left"))
        # The keys a file holds were counted as inserts: they are existing keys of that file group.
        inserts, moved = dict(profile.inserts), 0
        for path, key in self.keys:
            if (path, key) in homes:
                inserts[path] -= 1
                moved += 1
        updated = profile.updated | {(p, fid) for (p, _), fid in homes.items()}
        counted = WorkloadProfile({p: n for p, n in inserts.items() if n}, profile.existing + moved, updated)
        return settled, counted
