"""A read-only, seekable file over ranged reads: what pyarrow needs to read a parquet footer from an
object store without downloading the file.

pyarrow reads a parquet file's footer by asking for the file's size and then for its last bytes
(the footer and its length); a reader of a few columns asks for their column chunks only. Over
:class:`RangedFile` each of those reads is one ranged request (``Range: bytes=a-b``) for exactly
the bytes asked for, so reading the footer of a 100 MB base file moves tens of kilobytes, not
100 MB. Reading a whole file this way would take many requests: read whole files with one GET.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable

# (start, end) -> the bytes [start, end) of the file
FetchRange = Callable[[int, int], bytes]


class RangedFile(io.RawIOBase):
    """A file of ``size`` bytes whose reads are served by ``fetch(start, end)``, one call per read.

    ``name`` names the file in pyarrow's errors. Not thread-safe on its own: wrap it in
    ``pyarrow.PythonFile``, which serialises the calls.
    """

    def __init__(self, fetch: FetchRange, size: int, name: str) -> None:
        super().__init__()
        self._fetch = fetch
        self._size = size
        self._pos = 0
        self.name = name
        self.fetched_bytes = 0  # bytes moved by this file's reads, for callers that account for them
        self.fetches = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def size(self) -> int:
        return self._size

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos, os.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset} in {self.name}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        if end <= self._pos:
            return b""
        data = self._fetch(self._pos, end)
        if len(data) != end - self._pos:  # the object changed or shrank under us
            raise OSError(f"{self.name}: asked for bytes {self._pos}-{end}, got {len(data)} bytes")
        self.fetches += 1
        self.fetched_bytes += len(data)
        self._pos = end
        return data

    def readall(self) -> bytes:
        return self.read(-1)

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.read(len(buffer))
        memoryview(buffer)[: len(data)] = data
        return len(data)


__all__ = ["FetchRange", "RangedFile"]
