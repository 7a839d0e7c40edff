"""The archived timeline: Hudi v8's LSM history in ``.hoodie/timeline/history/``.

Layout (what Hudi 1.x writes and reads)::

    _version_                            the number N of the current manifest (text)
    manifest_N                           JSON {"files": [{"fileName": ..., "fileLen": ...}]}
    <min>_<max>_<level>.parquet          archived instants, rows of HoodieLSMTimelineInstant:
                                         instantTime, completionTime, action, metadata, plan

Only the files the current manifest lists are live. Publishing is: write the new
data file, write ``manifest_<N+1>``, then replace ``_version_`` atomically, so a
reader sees either the old or the new set of files, never a mix. Level-0 files
hold one archival batch each; once ``batch`` files share a level they are merged
into one file of the next level, so reading the whole history stays a handful of
reads however long it grows. Files dropped from the manifest are deleted one
archival later (a reader that read the previous manifest may still be on them).

Readers need the history only for instants that left the active timeline:
incremental reads whose range starts before it, listing the whole history, and a
committing writer whose snapshot predates an archival. The commit path never
reads it; it only checks that ``_version_`` exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.errors import CorruptTableError
from tidemark.format.names import TIMELINE_DIR
from tidemark.storage import Storage
from tidemark.timeline.instant import Action, Instant, State

HISTORY_DIR = f"{TIMELINE_DIR}/history"
VERSION_FILE = f"{HISTORY_DIR}/_version_"

_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ]
)
_INDEX_COLUMNS = ["instantTime", "completionTime", "action"]
_ACTIONS = {a.value: a for a in Action}


@dataclass(frozen=True)
class ArchivedRecord:
    """One instant to archive: the completed instant and the bytes of its files."""

    instant: Instant
    metadata: bytes  # the completed file's content (Avro)
    plan: bytes | None = None  # the requested file's content, for plans (clean, replace)


@dataclass(frozen=True)
class Manifest:
    version: int
    files: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.files


def data_file_name(min_time: str, max_time: str, level: int) -> str:
    return f"{min_time}_{max_time}_{level}.parquet"


def _level(name: str) -> int:
    return int(name.rsplit(".", 1)[0].rsplit("_", 1)[1])


def has_history(storage: Storage) -> bool:
    """Whether anything was ever archived (one existence check: the commit path's only cost)."""
    return storage.exists(VERSION_FILE)


def read_manifest(storage: Storage) -> Manifest:
    if not storage.exists(VERSION_FILE):
        return Manifest(0, ())
    version = int(storage.read_bytes(VERSION_FILE).decode().strip() or 0)
    if version <= 0:
        return Manifest(0, ())
    content = json.loads(storage.read_bytes(f"{HISTORY_DIR}/manifest_{version}").decode())
    return Manifest(version, tuple(f["fileName"] for f in content.get("files", [])))


# Archived files never change once written: their index (instants without metadata) is
# cached per process, keyed by full path.
_INDEX: dict[str, list[Instant]] = {}


def _file_index(storage: Storage, name: str) -> list[Instant]:
    full = storage.full_path(f"{HISTORY_DIR}/{name}")
    cached = _INDEX.get(full)
    if cached is None:
        table = _read_table(storage, name, _INDEX_COLUMNS)
        cached = []
        for t, c, a in zip(*(table.column(n).to_pylist() for n in _INDEX_COLUMNS), strict=True):
            action = _ACTIONS.get(a)
            if action is not None and t and c:
                cached.append(Instant(t, action, State.COMPLETED, c))
        _INDEX[full] = cached
    return cached


@dataclass(frozen=True)
class ArchivedTimeline:
    """The instants of the history, each with the file that holds its metadata."""

    storage: Storage
    instants: tuple[Instant, ...]
    location: dict[tuple[str, Action], str]

    @classmethod
    def load(cls, storage: Storage) -> ArchivedTimeline:
        """The history as its current manifest lists it.

        An archiver in another process may merge the history while it is read and remove the
        files of manifests older than the one before its own: the read then starts again from
        the newer manifest. Raises CorruptTableError if a listed file is missing every time.
        """
        for attempt in range(_LOAD_ATTEMPTS):
            try:
                return cls._load(storage)
            except FileNotFoundError as gone:
                if attempt == _LOAD_ATTEMPTS - 1:
                    missing = getattr(gone, "filename", None) or str(gone)
                    raise CorruptTableError(
                        f"a file of the archived timeline is missing ({missing}) though its manifest "
                        f"lists it: restore {HISTORY_DIR} from a backup",
                        path=HISTORY_DIR,
                    ) from None
        raise AssertionError("unreachable")

    @classmethod
    def _load(cls, storage: Storage) -> ArchivedTimeline:
        manifest = read_manifest(storage)
        found: dict[tuple[str, Action], tuple[Instant, str]] = {}
        # An instant lives in one file of the manifest; were it ever in two, both hold the same bytes.
        for name in manifest.files:
            for inst in _file_index(storage, name):
                found[(inst.requested_time, inst.action)] = (inst, name)
        instants = tuple(sorted((i for i, _ in found.values()), key=lambda i: (i.requested_time, i.action.value)))
        return cls(storage, instants, {k: name for k, (_, name) in found.items()})

    def metadata_bytes(self, instant: Instant) -> bytes:
        name = self.location[(instant.requested_time, instant.action)]
        full = self.storage.full_path(f"{HISTORY_DIR}/{name}")
        contents = _CONTENTS.get(full)
        if contents is None:
            table = _read_table(self.storage, name, ["instantTime", "action", "metadata"])
            contents = {
                (t, a): bytes(data or b"")
                for t, a, data in zip(
                    table.column("instantTime").to_pylist(),
                    table.column("action").to_pylist(),
                    table.column("metadata").to_pylist(),
                    strict=True,
                )
            }
            if len(_CONTENTS) >= 64:
                _CONTENTS.clear()
            _CONTENTS[full] = contents
        return contents[(instant.requested_time, instant.action.value)]


_CONTENTS: dict[str, dict[tuple[str, str], bytes]] = {}
_LOAD_ATTEMPTS = 3


def _read_table(storage: Storage, name: str, columns: Sequence[str] | None = None) -> pa.Table:
    return pq.read_table(pa.BufferReader(storage.read_bytes(f"{HISTORY_DIR}/{name}")), columns=columns)


def _write_data_file(storage: Storage, rows: Sequence[Mapping[str, Any]], level: int) -> str:
    ordered = sorted(rows, key=lambda r: (str(r["instantTime"]), str(r["action"])))
    name = data_file_name(str(ordered[0]["instantTime"]), str(ordered[-1]["instantTime"]), level)
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(list(ordered), schema=_SCHEMA), sink, compression="zstd")
    storage.write_atomic(f"{HISTORY_DIR}/{name}", sink.getvalue().to_pybytes())
    return name


def _publish(storage: Storage, previous: Manifest, files: Sequence[str]) -> Manifest:
    version = previous.version + 1
    sizes = {info.name: info.size for info in storage.list_dir(HISTORY_DIR)}
    entries = [{"fileName": f, "fileLen": sizes.get(f, 0)} for f in files]
    storage.write_atomic(f"{HISTORY_DIR}/manifest_{version}", json.dumps({"files": entries}, indent=2).encode())
    # The switch: readers follow _version_, so the new manifest is live only from here.
    storage.write_atomic(VERSION_FILE, str(version).encode())
    return Manifest(version, tuple(files))


def _remove_unreferenced(storage: Storage, manifest: Manifest, previous: Manifest) -> None:
    keep = set(manifest.files) | set(previous.files)
    for info in storage.list_dir(HISTORY_DIR):
        if _superseded(info.name, keep, previous.version):
            storage.delete(info.path)


def _superseded(name: str, live_files: set[str], oldest_manifest: int) -> bool:
    if name.endswith(".parquet"):
        return name not in live_files
    number = name.removeprefix("manifest_")
    return name.startswith("manifest_") and number.isdigit() and int(number) < oldest_manifest


def append(storage: Storage, records: Sequence[ArchivedRecord], *, batch: int) -> Manifest:
    """Add ``records`` to the history as one level-0 file, then merge full levels.

    Call under the table lock: two archivers must not publish manifests at once.
    """
    previous = read_manifest(storage)
    rows = [
        {
            "instantTime": r.instant.requested_time,
            "completionTime": r.instant.completion_time,
            "action": r.instant.action.value,
            "metadata": r.metadata,
            "plan": r.plan,
            "version": 1,
        }
        for r in records
    ]
    name = _write_data_file(storage, rows, 0)
    manifest = _publish(storage, previous, [*previous.files, name])
    manifest = _compact(storage, manifest, batch)
    _remove_unreferenced(storage, manifest, previous)
    return manifest


def _compact(storage: Storage, manifest: Manifest, batch: int) -> Manifest:
    level = 0
    while True:
        at_level = [f for f in manifest.files if _level(f) == level]
        if len(at_level) < batch:
            if not any(_level(f) > level for f in manifest.files):
                return manifest
            level += 1
            continue
        merged = pa.concat_tables([_read_table(storage, f).cast(_SCHEMA) for f in at_level]).to_pylist()
        name = _write_data_file(storage, merged, level + 1)
        files = [f for f in manifest.files if f not in at_level] + [name]
        manifest = _publish(storage, manifest, files)
        level += 1
