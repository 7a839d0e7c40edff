"""Hadoop's 32-bit Murmur hash chains of record keys, compiled.

Hudi's bloom filter hashes every key 30 times, each hash seeded with the one before it
(:mod:`tidemark.format.bloom` states the hash). numpy does that over keys of one byte length
at a time, one array operation per step of the hash: for a UUID key (nine 4-byte blocks) about
forty passes over the keys per hash, 0.3-0.9 s of CPU per million keys. ``_murmur.c`` does
the same steps over chunks of 1,024 keys held in the CPU's cache, in loops the C compiler
vectorises: 0.08-0.15 s per million keys, whatever the key's length. Both give the same
hashes, bit for bit (``tests/test_murmur.py`` holds them to each other, ``tests/test_bloom.py``
both to Hudi's bytes and Hadoop's class).

The C file is built with the package (``setup.py``; an optional extension: an install without
a C compiler goes on) and called through ctypes, which releases the GIL: filters are built on
threads beside the parquet encoding. Without it, or with ``TIDEMARK_COMPILED_HASHING=0``, numpy
serves.
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

_POINTER = ctypes.c_void_p


@dataclass(frozen=True)
class Kernels:
    """The compiled functions (see ``_murmur.c``)."""

    library: ctypes.CDLL

    def place(self, offsets: np.ndarray, data: np.ndarray, order: np.ndarray | None, rows: np.ndarray,
              bits: np.ndarray, hashes: int) -> None:
        """Set each key's ``hashes`` bits in ``bits[rows[key]]`` (a C-contiguous bool matrix: one
        row per filter row, one byte per bit). ``offsets`` and ``data``: :func:`key_buffers`;
        ``order``: :func:`length_order`."""
        if not (bits.flags.c_contiguous and bits.dtype == np.bool_ and bits.ndim == 2):
            raise ValueError("the filter's bits must be a C-contiguous bool matrix")
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        order = _contiguous(order)  # held here while the call reads it
        status = self.library.tidemark_bloom_place(
            offsets.ctypes.data, _data_pointer(data), _order_pointer(order), len(offsets) - 1, rows.ctypes.data,
            bits.ctypes.data, bits.shape[1], hashes)
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
    except (ImportError, OSError) as error:
        log.debug("tidemark.format._murmur could not be loaded (%s): numpy hashes the bloom filters", error)
        return None
    library.tidemark_bloom_place.argtypes = [_POINTER, _POINTER, _POINTER, ctypes.c_int64, _POINTER, _POINTER,
                                             ctypes.c_int64, ctypes.c_int32]
    library.tidemark_bloom_place.restype = ctypes.c_int
    library.tidemark_hash_chains.argtypes = [_POINTER, _POINTER, _POINTER, ctypes.c_int64, _POINTER, ctypes.c_int32]
    library.tidemark_hash_chains.restype = ctypes.c_int
    return Kernels(library)


def kernels() -> Kernels | None:
    """The compiled kernels, or None: numpy hashes."""
    return _load()


def key_buffers(keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of ``keys`` (non-null string or binary values) as the kernels take them:
    each key's start in ``data`` (int64, one more than the keys), and ``data``."""
    if pa.types.is_large_string(keys.type) or pa.types.is_large_binary(keys.type):
        offset_type: Any = np.int64
    elif pa.types.is_string(keys.type) or pa.types.is_binary(keys.type):
        offset_type = np.int32
    else:
        keys = keys.cast(pa.string())
        offset_type = np.int32
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
