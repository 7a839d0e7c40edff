"""Which files a reader sees: latest base file of each live file group.

A data file belongs to the instant named in its file name. It is visible only
if that instant is completed (and, for time travel, not after the ``as_of``
time). File groups replaced by a completed ``replacecommit`` (insert_overwrite,
clustering) disappear from the view from that instant on. Files of pending or
failed instants are never visible, whatever their age.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemark.format.names import parse_base_file_name
from tidemark.storage import Storage
from tidemark.timeline import Action, Instant, Timeline


@dataclass(frozen=True)
class BaseFile:
    partition_path: str
    file_id: str
    instant_time: str
    path: str  # relative to the table base
    size: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    base_files: list[BaseFile] = field(default_factory=list)  # oldest first

    @property
    def latest(self) -> BaseFile:
        return self.base_files[-1]


class FileSystemView:
    """File groups of a table as of one timeline snapshot (and optionally a time-travel point)."""

    def __init__(self, storage: Storage, timeline: Timeline, *, as_of: str | None = None) -> None:
        self.storage = storage
        self.timeline = timeline
        self.as_of = as_of
        self._groups = self._build()

    def _visible_instant(self, instant: Instant | None) -> bool:
        if instant is None:
            return False
        return self.as_of is None or instant.requested_time <= self.as_of

    def _visible_file(self, instant_time: str) -> bool:
        """Whether a data file written by ``instant_time`` is visible: its instant completed
        (or was archived, which it only is once completed) and is not after ``as_of``."""
        owner = self.timeline.completed_instant(instant_time)
        if owner is not None:
            return self._visible_instant(owner)
        return self.timeline.is_archived(instant_time) and (self.as_of is None or instant_time <= self.as_of)

    def _build(self) -> dict[tuple[str, str], FileGroup]:
        # Only replacecommits change which file groups exist; plain commits need no metadata read.
        replaced: set[tuple[str, str]] = set()
        for inst in self.timeline.completed_data_instants:
            if inst.action is Action.REPLACE_COMMIT and self._visible_instant(inst):
                for partition, ids in self.timeline.commit_metadata(inst).replaced_file_ids.items():
                    replaced.update((partition, f) for f in ids)

        found: dict[tuple[str, str, str], list[BaseFile]] = {}
        for info in self.storage.walk_files(""):
            parsed = parse_base_file_name(info.name)
            if parsed is None:
                continue
            if not self._visible_file(parsed.instant_time):
                continue
            partition = info.path.rsplit("/", 1)[0] if "/" in info.path else ""
            if (partition, parsed.file_id) in replaced:
                continue
            base = BaseFile(partition, parsed.file_id, parsed.instant_time, info.path, info.size)
            found.setdefault((partition, parsed.file_id, parsed.instant_time), []).append(base)

        groups: dict[tuple[str, str], FileGroup] = {}
        for (partition, file_id, instant_time), bases in found.items():
            if len(bases) > 1:
                # Leftovers of a failed task attempt next to the real file: the commit says which counts.
                writer = self.timeline.completed_instant(instant_time)
                if writer is not None:  # archived writers' leftovers were removed when they committed
                    recorded = {s.path for s in self.timeline.commit_metadata(writer).write_stats}
                    bases = [b for b in bases if b.path in recorded] or bases[:1]
            group = groups.setdefault((partition, file_id), FileGroup(partition, file_id))
            group.base_files.append(bases[0])
        for group in groups.values():
            group.base_files.sort(key=lambda b: b.instant_time)
        return groups

    def file_groups(self, partitions: Iterable[str] | None = None) -> list[FileGroup]:
        wanted = set(partitions) if partitions is not None else None
        return [g for g in self._groups.values() if wanted is None or g.partition_path in wanted]

    def latest_base_files(self, partitions: Iterable[str] | None = None) -> list[BaseFile]:
        return [g.latest for g in self.file_groups(partitions)]

    def partitions(self) -> list[str]:
        return sorted({g.partition_path for g in self._groups.values()})

    def group(self, partition: str, file_id: str) -> FileGroup | None:
        return self._groups.get((partition, file_id))
