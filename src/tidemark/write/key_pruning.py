"""Which base files may hold a batch's keys: Hudi's bloom-index pruning, from the files' footers.

Before joining a batch's record keys with the keys stored in a partition's base files, each
candidate file is checked with what its footer says (:mod:`tidemark.write.footer`): the
batch keys outside the file's ``[min, max]`` record-key range cannot be in it, and neither can
those its bloom filter rules out. Only files that may hold some key are read. Pruning never
loses a match: both tests only ever say "surely not here". A file without the footer (written
by an older tidemark) is always read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.bloom import (
    FOOTER_KEY,
    MAX_KEY_KEY,
    MIN_KEY_KEY,
    TYPE_CODE_KEY,
    BloomFilter,
    BloomFilterError,
    HashedKeys,
)
from tidemark.fsview import BaseFile
from tidemark.storage import Storage


@dataclass(frozen=True)
class PruneStats:
    """How many candidate files the footers ruled out, by which test."""

    candidates: int
    by_range: int
    by_bloom: int

    @property
    def read(self) -> int:
        return self.candidates - self.by_range - self.by_bloom


def _ascii(text: str) -> bool:
    return text.isascii()


def files_that_may_hold(
    storage: Storage, files: Iterable[BaseFile], keys_by_partition: dict[str, pa.Array]
) -> tuple[list[BaseFile], PruneStats]:
    """The files of ``files`` that may hold one of their partition's batch keys.

    ``keys_by_partition`` maps a partition path to the batch's record keys in it (strings).
    """
    kept: list[BaseFile] = []
    candidates = by_range = by_bloom = 0
    hashed: dict[tuple[str, int], HashedKeys] = {}  # each partition's keys hashed once for all its files
    for f in files:
        keys = keys_by_partition.get(f.partition_path)
        if keys is None or len(keys) == 0:
            continue
        candidates += 1
        try:
            # The footer alone: ranged reads of its bytes on an object store, not the whole file.
            footer = pq.read_metadata(storage.open_ranged(f.path, f.size or None)).metadata or {}
        except (pa.ArrowInvalid, OSError):  # damaged or gone: the key read names it (CorruptDataFileError)
            kept.append(f)
            continue
        inside = np.ones(len(keys), dtype=bool)
        low, high = footer.get(MIN_KEY_KEY.encode()), footer.get(MAX_KEY_KEY.encode())
        if low is not None and high is not None:
            low_text, high_text = low.decode(), high.decode()
            # Hudi orders keys as Java strings (UTF-16); for ASCII that is byte order, as here.
            if _ascii(low_text) and _ascii(high_text):
                in_range = pc.and_(pc.greater_equal(keys, low_text), pc.less_equal(keys, high_text))
                inside = in_range.to_numpy(zero_copy_only=False)
                if not inside.any():
                    by_range += 1
                    continue
        serialized = footer.get(FOOTER_KEY.encode())
        if serialized is not None:
            try:
                bloom = BloomFilter.parse(serialized, footer.get(TYPE_CODE_KEY.encode(), b"").decode())
            except BloomFilterError:
                bloom = None  # a filter we cannot read prunes nothing; the keys are read instead
            if bloom is not None:
                slot = (f.partition_path, bloom.hashes)
                if slot not in hashed:
                    hashed[slot] = HashedKeys.of(keys, bloom.hashes)
                if not (bloom.might_contain(hashed[slot]) & inside).any():
                    by_bloom += 1
                    continue
        kept.append(f)
    return kept, PruneStats(candidates, by_range, by_bloom)


__all__ = ["PruneStats", "files_that_may_hold"]
