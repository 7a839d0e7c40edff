"""A table opened for reading: its ``hoodie.properties``, schema, record merger and read plans.

What a reader needs and nothing a writer does (no lock, no writer settings): the Spark data
source plans its scans with it, and ``Table`` reads through the same functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from tidemark.errors import ConfigError, CorruptPropertiesError, TableNotFoundError
from tidemark.format.properties import PROPERTIES_PATH, TableConfig, check_fields_exist, load_properties
from tidemark.format.schema import arrow_schema_from_avro
from tidemark.merge import MergeConfig, RecordMerger
from tidemark.read.plan import PartitionFilter, ReadPlan, incremental_plan, prune, snapshot_plan
from tidemark.storage import Storage
from tidemark.storage.location import open_storage
from tidemark.timeline import Timeline


def open_properties(
    path: str, storage_options: Mapping[str, str] | None = None
) -> tuple[Storage, TableConfig, dict[str, str]]:
    """The table at ``path``: its storage, its configuration and ``hoodie.properties`` as stored.
    TableNotFoundError if there
    is none; CorruptPropertiesError if its create schema is unreadable or lacks the key fields."""
    storage = open_storage(path, storage_options)
    props = load_properties(storage.read_bytes)
    if props is None:
        detail = "the path does not exist" if not storage.exists("") else f"{PROPERTIES_PATH} is missing"
        raise TableNotFoundError(path, detail)
    config = TableConfig.from_properties(props)
    if config.create_schema:
        try:
            create_schema = arrow_schema_from_avro(config.create_schema)
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptPropertiesError(
                PROPERTIES_PATH, f"hoodie.table.create.schema is not an Avro record schema ({exc})"
            ) from None
        check_fields_exist(config, create_schema.names, schema_source="hoodie.table.create.schema")
    return storage, config, dict(props)


def load_schema(storage: Storage, config: TableConfig) -> pa.Schema | None:
    """The user columns' schema: the latest commit's, else the create schema, else None."""
    schema_json = Timeline.load(storage).latest_schema_json()
    if schema_json:
        schema = arrow_schema_from_avro(schema_json)
        check_fields_exist(config, schema.names, schema_source="the schema of the latest commit")
        return schema
    if config.create_schema:
        return arrow_schema_from_avro(config.create_schema)
    return None


def query_type(value: str) -> str:
    query = str(value).lower().replace("-", "_")
    if query not in ("snapshot", "read_optimized"):
        raise ConfigError(f"query_type must be snapshot or read_optimized, got {value!r}")
    return query


def table_read_plan(
    storage: Storage,
    config: TableConfig,
    *,
    as_of: str | None = None,
    filters: Sequence[PartitionFilter] | None = None,
    query_type_: str = "snapshot",
) -> ReadPlan:
    """The snapshot (or read-optimized, or time-travel) plan, pruned by partition ``filters``."""
    query = query_type(query_type_)
    plan = snapshot_plan(storage, Timeline.load(storage), as_of=as_of, read_optimized=query == "read_optimized")
    files = prune(plan.files, filters, config.partition_fields, config.hive_style_partitioning,
                  url_encode=config.partition_url_encode)
    return ReadPlan(tuple(files), plan.commit_times, logs=plan.logs)


class ReadableTable:
    """A table opened for reading (the part of ``Table`` a reader needs)."""

    def __init__(self, storage: Storage, config: TableConfig) -> None:
        self.storage = storage
        self.config = config
        self._schema: pa.Schema | None = None

    @classmethod
    def open(
        cls, path: str, *, spark: Any = None, storage_options: Mapping[str, str] | None = None
    ) -> ReadableTable:
        """Open the table at ``path`` (a local path or URI) for reading (``spark`` is accepted and
        unused: reading plans needs no engine)."""
        storage, config, _ = open_properties(path, storage_options)
        return cls(storage, config)

    @property
    def schema(self) -> pa.Schema | None:
        if self._schema is None:
            self._schema = load_schema(self.storage, self.config)
        return self._schema

    def merger(self) -> RecordMerger:
        return MergeConfig.of_table(self.config).merger(self.schema)

    def read_plan(
        self,
        *,
        as_of: str | None = None,
        filters: Sequence[PartitionFilter] | None = None,
        query_type: str = "snapshot",
    ) -> ReadPlan:
        return table_read_plan(self.storage, self.config, as_of=as_of, filters=filters, query_type_=query_type)

    def incremental_plan(self, *, start: str | None = None, end: str | None = None) -> ReadPlan:
        return incremental_plan(self.storage, Timeline.load(self.storage), start=start, end=end)
