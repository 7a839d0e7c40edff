"""Hudi's record-key bloom filter, in the form Hudi keeps in every base file's footer.

Hudi's writers put a bloom filter of the file's record keys in the parquet footer under
``org.apache.hudi.bloomfilter`` (type code ``DYNAMIC_V0`` under
``hoodie_bloom_filter_type_code``) and Hudi's bloom index reads it on every upsert to skip
files that cannot hold a key. This module builds, serializes, parses and probes that
filter so that tidemark's files carry one Hudi can use, and tidemark can use Hudi's.

The serialized form (base64 of Java ``DataOutput`` bytes, big-endian):

* the filter header: version ``-1`` (int), number of hash functions (int), hash type (byte,
  1 = Murmur), vector size in bits (int);
* ``DYNAMIC_V0`` adds: keys per row ``nr`` (int), keys counted in the current row (int),
  number of rows (int), then each row: the same header again and its bit vector,
  ``ceil(vector_size / 8)`` bytes, bit ``i`` at byte ``i // 8``, mask ``1 << (i % 8)``.

A key's bit positions come from Hadoop's 32-bit Murmur hash (MurmurHash2 with the tail bytes in reverse order) of
its UTF-8 bytes, chained: position ``i`` hashes with the previous hash as seed (the first
with seed 0) and is ``abs(java_remainder(hash, vector_size))``. Rows fill ``nr`` keys each
while ``rows * nr < max_entries``; after that keys go round-robin over the rows, exactly
as Hudi's bounded dynamic filter places them, so the bytes equal Hudi's for the same keys.

Hashing is vectorised over keys of equal byte length (record keys of one file usually share
few lengths): compiled (:mod:`tidemark.format.murmur`, 0.09-0.14 s of CPU per million keys),
or with numpy where the compiled part was not built (0.18-0.29 s per million keys).
"""

from __future__ import annotations

import binascii
import bisect
import math
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from tidemark.errors import TidemarkError
from tidemark.format import murmur

TYPE_CODE = "DYNAMIC_V0"
FOOTER_KEY = "org.apache.hudi.bloomfilter"
TYPE_CODE_KEY = "hoodie_bloom_filter_type_code"
MIN_KEY_KEY = "hoodie_min_record_key"
MAX_KEY_KEY = "hoodie_max_record_key"

# Hudi's defaults: hoodie.index.bloom.num_entries, .fpp, hoodie.bloom.index.filter.dynamic.max.entries.
DEFAULT_NUM_ENTRIES = 60_000
DEFAULT_FPP = 0.000000001
DEFAULT_MAX_ENTRIES = 100_000
MIN_FOOTER_ENTRIES = 1_000

_MURMUR = 1
_VERSION = -1


class BloomFilterError(TidemarkError):
    """A serialized bloom filter could not be read (corrupt footer, unknown type)."""


def bit_size(num_entries: int, fpp: float) -> int:
    """Bits of one row for ``num_entries`` keys at false-positive rate ``fpp`` (Hudi's sizing)."""
    return int(math.ceil(num_entries * (-math.log(fpp)) / (math.log(2) ** 2)))


def num_hashes(bits: int, num_entries: int) -> int:
    return int(math.ceil(bits / num_entries * math.log(2)))


# Re-exported: the hashing lives in murmur.py, the filter's callers find it here.
CHUNK_KEYS = murmur.CHUNK_KEYS
# holds_any hashes this many keys first, then four times as many each pass (up to CHUNK_KEYS):
# a file that holds some of the keys (an upsert's updates) is usually decided by the first few,
# and a file that holds none of them still costs every key's hashes, in a handful of passes.
FIRST_PROBE_KEYS = 64


def probe_chunks(count: int) -> list[tuple[int, int]]:
    """(start, length) of the passes :meth:`BloomFilter.holds_any` makes over ``count`` keys."""
    chunks, start, size = [], 0, FIRST_PROBE_KEYS
    while start < count:
        chunks.append((start, min(size, count - start)))
        start += size
        size = min(4 * size, CHUNK_KEYS)
    return chunks


def hash_chains(keys: pa.Array, count: int) -> np.ndarray:
    """The first ``count`` hashes of each key's chain, one row per key (uint32). They are the
    same for every filter: only the bit positions depend on a filter's vector size, so keys
    probed against many files' filters are hashed once (:meth:`PackedFilter.holds_hashed`)."""
    return murmur.hash_chains(_binary(keys), count)


def _binary(keys: pa.Array) -> pa.Array:
    binary = pa.array(keys, pa.string()).cast(pa.binary()) if not pa.types.is_binary(keys.type) else keys
    if binary.null_count:
        raise BloomFilterError("a record key is null; a bloom filter holds only non-null keys")
    return binary


def _fill_rows(keys_per_row: int, max_entries: int) -> int:
    return max(1, -(-max_entries // keys_per_row))


def _rows_of(first: int, count: int, keys_per_row: int, max_entries: int) -> np.ndarray:
    """The row each of the keys added at positions ``first .. first + count - 1`` lands in."""
    fill_rows = _fill_rows(keys_per_row, max_entries)
    bound = fill_rows * keys_per_row  # keys past it go round-robin, the first one to row 0
    end = first + count
    rows = np.empty(count, dtype=np.int64)
    at = first
    while at < min(end, bound):  # rows fill in turn: a run of one row per row, no division per key
        row_end = min(end, (at // keys_per_row + 1) * keys_per_row)
        rows[at - first:row_end - first] = at // keys_per_row
        at = row_end
    if end > bound:
        spill = np.arange(max(first, bound), end, dtype=np.int64) - bound
        rows[max(first, bound) - first:] = np.where(spill == 0, 0, (spill - 1) % fill_rows)
    return rows


def _used_rows(count: int, keys_per_row: int, max_entries: int) -> tuple[int, int]:
    """The number of rows a filter of ``count`` keys has, and the keys counted in its current row."""
    used_rows = max(1, min(_fill_rows(keys_per_row, max_entries), -(-count // keys_per_row)))
    return used_rows, count - (used_rows - 1) * keys_per_row


class BloomBuilder:
    """Builds the filter of keys added in pieces, in insertion order.

    With ``num_entries=None`` the filter is sized as tidemark's footers are (:func:`footer_entries`
    of the final key count); pieces are placed in the bit vectors as soon as the sizing is
    certain (from 60,000 keys on, it no longer depends on the final count), so building a large
    file's filter costs nothing at close. The result equals :meth:`BloomFilter.build` of all the
    keys in the order added.
    """

    def __init__(
        self, *, num_entries: int | None = None, fpp: float = DEFAULT_FPP, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        self._fixed_entries = num_entries
        self._fpp = fpp
        self._max_entries = max_entries
        self._hashes = num_hashes(bit_size(num_entries or DEFAULT_NUM_ENTRIES, fpp), num_entries or DEFAULT_NUM_ENTRIES)
        self._count = 0
        self._pending: list[tuple[int, pa.Array]] = []  # (offset, keys) not placed yet
        # (fill rows, row), allocated once sized: a byte per bit (bool) for a filter built anew,
        # whose placements store ones only; packed as serialized (uint8) for one resuming a
        # stored filter (:meth:`resuming`), which a rewrite adds a few keys to.
        self._bits: np.ndarray | None = None
        self._entries: int | None = num_entries
        self._merging = threading.Lock()  # placements side by side or their bits into _bits in turn

    @classmethod
    def resuming(cls, stored: BloomFilter, count: int, total: int | None = None) -> BloomBuilder:
        """A builder sized as ``stored`` that already holds ``stored``'s bits as the filter of
        ``count`` keys added (:func:`counts_keys` must hold): keys added next land as they would
        after those. ``total``: the keys it will hold in all, if known (only the rows those fill
        are made)."""
        builder = cls(num_entries=stored.keys_per_row)
        rows = _fill_rows(stored.keys_per_row, builder._max_entries) if total is None else \
            _used_rows(total, stored.keys_per_row, builder._max_entries)[0]
        builder._bits = _zero_rows(max(rows, len(stored.rows)), stored.vector_size)
        for i, bits in enumerate(stored.rows):
            builder._bits[i] = bits
        builder._count = count
        return builder

    def add(self, keys: pa.Array | Sequence[str]) -> None:
        for place in self.reserve(keys):
            place()

    def reserve(self, keys: pa.Array | Sequence[str]) -> list[Callable[[], None]]:
        """Count ``keys`` in, after the keys already added, and return the placements now due
        (none while the sizing still waits for the final count: :meth:`build` places those).

        The placements only set bits of a filter already sized: they may run in any order, on
        any threads, side by side; all of them must have run before :meth:`build`.
        """
        array = keys if isinstance(keys, pa.Array) else pa.array(list(keys), pa.string())
        self._pending.append((self._count, array))
        self._count += len(array)
        if self._entries is None and self._count >= DEFAULT_NUM_ENTRIES:
            self._entries = footer_entries(self._count)  # final: more keys never change it
        if self._entries is None:
            return []
        if self._bits is None:
            self._bits = np.zeros((_fill_rows(self._entries, self._max_entries), self._size()), dtype=bool)
        due, self._pending = self._pending, []
        return [partial(self._place, offset, piece) for offset, piece in due]

    def _size(self) -> int:
        assert self._entries is not None
        return bit_size(self._entries, self._fpp)

    def _place(self, offset: int, keys: pa.Array) -> None:
        """Set the bits of ``keys``, the ones added from position ``offset`` on. A byte per bit
        takes stores of ones only: placements side by side set theirs straight in. A packed bit
        is set by a read, an or and a store (two at once could lose one): the bits are set in
        rows of the placement's own, then or-ed into the filter's in turn."""
        assert self._bits is not None and self._entries is not None
        if len(keys) == 0:
            return
        rows = _rows_of(offset, len(keys), self._entries, self._max_entries)
        size = self._size()
        if self._bits.dtype == np.bool_:
            murmur.place(_binary(keys), rows, self._bits, size, self._hashes)
            return
        first, last = int(rows.min()), int(rows.max())
        own = _zero_rows(last - first + 1, size)
        murmur.place(_binary(keys), rows - first, own, size, self._hashes)
        with self._merging:
            np.bitwise_or(self._bits[first:last + 1], own, out=self._bits[first:last + 1])

    def build(self) -> BloomFilter:
        if self._entries is None:
            self._entries = self._fixed_entries or footer_entries(self._count)
        if self._bits is None:  # the count is final: only the rows its keys fill (a small file's one)
            rows = _used_rows(self._count, self._entries, self._max_entries)[0]
            self._bits = np.zeros((rows, self._size()), dtype=bool)
        for offset, piece in self._pending:
            self._place(offset, piece)
        self._pending.clear()
        size = self._size()
        used_rows, current = _used_rows(self._count, self._entries, self._max_entries)
        hashes = num_hashes(size, self._entries)
        if hashes != self._hashes:  # pragma: no cover - the sizing keeps the count of hashes
            raise AssertionError(f"hashed {self._hashes} times for a filter of {hashes} hashes")
        bits = self._bits[:used_rows]
        # Packed anew, or copied: the filter's rows are its own, whatever the builder does next.
        packed = np.packbits(bits, axis=1, bitorder="little") if bits.dtype == np.bool_ else bits.copy()
        return BloomFilter(size, hashes, self._entries, current, tuple(packed))


@dataclass(frozen=True)
class BloomFilter:
    """A ``DYNAMIC_V0`` bloom filter: ``rows`` bit vectors of ``vector_size`` bits each."""

    vector_size: int
    hashes: int
    keys_per_row: int
    current_row_count: int
    # Each row's vector_size bits packed as Hudi serializes them: a uint8 array of
    # ceil(vector_size / 8) bytes, bit i at byte i // 8, mask 1 << (i % 8) (the padding bits clear).
    rows: tuple[np.ndarray, ...]

    @classmethod
    def build(
        cls,
        keys: pa.Array | Sequence[str],
        *,
        num_entries: int = DEFAULT_NUM_ENTRIES,
        fpp: float = DEFAULT_FPP,
        max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> BloomFilter:
        """The filter Hudi builds when it adds ``keys`` in this order (same bytes when serialized)."""
        builder = BloomBuilder(num_entries=num_entries, fpp=fpp, max_entries=max_entries)
        builder.add(keys)
        return builder.build()

    def might_contain(self, keys: pa.Array | Sequence[str]) -> np.ndarray:
        """For each key, False when the file surely does not hold it, True when it may."""
        array = keys if isinstance(keys, pa.Array) else pa.array(list(keys), pa.string())
        result = np.zeros(len(array), dtype=bool)
        if murmur.kernels() is not None:  # compiled hash chains, a chunk of keys at a time
            for start in range(0, len(array), CHUNK_KEYS):
                result[start : start + CHUNK_KEYS] = self._holds_hashed(hash_chains(array.slice(start, CHUNK_KEYS),
                                                                                    self.hashes))
            return result
        for positions, matrix in murmur.utf8_groups(_binary(array)):
            for start in range(0, len(positions), CHUNK_KEYS):
                chunk = matrix[start : start + CHUNK_KEYS]
                result[positions[start : start + CHUNK_KEYS]] = self._probe(chunk, stop_at_first=False)
        return result

    def holds_any(self, keys: pa.Array | Sequence[str]) -> bool:
        """Whether the file may hold one of ``keys`` (False: surely none of them). Stops at the
        first pass with a key the filter may hold (:func:`probe_chunks`): a file that holds
        some of a batch's keys usually costs the first few keys' hashes."""
        array = keys if isinstance(keys, pa.Array) else pa.array(list(keys), pa.string())
        if murmur.kernels() is not None:
            return any(self._holds_hashed(hash_chains(array.slice(start, length), self.hashes)).any()
                       for start, length in probe_chunks(len(array)))
        for _, matrix in murmur.utf8_groups(_binary(array)):
            for start in range(0, len(matrix), CHUNK_KEYS):
                if self._probe(matrix[start : start + CHUNK_KEYS], stop_at_first=True).any():
                    return True
        return False

    def _holds_hashed(self, chains: np.ndarray) -> np.ndarray:
        """:meth:`PackedFilter.holds_hashed` on this filter's rows."""
        return _holds_hashed(self.rows, chains, self.hashes, self.vector_size)

    def _probe(self, matrix: np.ndarray, *, stop_at_first: bool) -> np.ndarray:
        """Which keys of one byte length (``matrix``, one chunk) the filter may hold.

        The chain is hashed one position at a time and a key is dropped as soon as one of its
        bits is clear in every row: a key the file does not hold costs a hash or two, not
        ``hashes`` of them. With ``stop_at_first``, once every remaining key's bits are all
        set the first of them decides.
        """
        n, length = matrix.shape
        k, tail = murmur.seed_free_parts(matrix)
        h = np.zeros(n, dtype=np.uint32)
        alive = np.ones((len(self.rows), n), dtype=bool)  # per row: every bit so far is set
        index = np.arange(n)  # the chunk's keys still in the running
        for _ in range(self.hashes):
            murmur.next_hash(h, k, tail, length, np.empty_like(h))
            where = murmur.positions(h, self.vector_size)
            byte, bit = where >> np.uint32(3), (where & np.uint32(7)).astype(np.uint8)
            for row, bits in zip(alive, self.rows, strict=True):
                row &= ((bits[byte] >> bit) & 1).astype(bool)
            keep = alive.any(axis=0)
            kept = int(np.count_nonzero(keep))
            if kept == 0:
                return np.zeros(n, dtype=bool)
            if kept < 0.8 * len(index):  # drop the ruled-out keys once that saves work
                index, h, k, alive = index[keep], h[keep], k[:, keep], alive[:, keep]
                tail = tail[keep] if tail is not None else None
        result = np.zeros(n, dtype=bool)
        result[index[alive.any(axis=0)]] = True
        return result

    @property
    def false_positive_rate(self) -> float:
        """The chance that a key the file does not hold is said to be in it, from how full the
        rows are: a row whose bits are set in fraction ``f`` lets a key through with chance
        ``f ** hashes``, and a key may be in any row. Past its sizing (Hudi's files of more than
        60,000 keys spread keys over two rows, then round-robin) this grows fast."""
        return _false_positive_rate([int(np.bitwise_count(bits).sum()) for bits in self.rows], self.vector_size,
                                    self.hashes)

    def serialize(self) -> str:
        """Base64 text, byte for byte what Hudi's ``serializeToString`` writes for the same filter."""
        header = struct.pack(">iiBi", _VERSION, self.hashes, _MURMUR, self.vector_size)
        parts = [header, struct.pack(">iii", self.keys_per_row, self.current_row_count, len(self.rows))]
        for bits in self.rows:
            parts.append(header)
            parts.append(bits.tobytes())
        raw = b"".join(parts)
        kernels = murmur.kernels()
        return kernels.base64_encode(raw) if kernels is not None else \
            binascii.b2a_base64(raw, newline=False).decode("ascii")

    @classmethod
    def parse(cls, text: str | bytes, type_code: str = TYPE_CODE) -> BloomFilter:
        """Read a filter from a footer value; raises BloomFilterError if it is not a readable ``DYNAMIC_V0``."""
        size, hashes, keys_per_row, current, packed = _read(text, type_code)
        return cls(size, hashes, keys_per_row, current, tuple(packed))


def _decode(text: str | bytes) -> bytes | memoryview:
    """The bytes of a filter's base64 text; raises ValueError (binascii.Error) if it is not
    padded base64 of RFC 4648's alphabet."""
    kernels = murmur.kernels()
    data = text.encode("ascii", "replace") if isinstance(text, str) else text
    decoded = kernels.base64_decode(data) if kernels is not None else None
    # binascii's strict mode validates as b64decode(validate=True) does, without its regex
    # pass over the text (a fifth of the decoding of a 100,000-key filter); it also says what
    # is wrong with text the compiled decoding refuses.
    return decoded.data if decoded is not None else binascii.a2b_base64(text, strict_mode=True)


def _read(text: str | bytes, type_code: str) -> tuple[int, int, int, int, list[np.ndarray]]:
    """A serialized filter's vector size, hashes, keys per row, keys in the current row and
    packed rows (uint8 views of the decoded bytes); raises BloomFilterError."""
    if type_code != TYPE_CODE:
        raise BloomFilterError(f"bloom filter type {type_code!r} is not supported (only {TYPE_CODE})")
    try:
        raw = _decode(text)
        version, hashes, hash_type, size = struct.unpack_from(">iiBi", raw, 0)
        keys_per_row, current, row_count = struct.unpack_from(">iii", raw, 13)
        offset = 25
        n_bytes = (size + 7) // 8
        rows = []
        for _ in range(row_count):
            struct.unpack_from(">iiBi", raw, offset)
            offset += 13
            rows.append(np.frombuffer(raw, dtype=np.uint8, count=n_bytes, offset=offset))
            offset += n_bytes
    except (ValueError, struct.error) as error:
        raise BloomFilterError(f"the bloom filter could not be read: {error}") from error
    if version != _VERSION or hash_type != _MURMUR or offset != len(raw) or row_count < 1:
        raise BloomFilterError(
            f"the bloom filter is not a Murmur-hashed {TYPE_CODE} filter "
            f"(version {version}, hash type {hash_type}, {len(raw) - offset} bytes left over)"
        )
    return size, hashes, keys_per_row, current, rows


def _zero_rows(rows: int, vector_size: int) -> np.ndarray:
    """``rows`` rows of ``vector_size`` clear bits, packed (:attr:`BloomFilter.rows`)."""
    return np.zeros((rows, (vector_size + 7) // 8), dtype=np.uint8)


def _holds_hashed(rows: Sequence[np.ndarray], chains: np.ndarray, hashes: int, vector_size: int) -> np.ndarray:
    """Which keys, given by their hash chains, have every one of their bits set in one of the
    packed ``rows``."""
    where = _chain_positions(chains, hashes, vector_size)
    byte, bit = where >> np.uint32(3), (where & np.uint32(7)).astype(np.uint8)
    result = np.zeros(chains.shape[0], dtype=bool)
    for packed in rows:
        result |= ((packed[byte] >> bit) & 1).all(axis=1)
    return result


def _chain_positions(chains: np.ndarray, hashes: int, vector_size: int) -> np.ndarray:
    """Each key's first ``hashes`` bit positions in a row of ``vector_size`` bits, from its hash
    chain (:func:`hash_chains`): a (keys, hashes) matrix."""
    where = murmur.positions(np.ascontiguousarray(chains[:, :hashes]).reshape(-1), vector_size)
    return where.reshape(chains.shape[0], hashes)


def _false_positive_rate(set_bits: Sequence[int], vector_size: int, hashes: int) -> float:
    """A row whose bits are set in fraction ``f`` lets a key through with chance ``f ** hashes``;
    a key may be in any row."""
    return min(1.0, float(sum((bits / vector_size) ** hashes for bits in set_bits)))


@dataclass(frozen=True)
class PackedFilter:
    """A filter's packed bit vectors and hashing alone (no sizing to add keys by), for probing
    keys by their hash chains: a task that locates keys among many files' filters
    (:class:`~tidemark.write.key_pruning.KeyLocator`) holds them all at once."""

    vector_size: int
    hashes: int
    rows: tuple[np.ndarray, ...]  # uint8: bit i at byte i // 8, mask 1 << (i % 8)

    @classmethod
    def of(cls, bloom: BloomFilter) -> PackedFilter:
        return cls(bloom.vector_size, bloom.hashes, bloom.rows)

    @classmethod
    def parse(cls, text: str | bytes, type_code: str = TYPE_CODE) -> PackedFilter:
        """:meth:`BloomFilter.parse`, the bits left packed as stored; raises BloomFilterError."""
        size, hashes, _, _, rows = _read(text, type_code)
        return cls(size, hashes, tuple(rows))

    @property
    def false_positive_rate(self) -> float:
        """:attr:`BloomFilter.false_positive_rate`, counted on the packed bits (the padding bits
        of the last byte are clear)."""
        return _false_positive_rate([int(np.bitwise_count(row).sum()) for row in self.rows], self.vector_size,
                                    self.hashes)

    def holds_hashed(self, chains: np.ndarray) -> np.ndarray:
        """For keys given by their hash chains (:func:`hash_chains`, at least :attr:`hashes`
        long): False where the file surely does not hold the key, True where it may. The chains
        are computed once for keys probed against many filters."""
        if chains.shape[1] < self.hashes:
            raise ValueError(f"{chains.shape[1]} hashes per key given, the filter needs {self.hashes}")
        return _holds_hashed(self.rows, chains, self.hashes, self.vector_size)

    def holds_any(self, keys: pa.Array) -> bool:
        """:meth:`BloomFilter.holds_any` (keys as a string array, no nulls), on the packed bits:
        the keys hashed in growing passes (:func:`probe_chunks`), stopping at the first pass with
        a key the filter may hold."""
        return any(self.holds_hashed(hash_chains(keys.slice(start, length), self.hashes)).any()
                   for start, length in probe_chunks(len(keys)))


def _footer_steps() -> tuple[int, ...]:
    steps = [MIN_FOOTER_ENTRIES]
    while steps[-1] < DEFAULT_NUM_ENTRIES:
        steps.append(min(steps[-1] + steps[-1] // 4, DEFAULT_NUM_ENTRIES))
    return tuple(steps)


# The sizings of small files' filters: 1,000 keys, then a quarter more each step, up to 60,000.
FOOTER_STEPS = _footer_steps()


def footer_entries(num_keys: int) -> int:
    """Keys per row of the filter tidemark writes for a file of ``num_keys`` keys.

    Hudi sizes every file's filter for 60,000 keys (about 430 KB of footer, even for a file of
    three rows); its readers take the sizing from the serialized filter, so any sizing reads.
    tidemark sizes a small file's filter to the first of :data:`FOOTER_STEPS` that holds its
    keys, at the same false-positive rate, and uses Hudi's own sizing, byte for byte, from
    60,000 keys up. The steps leave room: a rewrite that adds a few keys to a file usually
    keeps its sizing, and then its stored filter's bits (:func:`with_added_keys`).
    """
    return FOOTER_STEPS[bisect.bisect_left(FOOTER_STEPS, min(num_keys, DEFAULT_NUM_ENTRIES))]


def counts_keys(bloom: BloomFilter, count: int) -> bool:
    """Whether ``bloom`` is sized and filled as the filter tidemark (and Hudi, from 60,000 keys
    on) builds for ``count`` keys: its sizing is :func:`footer_entries` of ``count`` and its rows
    and current-row count are those ``count`` keys fill. Only then do keys added to it land
    where a build of all the keys in that order would put them (a filter that counts keys its
    file no longer holds, or was sized otherwise, is built anew by a rewrite)."""
    entries = footer_entries(count)
    return (
        bloom.keys_per_row == entries
        and bloom.vector_size == bit_size(entries, DEFAULT_FPP)
        and bloom.hashes == num_hashes(bloom.vector_size, entries)
        and (len(bloom.rows), bloom.current_row_count) == _used_rows(count, entries, DEFAULT_MAX_ENTRIES)
    )


def with_added_keys(stored: BloomFilter, keys: pa.Array, total: int) -> BloomFilter | None:
    """The filter of a file of ``total`` keys: the ``total - len(keys)`` keys ``stored`` was built
    from (in their order), then ``keys``; hashing only ``keys``.

    Byte for byte the filter Hudi builds when it adds the stored keys and then ``keys`` (as its
    merge of a file writes them). In a one-row filter a key's bits do not depend on its place,
    so that is also the build of the file's keys in any order. None when ``stored`` does not
    :func:`count <counts_keys>` its keys, or ``total`` keys take another sizing: then build
    the filter from all the keys.
    """
    count = total - len(keys)
    if not counts_keys(stored, count) or footer_entries(total) != stored.keys_per_row:
        return None
    builder = BloomBuilder.resuming(stored, count, total)
    builder.add(keys)
    return builder.build()


def footer_size(num_keys: int) -> int:
    """Bytes the serialized filter of a file of ``num_keys`` keys takes in its footer."""
    if num_keys <= 0:
        return 0
    per_row = footer_entries(num_keys)
    fill_rows = max(1, -(-DEFAULT_MAX_ENTRIES // per_row))
    rows = min(fill_rows, -(-num_keys // per_row))
    raw = 25 + rows * (13 + (bit_size(per_row, DEFAULT_FPP) + 7) // 8)
    return 4 * -(-raw // 3)


def footer_metadata(
    record_keys: pa.Array, *, with_filter: bool = True, bloom: BloomBuilder | None = None
) -> dict[str, str]:
    """The footer entries Hudi writes for a base file holding ``record_keys`` (in file order);
    without ``with_filter`` only the key range (Hudi's ``hoodie.parquet.bloom.filter.enabled=false``).
    ``bloom``: a builder that was already given these keys, in this order."""
    if len(record_keys) == 0:
        return {}
    import pyarrow.compute as pc

    bounds = pc.min_max(record_keys)
    if with_filter and bloom is None:
        bloom = BloomBuilder()
        bloom.add(record_keys)
    return range_footer(bounds["min"].as_py(), bounds["max"].as_py(), bloom if with_filter else None)


def range_footer(min_key: str, max_key: str, bloom: BloomBuilder | BloomFilter | None) -> dict[str, str]:
    """The footer entries of a base file whose keys span ``min_key``..``max_key`` (in byte
    order, as Hudi compares them), with ``bloom``'s filter if one is given."""
    footer = {MIN_KEY_KEY: min_key, MAX_KEY_KEY: max_key}
    if bloom is not None:
        built = bloom.build() if isinstance(bloom, BloomBuilder) else bloom
        footer[FOOTER_KEY] = built.serialize()
        footer[TYPE_CODE_KEY] = TYPE_CODE
    return footer
