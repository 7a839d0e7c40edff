"""Which base files may hold a batch's keys: Hudi's bloom-index pruning, from the files' footers.

Before joining a batch's record keys with the keys stored in a partition's base files, each
candidate file is checked with what its footer says (:mod:`tidemark.write.footer`): the
batch keys outside the file's ``[min, max]`` record-key range cannot be in it, and neither can
those its bloom filter rules out. Only files that may hold some key are read. Pruning never
loses a match: both tests only ever say "surely not here". A file without the footer (written
by an older tidemark) is always read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.format.bloom import (
    FOOTER_KEY,
    MAX_KEY_KEY,
    MIN_KEY_KEY,
    TYPE_CODE,
    TYPE_CODE_KEY,
    BloomFilter,
    BloomFilterError,
    PackedFilter,
    hash_chains,
)
from tidemark.fsview import BaseFile
from tidemark.storage import Storage

_Filter = TypeVar("_Filter", BloomFilter, PackedFilter)

OUT_OF_RANGE, NOT_IN_BLOOM, MAY_HOLD = 0, 1, 2  # a file's verdict for a set of keys, best last


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
    for f in files:
        keys = keys_by_partition.get(f.partition_path)
        if keys is None or len(keys) == 0:
            continue
        candidates += 1
        footer = read_footer(storage, f)
        verdict = MAY_HOLD if footer is None else footer_verdict(footer, keys)
        by_range += verdict == OUT_OF_RANGE
        by_bloom += verdict == NOT_IN_BLOOM
        if verdict == MAY_HOLD:
            kept.append(f)
    return kept, PruneStats(candidates, by_range, by_bloom)


def read_footer(storage: Storage, f: BaseFile) -> pq.FileMetaData | None:
    """The parquet footer of base file ``f`` (ranged reads of its bytes on an object store, not
    the whole file); None when it cannot be read: the key read then names the damage
    (CorruptDataFileError), or finds the file gone."""
    try:
        return pq.read_metadata(storage.open_ranged(f.path, f.size or None))
    except (pa.ArrowInvalid, OSError):
        return None


def footer_verdict(footer: pq.FileMetaData, keys: pa.Array) -> int:
    """What a base file's footer says of ``keys`` (record keys as strings, no nulls):
    :data:`OUT_OF_RANGE` (all outside its key range), :data:`NOT_IN_BLOOM` (its bloom filter
    rules out those inside) or :data:`MAY_HOLD`. A footer without a range or a filter tidemark
    reads rules nothing out by it."""
    kv = footer.metadata or {}
    inside: pa.Array | None = None
    low, high = kv.get(MIN_KEY_KEY.encode()), kv.get(MAX_KEY_KEY.encode())
    if low is not None and high is not None:
        low_text, high_text = low.decode(), high.decode()
        # Hudi orders keys as Java strings (UTF-16); for ASCII that is byte order, as here.
        if _ascii(low_text) and _ascii(high_text):
            inside = pc.and_(pc.greater_equal(keys, low_text), pc.less_equal(keys, high_text))
            if not pc.any(inside).as_py():
                return OUT_OF_RANGE
    serialized = kv.get(FOOTER_KEY.encode())
    if serialized is None:
        return MAY_HOLD
    try:
        bloom = PackedFilter.parse(serialized, kv.get(TYPE_CODE_KEY.encode(), b"").decode())
    except BloomFilterError:
        return MAY_HOLD  # a filter we cannot read prunes nothing; the keys are read instead
    probed = keys if inside is None or pc.all(inside).as_py() else keys.filter(inside)
    return MAY_HOLD if bloom.holds_any(probed) else NOT_IN_BLOOM


# -- the same tests, split for engines that probe the keys where they are (Spark tasks) ------


@dataclass(frozen=True)
class KeyFooter:
    """What one base file's footer says about its keys; small and picklable, so that the footers
    read once on the driver can travel to the tasks that probe the batch's keys.

    ``low``/``high``: the record-key range (only when ASCII, where Java's order is byte order);
    ``int_low``/``int_high``: the range of an integer key field from the parquet column
    statistics (an integer key's text order says nothing useful: "10" < "9"); ``bloom``: the
    serialized bloom filter and its type code. None everywhere: a footer we could not read,
    which never rules a file out.
    """

    partition_path: str
    low: str | None = None
    high: str | None = None
    int_low: int | None = None
    int_high: int | None = None
    bloom: bytes | None = None
    bloom_type: str = ""
    num_rows: int | None = None  # the file's row count (its keys), when known

    @property
    def has_filter(self) -> bool:
        """Whether the footer holds a bloom filter of the type tidemark reads."""
        return self.bloom is not None and self.bloom_type == TYPE_CODE

    @property
    def false_positive_rate(self) -> float:
        """The chance that the file's filter lets through a key the file does not hold
        (:attr:`BloomFilter.false_positive_rate`); 1.0 without a filter tidemark reads."""
        packed = packed_filter(self)
        return 1.0 if packed is None else packed.false_positive_rate


def _int_range(meta: pq.FileMetaData, field: str) -> tuple[int | None, int | None]:
    """The min and max of integer column ``field`` over every row group, if all have statistics."""
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if field not in names:
        return None, None
    column = names.index(field)
    lows, highs = [], []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max or not isinstance(stats.min, int):
            return None, None
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else (None, None)


# Footers read at once from an object store, where each read waits a round trip or two.
FOOTER_READ_THREADS = 16


def read_key_footers(storage: Storage, files: Iterable[BaseFile], int_key: str | None = None) -> list[KeyFooter]:
    """The key footer of each file, in order (driver side: one footer read per file, no rows;
    on an object store several at once)."""
    files = list(files)

    def read(f: BaseFile) -> KeyFooter:
        return read_key_footer(storage, f, int_key)

    if storage.is_local or len(files) < 2:
        return [read(f) for f in files]
    with ThreadPoolExecutor(max_workers=min(FOOTER_READ_THREADS, len(files)),
                            thread_name_prefix="tidemark-footers") as pool:
        return list(pool.map(read, files))


# A key of a partition whose files' filters add up to more than this chance of letting a key
# through falls to the several-files path that often: past it, locating keys by footers would
# read files for many keys anyway.
FOOTER_TAG_MAX_FALSE_POSITIVES = 0.005


def footers_locate_keys(footers: Iterable[KeyFooter]) -> bool:
    """Whether these footers are sharp enough to locate keys by (:class:`KeyLocator`): every
    file has a bloom filter tidemark reads (a file without one would look like the home of every
    key in its range, and inserts would pile into it), and per partition the files' filters let
    a key through with a chance of at most :data:`FOOTER_TAG_MAX_FALSE_POSITIVES` in all (filters
    filled far past their sizing, such as those of Hudi's 1M-key files, let many through)."""
    false_positives: dict[str, float] = {}
    for f in footers:
        false_positives[f.partition_path] = false_positives.get(f.partition_path, 0.0) + f.false_positive_rate
    return max(false_positives.values(), default=0.0) <= FOOTER_TAG_MAX_FALSE_POSITIVES


def read_key_footer(storage: Storage, f: BaseFile, int_key: str | None = None) -> KeyFooter:
    """What base file ``f``'s footer says about its keys (one ranged read of the footer);
    ``int_key``: the record key's one integer field, whose range the column statistics give.
    A footer that cannot be read gives a :class:`KeyFooter` that rules nothing out."""
    try:
        # Ranged reads of the footer's bytes: on an object store, not a download of the file.
        meta = pq.read_metadata(storage.open_ranged(f.path, f.size or None))
    except (pa.ArrowInvalid, OSError):  # damaged or gone: the key read names it (CorruptDataFileError)
        return KeyFooter(f.partition_path)
    kv = meta.metadata or {}
    low, high = kv.get(MIN_KEY_KEY.encode()), kv.get(MAX_KEY_KEY.encode())
    low_text = low.decode() if low is not None else None
    high_text = high.decode() if high is not None else None
    if low_text is None or high_text is None or not (_ascii(low_text) and _ascii(high_text)):
        low_text = high_text = None
    int_low, int_high = _int_range(meta, int_key) if int_key else (None, None)
    return KeyFooter(
        f.partition_path, low_text, high_text, int_low, int_high, kv.get(FOOTER_KEY.encode()),
        kv.get(TYPE_CODE_KEY.encode(), b"").decode(), meta.num_rows,
    )


def in_key_range(footer: KeyFooter, keys: pa.Array | None, ints: pa.Array | None) -> np.ndarray | None:
    """Which keys lie within the file's key range: by its integer range when ``ints`` (the
    integer key field's values) are given, else by its record-key text range; None when the
    footer has no range to test them by (then any of them may be in the file)."""
    if footer.int_low is not None and footer.int_high is not None and ints is not None:
        inside = pc.and_(pc.greater_equal(ints, footer.int_low), pc.less_equal(ints, footer.int_high))
    elif footer.low is not None and footer.high is not None and keys is not None:
        inside = pc.and_(pc.greater_equal(keys, footer.low), pc.less_equal(keys, footer.high))
    else:
        return None
    return pc.fill_null(inside, False).to_numpy(zero_copy_only=False)


def parsed_filter(footer: KeyFooter) -> BloomFilter | None:
    """The footer's bloom filter, or None: none, or one that cannot be read (which then rules
    nothing out: the keys are read instead)."""
    return _filter_of(footer, BloomFilter.parse)


def packed_filter(footer: KeyFooter) -> PackedFilter | None:
    """:func:`parsed_filter`, its bits left packed."""
    return _filter_of(footer, PackedFilter.parse)


def _filter_of(footer: KeyFooter, parse: Callable[[bytes, str], _Filter]) -> _Filter | None:
    if footer.bloom is None:
        return None
    try:
        return parse(footer.bloom, footer.bloom_type)
    except BloomFilterError:
        return None


class KeyProbe:
    """Probes chunks of a batch's keys against many files' footers (:func:`read_key_footers`).

    Made where the keys are (a Spark task); parses each bloom filter once, hashes each chunk's
    keys once per partition. :meth:`verdicts` is the best verdict per file so far
    (``OUT_OF_RANGE`` < ``NOT_IN_BLOOM`` < ``MAY_HOLD``); a file that may hold a key is kept.
    """

    def __init__(self, footers: list[KeyFooter]) -> None:
        self.footers = footers
        self.verdicts = np.full(len(footers), OUT_OF_RANGE, dtype=np.int8)
        self._blooms: dict[int, BloomFilter | None] = {}
        self._by_partition: dict[str, list[int]] = {}
        for i, footer in enumerate(footers):
            self._by_partition.setdefault(footer.partition_path, []).append(i)

    def _bloom(self, i: int) -> BloomFilter | None:
        if i not in self._blooms:
            self._blooms[i] = parsed_filter(self.footers[i])
        return self._blooms[i]

    def add(self, keys: pa.Array, partitions: pa.Array | None = None, int_keys: pa.Array | None = None) -> None:
        """Probe one chunk: ``keys`` (record-key text, or None where ``int_keys`` serve: then the
        text is made only for the bloom test), ``partitions`` each key's partition path (None: a
        key may be in any file), ``int_keys`` the integer key field's values."""
        groups: list[tuple[str | None, list[int]]]
        if partitions is None:
            groups = [(None, list(range(len(self.footers))))]
        else:
            groups = list(self._by_partition.items())
        for part, members in groups:
            if all(self.verdicts[i] == MAY_HOLD for i in members):
                continue
            mask = None if part is None else pc.equal(partitions, part)
            if mask is not None and not pc.any(mask).as_py():
                continue
            self._probe(members, keys, int_keys, mask)

    def _probe(self, members: list[int], keys: pa.Array | None, ints: pa.Array | None, mask: pa.Array | None) -> None:
        if mask is not None:
            keys = keys.filter(mask) if keys is not None else None
            ints = ints.filter(mask) if ints is not None else None
        for i in members:
            if self.verdicts[i] == MAY_HOLD:
                continue
            chosen = in_key_range(self.footers[i], keys, ints)
            if chosen is not None and not chosen.any():
                continue
            bloom = self._bloom(i)
            if bloom is not None:
                if keys is None and ints is not None:
                    keys = pc.cast(ints, pa.string())
                assert keys is not None
                if not bloom.holds_any(keys if chosen is None else keys.filter(pa.array(chosen))):
                    self.verdicts[i] = max(self.verdicts[i], NOT_IN_BLOOM)
                    continue
            self.verdicts[i] = MAY_HOLD


# What :meth:`KeyLocator.locate` says of a key besides a file's index.
NO_FILE, SEVERAL_FILES = -1, -2


class KeyLocator:
    """Which base file holds each key, from the files' footers alone, wherever that is certain.

    A key is in at most one base file of its partition, and a file whose footer rules a key out
    (key range, bloom filter) surely does not hold it. So a key that exactly one file of its
    partition may hold is in that file or in no file at all, and a key that no file may hold
    is new: neither needs a stored key read. Only a key that several files may hold (a false
    positive of some file's filter) does: :data:`SEVERAL_FILES`. A file without a readable
    filter may hold every key in its range.

    Each key is hashed once for all the filters (:func:`~tidemark.format.bloom.hash_chains`);
    each filter is parsed once per locator, when a key of its partition first comes. Made where
    the keys are (a Spark task), which may see a few of many partitions.
    """

    def __init__(self, footers: list[KeyFooter]) -> None:
        self.footers = footers
        self._filters: dict[int, PackedFilter | None] = {}
        self._by_partition: dict[str, list[int]] = {}
        for i, footer in enumerate(footers):
            self._by_partition.setdefault(footer.partition_path, []).append(i)

    def _filter(self, i: int) -> PackedFilter | None:
        """File ``i``'s filter, or None (none, or one that cannot be read: it rules nothing out)."""
        if i not in self._filters:
            self._filters[i] = packed_filter(self.footers[i])
        return self._filters[i]

    def locate(
        self, keys: pa.Array, partitions: pa.Array | None = None, int_keys: pa.Array | None = None
    ) -> np.ndarray:
        """For each of ``keys`` (record-key text; a null key is in no file): the index in
        ``footers`` of the one file that may hold it, :data:`NO_FILE` or :data:`SEVERAL_FILES`.
        ``partitions``: each key's partition path (None: a key may be in any file);
        ``int_keys``: the integer key field's values, for the files' integer ranges."""
        n = len(keys)
        found = np.full(n, NO_FILE, dtype=np.int32)
        hits = np.zeros(n, dtype=np.int8)
        if n == 0 or not self.footers:
            return found
        valid = pc.is_valid(keys).to_numpy(zero_copy_only=False)
        text = pc.fill_null(keys, "") if not valid.all() else keys
        groups: list[tuple[np.ndarray, list[int]]]
        if partitions is None:
            groups = [(np.flatnonzero(valid), list(range(len(self.footers))))]
        else:
            encoded = pc.dictionary_encode(partitions).combine_chunks() if isinstance(
                partitions, pa.ChunkedArray) else pc.dictionary_encode(partitions)
            codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
            groups = []
            for code, path in enumerate(encoded.dictionary.to_pylist()):
                members = self._by_partition.get(path)
                if members:
                    groups.append((np.flatnonzero((codes == code) & valid), members))
        filters = {i: self._filter(i) for rows, members in groups if len(rows) for i in members}
        count = max((f.hashes for f in filters.values() if f is not None), default=0)
        # The groups' rows are disjoint (one partition each): sorted, they are the keys to hash.
        wanted = np.sort(np.concatenate([rows for rows, _ in groups])) if groups else np.zeros(0, np.int64)
        if len(wanted) == n:  # every key: hashed as it is, not taken first
            chains = hash_chains(text, count) if count else np.zeros((n, 0), dtype=np.uint32)
        else:
            chains = np.zeros((n, count), dtype=np.uint32)
            if count and len(wanted):
                chains[wanted] = hash_chains(text.take(pa.array(wanted)), count)
        for rows, members in groups:
            if not len(rows):
                continue
            row_keys = text.take(pa.array(rows))
            row_ints = int_keys.take(pa.array(rows)) if int_keys is not None else None
            for i in members:
                inside = in_key_range(self.footers[i], row_keys, row_ints)
                chosen = rows if inside is None else rows[inside]
                bloom = filters[i]
                if bloom is not None and len(chosen):
                    chosen = chosen[bloom.holds_hashed(chains[chosen])]
                hits[chosen] = np.minimum(hits[chosen] + 1, 2)
                found[chosen] = i
        found[hits > 1] = SEVERAL_FILES
        return found


__all__ = [
    "MAY_HOLD", "NO_FILE", "NOT_IN_BLOOM", "OUT_OF_RANGE", "SEVERAL_FILES", "KeyFooter", "KeyLocator", "KeyProbe",
    "FOOTER_TAG_MAX_FALSE_POSITIVES", "PruneStats", "files_that_may_hold", "footer_verdict", "footers_locate_keys",
    "read_footer", "read_key_footer", "read_key_footers",
]
