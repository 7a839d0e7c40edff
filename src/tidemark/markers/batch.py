"""Markers of a write whose tasks are threads of the writing process, kept as the marker server keeps them.

When the tasks run in the process that writes the commit (the Arrow engine), no
server stands between them and the file system: the markers go to ``MARKERS<n>``
files next to ``MARKERS.type`` (``TIMELINE_SERVER_BASED``), the layout Hudi and
:mod:`tidemark.markers.listing` read back, written by the task's own thread. The
writer also **declares** the files it has planned before any task starts: the
marker of every file group it will rewrite or create goes into one ``MARKERS``
file, and a task's own request for such a marker then touches nothing. A file
that was declared but never written is harmless: rollback and the commit's clean-up
of partial files delete what exists of the marked files.

Why: a direct marker costs a folder per partition and a file per data file under
``.hoodie/.temp/<instant>/``; on a local disk each is a new inode (0.4 to 1 ms
each on this project's test machines), for a write of a hundred small file
groups a tenth of its time, and as many unlinks when the commit deletes them.

A marker is on the file system before :meth:`MarkerBatch.declare` or
:meth:`MarkerBatch.create` returns, so a crash loses no marker of a file that
may exist. The ``MARKERS<n>`` files are rewritten whole and atomically (temporary
file, rename), at most ``max_files`` of them, as the server's are.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable

from tidemark.markers.base import IOType, Marker
from tidemark.markers.listing import write_markers_file, write_markers_type
from tidemark.storage import Storage

_open_batches: dict[str, MarkerBatch] = {}
_registry_lock = threading.Lock()


class MarkerBatch:
    """The markers of one write, written by the threads that ask for them; start before the
    tasks, stop after them. Thread-safe."""

    def __init__(self, storage: Storage, instant_time: str, *, max_files: int = 20) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.max_files = max(1, max_files)
        self.batch_id = uuid.uuid4().hex  # how a task's MarkerSpec names this batch
        self._markers: set[Marker] = set()
        self._file_contents: list[list[str]] = []
        self._lock = threading.Lock()  # one writer of the MARKERS files at a time
        self.files_written = 0

    def start(self) -> MarkerBatch:
        write_markers_type(self.storage, self.instant_time)
        with _registry_lock:
            _open_batches[self.batch_id] = self
        return self

    def stop(self) -> None:
        with _registry_lock:
            _open_batches.pop(self.batch_id, None)

    def __enter__(self) -> MarkerBatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def declare(self, markers: Iterable[Marker]) -> None:
        """Record ``markers`` (those not yet recorded) in one write of one ``MARKERS`` file;
        returns once it is on the file system. Raises what the storage raises."""
        with self._lock:
            fresh = sorted({m for m in markers if m not in self._markers}, key=lambda m: m.name)
            if not fresh:
                return
            # A new file while fewer than max_files exist (a create each), then the emptiest
            # is rewritten with its lines and the new ones.
            if len(self._file_contents) < self.max_files:
                index = len(self._file_contents)
                self._file_contents.append([])
            else:
                index = min(range(self.max_files), key=lambda i: len(self._file_contents[i]))
            lines = self._file_contents[index] + [m.name for m in fresh]
            write_markers_file(self.storage, self.instant_time, index, lines)
            self._file_contents[index] = lines
            self._markers.update(fresh)
            self.files_written += 1

    # -- the MarkerWriter of a task ------------------------------------------------------------
    def create(self, data_file: str, io_type: IOType) -> None:
        self.declare([Marker(data_file, io_type)])

    def close(self) -> None:
        pass


def open_batch(batch_id: str) -> MarkerBatch:
    """The running batch ``batch_id`` of this process; ValueError if there is none (a task of an
    in-process batch ran in another process, or after its write ended)."""
    with _registry_lock:
        batch = _open_batches.get(batch_id)
    if batch is None:
        raise ValueError(f"no marker batch {batch_id} runs in this process: its write has ended, or the task "
                         "runs in another process (in-process markers are for the Arrow engine's threads)")
    return batch


def declare_markers(batch_id: str | None, markers: Iterable[Marker]) -> None:
    """Declare ``markers`` to the in-process batch ``batch_id``; nothing if the write keeps its
    markers otherwise (``batch_id`` None: direct markers or the marker server)."""
    if batch_id is not None:
        open_batch(batch_id).declare(markers)
