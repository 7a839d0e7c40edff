"""Hadoop's 32-bit Murmur hash chains of record keys: in C where it was built, else in numpy.

Hudi's bloom filter hashes every key 30 times, each hash seeded with the one before it
(:mod:`tidemark.format.bloom` states the hash). numpy does that over keys of one byte length
at a time, one array operation per step of the hash: for a UUID key (nine 4-byte blocks) about
forty passes over the keys per hash, 0.18-0.29 s of CPU per million keys. ``_murmur.c`` does
the same steps over chunks of 1,024 keys held in the CPU's cache, in loops the C compiler
vectorises: 0.09-0.14 s per million keys (``benchmarks/bench_bloom_hashing.py``). Both give the same
hashes, bit for bit (``tests/test_murmur.py`` holds them to each other, ``tests/test_bloom.py``
both to Hudi's bytes and Hadoop's class).

The C file is built with the package (``setup.py``; an optional extension: an install without
a C compiler goes on) and called through ctypes, which releases the GIL: filters are built on
threads beside the parquet encoding. Without it, or with ``TIDEMARK_COMPILED_HASHING=0``, numpy
serves. The same file holds the base64 coding of a filter's footer text, for the same reason:
binascii holds the GIL while it decodes and encodes ~100 KB per rewritten file, and the other
writing threads wait (binascii serves without the build).
"""

from __future__ import annotations

import ctypes
import importlib.util
import logging
import os
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

_MULTIPLIER = np.uint32(0x5BD1E995)

_POINTER = ctypes.c_void_p
_ABI = 4  # tidemark_murmur_abi() of the _murmur.c this module calls


@dataclass(frozen=True)
class Kernels:
    """The compiled functions (see ``_murmur.c``)."""

    library: ctypes.CDLL

    def place(self, offsets: np.ndarray, data: np.ndarray, order: np.ndarray | None, rows: np.ndarray,
              bits: np.ndarray, size: int, hashes: int) -> None:
        """Set each key's ``hashes`` bits in ``bits[rows[key]]`` (:func:`place`'s rows of ``size``
        bits). ``offsets`` and ``data``: :func:`key_buffers`; ``order``: :func:`length_order`."""
        packed = _check_rows(bits, size)
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= bits.shape[0]):
            raise ValueError("a key's row is not one of the filter's")
        order = _contiguous(order)  # held here while the call reads it
        status = self.library.tidemark_bloom_place(
            offsets.ctypes.data, _data_pointer(data), _order_pointer(order), len(offsets) - 1, rows.ctypes.data,
            bits.ctypes.data, size, hashes, int(packed))
        if status != 0:
            raise MemoryError("no memory for the bloom filter's hashing")

    def chains(self, offsets: np.ndarray, data: np.ndarray, order: np.ndarray | None, count: int) -> np.ndarray:
        """The first ``count`` hashes of each key's chain, one row per key (uint32)."""
        out = np.empty((len(offsets) - 1, count), dtype=np.uint32)
        order = _contiguous(order)
        status = self.library.tidemark_hash_chains(
            offsets.ctypes.data, _data_pointer(data), _order_pointer(order), len(offsets) - 1, out.ctypes.data, count)
        if status != 0:
            raise MemoryError("no memory for the bloom filter's hashing")
        return out

    def base64_encode(self, data: bytes) -> str:
        """``data`` as padded base64 text (binascii's ``b2a_base64(data, newline=False)``)."""
        out = ctypes.create_string_buffer(4 * (-(-len(data) // 3)))
        written = self.library.tidemark_base64_encode(data, len(data), out)
        return out.raw[:written].decode("ascii")

    def base64_decode(self, text: bytes) -> np.ndarray | None:
        """The bytes of padded base64 ``text`` (uint8), or None if it is not that (binascii's
        strict decoding then says what is wrong)."""
        out = np.empty(len(text) // 4 * 3, dtype=np.uint8)
        count = self.library.tidemark_base64_decode(text, len(text), out.ctypes.data)
        out.flags.writeable = False  # as binascii's bytes: a parsed filter's rows are views of it
        return None if count < 0 else out[:count]


def _check_rows(bits: np.ndarray, size: int) -> bool:
    """Whether ``bits`` holds rows of ``size`` bits packed (else one byte per bit); raises
    ValueError for anything else."""
    if bits.flags.c_contiguous and bits.flags.writeable and bits.ndim == 2:
        if bits.dtype == np.uint8 and bits.shape[1] == (size + 7) // 8:
            return True
        if bits.dtype == np.bool_ and bits.shape[1] == size:
            return False
    raise ValueError(f"the filter's bits must be a writable C-contiguous matrix of rows of {size} bits: uint8, "
                     f"{(size + 7) // 8} bytes per row (packed), or bool, {size} per row")


def _data_pointer(data: np.ndarray) -> int:
    return int(data.ctypes.data) if len(data) else 0


def _contiguous(order: np.ndarray | None) -> np.ndarray | None:
    return None if order is None else np.ascontiguousarray(order, dtype=np.int64)


def _order_pointer(order: np.ndarray | None) -> int | None:
    return None if order is None else int(order.ctypes.data)


@cache
def _load() -> Kernels | None:
    if os.environ.get("TIDEMARK_COMPILED_HASHING", "1") == "0":
        return None
    try:
        spec = importlib.util.find_spec("tidemark.format._murmur")
        if spec is None or spec.origin is None:
            log.debug("tidemark.format._murmur was not built: numpy hashes the bloom filters")
            return None
        library = ctypes.CDLL(spec.origin)
        library.tidemark_murmur_abi  # noqa: B018 - an older build lacks it: AttributeError
    except (ImportError, OSError, AttributeError) as error:
        log.debug("tidemark.format._murmur could not be loaded (%s): numpy hashes the bloom filters", error)
        return None
    library.tidemark_murmur_abi.restype = ctypes.c_int
    if library.tidemark_murmur_abi() != _ABI:
        log.warning("tidemark.format._murmur was built from another version of _murmur.c (pip install -e . "
                    "rebuilds it): numpy hashes the bloom filters")
        return None
    library.tidemark_bloom_place.argtypes = [_POINTER, _POINTER, _POINTER, ctypes.c_int64, _POINTER, _POINTER,
                                             ctypes.c_int64, ctypes.c_int32, ctypes.c_int32]
    library.tidemark_bloom_place.restype = ctypes.c_int
    library.tidemark_hash_chains.argtypes = [_POINTER, _POINTER, _POINTER, ctypes.c_int64, _POINTER, ctypes.c_int32]
    library.tidemark_hash_chains.restype = ctypes.c_int
    library.tidemark_base64_encode.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_char_p]
    library.tidemark_base64_encode.restype = ctypes.c_int64
    library.tidemark_base64_decode.argtypes = [ctypes.c_char_p, ctypes.c_int64, _POINTER]
    library.tidemark_base64_decode.restype = ctypes.c_int64
    return Kernels(library)


def kernels() -> Kernels | None:
    """The compiled kernels, or None: numpy hashes."""
    return _load()


def key_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of ``keys`` (a binary array without nulls) as the kernels take them: each
    key's start in ``data`` (int64, one more than the keys), and ``data``."""
    offset_type: Any = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    buffers = keys.buffers()
    width = np.dtype(offset_type).itemsize
    offsets = np.frombuffer(buffers[1], dtype=offset_type, count=len(keys) + 1, offset=keys.offset * width)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def length_order(offsets: np.ndarray) -> np.ndarray | None:
    """The keys in order of byte length (stable), or None when they all have one length (the
    usual case: formatted ids, UUIDs): the kernels hash keys of one length side by side."""
    lengths = np.diff(offsets)
    if len(lengths) == 0 or lengths.min() == lengths.max():
        return None
    if lengths.max() < 2**16:  # numpy sorts 16-bit integers by radix: linear
        return np.argsort(lengths.astype(np.uint16), kind="stable").astype(np.int64)
    return np.argsort(lengths, kind="stable").astype(np.int64)


# -- numpy: keys of one byte length at a time, one array operation per step ------------------
def utf8_groups(binary: pa.Array) -> list[tuple[np.ndarray, np.ndarray]]:
    """(positions, bytes as an (n, length) uint8 matrix) for each byte length among ``binary``
    (a binary array without nulls)."""
    binary = pa.concat_arrays([binary]) if binary.offset else binary  # offsets start at 0
    offsets = np.frombuffer(binary.buffers()[1], dtype=np.int32, count=len(binary) + 1)
    data_buffer = binary.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    groups = []
    for length in np.unique(lengths):
        positions = np.flatnonzero(lengths == length)
        starts = offsets[positions]
        matrix = data[starts[:, None] + np.arange(int(length))] if length else np.zeros((len(positions), 0), np.uint8)
        groups.append((positions, matrix))
    return groups


def next_hash(h: np.ndarray, k: np.ndarray, tail: np.ndarray | None, length: int, scratch: np.ndarray) -> None:
    """Turn ``h``, the previous hash of the chain (its seed), into the next one, in place: the
    block multiply-xors over ``k`` and ``tail`` (:func:`seed_free_parts`), then the finish."""
    with np.errstate(over="ignore"):
        h ^= np.uint32(length)
        for b in range(k.shape[0]):
            h *= _MULTIPLIER
            h ^= k[b]
        if tail is not None:
            h ^= tail
            h *= _MULTIPLIER
        np.right_shift(h, np.uint32(13), out=scratch)
        h ^= scratch
        h *= _MULTIPLIER
        np.right_shift(h, np.uint32(15), out=scratch)
        h ^= scratch


def positions(chain: np.ndarray, vector_size: int) -> np.ndarray:
    """Bit positions from hash values: Java's ``Math.abs(h % size)``, which is ``abs(h) % size``
    (the abs of Integer.MIN_VALUE is 2^31 as unsigned)."""
    if vector_size >= 2**31:
        return np.remainder(np.abs(chain.view(np.int32)).view(np.uint32), np.uint32(vector_size))
    # numpy divides signed integers by a scalar with a multiply (libdivide), about four times
    # faster than its unsigned remainder: abs, then x - (x // size) * size.
    signed = np.abs(chain.view(np.int32))
    minimum = signed < 0  # abs(Integer.MIN_VALUE) overflows and stays negative
    size = np.int32(vector_size)
    quotient = signed // size
    quotient *= size
    signed -= quotient
    if minimum.any():
        signed[minimum] = 2**31 % vector_size
    return signed.view(np.uint32)


# Keys hashed and placed per pass: the working arrays (a few per hash) stay in the CPU's cache,
# where numpy's passes over them cost a fraction of passes over a million-key array.
CHUNK_KEYS = 16_384


def seed_free_parts(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """What a key's 4-byte blocks and its tail add to every hash of the chain (seed-free)."""
    n, length = matrix.shape
    blocks = length // 4
    left = length - 4 * blocks
    with np.errstate(over="ignore"):
        k = np.ascontiguousarray(matrix[:, : blocks * 4]).view("<u4").T.copy()  # (blocks, n)
        k *= _MULTIPLIER
        k ^= k >> np.uint32(24)
        k *= _MULTIPLIER
        if not left:
            return k, None
        tail = np.zeros(n, dtype=np.uint32)
        signed_tail = matrix[:, blocks * 4 :].astype(np.int8).astype(np.int32).view(np.uint32)  # Java's signed bytes
        for j in range(left):  # Hadoop's variant: the first tail byte is the highest
            tail ^= signed_tail[:, j] << np.uint32(8 * (left - 1 - j))
        return k, tail


def place_chunk(flat: np.ndarray, matrix: np.ndarray, hashes: int, size: int, row_offsets: np.ndarray | None) -> None:
    """Set the bits of keys of one byte length (``matrix``) in ``flat``: one row's bits (packed
    or a byte each, :func:`place`), or the filter's rows laid end to end with the bit each
    key's row starts at in ``row_offsets``.

    Each hash of the chain is turned into its bit position and placed as soon as it is
    computed: nothing of size ``hashes x keys`` is ever materialised.
    """
    n, length = matrix.shape
    k, tail = seed_free_parts(matrix)
    divisor = np.int32(size)
    h = np.zeros(n, dtype=np.uint32)
    scratch = np.empty(n, dtype=np.uint32)
    where = np.empty(n, dtype=np.int32)
    quotient = np.empty(n, dtype=np.int32)
    index = np.empty(n, dtype=np.int64) if row_offsets is not None else where
    with np.errstate(over="ignore"):
        for _ in range(hashes):
            next_hash(h, k, tail, length, scratch)
            # Java's Math.abs(h % size) == abs(h) % size; numpy divides int32 by a scalar with a
            # multiply (libdivide). abs(Integer.MIN_VALUE) overflows and stays negative: fixed after.
            if size >= 2**31:  # pragma: no cover - far beyond any sizing Hudi's options allow
                positions = np.remainder(np.abs(h.view(np.int32)).view(np.uint32).astype(np.int64), size)
                _set_bits(flat, positions if row_offsets is None else positions + row_offsets)
                continue
            np.abs(h.view(np.int32), out=where)
            np.floor_divide(where, divisor, out=quotient)
            quotient *= divisor
            where -= quotient
            if where.min() < 0:
                where[h == np.uint32(0x80000000)] = 2**31 % size
            if row_offsets is not None:
                np.add(row_offsets, where, out=index)
            _set_bits(flat, index)


def _set_bits(flat: np.ndarray, positions: np.ndarray) -> None:
    """Set bits ``positions`` of ``flat``: one byte per bit (bool), or packed bytes (bit i at
    byte i // 8, mask 1 << (i % 8))."""
    if flat.dtype == np.bool_:
        flat[positions] = True
    else:
        np.bitwise_or.at(flat, positions >> 3, np.left_shift(1, positions & 7).astype(np.uint8))


# -- either ------------------------------------------------------------------------------------
def hash_chains(binary: pa.Array, count: int) -> np.ndarray:
    """The first ``count`` hashes of each key's chain (``binary``: keys without nulls), one row
    per key (uint32)."""
    compiled = kernels()
    if compiled is not None:
        offsets, data = key_buffers(binary)
        return compiled.chains(offsets, data, length_order(offsets), count)
    return numpy_hash_chains(binary, count)


def numpy_hash_chains(binary: pa.Array, count: int) -> np.ndarray:
    chains = np.empty((len(binary), count), dtype=np.uint32)
    for where, matrix in utf8_groups(binary):
        for start in range(0, len(where), CHUNK_KEYS):
            chunk = matrix[start : start + CHUNK_KEYS]
            rows = where[start : start + CHUNK_KEYS]
            k, tail = seed_free_parts(chunk)
            h = np.zeros(len(rows), dtype=np.uint32)
            scratch = np.empty_like(h)
            for i in range(count):
                next_hash(h, k, tail, chunk.shape[1], scratch)
                chains[rows, i] = h
    return chains


def place(binary: pa.Array, rows: np.ndarray, bits: np.ndarray, size: int, hashes: int) -> None:
    """Set the ``hashes`` bits of each key of ``binary`` (no nulls) in its row of ``bits``: rows
    of ``size`` bits, a writable C-contiguous matrix, packed as Hudi stores them (uint8,
    ``(size + 7) // 8`` bytes per row, bit i at byte i // 8, mask 1 << (i % 8)) or one byte per
    bit (bool, ``size`` per row: a store per bit, no read, for placements that reach most bytes
    of a row); ``rows[i]`` is the row of key ``i`` (int64). A packed bit is read, or-ed and
    stored: two placements into the same packed ``bits`` must not run at once."""
    _check_rows(bits, size)
    compiled = kernels()
    if compiled is not None:
        offsets, data = key_buffers(binary)
        compiled.place(offsets, data, length_order(offsets), rows, bits, size, hashes)
        return
    numpy_place(binary, rows, bits, size, hashes)


def numpy_place(binary: pa.Array, key_rows: np.ndarray, bits: np.ndarray, size: int, hashes: int) -> None:
    flat = bits.reshape(-1)
    row_bits = bits.shape[1] if bits.dtype == np.bool_ else 8 * bits.shape[1]
    for where, matrix in utf8_groups(binary):
        for start in range(0, len(where), CHUNK_KEYS):
            rows = key_rows[where[start : start + CHUNK_KEYS]]
            chunk = matrix[start : start + CHUNK_KEYS]
            if rows.min() == rows.max():  # the usual case: every key of the chunk in one row
                place_chunk(bits[int(rows[0])], chunk, hashes, size, None)
            else:
                place_chunk(flat, chunk, hashes, size, rows.astype(np.int64) * row_bits)
