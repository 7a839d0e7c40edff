"""Creating a table (its folders and ``hoodie.properties``) and opening one.

Creating validates every name and option before anything is written, and writes
``hoodie.properties`` last: until it exists the folder is not a table. Opening loads
``hoodie.properties``, checks the stored schema names the key fields, and refuses
table-level options that disagree with what the table stores.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from tidemark.concurrency.writer_settings import WriterSettings
from tidemark.config import WriteConfig, resolve_write_config
from tidemark.config.resolve import parse_option, validate_keys
from tidemark.config.table_options import (
    URL_ENCODE_KEY,
    check_fixed_options,
    column_names,
    index_options,
    merge_options,
    write_options,
)
from tidemark.errors import ConfigError, StorageError, TableExistsError
from tidemark.format.names import HOODIE_DIR, TEMP_DIR, TIMELINE_DIR
from tidemark.format.properties import (
    COPY_ON_WRITE,
    MERGE_ON_READ,
    PROPERTIES_PATH,
    TableConfig,
    format_properties,
)
from tidemark.format.schema import avro_schema_json
from tidemark.merge import MergeConfig
from tidemark.merge.config import format_column_groups
from tidemark.read.table import open_properties
from tidemark.storage import CreateOutcome, Storage
from tidemark.storage.failures import is_storage_failure
from tidemark.storage.location import open_storage
from tidemark.write.bucket import BucketSpec
from tidemark.write.nbcc import check_table_supports


@dataclass(frozen=True)
class OpenedTable:
    """A table's storage, its stored configuration and the writer's configuration."""

    storage: Storage
    config: TableConfig
    write_config: WriteConfig
    schema: pa.Schema | None = None  # the schema given at create time, if any


def create_table(
    path: str,
    *,
    record_key: str | Sequence[str],
    partition_by: str | Sequence[str] = (),
    ordering_field: str | Sequence[str] | None = None,
    table_type: str = COPY_ON_WRITE,
    options: Mapping[str, Any] | None = None,
    schema: Any = None,
    to_arrow: Callable[[Any], pa.Schema | None] = lambda s: s,
    storage_options: Mapping[str, str] | None = None,
) -> OpenedTable:
    """Create an empty table at ``path`` (a new or empty folder); see ``Table.create``.

    ``to_arrow`` turns ``schema`` into a pyarrow schema (an engine's schema types).
    """
    keys = column_names(record_key, "record_key")
    if not keys:
        raise ConfigError("record_key needs at least one column name")
    partitions = column_names(partition_by, "partition_by")
    ordering = column_names(ordering_field, "ordering_field")
    table_type = str(table_type).upper()
    if table_type not in (COPY_ON_WRITE, MERGE_ON_READ):
        raise ConfigError(f"table_type must be {COPY_ON_WRITE} or {MERGE_ON_READ}, got {table_type!r}")
    raw = validate_keys(options or {})
    write_config = resolve_write_config(write_options(raw))
    storage = open_storage(path, storage_options)
    local = storage.is_local
    if storage.exists(PROPERTIES_PATH):
        raise TableExistsError(path, "a table already exists there; use Table.open")
    if not local:
        from tidemark.storage.object_store import verify_conditional_writes

        verify_conditional_writes(storage)  # before anything: commits need put-if-absent
    if local and storage.exists("") and not os.path.isdir(storage.base_path):
        raise TableExistsError(path, "it is a file")
    if storage.exists(CREATION_CLAIM):
        raise _creating_elsewhere(path)
    if storage.exists("") and not storage.is_empty_dir(""):
        raise TableExistsError(path, "the folder is not empty; choose a new or empty folder")
    arrow_schema = to_arrow(schema)
    name = raw.get("hoodie.table.name") or storage.base_path.rstrip("/").rsplit("/", 1)[-1] or "table"
    given = merge_options(raw)
    merge = MergeConfig.build(
        mode=given.mode,
        ordering_fields=ordering,
        partial_update_mode=given.partial_update_mode,
        column_groups=given.column_groups,
        custom_class=given.custom_class,
    )
    ordering = merge.ordering_fields
    if arrow_schema is not None:
        for role, cols in (("record key", keys), ("partition", partitions), ("ordering", ordering)):
            absent = [c for c in cols if c not in arrow_schema.names]
            if absent:
                raise ConfigError(f"the schema lacks the {role} column(s) {absent}")
        merge.check_schema(arrow_schema, key_fields=keys, partition_fields=partitions)
        from tidemark.write.validate import check_key_types, check_storable, storable_schema

        arrow_schema = storable_schema(arrow_schema)
        check_key_types(arrow_schema, keys, partitions)
        check_storable(arrow_schema)
    config = TableConfig(
        name=name,
        table_type=table_type,
        record_key_fields=keys,
        partition_fields=partitions,
        ordering_fields=ordering,
        hive_style_partitioning=parse_option("hoodie.datasource.write.hive_style_partitioning", raw),
        partition_url_encode=parse_option(URL_ENCODE_KEY, raw),
        create_schema=avro_schema_json(arrow_schema, name) if arrow_schema is not None else None,
        database=parse_option("hoodie.database.name", raw),
        **_merge_fields(merge),
        **_index_fields(raw, keys),
    )
    check_table_supports(write_config, config)
    # A table created for several writers records their settings at once (see set_concurrency).
    settings = WriterSettings.of(write_config.concurrency_mode, write_config.lock, storage.base_path)
    settings = settings.with_table_defaults({"hoodie.table.name": config.name}, storage.base_path)
    config = replace(config, extra={**config.extra, **settings.to_properties()})
    _claim_creation(storage, path)
    try:
        config = _write_table_files(storage, config, metadata=write_config.metadata_enable)
    except BaseException as failure:
        cleared = _remove_unfinished(storage)
        if is_storage_failure(failure):
            left = "Nothing of it is left there" if cleared else f"Remove its {HOODIE_DIR} folder, which is left there"
            raise StorageError(
                f"the table's storage failed while creating the table at {storage.base_path}: {failure}. {left}. "
                "Free space on the disk, or let this process write the folder, then create the table again.",
                uri=storage.base_path) from failure
        raise
    with contextlib.suppress(Exception):  # a claim left behind only keeps the folder from a second create
        storage.delete(CREATION_CLAIM)
    return OpenedTable(storage, config, write_config, arrow_schema)


def _write_table_files(storage: Storage, config: TableConfig, *, metadata: bool) -> TableConfig:
    """Write a new table's folders, its metadata table (if ``metadata``) and, last, its
    ``hoodie.properties``; the configuration written."""
    for folder in (TIMELINE_DIR, f"{TIMELINE_DIR}/history", TEMP_DIR) if storage.is_local else ():
        os.makedirs(storage.full_path(folder), exist_ok=True)  # object stores have no folders
    # A metadata table (its files partition) unless hoodie.metadata.enable=false, as Hudi 1.x
    # creates one by default; readers trust it once hoodie.properties names files.
    if metadata:
        from tidemark.metadata.create import write_metadata_table

        write_metadata_table(storage, config.name, {})
        config = replace(config, extra={**config.extra, **{"hoodie.table.metadata.partitions": "files",
                                                            "hoodie.table.metadata.partitions.inflight": ""}})
    # hoodie.properties last: until it exists the folder is not a table.
    storage.write_atomic(PROPERTIES_PATH, format_properties(config.to_properties()).encode())
    return config


def _remove_unfinished(storage: Storage) -> bool:
    """Remove what a creation that failed wrote (the folder was new or empty, and its creation
    claim is this process's): without ``hoodie.properties`` the ``.hoodie`` folder is no table,
    and would make the folder refuse the next creation. Best effort (the failure being raised
    says why); whether the folder is empty again."""
    with contextlib.suppress(Exception):
        if not storage.exists(PROPERTIES_PATH):
            # The claim goes last: until then no other creator can start writing here.
            for folder in (f"{HOODIE_DIR}/metadata", TIMELINE_DIR, TEMP_DIR):
                storage.delete_tree(folder)
            storage.delete_tree(HOODIE_DIR)
    try:
        return not storage.exists("") or storage.is_empty_dir("")
    except Exception:
        return False


# Created (if absent) before a table's first file: the creation in progress is this process's.
CREATION_CLAIM = f"{HOODIE_DIR}/.tidemark-creating"


def _claim_creation(storage: Storage, path: str) -> None:
    """Make this process the folder's one creator, or raise TableExistsError: the claim is
    created only if absent (holding a token of this process's own, so that a put retried after
    it landed is still recognised as ours), and a table another creator finished since the
    folder was found empty is looked for once more under it."""
    token = uuid.uuid4().hex.encode()
    if storage.create_if_absent(CREATION_CLAIM, token) is not CreateOutcome.CREATED \
            and not _holds(storage, CREATION_CLAIM, token):
        raise _creating_elsewhere(path)
    _claimed_on_empty_folder(storage, path)


def _holds(storage: Storage, path: str, token: bytes) -> bool:
    """Whether the file ``path`` holds ``token`` (False if it cannot be read)."""
    try:
        return storage.read_bytes(path) == token
    except Exception:
        return False


def _creating_elsewhere(path: str) -> TableExistsError:
    return TableExistsError(path, f"another process is creating a table there (if none is, one that "
                                  f"stopped left {CREATION_CLAIM}: remove the folder's {HOODIE_DIR} and "
                                  "create the table again)")


def _claimed_on_empty_folder(storage: Storage, path: str) -> None:
    """Under a claim just made: refuse (and give the claim up) if a creator finished meanwhile."""
    if storage.exists(PROPERTIES_PATH):
        with contextlib.suppress(Exception):
            storage.delete(CREATION_CLAIM)
        raise TableExistsError(path, "a table already exists there; use Table.open")


def open_table(
    path: str, options: Mapping[str, Any] | None = None, storage_options: Mapping[str, str] | None = None
) -> OpenedTable:
    """Open the table at ``path``; TableNotFoundError if there is none, ConfigError for options
    that disagree with the table."""
    write_config = resolve_write_config(write_options(validate_keys(options or {})))
    storage, config, props = open_properties(path, storage_options)
    check_fixed_options(validate_keys(options or {}), props)
    check_table_supports(write_config, config)
    return OpenedTable(storage, config, write_config)


def _merge_fields(merge: MergeConfig) -> dict[str, Any]:
    return {
        "record_merge_mode": merge.mode,
        "partial_update_mode": "IGNORE_DEFAULTS" if merge.partial_update else None,
        "merge_column_groups": format_column_groups(merge.column_groups) if merge.column_groups else None,
        "custom_merger_class": merge.custom_class,
    }


def _index_fields(raw: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, Any]:
    index = index_options(raw, keys)
    if index.index_type != "BUCKET":
        return {"index_type": index.index_type}
    assert index.num_buckets is not None  # the option has a default
    spec = BucketSpec(index.num_buckets, index.hash_fields, keys)
    return {"index_type": "BUCKET", "bucket_num_buckets": spec.num_buckets, "bucket_hash_fields": spec.hash_fields}
