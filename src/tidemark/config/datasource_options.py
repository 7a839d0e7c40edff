"""The Spark data source's write keys: ``df.write`` / ``df.writeStream`` ``.format("tidemark")``.

Declared apart from the writer's options (:mod:`tidemark.config.options`): only the data source
reads them (engines/spark/datasource_write.py); Table.create/open take the same facts as
arguments and refuse these keys as unknown.
"""

from __future__ import annotations

from tidemark.config.options import Option, choice, parse_non_negative_int, parse_str

WRITE_OPERATIONS = (
    "upsert", "insert", "bulk_insert", "delete", "insert_overwrite", "insert_overwrite_table", "delete_partition",
)
DATASOURCE_WRITE_OPTIONS: tuple[Option, ...] = (
    Option("hoodie.datasource.write.recordkey.field", None, parse_str,
           "Record-key column(s), comma-separated (needed to create the table; checked against an existing one).",
           "datasource"),
    Option("hoodie.datasource.write.partitionpath.field", None, parse_str,
           "Partition column(s), comma-separated (empty: a non-partitioned table).", "datasource"),
    Option("hoodie.datasource.write.precombine.field", None, parse_str,
           "Ordering (precombine) column(s) of a new table; Hudi 1.1's hoodie.table.ordering.fields also works.",
           "datasource"),
    Option("hoodie.table.ordering.fields", None, parse_str, "Ordering column(s) of a new table.", "datasource"),
    Option("hoodie.datasource.write.table.type", "COPY_ON_WRITE", choice("COPY_ON_WRITE", "MERGE_ON_READ"),
           "Table type of a new table (hoodie.table.type is accepted too).", "datasource"),
    Option("hoodie.table.type", None, choice("COPY_ON_WRITE", "MERGE_ON_READ"), "Table type of a new table.",
           "datasource"),
    Option("hoodie.datasource.write.operation", "upsert", choice(*WRITE_OPERATIONS),
           "The write operation; mode('overwrite') turns upsert/insert/bulk_insert into insert_overwrite_table.",
           "datasource"),
    Option("hoodie.datasource.write.partitions.to.delete", None, parse_str,
           "delete_partition: partition paths to delete, comma-separated (default: the batch's partitions).",
           "datasource"),
    Option("hoodie.datasource.write.keygenerator.class", None, parse_str,
           "Accepted for Hudi jobs when it is Simple, Complex or NonpartitionedKeyGenerator (what tidemark's "
           "keys are); any other key generator is refused.", "datasource"),
    Option("hoodie.datasource.write.streaming.checkpoint.identifier", None, parse_str,
           "Streaming sink: the query's identity recorded with each micro-batch's commit (exactly once). "
           "Default: derived from the query's checkpointLocation.", "datasource"),
    Option("hoodie.datasource.write.streaming.retry.count", "3", parse_non_negative_int,
           "Streaming sink: extra attempts of a micro-batch whose commit lost a write conflict.", "datasource"),
    Option("hoodie.datasource.write.streaming.retry.interval.ms", "2000", parse_non_negative_int,
           "Streaming sink: pause before retrying a conflicting micro-batch.", "datasource"),
)
