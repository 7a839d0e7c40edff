"""The footer Hudi expects in every base file: the record keys' bloom filter and range, the Avro schema.

Hudi's bloom index reads ``org.apache.hudi.bloomfilter``, ``hoodie_min_record_key`` and
``hoodie_max_record_key`` from each candidate file before it joins keys; Hudi's Avro
readers look for ``parquet.avro.schema``. tidemark writes all of them, in Hudi's form, into
every base file (bulk insert, upsert rewrites, compaction, clustering), so Hudi's writers
sharing the lake can index tidemark's files, and tidemark can prune files by them.
"""

from __future__ import annotations

import os
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tidemark.format.bloom import footer_metadata
from tidemark.format.names import RECORD_KEY
from tidemark.format.schema import file_avro_schema_json

AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"


def base_file_footer(record_keys: pa.Array | pa.ChunkedArray, schema: pa.Schema, table_name: str) -> dict[str, str]:
    """Footer entries for a base file of ``schema`` holding ``record_keys`` in file order."""
    keys = record_keys.combine_chunks() if isinstance(record_keys, pa.ChunkedArray) else record_keys
    footer = footer_metadata(keys.cast(pa.string()))
    try:
        footer[AVRO_SCHEMA_KEY] = file_avro_schema_json(schema, table_name)
        footer[WRITER_MODEL_KEY] = "avro"
    except ValueError:  # a type without an Avro form: the file stays readable, only Avro readers lack it
        pass
    return footer


def write_base_file(rows: pa.Table, full_path: str, table_name: str, **options: Any) -> None:
    """Write ``rows`` as one parquet base file with Hudi's footer.

    The footer goes in as key-value metadata at close, not as schema metadata: pyarrow would
    also copy schema metadata into its own serialized schema, storing the filter twice.
    """
    with pq.ParquetWriter(full_path, rows.schema, **options) as writer:
        writer.write_table(rows)
        writer.add_key_value_metadata(base_file_footer(rows.column(RECORD_KEY), rows.schema, table_name))


class FooterKeys:
    """Collects the record keys of a base file written in pieces, for its footer at close."""

    def __init__(self, table_name: str) -> None:
        self.table_name = table_name
        self._keys: list[pa.Array] = []

    def add(self, rows: pa.Table) -> None:
        self._keys.extend(rows.column(RECORD_KEY).chunks)

    def footer(self, schema: pa.Schema) -> dict[str, str]:
        keys = pa.chunked_array(self._keys, pa.string()) if self._keys else pa.array([], pa.string())
        return base_file_footer(keys, schema, self.table_name)


def table_name_of(base_path: str, table_name: str = "") -> str:
    """The name Hudi's Avro record is named after: the table's, else its folder's."""
    return table_name or os.path.basename(base_path.rstrip("/")) or "table"
