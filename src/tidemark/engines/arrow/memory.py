"""pyarrow's system allocator for the rewrites that bound a write's peak memory.

A write of many large file groups rewrites them one at a time (engines/arrow/tasks.py) so that
its peak stays near one rewrite's working set. With pyarrow's default pool (mimalloc) that
working set is far above Arrow's live buffers: a rewrite streams its base file through in
slices, and the allocator keeps the pages the slices freed (measured on a 5M-row upsert of ten
27 MiB file groups: RSS grew ~130 MiB per rewrite while Arrow's allocations grew ~45 MiB; the
write's peak 2.0x the rewritten bytes, 1.7x with the system allocator, in the same time).
pyarrow's parquet reader, its compute functions and its tables take the Python layer's default
pool, and the reader offers no argument to choose another, so while such a rewrite runs the
default pool is the system allocator; the pool before is put back after.

The switch is process-wide and shared: nested and concurrent users enter one switch, the last
to leave restores the pool that was the default when the first entered. Buffers keep the pool
that allocated them, so buffers made before, during and after are freed correctly. A process
that set the system pool itself sees no change.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import pyarrow as pa

_lock = threading.Lock()
_users = 0
_before: pa.MemoryPool | None = None


@contextlib.contextmanager
def system_allocator() -> Iterator[None]:
    """While the block runs, pyarrow's default memory pool is the system allocator (see the
    module); on leaving it, its freed pages go back to the system and, once no other user is
    inside, the previous default pool is restored."""
    global _users, _before
    with _lock:
        if _users == 0:
            _before = pa.default_memory_pool()
            pa.set_memory_pool(pa.system_memory_pool())
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                pa.system_memory_pool().release_unused()
                if _before is not None:
                    pa.set_memory_pool(_before)
                _before = None
