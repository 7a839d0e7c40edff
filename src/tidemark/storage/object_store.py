"""Object stores (S3 and S3-compatible, GCS, Azure) over ``obstore``, the Rust ``object_store`` crate.

Object stores have no rename and no folders, so the two guarantees of :mod:`tidemark.storage.base`
come from conditional puts instead: :meth:`ObjectStorage.create_if_absent` is a put with
``If-None-Match: *`` (only one of several racing writers gets a 2xx) and
:meth:`ObjectStorage.replace_if_match` a put with ``If-Match: <etag>``. A plain put is already
atomic (readers see the old object or the new one), which is all ``write_atomic`` needs.

Folders are key prefixes: listing one is a delimiter listing, deleting one deletes every key under
it. Every obstore failure is turned into a typed :class:`~tidemark.errors.StorageError` that says
what to do; messages are scrubbed of every secret option value.
"""

from __future__ import annotations

import datetime as dt
import errno
import io
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import obstore
import pyarrow as pa
from obstore.exceptions import (
    AlreadyExistsError,
    NotSupportedError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)

from tidemark.errors import (
    BucketNotFoundError,
    ConditionalWritesUnsupportedError,
    StorageAccessDeniedError,
    StorageError,
    StorageUnreachableError,
)
from tidemark.storage.base import CreateOutcome, DataSource, FileInfo, Storage, Versioned
from tidemark.storage.ranged import RangedFile
from tidemark.storage.secrets import is_secret_option

T = TypeVar("T")

SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss", "azure")

# Bounded by default so a dead endpoint fails in seconds, not minutes; each is a storage option.
DEFAULT_CLIENT = {"timeout": "30s", "connect_timeout": "5s"}
DEFAULT_MAX_RETRIES = 3
DEFAULT_RETRY_TIMEOUT_S = 20.0
_CLIENT_KEYS = ("timeout", "connect_timeout", "pool_idle_timeout", "http1_only", "http2_only", "user_agent")
_RETRY_KEYS = ("max_retries", "retry_timeout")


def _seconds(value: str) -> float:
    text = value.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def _split_uri(uri: str) -> tuple[str, str, str]:
    """(scheme, bucket or container, prefix) of ``scheme://bucket/prefix`` (abfs: container@account)."""
    scheme, rest = uri.split("://", 1)
    bucket, _, prefix = rest.partition("/")
    return scheme.lower(), bucket, prefix.strip("/")


def _store_config(scheme: str, options: Mapping[str, str]) -> tuple[dict[str, Any], dict[str, str], dict[str, Any]]:
    """Split storage options (hudi-rs / delta-rs keys) into the store's config, client options, retries."""
    config: dict[str, Any] = {}
    client = dict(DEFAULT_CLIENT)
    retry: dict[str, Any] = {"max_retries": DEFAULT_MAX_RETRIES,
                             "retry_timeout": dt.timedelta(seconds=DEFAULT_RETRY_TIMEOUT_S)}
    prefix = {"s3": "aws_", "s3a": "aws_", "gs": "google_"}.get(scheme, "azure_")
    for key, value in options.items():
        name = key.lower()
        if name in _CLIENT_KEYS:
            client[name] = str(value)
        elif name == "max_retries":
            retry["max_retries"] = int(value)
        elif name == "retry_timeout":
            retry["retry_timeout"] = dt.timedelta(seconds=_seconds(str(value)))
        elif name == "allow_http":
            config["allow_http"] = str(value)
        elif name.startswith(prefix):
            # As given: object_store knows the prefixed keys hudi-rs and delta-rs take
            # (aws_endpoint_url, azure_storage_account_name, google_service_account, ...); some,
            # such as azure_storage_account_key, have no unprefixed spelling at all.
            config[name] = str(value)
        elif name.startswith(("aws_", "google_", "azure_")):
            continue  # another store's key (options shared between stores): not ours
        else:
            config[name] = str(value)
    return config, client, retry


def _make_store(uri: str, options: Mapping[str, str]) -> Any:
    from obstore.store import AzureStore, GCSStore, S3Store

    scheme, bucket, prefix = _split_uri(uri)
    config: Any
    config, client, retry = _store_config(scheme, options)
    kwargs: dict[str, Any] = {"prefix": prefix or None, "client_options": client, "retry_config": retry}
    try:
        if scheme in ("s3", "s3a"):
            return S3Store(bucket, config=config, **kwargs)  # also reads AWS_* environment variables
        if scheme == "gs":
            return GCSStore(bucket, config=config, **kwargs)
        container, _, account = bucket.partition("@")
        if account and not any(k.endswith("account_name") for k in config):
            # abfs[s]://container@account.dfs.core.windows.net/prefix names the account itself
            config["account_name"] = account.split(".", 1)[0]
        return AzureStore(container, config=config, **kwargs)
    except Exception as exc:  # obstore raises on unknown keys and missing settings
        from tidemark.errors import ConfigError

        raise ConfigError(f"cannot open {uri}: {_scrub(str(exc).splitlines()[0], options)}") from None


def _scrub(text: str, options: Mapping[str, str]) -> str:
    for key, value in options.items():
        if is_secret_option(key) and value and str(value) in text:
            text = text.replace(str(value), "***")
    return text


class ObjectOutputFile:
    """A file built in memory and put in one request on commit (readers never see a partial one)."""

    def __init__(self, storage: ObjectStorage, path: str) -> None:
        self._storage = storage
        self._path = path
        self._stream = pa.BufferOutputStream()

    @property
    def sink(self) -> pa.NativeFile:
        return self._stream

    def size(self) -> int:
        return int(self._stream.tell())

    def commit(self) -> int:
        data = self._stream.getvalue()
        self._storage.write_atomic(self._path, data.to_pybytes())
        return int(data.size)


class ObjectStorage:
    """Objects under ``scheme://bucket/prefix``; paths are keys relative to the prefix."""

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        self._uri = uri.rstrip("/")
        self._options = dict(options or {})
        self._store = _make_store(self._uri, self._options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectStorage, (self._uri, self._options))

    def __repr__(self) -> str:
        shown = {k: ("***" if is_secret_option(k) else v) for k, v in self._options.items()}
        return f"ObjectStorage(uri={self._uri!r}, options={shown!r})"

    # -- errors ------------------------------------------------------------------------------
    def _call(self, what: str, path: str, fn: Callable[[], T]) -> T:
        """Run one request, turning obstore's failures into typed errors (FileNotFoundError stays)."""
        try:
            return fn()
        except FileNotFoundError as exc:
            if "NoSuchBucket" in str(exc) or "ContainerNotFound" in str(exc):
                raise self._bucket_missing() from None
            raise FileNotFoundError(errno.ENOENT, "no such object", self.full_path(path)) from None
        except (PermissionDeniedError, UnauthenticatedError) as exc:
            raise self._denied(what, path, exc) from None
        except NotSupportedError as exc:
            raise self._no_conditional(what, path, exc) from None
        except (AlreadyExistsError, PreconditionError):
            raise
        except Exception as exc:  # obstore.exceptions.GenericError and friends
            raise self._classify(what, path, exc) from None

    def _bucket_missing(self) -> StorageError:
        scheme, bucket, _ = _split_uri(self._uri)
        return BucketNotFoundError(
            f"the bucket {bucket!r} of {self._uri} does not exist: create it first, or fix the URI",
            uri=self._uri)

    def _denied(self, what: str, path: str, exc: BaseException) -> StorageError:
        return StorageAccessDeniedError(
            f"{what} {self.full_path(path)} was refused ({self._first_line(exc)}): check the credentials "
            "(aws_access_key_id / aws_secret_access_key storage options or AWS_* environment variables) "
            "and their permissions on the bucket", uri=self._uri)

    def _no_conditional(self, what: str, path: str, exc: BaseException) -> StorageError:
        return ConditionalWritesUnsupportedError(
            f"{what} {self.full_path(path)}: the store does not support conditional writes "
            f"(If-None-Match / If-Match), which atomic commits need ({self._first_line(exc)}); use a store "
            "that supports them (AWS S3, GCS, Azure, MinIO, moto) ", uri=self._uri)

    def _classify(self, what: str, path: str, exc: BaseException) -> StorageError:
        text = str(exc)
        line = self._first_line(exc)
        if "NoSuchBucket" in text or "ContainerNotFound" in text:
            return self._bucket_missing()
        if any(code in text for code in ("InvalidAccessKeyId", "SignatureDoesNotMatch", "403 Forbidden",
                                         "AccessDenied", "401 Unauthorized", "ExpiredToken")):
            return self._denied(what, path, exc)
        if "501 Not Implemented" in text or "NotImplemented" in text:
            return self._no_conditional(what, path, exc)
        if any(s in text for s in ("error sending request", "HTTP error", "timed out", "timeout",
                                   "connection", "Connection")):
            return StorageUnreachableError(
                f"{what} {self.full_path(path)}: the storage endpoint did not answer ({line}); check the "
                "endpoint (aws_endpoint_url) and the network, or raise the storage options timeout / "
                "connect_timeout / max_retries / retry_timeout", uri=self._uri)
        return StorageError(f"{what} {self.full_path(path)} failed: {line}", uri=self._uri)

    def _first_line(self, exc: BaseException) -> str:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        return _scrub(lines[0] if lines else type(exc).__name__, self._options)[:300]

    # -- the Storage protocol ----------------------------------------------------------------
    @property
    def options(self) -> dict[str, str]:
        return dict(self._options)

    @property
    def is_local(self) -> bool:
        return False

    @property
    def base_path(self) -> str:
        return self._uri

    def full_path(self, path: str) -> str:
        return f"{self._uri}/{path}" if path else self._uri

    def _head(self, path: str) -> dict[str, Any] | None:
        try:
            return self._call("reading", path, lambda: obstore.head(self._store, path))  # type: ignore[return-value]
        except FileNotFoundError:
            return None

    def exists(self, path: str) -> bool:
        if path and self._head(path) is not None:
            return True
        return self._any_under(path)

    def _any_under(self, path: str) -> bool:
        prefix = f"{path.rstrip('/')}/" if path else None

        def first() -> bool:
            return any(chunk for chunk in obstore.list(self._store, prefix, chunk_size=1))

        return self._call("listing", path, first)

    def modified_ms(self, path: str) -> int | None:
        meta = self._head(path)
        return None if meta is None else int(meta["last_modified"].timestamp() * 1000)

    def read_bytes(self, path: str) -> bytes:
        return self._call("reading", path, lambda: bytes(obstore.get(self._store, path).bytes()))

    def open_input(self, path: str) -> DataSource:
        return pa.BufferReader(self._call("reading", path, lambda: obstore.get(self._store, path).bytes()))

    def open_ranged(self, path: str, size: int | None = None) -> DataSource:
        if size is None:
            meta = self._head(path)
            if meta is None:
                raise FileNotFoundError(errno.ENOENT, "no such object", self.full_path(path))
            size = int(meta["size"])

        def fetch(start: int, end: int) -> bytes:
            return self._call("reading", path,
                              lambda: bytes(obstore.get_range(self._store, path, start=start, end=end)))

        return pa.PythonFile(RangedFile(fetch, size, self.full_path(path)), mode="r")

    def open_output(self, path: str) -> ObjectOutputFile:
        return ObjectOutputFile(self, path)

    def write_atomic(self, path: str, data: bytes) -> None:
        self._call("writing", path, lambda: obstore.put(self._store, path, io.BytesIO(data) if len(data) > 5 << 20
                                                         else data))

    def create_if_absent(self, path: str, data: bytes = b"") -> CreateOutcome:
        try:
            self._call("creating", path, lambda: obstore.put(self._store, path, data, mode="create"))
            return CreateOutcome.CREATED
        except (AlreadyExistsError, PreconditionError):
            # A put retried after a lost answer meets its own first attempt (412). The same
            # non-empty bytes mean that attempt landed: ours (an empty marker proves nothing).
            if data:
                try:
                    if self.read_bytes(path) == data:
                        return CreateOutcome.CREATED
                except FileNotFoundError:
                    return CreateOutcome.UNKNOWN  # deleted meanwhile: the caller re-reads
            return CreateOutcome.ALREADY_EXISTS

    def read_versioned(self, path: str) -> Versioned | None:
        try:
            got = self._call("reading", path, lambda: obstore.get(self._store, path))
        except FileNotFoundError:
            return None
        version = got.meta.get("e_tag")
        data = bytes(got.bytes())
        if not version:
            raise self._no_conditional("reading", path, RuntimeError("the store returned no ETag"))
        return Versioned(data, str(version))

    def replace_if_match(self, path: str, data: bytes, version: str) -> bool:
        try:
            self._call("replacing", path,
                       lambda: obstore.put(self._store, path, data, mode={"e_tag": version}))
            return True
        except (PreconditionError, AlreadyExistsError, FileNotFoundError):
            return False

    def _listing(self, path: str) -> dict[str, Any]:
        prefix = path.rstrip("/") or None
        listing: Any = self._call("listing", path, lambda: obstore.list_with_delimiter(self._store, prefix))
        return dict(listing)

    @staticmethod
    def _info(meta: Mapping[str, Any]) -> FileInfo:
        return FileInfo(str(meta["path"]), int(meta["size"]), meta["last_modified"].timestamp())

    def list_dir(self, path: str) -> list[FileInfo]:
        return [self._info(m) for m in self._listing(path)["objects"]]

    def list_names(self, path: str) -> list[str]:
        listing = self._listing(path)
        return [str(m["path"]).rsplit("/", 1)[-1] for m in listing["objects"]] + [
            str(p).rstrip("/").rsplit("/", 1)[-1] for p in listing["common_prefixes"]]

    def list_subdirs(self, path: str) -> list[str]:
        return [str(p).rstrip("/").rsplit("/", 1)[-1] for p in self._listing(path)["common_prefixes"]]

    def walk_files(self, path: str = "", *, skip_hidden_dirs: bool = True) -> Iterator[FileInfo]:
        prefix = f"{path.rstrip('/')}/" if path else None
        skip = len(prefix) if prefix else 0
        chunks = self._call("listing", path, lambda: list(obstore.list(self._store, prefix)))
        for chunk in chunks:
            for meta in chunk:
                rel = str(meta["path"])
                folders = rel[skip:].split("/")[:-1]
                if skip_hidden_dirs and any(f.startswith(".") for f in folders):
                    continue
                yield self._info(meta)

    def delete(self, path: str) -> bool:
        if self._head(path) is None:
            return False
        self._call("deleting", path, lambda: obstore.delete(self._store, path))
        return True

    def delete_tree(self, path: str) -> None:
        prefix = f"{path.rstrip('/')}/" if path else None
        chunks = self._call("listing", path, lambda: list(obstore.list(self._store, prefix)))
        keys = [str(m["path"]) for chunk in chunks for m in chunk]
        for start in range(0, len(keys), 1000):
            batch = keys[start:start + 1000]
            self._call("deleting", path, lambda batch=batch: obstore.delete(self._store, batch))  # type: ignore[misc]

    def is_empty_dir(self, path: str) -> bool:
        return not self._any_under(path)


def verify_conditional_writes(storage: Storage) -> None:
    """Refuse a store that ignores put-if-absent (ConditionalWritesUnsupportedError), before a table
    is created on it: some S3-compatible stores accept ``If-None-Match`` and overwrite anyway, which
    would let two writers complete one instant. Three requests on a probe object, deleted after."""
    import uuid

    probe = f".hoodie/.probe-{uuid.uuid4().hex}"
    try:
        first = storage.create_if_absent(probe, b"1")
        second = storage.create_if_absent(probe, b"2")
    finally:
        storage.delete(probe)
    if first is not CreateOutcome.CREATED or second is not CreateOutcome.ALREADY_EXISTS:
        raise ConditionalWritesUnsupportedError(
            f"{storage.base_path}: the store ignored a put-if-absent (If-None-Match) and overwrote the "
            "object, so commits could not be atomic; use a store with conditional writes (AWS S3, GCS, "
            "Azure, MinIO, moto). Nothing was created.", uri=storage.base_path)
