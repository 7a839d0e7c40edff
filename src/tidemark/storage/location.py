"""Where a table lives: a URI plus the options that open it, small enough to ship to Spark tasks.

``StorageLocation`` is what travels inside a write spec to executors, which open their own
:class:`~tidemark.storage.base.Storage` from it. It carries credentials (tasks need them) but never
shows them: its ``repr`` and :meth:`redacted_options` mask every secret.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tidemark.storage.secrets import is_secret_option

if TYPE_CHECKING:
    from tidemark.storage.base import Storage

@dataclass(frozen=True)
class StorageLocation:
    """A table's base URI (``s3://bucket/prefix``, ``file:///...`` or a local path) and its options."""

    uri: str
    options: Mapping[str, str] = field(default_factory=dict)

    def redacted_options(self) -> dict[str, str]:
        return {k: ("***" if is_secret_option(k) else v) for k, v in self.options.items()}

    def __repr__(self) -> str:
        return f"StorageLocation(uri={self.uri!r}, options={self.redacted_options()!r})"

    @property
    def is_local(self) -> bool:
        return "://" not in self.uri or self.uri.startswith("file://")

    def open(self) -> Storage:
        """The storage of this location."""
        return open_storage(self.uri, self.options)


def location_of(storage: Storage) -> StorageLocation:
    """The picklable location that reopens ``storage`` (in a Spark task, say)."""
    return StorageLocation(storage.base_path, dict(storage.options))


_OPENED: dict[tuple[str, tuple[tuple[str, str], ...]], Storage] = {}


def storage_of(location: StorageLocation) -> Storage:
    """The storage of ``location``, opened once per process (tasks write many files to one table)."""
    key = (location.uri, tuple(sorted((str(k), str(v)) for k, v in location.options.items())))
    found = _OPENED.get(key)
    if found is None:
        found = _OPENED[key] = location.open()
    return found


def open_storage(uri: str, storage_options: Mapping[str, str] | None = None) -> Storage:
    """Open the storage of a table at ``uri``.

    Local paths and ``file://`` URIs give :class:`~tidemark.storage.local.LocalStorage`;
    ``s3://`` (AWS or any S3-compatible endpoint), ``gs://``, ``az://`` and ``abfs[s]://`` give
    :class:`~tidemark.storage.object_store.ObjectStorage`, configured by ``storage_options``
    (the keys hudi-rs and delta-rs take, such as ``aws_endpoint_url`` or ``aws_region``) and else by
    the standard environment variables. ConfigError for any other scheme.
    """
    from tidemark.storage.local import LocalStorage

    if uri.startswith("file://"):
        return LocalStorage(uri[len("file://"):] or "/")
    if "://" not in uri:
        return LocalStorage(os.path.expanduser(uri))
    from tidemark.storage.object_store import SCHEMES, ObjectStorage

    scheme = uri.split("://", 1)[0].lower()
    if scheme not in SCHEMES:
        from tidemark.errors import ConfigError

        raise ConfigError(
            f"unsupported table URI {uri!r}: use a local path, file://, s3://, gs://, az:// or abfs[s]://")
    return ObjectStorage(uri, {str(k): str(v) for k, v in (storage_options or {}).items()})
