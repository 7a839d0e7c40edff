"""The one way tasks obtain a marker writer: from the write's picklable :class:`MarkerSpec`."""

from __future__ import annotations

from tidemark.markers.base import IOType, MarkerSpec, MarkerType, MarkerWriter
from tidemark.markers.direct import DirectMarkerWriter
from tidemark.markers.fence import WriteFence
from tidemark.storage import Storage


def open_marker_writer(storage: Storage, instant_time: str, spec: MarkerSpec) -> MarkerWriter:
    """A writer for the markers of ``instant_time`` as ``spec`` says (direct, via the server, or
    the in-process batch of :mod:`.batch`).

    With early conflict detection on direct markers, every marker is created only
    after its file group passed the check; with the marker server, the server
    answers a marker request with the conflict its checker found. With a fence, no
    marker is created once the write was rolled back (WriteRolledBackError).
    """
    writer = _open(storage, instant_time, spec)
    return writer if spec.fence is None else _FencedMarkerWriter(writer, storage, spec.fence)


class _FencedMarkerWriter:
    def __init__(self, inner: MarkerWriter, storage: Storage, fence: WriteFence) -> None:
        self.inner = inner
        self.storage = storage
        self.fence = fence

    def create(self, data_file: str, io_type: IOType) -> None:
        self.fence.check(self.storage, data_file)
        self.inner.create(data_file, io_type)

    def close(self) -> None:
        self.inner.close()


def _open(storage: Storage, instant_time: str, spec: MarkerSpec) -> MarkerWriter:
    if spec.type is MarkerType.TIMELINE_SERVER_BASED and spec.batch_id is not None:
        from tidemark.markers.batch import open_batch

        return open_batch(spec.batch_id)
    if spec.type is MarkerType.TIMELINE_SERVER_BASED:
        from tidemark.markers.server import MarkerServerClient

        if not spec.server_url:
            raise ValueError("TIMELINE_SERVER_BASED markers need the marker server's URL")
        return MarkerServerClient(spec.server_url, instant_time)
    detector = None
    if spec.early_conflict is not None:
        from tidemark.markers.early_conflict import ConflictDetector

        detector = ConflictDetector(storage, spec.early_conflict)
    return DirectMarkerWriter(storage, instant_time, detector)
