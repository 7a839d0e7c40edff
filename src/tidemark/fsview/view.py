"""Which files a reader sees: the file slices of each live file group.

A data file belongs to the instant named in its file name. It is visible only
if that instant is completed (and, for time travel, not after the ``as_of``
time). File groups replaced by a completed ``replacecommit`` (insert_overwrite,
clustering) disappear from the view from that instant on. Files of pending or
failed instants are never visible, whatever their age.

Merge-on-read: a file slice is a base file plus the log files written on top of
it. A log file joins the slice with the greatest base instant time at or before
the *completion* time of the deltacommit that wrote it (Hudi 1.x and hudi-rs
do the same for table version 8). So a log whose deltacommit started before a
compaction was planned but completed after it lands on the compacted base:
compaction never loses a late log. :func:`order_log_files` fixes the order in
which a slice's logs are merged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tidemark.errors import InstantNotFoundError, MissingDataFileError
from tidemark.format.log_file import parse_log_file_name
from tidemark.format.names import TIMELINE_DIR, parse_base_file_name
from tidemark.fsview.legacy_logs import legacy_log_writer
from tidemark.fsview.listing import PartitionListing
from tidemark.storage import FileInfo, Storage
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


@dataclass(frozen=True)
class LogFile:
    partition_path: str
    file_id: str
    instant_time: str  # requested time of the deltacommit that wrote it
    completion_time: str
    version: int
    write_token: str
    path: str  # relative to the table base
    size: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def order_log_files(logs: Iterable[LogFile]) -> list[LogFile]:
    """The order in which a slice's logs are merged (a later log wins ties of the merger).

    By the *completion* time of the deltacommit that wrote each log, then requested
    time, version and write token. Under non-blocking concurrency control two
    deltacommits may write the same file group at once; the one that completed
    later is the later write. Under optimistic concurrency control two writes of one
    file group never overlap, so this is also their requested-time order, the order
    hudi-rs uses.
    """
    return sorted(logs, key=lambda f: (f.completion_time, f.instant_time, f.version, f.write_token))


@dataclass
class FileSlice:
    base: BaseFile
    logs: list[LogFile] = field(default_factory=list)  # in merge order

    @property
    def base_instant_time(self) -> str:
        return self.base.instant_time


@dataclass
class FileGroup:
    partition_path: str
    file_id: str
    base_files: list[BaseFile] = field(default_factory=list)  # oldest first
    slices: list[FileSlice] = field(default_factory=list)  # one per base file, oldest first

    @property
    def latest(self) -> BaseFile:
        return self.base_files[-1]

    @property
    def latest_slice(self) -> FileSlice:
        return self.slices[-1]

    def add_log(self, log: LogFile) -> bool:
        """Put ``log`` in its slice: the latest whose base instant is not after the log's completion."""
        chosen = None
        for s in self.slices:
            if s.base_instant_time <= log.completion_time:
                chosen = s
        if chosen is None:  # a log older than every visible base file: nothing to apply it to
            return False
        chosen.logs = order_log_files([*chosen.logs, log])
        return True


_Written = tuple[tuple[str, str], "str | None", str]
_WRITTEN: dict[str, tuple[_Written, ...]] = {}
_WRITTEN_LIMIT = 20_000


class FileSystemView:
    """File groups of a table as of one timeline snapshot (and optionally a time-travel point).

    Without ``listing`` the whole table is walked once, here (every file group of every
    partition). With a :class:`~tidemark.fsview.listing.PartitionListing` nothing is listed
    until asked, and then only the partitions asked about (each once): the commit path and
    planning ask for the partitions they touch; asking for all partitions lists those the
    listing knows, or walks the table when it knows none. A file the timeline says is missing
    is reported (MissingDataFileError) when its partition is first asked about.
    """

    def __init__(
        self, storage: Storage, timeline: Timeline, *, as_of: str | None = None,
        listing: PartitionListing | None = None,
    ) -> None:
        self.storage = storage
        self.timeline = timeline
        self.as_of = as_of
        self.listing = listing
        self._history: dict[str, Instant] | None = None
        self._replaced = self._replaced_groups()
        self._groups: dict[tuple[str, str], FileGroup] = {}
        self._loaded: set[str] = set()
        self._complete = False
        if listing is None:
            self._load_all()

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

    def _replaced_groups(self) -> set[tuple[str, str]]:
        # Only replacecommits change which file groups exist; plain commits need no metadata read.
        replaced: set[tuple[str, str]] = set()
        for inst in self.timeline.completed_data_instants:
            if inst.action is Action.REPLACE_COMMIT and self._visible_instant(inst):
                for partition, ids in self.timeline.commit_metadata(inst).replaced_file_ids.items():
                    replaced.update((partition, f) for f in ids)
        return replaced

    def _load_all(self) -> None:
        if self._complete:
            return
        known = self.listing.all_partitions() if self.listing is not None else None
        if known is not None:
            self._load(known)
        else:  # no listing knows the partitions: one walk of the table finds them all
            self._add(self.storage.walk_files(""), None)
            self._loaded.update(g.partition_path for g in self._groups.values())
        self._complete = True

    def _load(self, partitions: Iterable[str]) -> None:
        wanted = sorted(set(partitions) - self._loaded)
        if not wanted or self._complete:
            return
        assert self.listing is not None  # a view without a listing loads everything at once
        files = [info for p in wanted for info in self.listing.files(p)]
        self._add(files, set(wanted))
        self._loaded.update(wanted)

    def _add(self, infos: Iterable[FileInfo], partitions: set[str] | None) -> None:
        """Add the file groups of the listed files (of ``partitions``; None: all of the table)."""
        replaced = self._replaced
        found: dict[tuple[str, str, str], list[BaseFile]] = {}
        logs: list[LogFile] = []
        listed: set[str] = set()
        listed_bases: dict[tuple[str, str], set[str]] = {}  # every base file's instant, visible or not
        for info in infos:
            listed.add(info.path)
            parsed = parse_base_file_name(info.name)
            if parsed is not None:
                partition = info.path.rsplit("/", 1)[0] if "/" in info.path else ""
                listed_bases.setdefault((partition, parsed.file_id), set()).add(parsed.instant_time)
            if parsed is None:
                log = self._visible_log(info.path, info.name, info.size)
                if log is not None and (log.partition_path, log.file_id) not in replaced:
                    logs.append(log)
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
            group.slices = [FileSlice(b) for b in group.base_files]
        for log in logs:
            owner_group = groups.get((log.partition_path, log.file_id))
            if owner_group is not None:
                owner_group.add_log(log)
        self._check_latest_files(groups, replaced, listed, listed_bases, partitions)
        self._groups.update(groups)

    def _check_latest_files(
        self,
        groups: dict[tuple[str, str], FileGroup],
        replaced: set[tuple[str, str]],
        listed: set[str],
        listed_bases: dict[tuple[str, str], set[str]],
        partitions: set[str] | None = None,
    ) -> None:
        """Raise MissingDataFileError if a file of the latest slice of a file group, as the
        timeline's commit metadata records it, is not in the listing.

        Without this a file deleted by hand makes the view serve the group's previous version
        (or drop the group) with no error. Only the latest slice is checked: clean removes older
        slices and whole replaced file groups, never the latest slice of a live group, and a
        rollback or restore unpublishes an instant before deleting its files. Compared against
        the listing the view made anyway: no file is looked up on its own. A newer base file
        of the group whose instant is not pending means the checked one was superseded (time
        travel, incremental reads), so it may be cleaned. A finding is checked again against a
        fresh timeline, for a writer or replacecommit that completed (and a clean that followed)
        after this view's timeline was loaded.
        """
        missing = self._missing_latest_files(self.timeline, groups, replaced, listed, listed_bases, partitions)
        if not missing:
            return
        fresh = self.timeline.reload()
        # A replacecommit that completed meanwhile lets clean remove the groups it replaced.
        replaced_now = set(replaced)
        for inst in fresh.completed_data_instants:
            if inst.action is Action.REPLACE_COMMIT and not self.timeline.is_completed(inst.requested_time):
                try:
                    replacing = fresh.commit_metadata(inst).replaced_file_ids
                except (FileNotFoundError, InstantNotFoundError):  # gone meanwhile (a restore): nothing to add
                    continue
                for partition, ids in replacing.items():
                    replaced_now.update((partition, f) for f in ids)
        missing = [
            m for m in self._missing_latest_files(fresh, groups, replaced_now, listed, listed_bases, partitions)
            if fresh.is_completed(m[1].requested_time) and not self.storage.exists(m[0])
        ]
        if missing:
            path, instant = missing[0]
            raise MissingDataFileError(
                path,
                instant_time=instant.requested_time,
                instant_file=f"{TIMELINE_DIR}/{instant.file_name}",
                more=len(missing) - 1,
            )

    def _missing_latest_files(
        self,
        timeline: Timeline,
        groups: dict[tuple[str, str], FileGroup],
        replaced: set[tuple[str, str]],
        listed: set[str],
        listed_bases: dict[tuple[str, str], set[str]],
        partitions: set[str] | None = None,
    ) -> list[tuple[str, Instant]]:
        pending = {i.requested_time for i in timeline.pending}
        expected: dict[tuple[str, str], tuple[str, str, Instant]] = {}  # latest base: (time, path, writer)
        logs: list[tuple[tuple[str, str], str, Instant]] = []
        for inst in self.timeline.completed_data_instants:
            if not self._visible_instant(inst) or self.timeline.is_archived(inst.requested_time):
                continue
            try:
                files = self._written_files(inst)
            except FileNotFoundError:  # archived or rolled back since the timeline was loaded
                continue
            for key, base_time, path in files:
                if key in replaced or (partitions is not None and key[0] not in partitions):
                    continue
                if base_time is None:
                    if path not in listed:
                        logs.append((key, path, inst))
                    continue
                current = expected.get(key)
                if current is None or base_time > current[0]:
                    expected[key] = (base_time, path, inst)

        def superseded(key: tuple[str, str], instant_time: str) -> bool:
            return any(t > instant_time and t not in pending for t in listed_bases.get(key, ()))

        missing = [
            (path, inst)
            for key, (instant_time, path, inst) in expected.items()
            if path not in listed and not superseded(key, instant_time)
        ]
        for key, path, inst in logs:
            group = groups.get(key)
            if group is None:  # a file group of logs only (Hudi writes them): no slice to check
                continue
            latest = group.latest.instant_time
            if (inst.completion_time or "") >= latest and not superseded(key, latest):
                missing.append((path, inst))
        return missing

    def _written_files(self, inst: Instant) -> tuple[_Written, ...]:
        """The data files a completed instant wrote: ((partition, file id), base instant time or
        None for a log file, path). Parsed once per process: completed instants never change."""
        full = self.storage.full_path(f"{TIMELINE_DIR}/{inst.file_name}")
        cached = _WRITTEN.get(full)
        if cached is None:
            out: list[_Written] = []
            for stat in self.timeline.commit_metadata(inst).write_stats:
                if not stat.path:
                    continue
                partition, _, name = stat.path.rpartition("/")
                # The file id in the name, as the listing keys file groups.
                base = parse_base_file_name(name)
                log = parse_log_file_name(name) if base is None else None
                if base is not None:
                    out.append(((partition, base.file_id), base.instant_time, stat.path))
                elif log is not None:
                    out.append(((partition, log.file_id), None, stat.path))
            cached = tuple(out)
            if len(_WRITTEN) >= _WRITTEN_LIMIT:
                _WRITTEN.clear()
            _WRITTEN[full] = cached
        return cached

    def _visible_log(self, path: str, name: str, size: int) -> LogFile | None:
        if not name.startswith("."):
            return None
        parsed = parse_log_file_name(name)
        if parsed is None:
            return None
        owner = self.timeline.completed_instant(parsed.instant_time)
        if self.timeline.legacy_log_names:
            owner = legacy_log_writer(self.timeline, name) or owner
        if owner is None and self.timeline.is_archived(parsed.instant_time):
            # Archival keeps deltacommits whose logs are uncompacted; an older table's may be
            # archived anyway: the history still knows when they completed.
            owner = self._archived_instant(parsed.instant_time)
        if not self._visible_instant(owner):
            return None
        assert owner is not None and owner.completion_time is not None
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        return LogFile(partition, parsed.file_id, parsed.instant_time, owner.completion_time, parsed.version,
                       parsed.write_token, path, size)

    def _archived_instant(self, instant_time: str) -> Instant | None:
        if self._history is None:  # read once per view, and only for logs of archived instants
            self._history = {i.requested_time: i for i in self.timeline.with_history().completed}
        return self._history.get(instant_time)

    def file_groups(self, partitions: Iterable[str] | None = None) -> list[FileGroup]:
        if partitions is None:
            self._load_all()
            return list(self._groups.values())
        wanted = set(partitions)
        self._load(wanted)
        return [g for g in self._groups.values() if g.partition_path in wanted]

    def latest_base_files(self, partitions: Iterable[str] | None = None) -> list[BaseFile]:
        return [g.latest for g in self.file_groups(partitions)]

    def latest_file_slices(self, partitions: Iterable[str] | None = None) -> list[FileSlice]:
        return [g.latest_slice for g in self.file_groups(partitions)]

    def listed_partitions(self) -> set[str] | None:
        """The partitions this view has listed so far (None: all of the table's)."""
        return None if self._complete else set(self._loaded)

    def known_partitions(self) -> list[str] | None:
        """Every partition of the table if known without a walk of it (listed already, or by
        the metadata table), else None."""
        if self._complete:
            return self.partitions()
        known = self.listing.all_partitions() if self.listing is not None else None
        return None if known is None else sorted(known)

    def partitions(self) -> list[str]:
        self._load_all()
        return sorted({g.partition_path for g in self._groups.values()})

    def group(self, partition: str, file_id: str) -> FileGroup | None:
        self._load([partition])
        return self._groups.get((partition, file_id))
