"""Reading markers back, whatever their type: for rollback, partial-file clean-up and conflict checks
(and the layout of the ``MARKERS`` files, written by the marker server and by in-process batches).

A write's markers live in ``.hoodie/.temp/<instant>/``: direct markers as empty
files in partition folders, server-based ones as lines of ``MARKERS<n>`` files
next to ``MARKERS.type``. A write may hold both (a task that fell back), so
every reader here takes the union.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable

from tidemark.format.names import marker_dir
from tidemark.markers.base import Marker, MarkerType, parse_marker
from tidemark.storage import Storage

MARKERS_TYPE_FILE = "MARKERS.type"
_MARKERS_FILE = re.compile(r"^MARKERS\d+$")

# Server-based marker files are rewritten whole (atomically) by the marker server; a
# reader re-parses one only when its size or modification time changed.
_parsed: dict[str, tuple[int, int, tuple[Marker, ...]]] = {}
_parsed_lock = threading.Lock()


def write_markers_type(storage: Storage, instant_time: str) -> None:
    """``MARKERS.type`` of a write whose markers are lines of ``MARKERS<n>`` files (Hudi reads
    the type before the markers)."""
    storage.write_atomic(f"{marker_dir(instant_time)}/{MARKERS_TYPE_FILE}",
                         MarkerType.TIMELINE_SERVER_BASED.value.encode())


def write_markers_file(storage: Storage, instant_time: str, index: int, names: list[str]) -> None:
    """``MARKERS<index>`` holding the marker ``names``, one per line, replaced whole and
    atomically: a reader in another process never sees it torn. Written through to the file
    system before it returns (a rollback after this process died reads it); not fsynced, like
    direct markers: that would cost a disk flush for a crash of the whole machine, which the
    page cache already survives as far as any process is concerned."""
    storage.write_atomic(f"{marker_dir(instant_time)}/MARKERS{index}", ("\n".join(names) + "\n").encode())


def is_server_marker_file(name: str) -> bool:
    return bool(_MARKERS_FILE.match(name))


def _read_marker_file(storage: Storage, path: str) -> tuple[Marker, ...]:
    full = storage.full_path(path)
    if not storage.is_local:  # no cheap stat on object stores: read the file each time
        try:
            text = storage.read_bytes(path).decode()
        except FileNotFoundError:
            return ()
        return tuple(m for m in map(parse_marker, text.splitlines()) if m is not None)
    try:
        st = os.stat(full)
        with _parsed_lock:
            cached = _parsed.get(full)
        if cached is not None and cached[0] == st.st_mtime_ns and cached[1] == st.st_size:
            return cached[2]
        text = storage.read_bytes(path).decode()
    except FileNotFoundError:  # the write completed or was rolled back meanwhile
        return ()
    markers = tuple(m for m in map(parse_marker, text.splitlines()) if m is not None)
    with _parsed_lock:
        _parsed[full] = (st.st_mtime_ns, st.st_size, markers)
    return markers


def server_markers(storage: Storage, instant_time: str) -> list[Marker]:
    """Markers the marker server of ``instant_time`` flushed (empty for direct markers)."""
    root = marker_dir(instant_time)
    out: list[Marker] = []
    for name in storage.list_names(root):
        if is_server_marker_file(name):
            out.extend(_read_marker_file(storage, f"{root}/{name}"))
    return out


def read_markers(storage: Storage, instant_time: str) -> list[Marker]:
    """Every marker of the write ``instant_time``, direct and server-based."""
    root = marker_dir(instant_time)
    found: set[Marker] = set()
    for info in storage.walk_files(root, skip_hidden_dirs=False):
        marker = parse_marker(info.path[len(root) + 1 :])
        if marker is not None:
            found.add(marker)
    found.update(server_markers(storage, instant_time))
    return sorted(found, key=lambda m: m.name)


def markers_in_partitions(storage: Storage, instant_time: str, partitions: Iterable[str]) -> list[Marker]:
    """The markers of ``instant_time`` in the given partitions, listing only their folders.

    This is what keeps an early conflict check cheap: a writer about to write in
    partition P looks at P's marker folder of each other active writer, not at
    every marker they hold. (Server-based markers are read whole, once, from the
    few MARKERS files; unchanged files are not parsed again.)
    """
    root = marker_dir(instant_time)
    wanted = set(partitions)
    out = []
    for partition_path in sorted(wanted):
        folder = f"{root}/{partition_path}" if partition_path else root
        for name in storage.list_names(folder):
            marker = parse_marker(name)
            if marker is not None:
                data_file = f"{partition_path}/{marker.data_file}" if partition_path else marker.data_file
                out.append(Marker(data_file, marker.io_type))
    out.extend(m for m in server_markers(storage, instant_time) if m.partition_path in wanted)
    return out


def markers_in_partition(storage: Storage, instant_time: str, partition_path: str) -> list[Marker]:
    """The markers of ``instant_time`` in one partition (see :func:`markers_in_partitions`)."""
    return markers_in_partitions(storage, instant_time, [partition_path])


def marked_data_files(storage: Storage, instant_time: str) -> list[str]:
    """Table-relative paths of every data file the write marked (whether or not it exists)."""
    return sorted({m.data_file for m in read_markers(storage, instant_time)})


def delete_markers(storage: Storage, instant_time: str) -> None:
    storage.delete_tree(marker_dir(instant_time))
