"""The one way tasks obtain a marker writer: from the write's picklable :class:`MarkerSpec`."""

from __future__ import annotations

from tidemark.markers.base import MarkerSpec, MarkerType, MarkerWriter
from tidemark.markers.direct import DirectMarkerWriter
from tidemark.storage import Storage


def open_marker_writer(storage: Storage, instant_time: str, spec: MarkerSpec) -> MarkerWriter:
    """A writer for the markers of ``instant_time`` as ``spec`` says (direct or via the server).

    With early conflict detection on direct markers, every marker is created only
    after its file group passed the check; with the marker server, the server
    answers a marker request with the conflict its checker found.
    """
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
