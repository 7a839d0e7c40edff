"""Hudi's bloom index in the Spark engine: base files ruled out by their footers before the join.

Before the batch's keys are joined with the keys stored in the latest base files, the files
whose footer (``hoodie_min_record_key`` / ``hoodie_max_record_key`` and Hudi's bloom filter,
:mod:`tidemark.write.key_pruning`, the same test the Arrow engine applies) rules out every
batch key of their partition are dropped from the lookup: Spark never reads their keys.
Pruning never loses a match (both tests only ever say "surely not here").

The footers are read on the driver, so the batch's keys come there too: only for batches
of at most :data:`BLOOM_PRUNE_MAX_KEYS` rows (counted before the lookup). Bigger batches
join against every base file of the touched partitions, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.fsview import BaseFile
from tidemark.storage import Storage
from tidemark.write.key_pruning import PruneStats, files_that_may_hold

log = logging.getLogger(__name__)

BLOOM_PRUNE_MAX_KEYS = 200_000


def candidate_files(
    storage: Storage, files: Sequence[BaseFile], batch: DataFrame, *, by_partition: bool
) -> tuple[list[BaseFile], PruneStats]:
    """The files of ``files`` that may hold one of ``batch``'s record keys (one small Spark job).

    ``by_partition``: a key is looked for only in its own partition's files (the batch has
    partition paths); otherwise every file is checked against every key.
    """
    cols = [PARTITION_PATH, RECORD_KEY] if by_partition else [RECORD_KEY]
    keys = batch.select(*cols).distinct().toArrow()
    if by_partition:
        paths = keys.column(PARTITION_PATH)
        grouped = {
            part: keys.filter(pc.equal(paths, part)).column(RECORD_KEY).combine_chunks()
            for part in {f.partition_path for f in files}
        }
    else:
        every = keys.column(RECORD_KEY).combine_chunks()
        grouped = {f.partition_path: every for f in files}
    grouped = {p: k.cast(pa.string()) for p, k in grouped.items() if len(k)}
    kept, stats = files_that_may_hold(storage, files, grouped)
    log.debug(
        "bloom index: %d of %d base files read (%d ruled out by key range, %d by bloom filter)",
        stats.read, stats.candidates, stats.by_range, stats.by_bloom,
    )
    return kept, stats
