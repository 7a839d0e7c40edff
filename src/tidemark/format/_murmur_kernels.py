"""The compiled kernels behind :mod:`tidemark.format.murmur` (imports numba; load them through
:func:`tidemark.format.murmur.kernels`).

Keys of one byte length are hashed side by side in chunks of :data:`CHUNK` keys: first each
key's 4-byte blocks and tail are mixed once (they do not depend on the seed), then each hash of
the chain runs one step at a time over the whole chunk, loops the compiler vectorises. Every
value is kept to 32 bits as Java's ``int`` arithmetic is (the hash is Hadoop's
``MurmurHash.hash``, whose tail bytes are Java's signed bytes, the first one the highest).
"""

from __future__ import annotations

import numpy as np
from numba import njit, uint32

CHUNK = 1024
_M = np.uint32(0x5BD1E995)


@njit(cache=True, nogil=True, inline="always")
def _key_at(order: np.ndarray, position: int) -> int:
    return order[position] if len(order) else position


@njit(cache=True, nogil=True)
def _mix_keys(offsets: np.ndarray, data: np.ndarray, order: np.ndarray, first: int, n: int, length: int,
              blocks: np.ndarray, tail: np.ndarray) -> None:
    """Each key's seed-free block values (``blocks[b, j]``) and tail value (``tail[j]``)."""
    count = length >> 2
    left = length - 4 * count
    for j in range(n):
        start = offsets[_key_at(order, first + j)]
        for b in range(count):
            p = start + 4 * b
            k = uint32(data[p]) | (uint32(data[p + 1]) << uint32(8)) | (uint32(data[p + 2]) << uint32(16)) | (
                uint32(data[p + 3]) << uint32(24))
            k = uint32(k * _M)
            k = uint32(k ^ (k >> uint32(24)))
            blocks[b, j] = uint32(k * _M)
        t = uint32(0)
        for q in range(left):
            byte = np.int32(data[start + 4 * count + q])
            if byte >= 128:  # Java's bytes are signed: sign-extended to 32 bits
                byte -= 256
            t ^= uint32(byte) << uint32(8 * (left - 1 - q))
        tail[j] = t


@njit(cache=True, nogil=True)
def _next_hashes(h: np.ndarray, n: int, length: int, blocks: np.ndarray, tail: np.ndarray) -> None:
    """Turn each ``h[j]`` (the previous hash of key j's chain, its seed) into the next one."""
    count = length >> 2
    size = uint32(length)
    for j in range(n):
        h[j] = h[j] ^ size
    for b in range(count):
        for j in range(n):
            h[j] = uint32(h[j] * _M) ^ blocks[b, j]
    if length & 3:
        for j in range(n):
            h[j] = uint32((h[j] ^ tail[j]) * _M)
    for j in range(n):
        x = h[j]
        x = x ^ (x >> uint32(13))
        x = uint32(x * _M)
        h[j] = x ^ (x >> uint32(15))


@njit(cache=True, nogil=True, inline="always")
def _position(h: np.uint32, size: int, inverse: float) -> np.int64:
    """Java's ``Math.abs(h % size)``: ``abs(h) % size`` as 64-bit (abs of Integer.MIN_VALUE is
    2^31). The quotient comes from a multiply by the float inverse, off by at most one, then
    corrected: no integer division per hash."""
    a = np.int64(np.int32(h))
    if a < 0:
        a = -a
    r = a - np.int64(a * inverse) * size
    if r < 0:
        r += size
    elif r >= size:
        r -= size
    return r


@njit(cache=True, nogil=True)
def _runs(offsets: np.ndarray, order: np.ndarray, first: int, total: int) -> tuple[int, int]:
    """From position ``first`` in ``order``: the length of its key and how many keys (at most
    a chunk) in a row share it."""
    key = _key_at(order, first)
    length = offsets[key + 1] - offsets[key]
    end = first + 1
    while end < total and end - first < CHUNK:
        other = _key_at(order, end)
        if offsets[other + 1] - offsets[other] != length:
            break
        end += 1
    return length, end - first


@njit(cache=True, nogil=True)
def place(offsets: np.ndarray, data: np.ndarray, order: np.ndarray, rows: np.ndarray, bits: np.ndarray, size: int,
          hashes: int) -> None:
    """Set each key's ``hashes`` bits in ``bits[rows[key]]`` (a bool matrix of filter rows,
    ``size`` bits each). Keys are ``data[offsets[i]:offsets[i + 1]]``; ``order`` lists them by
    byte length (empty: they share one). Only stores of True: placements of different keys
    may run on several threads at once."""
    total = len(offsets) - 1
    longest = 0
    for i in range(total):
        longest = max(longest, offsets[i + 1] - offsets[i])
    blocks = np.empty(((longest >> 2) + 1, CHUNK), np.uint32)
    tail = np.empty(CHUNK, np.uint32)
    h = np.empty(CHUNK, np.uint32)
    where = np.empty(CHUNK, np.int64)
    inverse = 1.0 / size
    first = 0
    while first < total:
        length, n = _runs(offsets, order, first, total)
        _mix_keys(offsets, data, order, first, n, length, blocks, tail)
        for j in range(n):
            h[j] = uint32(0)
            where[j] = rows[_key_at(order, first + j)]
        for _ in range(hashes):
            _next_hashes(h, n, length, blocks, tail)
            for j in range(n):
                bits[where[j], _position(h[j], size, inverse)] = True
        first += n


@njit(cache=True, nogil=True)
def chains(offsets: np.ndarray, data: np.ndarray, order: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` hashes of each key's chain, one row per key (uint32)."""
    total = len(offsets) - 1
    out = np.empty((total, count), np.uint32)
    longest = 0
    for i in range(total):
        longest = max(longest, offsets[i + 1] - offsets[i])
    blocks = np.empty(((longest >> 2) + 1, CHUNK), np.uint32)
    tail = np.empty(CHUNK, np.uint32)
    h = np.empty(CHUNK, np.uint32)
    first = 0
    while first < total:
        length, n = _runs(offsets, order, first, total)
        _mix_keys(offsets, data, order, first, n, length, blocks, tail)
        for j in range(n):
            h[j] = uint32(0)
        for i in range(count):
            _next_hashes(h, n, length, blocks, tail)
            for j in range(n):
                out[_key_at(order, first + j), i] = h[j]
        first += n
    return out


def warm_up() -> None:
    """Compile (or load from the on-disk cache) both kernels for the types they are called with."""
    offsets = np.array([0, 3, 7], np.int64)
    data = np.frombuffer(b"abcdefg", np.uint8)
    order = np.zeros(0, np.int64)
    place(offsets, data, order, np.zeros(2, np.int64), np.zeros((1, 64), np.bool_), 64, 3)
    chains(offsets, data, order, 3)
