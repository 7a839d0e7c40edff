"""Hadoop's 32-bit Murmur hash chains of record keys, compiled with numba.

Hudi's bloom filter hashes every key 30 times, each hash seeded with the one before it
(:mod:`tidemark.format.bloom` states the hash). numpy does that over keys of one byte length
at a time, one array operation per step of the hash: for a UUID key (nine 4-byte blocks) about
forty passes over the keys per hash, 0.9 s of CPU per million keys. The kernels here do the
same steps over chunks of 1,024 keys held in the CPU's cache, in one compiled loop per step
that the compiler turns into vector instructions: 0.15 s per million keys, whatever the key's
length. Both give the same hashes, bit for bit (``tests/test_bloom_filter.py`` holds them to
each other and to Hudi's bytes).

Compiled code costs each process about 0.3 s once (numba's import and first call; the machine
code itself is cached on disk after the first compile, which takes a few seconds once per
machine). So the kernels are loaded on a thread of their own, only once a process has hashed
:data:`LOAD_AT_KEYS` keys, and used once loaded: a process that writes a few small batches
never loads them, and until they are loaded the numpy code serves. Without numba
(``pip install numba`` is part of tidemark's requirements, but a platform may lack its
wheels) numpy serves always.
"""

from __future__ import annotations

import logging
import os
import threading
from types import ModuleType
from typing import Any

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

# Keys a process hashes before the kernels are worth loading (a million keys save 0.1-0.8 s
# of CPU, depending on their length; loading costs ~0.3 s once per process).
LOAD_AT_KEYS = 100_000

_lock = threading.Lock()
_hashed = 0  # keys hashed by this process so far (a count that may miss a few: threads add to it)
_kernels: ModuleType | None = None
_loader: threading.Thread | None = None
_unavailable = os.environ.get("TIDEMARK_COMPILED_HASHING", "1") == "0"


def kernels(keys: int) -> ModuleType | None:
    """The compiled kernels (:mod:`tidemark.format._murmur_kernels`) if they are loaded, for
    hashing ``keys`` keys; once the process has hashed :data:`LOAD_AT_KEYS` keys, loading them
    starts in the background. Never waits: None means "use numpy this time"."""
    global _loader, _hashed
    if _kernels is not None or _unavailable:
        return _kernels
    _hashed += keys
    if _hashed >= LOAD_AT_KEYS and _loader is None:
        with _lock:
            if _loader is None:
                _loader = threading.Thread(target=_load, name="tidemark-murmur-load")
                _loader.start()
    return None


def load() -> ModuleType | None:
    """Load the kernels now, in this thread (None without numba); for tests and benchmarks."""
    kernels(LOAD_AT_KEYS)
    _wait_for_loader()
    return _kernels


def _load() -> None:
    global _kernels, _unavailable
    try:
        from tidemark.format import _murmur_kernels as compiled

        compiled.warm_up()
        _kernels = compiled
    except Exception as error:  # noqa: BLE001 - numba missing or unable to compile: numpy serves
        log.debug("compiled Murmur hashing unavailable, numpy serves: %s", error)
        _unavailable = True


def _wait_for_loader() -> None:
    loader = _loader
    if loader is not None and loader is not threading.current_thread():
        loader.join()


# A process forked while the loader thread imports numba would inherit import locks held by a
# thread it does not have: the fork waits for the loader (at most its ~0.3 s). (The loader is
# not a daemon thread: a process that ends while it loads waits for it rather than tearing
# down the compiler under it.)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_wait_for_loader)


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
