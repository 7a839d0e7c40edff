"""Markers: a write's durable record of every data file it may create, kept before the file.

Two ways to keep them (``hoodie.write.markers.type``):

* ``DIRECT`` (:mod:`.direct`): one empty file per data file,
  ``.hoodie/.temp/<instant>/<partition>/<data file>.marker.<CREATE|MERGE|APPEND>``;
* ``TIMELINE_SERVER_BASED`` (:mod:`.server`): tasks ask a marker server in the
  driver, which batches markers into a few ``MARKERS<n>`` files.

Whatever the type, :mod:`.listing` reads them back for rollback, for the deletion
of partial files of failed task attempts, and for early conflict detection.
"""

from tidemark.markers.base import IOType, Marker, MarkerSpec, MarkerType, MarkerWriter, parse_marker
from tidemark.markers.listing import delete_markers, marked_data_files, markers_in_partition, read_markers
from tidemark.markers.writer import open_marker_writer

__all__ = [
    "IOType",
    "Marker",
    "MarkerSpec",
    "MarkerType",
    "MarkerWriter",
    "delete_markers",
    "marked_data_files",
    "markers_in_partition",
    "open_marker_writer",
    "parse_marker",
    "read_markers",
]
