"""File-system view: the file groups and slices visible at a point of the timeline."""

from tidemark.fsview.view import BaseFile, FileGroup, FileSlice, FileSystemView, LogFile, order_log_files

__all__ = ["BaseFile", "FileGroup", "FileSlice", "FileSystemView", "LogFile", "order_log_files"]
