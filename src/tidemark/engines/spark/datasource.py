"""``spark.read.format("tidemark")``: a PySpark Python data source over read plans.

Options (Hudi's keys are accepted too):

=================  ==========================================  ===========================
option             Hudi key                                    meaning
=================  ==========================================  ===========================
query_type         hoodie.datasource.query.type                snapshot | incremental |
                                                               read_optimized
as_of              as.of.instant                               time travel (snapshot)
start              hoodie.datasource.read.begin.instanttime    incremental, exclusive
end                hoodie.datasource.read.end.instanttime      incremental, inclusive
=================  ==========================================  ===========================

A table on an object store (``load("s3://bucket/t")``) takes its storage options as further
options, with the keys hudi-rs takes (``aws_endpoint_url``, ``aws_region``, ``aws_access_key_id``,
..., and ``timeout`` / ``max_retries``); the tasks read its files through them.

Equality and IN filters on partition columns prune partitions when
``spark.sql.python.filterPushdown.enabled`` is true.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, Filter, In, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema

from tidemark.errors import ConfigError
from tidemark.format.names import COMMIT_TIME
from tidemark.format.schema import with_meta_columns

_ALIASES = {
    "hoodie.datasource.query.type": "query_type",
    "as.of.instant": "as_of",
    "hoodie.datasource.read.begin.instanttime": "start",
    "hoodie.datasource.read.end.instanttime": "end",
}
_KNOWN = {"path", "query_type", "as_of", "start", "end"}
_STORAGE_PREFIXES = ("aws_", "google_", "azure_")
_STORAGE_KEYS = {"timeout", "connect_timeout", "max_retries", "retry_timeout", "allow_http"}


def _storage_options(options: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(read options, storage options): an object store's keys go to the table's storage."""
    storage = {k: v for k, v in options.items()
               if k.lower().startswith(_STORAGE_PREFIXES) or k.lower() in _STORAGE_KEYS}
    return {k: v for k, v in options.items() if k not in storage}, storage


def _normalize(options: dict[str, str]) -> dict[str, str]:
    out = {}
    for key, value in options.items():
        name = _ALIASES.get(key, key)
        if name not in _KNOWN:
            raise ConfigError(f"unknown read option {key!r}; known: {sorted(_KNOWN | set(_ALIASES))}", key=key)
        out[name] = value
    return out


class _FilePartition(InputPartition):
    def __init__(self, path: str, partition_values: dict[str, str], logs: tuple[str, ...] = ()) -> None:
        super().__init__(path)
        self.path = path
        self.partition_values = partition_values
        self.logs = logs  # merge-on-read: full paths of the slice's log files, in merge order


class TidemarkDataSource(DataSource):
    """Reads tidemark (Hudi v8) tables; see the module docstring for options."""

    @classmethod
    def name(cls) -> str:
        return "tidemark"

    def _plan(self) -> tuple[Any, Any, Any]:
        from tidemark.read.table import ReadableTable as Table

        given, storage_options = _storage_options(dict(self.options))
        opts = _normalize(given)
        if "path" not in opts:
            raise ConfigError("spark.read.format('tidemark').load(path) needs a path")
        table = Table.open(opts["path"], spark=None, storage_options=storage_options)
        query = opts.get("query_type", "snapshot").lower()
        if query in ("snapshot", "read_optimized"):
            plan = table.read_plan(as_of=opts.get("as_of"), query_type=query)
        elif query == "incremental":
            plan = table.incremental_plan(start=opts.get("start"), end=opts.get("end"))
        else:
            raise ConfigError(f"query_type {query!r} is not one of snapshot, incremental, read_optimized")
        return table, plan, with_meta_columns(table.schema or pa.schema([]))

    def schema(self) -> Any:
        _, _, schema = self._plan()
        return from_arrow_schema(schema)

    def reader(self, schema: Any) -> DataSourceReader:
        table, plan, arrow_schema = self._plan()
        return _Reader(table, plan, arrow_schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        """``df.write.format("tidemark")``: see :mod:`tidemark.engines.spark.datasource_write`."""
        from tidemark.engines.spark.datasource_write import TidemarkBatchWriter, plan_write
        from tidemark.engines.spark.table_api import table_api

        return TidemarkBatchWriter(plan_write(table_api(), dict(self.options), schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802 - Spark's name
        """``df.writeStream.format("tidemark")``: see :mod:`tidemark.engines.spark.streaming_sink`."""
        from tidemark.engines.spark.streaming_sink import TidemarkStreamWriter, plan_stream
        from tidemark.engines.spark.table_api import table_api

        return TidemarkStreamWriter(plan_stream(table_api(), dict(self.options), schema, overwrite))


class TidemarkPushdownDataSource(TidemarkDataSource):
    """The same source, pruning partitions by pushed filters (needs filter push-down on)."""

    def reader(self, schema: Any) -> DataSourceReader:
        table, plan, arrow_schema = self._plan()
        return _PruningReader(table, plan, arrow_schema)


class _Reader(DataSourceReader):
    def __init__(self, table: Any, plan: Any, schema: pa.Schema) -> None:
        from tidemark.format.log_file import delete_ordering_field
        from tidemark.format.partition_path import partition_values
        from tidemark.storage.location import location_of

        cfg = table.config
        self.base = table.storage.base_path
        self.location = location_of(table.storage)  # tasks read files through the table's storage
        self.schema = schema
        self.commit_times = sorted(plan.commit_times) if plan.commit_times is not None else None
        self.partition_fields = cfg.partition_fields
        # Built here on the driver and pickled with this reader into the tasks.
        self.merger = table.merger() if plan.merges else None
        self.delete_ordering_field = delete_ordering_field(cfg.ordering_fields)
        self.files = [
            (
                f.path,
                partition_values(
                    f.partition_path, cfg.partition_fields, cfg.hive_style_partitioning,
                    url_encode=cfg.partition_url_encode,
                ),
            )
            for f in plan.files
        ]
        self.logs = {f.path: tuple(f"{self.base}/{g.path}" for g in plan.logs_of(f)) for f in plan.files}
        self.wanted: dict[str, set[str]] = {}

    def partitions(self) -> Sequence[InputPartition]:
        keep = [
            (p, values)
            for p, values in self.files
            if all(values.get(col) in allowed for col, allowed in self.wanted.items())
        ]
        return [_FilePartition(f"{self.base}/{p}", values, self.logs.get(p, ())) for p, values in keep]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        from tidemark.storage.location import storage_of

        assert isinstance(partition, _FilePartition)
        storage = storage_of(self.location)
        skip = len(self.base) + 1  # partitions name files by full path: the storage takes them relative
        if partition.logs:
            from tidemark.read.merge import read_slice

            assert self.merger is not None  # the plan had logs
            table = read_slice(
                storage.open_input(partition.path[skip:]),
                [storage.open_input(log[skip:]) for log in partition.logs],
                self.merger,
                self.schema,
                delete_ordering_field=self.delete_ordering_field,
                base_path=partition.path[skip:],
            )
        else:
            table = pq.read_table(storage.open_input(partition.path[skip:]), schema=self.schema)
        if self.commit_times is not None:
            table = table.filter(pc.is_in(table.column(COMMIT_TIME), pa.array(self.commit_times, pa.string())))
        yield from table.to_batches()


class _PruningReader(_Reader):
    def _prunable(self, f: Filter) -> bool:
        # Only exact matches of string or integer values: their text is the folder name.
        values = [f.value] if isinstance(f, EqualTo) else list(f.value) if isinstance(f, In) else []
        return (
            bool(values)
            and len(f.attribute) == 1  # type: ignore[attr-defined]
            and f.attribute[0] in self.partition_fields  # type: ignore[attr-defined]
            and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in values)
        )

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 - Spark's name
        for f in filters:
            if not self._prunable(f):
                yield f
                continue
            values = [f.value] if isinstance(f, EqualTo) else list(f.value)  # type: ignore[attr-defined]
            column = f.attribute[0]  # type: ignore[attr-defined]
            allowed = {str(v) for v in values}
            current = self.wanted.get(column)
            self.wanted[column] = allowed if current is None else current & allowed


class HudiAliasDataSource(TidemarkDataSource):
    """``format("hudi")`` when no Hudi bundle is on the classpath: the same source."""

    @classmethod
    def name(cls) -> str:
        return "hudi"


class HudiAliasPushdownDataSource(TidemarkPushdownDataSource):
    """``format("hudi")`` with partition pruning by pushed filters."""

    @classmethod
    def name(cls) -> str:
        return "hudi"


def register(spark: Any) -> None:
    """Make ``spark.read.format("tidemark")`` available in this session (idempotent).

    ``format("hudi")`` is registered as an alias too, unless a real Hudi bundle is on the
    classpath (then Spark's own ``hudi`` source stays in charge: see :func:`hudi_alias`).
    """
    enabled = spark.conf.get("spark.sql.python.filterPushdown.enabled", "false") == "true"
    source = TidemarkPushdownDataSource if enabled else TidemarkDataSource
    spark.dataSource.register(source)
    from tidemark.engines.spark.datasource_write import hudi_bundle_present

    if not hudi_bundle_present(spark):
        spark.dataSource.register(HudiAliasPushdownDataSource if enabled else HudiAliasDataSource)
