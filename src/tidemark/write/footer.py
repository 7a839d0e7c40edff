"""The footer Hudi expects in every base file: the record keys' bloom filter and range, the Avro schema.

Hudi's bloom index reads ``org.apache.hudi.bloomfilter``, ``hoodie_min_record_key`` and
``hoodie_max_record_key`` from each candidate file before it joins keys; Hudi's Avro
readers look for ``parquet.avro.schema``. tidemark writes all of them, in Hudi's form, into
every base file (bulk insert, upsert rewrites, compaction, clustering), so Hudi's writers
sharing the lake can index tidemark's files, and tidemark can prune files by them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.format.bloom import footer_metadata
from tidemark.format.names import RECORD_KEY
from tidemark.format.schema import file_avro_schema_json
from tidemark.write.spec import WriteSpec

AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"


def base_file_footer(
    record_keys: pa.Array | pa.ChunkedArray, schema: pa.Schema, table_name: str, *, bloom_filter: bool = True
) -> dict[str, str]:
    """Footer entries for a base file of ``schema`` holding ``record_keys`` in file order
    (``bloom_filter``: hoodie.parquet.bloom.filter.enabled)."""
    keys = record_keys.combine_chunks() if isinstance(record_keys, pa.ChunkedArray) else record_keys
    footer = footer_metadata(keys.cast(pa.string()), with_filter=bloom_filter)
    try:
        footer[AVRO_SCHEMA_KEY] = file_avro_schema_json(schema, table_name)
        footer[WRITER_MODEL_KEY] = "avro"
    except ValueError:  # a type without an Avro form: the file stays readable, only Avro readers lack it
        pass
    return footer


def write_base_file(rows: pa.Table, full_path: str | pa.NativeFile, spec: WriteSpec, **options: Any) -> None:
    """Write ``rows`` as one parquet base file with Hudi's footer.

    The footer goes in as key-value metadata at close, not as schema metadata: pyarrow would
    also copy schema metadata into its own serialized schema, storing the filter twice.
    """
    with pq.ParquetWriter(full_path, rows.schema, **options) as writer:
        writer.write_table(rows)
        writer.add_key_value_metadata(FooterKeys(spec).footer(rows.schema, rows.column(RECORD_KEY)))


class FooterKeys:
    """Collects the record keys of a base file written in pieces, for its footer at close."""

    def __init__(self, spec: WriteSpec) -> None:
        self.table_name = table_name_of(spec.base_path, spec.table_name)
        self.bloom_filter = spec.bloom_filter
        self._keys: list[pa.Array] = []

    def add(self, rows: pa.Table) -> None:
        self._keys.extend(rows.column(RECORD_KEY).chunks)

    def footer(self, schema: pa.Schema, keys: pa.ChunkedArray | None = None) -> dict[str, str]:
        """The footer of a file of ``schema`` holding the keys added (or ``keys``)."""
        if keys is None:
            keys = pa.chunked_array(self._keys, pa.string())
        return base_file_footer(keys, schema, self.table_name, bloom_filter=self.bloom_filter)


def table_name_of(base_path: str, table_name: str = "") -> str:
    """The name Hudi's Avro record is named after: the table's, else its folder's."""
    return table_name or base_path.rstrip("/").rsplit("/", 1)[-1] or "table"
