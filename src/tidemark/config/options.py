"""Every option tidemark accepts, declared once: key, default, parser and documentation.

Keys are Hudi's own where Hudi has one, so a Hudi user finds them where they
look. :mod:`tidemark.config.resolve` turns raw string options into typed
configs; nothing else reads a ``hoodie.*`` string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Parser = Callable[[str], Any]


def parse_bool(value: str) -> bool:
    lowered = str(value).strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise ValueError("expected true or false")


def parse_positive_int(value: str) -> int:
    number = int(str(value).strip())
    if number <= 0:
        raise ValueError("expected a positive whole number")
    return number


def parse_non_negative_int(value: str) -> int:
    number = int(str(value).strip())
    if number < 0:
        raise ValueError("expected a whole number >= 0")
    return number


def choice(*allowed: str) -> Parser:
    def parse(value: str) -> str:
        normalized = str(value).strip().upper()
        for option in allowed:
            if option.upper() == normalized:
                return option
        raise ValueError(f"expected one of {', '.join(allowed)}")

    return parse


def parse_str(value: str) -> str:
    return str(value)


@dataclass(frozen=True)
class Option:
    key: str
    default: str | None
    parse: Parser
    doc: str
    scope: str = "write"  # "table": fixed at create time and kept in hoodie.properties


OPTIONS: tuple[Option, ...] = (
    Option(
        "hoodie.table.name",
        None,
        parse_str,
        "Table name written to hoodie.properties (default: the folder name).",
        "table",
    ),
    Option("hoodie.database.name", "default", parse_str, "Database name written to hoodie.properties.", "table"),
    Option(
        "hoodie.datasource.write.hive_style_partitioning",
        "true",
        parse_bool,
        "Partition folders named field=value (true) or just value (false).",
        "table",
    ),
    Option(
        "hoodie.parquet.max.file.size",
        str(120 * 1024 * 1024),
        parse_positive_int,
        "Largest base file to write, in bytes; larger file groups are split.",
    ),
    Option(
        "hoodie.parquet.small.file.limit",
        str(100 * 1024 * 1024),
        parse_non_negative_int,
        "Base files smaller than this take new inserts first (0 turns it off).",
    ),
    Option(
        "hoodie.copyonwrite.record.size.estimate",
        "1024",
        parse_positive_int,
        "Bytes per record assumed before the table has commits to learn it from.",
    ),
    Option(
        "hoodie.parquet.compression.codec",
        "snappy",
        choice("snappy", "gzip", "zstd", "lz4", "none", "uncompressed"),
        "Compression codec of base files.",
    ),
    Option(
        "hoodie.combine.before.insert",
        "false",
        parse_bool,
        "Deduplicate bulk_insert batches by key (insert and upsert always do).",
    ),
    Option(
        "hoodie.datasource.insert.dup.policy",
        "none",
        choice("none", "drop", "fail"),
        "insert of a key already in the table: none = update it (never a duplicate), "
        "drop = keep the stored record, fail = raise InvalidInputError.",
    ),
    Option(
        "hoodie.write.set.null.for.missing.columns",
        "false",
        parse_bool,
        "Accept batches that lack some table columns, writing nulls for them.",
    ),
    Option(
        "hoodie.write.concurrency.mode",
        "single_writer",
        choice("single_writer"),
        "Concurrency control: single_writer (one writer at a time).",
    ),
    Option(
        "hoodie.clean.failed.writes.policy",
        "EAGER",
        choice("EAGER", "LAZY", "NEVER"),
        "When failed writes are rolled back: EAGER = at the next write's start.",
    ),
    Option(
        "hoodie.write.markers.type",
        "DIRECT",
        choice("DIRECT"),
        "How markers are kept: DIRECT = one file per data file under .hoodie/.temp.",
    ),
    Option(
        "hoodie.bulkinsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for bulk_insert (0 = keep the input's partitioning).",
    ),
    Option(
        "hoodie.upsert.shuffle.parallelism",
        "0",
        parse_non_negative_int,
        "Spark partitions for the write stage of upsert/insert/delete (0 = Spark's default).",
    ),
)

OPTIONS_BY_KEY: dict[str, Option] = {o.key: o for o in OPTIONS}
