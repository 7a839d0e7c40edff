"""Storage: the only layer that touches files. See :mod:`tidemark.storage.base`."""

from tidemark.storage.base import CreateOutcome, FileInfo, Storage, Versioned
from tidemark.storage.local import LocalStorage, exclusive_flock

__all__ = ["CreateOutcome", "FileInfo", "LocalStorage", "Storage", "Versioned", "exclusive_flock"]
