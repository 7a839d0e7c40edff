"""Direct markers: the task creates one empty file per data file, before the data file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tidemark.format.names import marker_dir
from tidemark.markers.base import IOType, Marker
from tidemark.storage import Storage

if TYPE_CHECKING:
    from tidemark.markers.early_conflict import ConflictDetector


class DirectMarkerWriter:
    """Creates ``.hoodie/.temp/<instant>/<partition>/<file>.marker.<IO>`` files."""

    def __init__(self, storage: Storage, instant_time: str, detector: ConflictDetector | None = None) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.detector = detector

    def create(self, data_file: str, io_type: IOType) -> None:
        marker = Marker(data_file, io_type)
        path = f"{marker_dir(self.instant_time)}/{marker.name}"

        def create() -> None:
            self.storage.create_if_absent(path)

        if self.detector is None:
            create()
        else:
            self.detector.guarded_create(marker, create)

    def close(self) -> None:
        pass
