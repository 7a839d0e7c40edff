"""The file-system view's listing from the metadata table's ``files`` partition.

When the table declares ``files`` in ``hoodie.table.metadata.partitions`` (and not among the
inflight ones) and the metadata table is not behind the data timeline
(:func:`~tidemark.metadata.maintain.behind_data_timeline`: every mirrored data instant that
completed since the metadata table's first instant has its completed deltacommit, and no
rollback or restore is pending), the view takes its files from there and lists no folder.
Otherwise, or when the partition cannot be read, it lists the partition folders
(:class:`~tidemark.fsview.listing.FolderListing`).

Order matters: the caller loads the data timeline first, then this reads the metadata
table. Every data instant completed in that timeline had its deltacommit completed before
it, so its files are in what is read here; files of instants that completed later, or never,
are in the listing perhaps, but the view keeps only files of the timeline's completed
instants. Cost on an object store: ``hoodie.properties`` (1 GET), the metadata timeline and
the partition folder (2 LISTs), the base HFile and the log files since its last compaction
(1 GET each; :mod:`tidemark.metadata.compact` bounds their number).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from tidemark.concurrency.writer_settings import read_properties
from tidemark.errors import TidemarkError
from tidemark.fsview import FileSystemView
from tidemark.fsview.listing import FolderListing, PartitionListing
from tidemark.metadata.disable import INFLIGHT_PARTITIONS_KEY, PARTITIONS_KEY
from tidemark.metadata.files import FILES_DIR, HFILE_NAME_RE, FilesListing, read_files_partition
from tidemark.metadata.files_writer import TIMELINE
from tidemark.metadata.maintain import FILES_PARTITION, behind_data_timeline
from tidemark.storage import FileInfo, Storage
from tidemark.timeline import Action, State, Timeline
from tidemark.timeline.instant import parse_instant_file_name

log = logging.getLogger(__name__)
PARTITION_FIELDS_KEY = "hoodie.table.partition.fields"


class MetadataListing:
    """The files of every partition, as the ``files`` partition lists them."""

    source = "metadata table"

    def __init__(self, listing: FilesListing, *, present_in: Storage | None = None) -> None:
        self._files = listing.files
        self._partitions = sorted(set(listing.partitions) | set(listing.files))
        self._present_in = present_in

    def all_partitions(self) -> Sequence[str]:
        return self._partitions

    def files(self, partition: str) -> list[FileInfo]:
        """The partition's files as the metadata table lists them. With ``present_in`` (a local
        table: one directory read, cheaper than a file's HFile block) only those still in the
        folder: a file deleted by hand then reaches the view's check of the latest slices
        (MissingDataFileError) instead of failing when opened. On an object store the listing
        is trusted as Hudi trusts it (no LIST)."""
        entries: Mapping[str, int] = self._files.get(partition, {})
        if self._present_in is not None and entries:
            try:
                present = {f.name for f in self._present_in.list_dir(partition)}
            except FileNotFoundError:
                present = set()
            entries = {name: size for name, size in entries.items() if name in present}
        prefix = f"{partition}/" if partition else ""
        return [FileInfo(f"{prefix}{name}", size, 0.0) for name, size in entries.items()]


def _declares_files(props: Mapping[str, str]) -> bool:
    declared = {p.strip() for p in (props.get(PARTITIONS_KEY) or "").split(",")}
    inflight = {p.strip() for p in (props.get(INFLIGHT_PARTITIONS_KEY) or "").split(",")}
    return FILES_PARTITION in declared and FILES_PARTITION not in inflight


def metadata_listing(storage: Storage, timeline: Timeline,
                     props: Mapping[str, str] | None = None) -> tuple[MetadataListing | None, str]:
    """The ``files`` partition's listing if it can be trusted against ``timeline`` (loaded
    before this is called), else None; and why not ("" when trusted). ``props``: the table's
    ``hoodie.properties`` if the caller read them already."""
    if timeline.layout_v1 or timeline.legacy_log_names:
        return None, "a version 6 table's metadata table is not read"
    if not _declares_files(read_properties(storage) if props is None else props):
        return None, "no files partition declared"
    completed_any: dict[str, str] = {}
    deltas: dict[str, str] = {}
    for name in storage.list_names(TIMELINE):
        instant = parse_instant_file_name(name)
        if instant is None or instant.state is not State.COMPLETED or not instant.completion_time:
            continue
        completed_any[instant.requested_time] = instant.completion_time
        if instant.action is Action.DELTA_COMMIT:
            deltas[instant.requested_time] = instant.completion_time
    problem = behind_data_timeline(timeline, deltas, min(completed_any.values(), default=None))
    if problem is not None:
        return None, problem
    # An interrupted rollback or restore deleted files it has not yet recorded as deleted.
    if timeline.filter(actions=[Action.ROLLBACK, Action.RESTORE], states=[State.REQUESTED, State.INFLIGHT]):
        return None, "a rollback or restore is pending on the data timeline"
    names = storage.list_names(FILES_DIR)
    if len({n.split("_", 1)[0] for n in names if HFILE_NAME_RE.match(n)}) != 1:
        return None, "the files partition has not exactly one file group"
    try:
        listing = read_files_partition(storage, completed_any, names)
    except (FileNotFoundError, TidemarkError) as exc:  # compacted or removed meanwhile, or unreadable
        return None, f"the files partition could not be read ({exc})"
    if listing is None:
        return None, "the files partition has no completed base file"
    return MetadataListing(listing, present_in=storage if storage.is_local else None), ""


def table_listing(storage: Storage, timeline: Timeline, *, use_metadata: bool = True) -> PartitionListing:
    """Where a view over ``timeline`` lists files: the metadata table when it can be trusted
    (and ``use_metadata``), else the partition folders (a non-partitioned table's one
    partition is ``""``; a partitioned table's partitions are listed as they are asked for,
    and asking for all of them walks the table)."""
    props = read_properties(storage)
    if use_metadata:
        found, why = metadata_listing(storage, timeline, props)
        if found is not None:
            return found
        log.debug("listing partition folders, not the metadata table: %s", why)
    partitioned = bool((props.get(PARTITION_FIELDS_KEY) or "").strip())
    return FolderListing(storage, None if partitioned else [""])


def table_view(storage: Storage, timeline: Timeline, *, as_of: str | None = None) -> FileSystemView:
    """A file-system view over ``timeline`` that lists only what it is asked about, through
    :func:`table_listing` (the commit path's, the cleaner's and the planners' view)."""
    return FileSystemView(storage, timeline, as_of=as_of, listing=table_listing(storage, timeline))
