"""File-system view: the file groups and slices visible at a point of the timeline."""

from tidemark.fsview.view import BaseFile, FileGroup, FileSystemView

__all__ = ["BaseFile", "FileGroup", "FileSystemView"]
