"""Table-level options: the ``scope="table"`` declarations of :mod:`tidemark.config.options`.

They are fixed when a table is created and kept in its ``hoodie.properties``: the table
name and database, partition folder naming, the record merge settings and the index.
This module splits them from the writer's options, parses them into typed values, and
checks that options given to an existing table agree with what it stores (they cannot
change). Building the merger and the bucket index from these values is the job of the
layers that own those ideas (:mod:`tidemark.merge`, :mod:`tidemark.write.bucket`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidemark.config.options import OPTIONS
from tidemark.config.resolve import parse_option, validate_keys
from tidemark.errors import ConfigError

# Hudi's key (also tidemark.format.partition_path.URL_ENCODE_KEY, a layer above).
URL_ENCODE_KEY = "hoodie.datasource.write.partitionpath.urlencode"
MERGE_KEYS = (
    "hoodie.record.merge.mode",
    "hoodie.table.partial.update.mode",
    "hoodie.record.merge.column.groups",
    "hoodie.write.record.merge.custom.implementation.classes",
)
INDEX_KEYS = ("hoodie.index.type", "hoodie.bucket.index.num.buckets", "hoodie.bucket.index.hash.field")
# Every option declared with scope="table": not part of the writer's configuration.
TABLE_KEYS = frozenset(option.key for option in OPTIONS if option.scope == "table")


def column_names(value: str | Sequence[str] | None, what: str) -> tuple[str, ...]:
    """``value`` (one name or several) as a tuple of stripped column names; ConfigError for
    anything that is not a non-empty string."""
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigError(f"{what} must be column names, got {value!r}")
    return tuple(i.strip() for i in items)


def write_options(raw: Mapping[str, str]) -> dict[str, str]:
    """The writer's options of ``raw`` (already validated): every key but the table-level ones."""
    return {k: v for k, v in raw.items() if k not in TABLE_KEYS}


def resolve_writer_options(options: Mapping[str, Any] | None) -> dict[str, str]:
    """Validate ``options`` (UnknownOptionError, ConfigError) and keep the writer's ones."""
    return write_options(validate_keys(options or {}))


@dataclass(frozen=True)
class MergeOptions:
    """The record merge settings as given (validated together by ``MergeConfig.build``)."""

    mode: str | None
    partial_update_mode: str | None
    column_groups: str | None
    custom_class: str | None


def merge_options(raw: Mapping[str, str]) -> MergeOptions:
    return MergeOptions(
        mode=parse_option("hoodie.record.merge.mode", raw),
        partial_update_mode=parse_option("hoodie.table.partial.update.mode", raw),
        column_groups=parse_option("hoodie.record.merge.column.groups", raw),
        custom_class=parse_option("hoodie.write.record.merge.custom.implementation.classes", raw),
    )


@dataclass(frozen=True)
class IndexOptions:
    """The index as given: ``SIMPLE``, or ``BUCKET`` with its bucket count and hashed fields."""

    index_type: str
    num_buckets: int | None = None
    hash_fields: tuple[str, ...] = ()  # default: the record-key fields


def index_options(raw: Mapping[str, str], keys: tuple[str, ...]) -> IndexOptions:
    """The index options; ConfigError for bucket options without ``hoodie.index.type=BUCKET``."""
    index_type = parse_option("hoodie.index.type", raw)
    if index_type != "BUCKET":
        for key in ("hoodie.bucket.index.num.buckets", "hoodie.bucket.index.hash.field"):
            if key in raw:
                raise ConfigError(f"{key} needs hoodie.index.type=BUCKET", key=key)
        return IndexOptions(index_type)
    hash_fields = column_names(parse_option("hoodie.bucket.index.hash.field", raw), "hoodie.bucket.index.hash.field")
    if len(hash_fields) == 1 and "," in hash_fields[0]:
        hash_fields = tuple(f.strip() for f in hash_fields[0].split(",") if f.strip())
    return IndexOptions("BUCKET", parse_option("hoodie.bucket.index.num.buckets", raw), hash_fields or keys)


def check_fixed_options(raw: Mapping[str, str], props: Mapping[str, str]) -> None:
    """Table-scope options given to open() must agree with hoodie.properties: they cannot change."""
    if URL_ENCODE_KEY in raw:
        stored_encode = props.get(URL_ENCODE_KEY, "false").strip().lower() == "true"
        if parse_option(URL_ENCODE_KEY, raw) != stored_encode:
            raise ConfigError(
                f"{URL_ENCODE_KEY} is fixed when a table is created (it decides how partition folders are "
                f"named): this table has {str(stored_encode).lower()!r}, the options give {raw[URL_ENCODE_KEY]!r}",
                key=URL_ENCODE_KEY,
            )
    for key in (*MERGE_KEYS, *INDEX_KEYS):
        if key not in raw:
            continue
        given = parse_option(key, raw)
        stored_raw = props.get(key)
        if stored_raw is None and key in ("hoodie.index.type",):
            stored_raw = "SIMPLE"
        stored = parse_option(key, {key: stored_raw}) if stored_raw is not None else None
        if key == "hoodie.bucket.index.hash.field" and given is not None and stored is not None:
            given, stored = given.replace(" ", ""), stored.replace(" ", "")
        if given != stored:
            raise ConfigError(
                f"{key} is fixed when a table is created: this table has {stored_raw!r}, the options "
                f"give {raw[key]!r}; it cannot change on an existing table",
                key=key,
            )
