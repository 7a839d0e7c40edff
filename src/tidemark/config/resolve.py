"""Turn raw options into a typed, validated :class:`WriteConfig`: the one place keys are read."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tidemark.config.options import OPTIONS_BY_KEY
from tidemark.errors import ConfigError, UnknownOptionError


@dataclass(frozen=True)
class WriteConfig:
    """Validated writer options; every field has the default of its declared option."""

    max_file_size: int
    small_file_limit: int
    record_size_estimate: int
    compression: str
    combine_before_bulk_insert: bool
    insert_dup_policy: str
    set_null_for_missing_columns: bool
    concurrency_mode: str
    failed_writes_policy: str
    markers_type: str
    bulk_insert_parallelism: int
    upsert_parallelism: int


_FIELDS = {
    "max_file_size": "hoodie.parquet.max.file.size",
    "small_file_limit": "hoodie.parquet.small.file.limit",
    "record_size_estimate": "hoodie.copyonwrite.record.size.estimate",
    "compression": "hoodie.parquet.compression.codec",
    "combine_before_bulk_insert": "hoodie.combine.before.insert",
    "insert_dup_policy": "hoodie.datasource.insert.dup.policy",
    "set_null_for_missing_columns": "hoodie.write.set.null.for.missing.columns",
    "concurrency_mode": "hoodie.write.concurrency.mode",
    "failed_writes_policy": "hoodie.clean.failed.writes.policy",
    "markers_type": "hoodie.write.markers.type",
    "bulk_insert_parallelism": "hoodie.bulkinsert.shuffle.parallelism",
    "upsert_parallelism": "hoodie.upsert.shuffle.parallelism",
}


def validate_keys(options: Mapping[str, Any]) -> dict[str, str]:
    """Options as strings; raises UnknownOptionError (with the closest key) for unknown keys."""
    out: dict[str, str] = {}
    for key, value in options.items():
        if key not in OPTIONS_BY_KEY:
            close = difflib.get_close_matches(key, OPTIONS_BY_KEY, n=1, cutoff=0.6)
            raise UnknownOptionError(key, close[0] if close else None)
        if value is None:
            raise ConfigError(f"option {key!r} is None; give a value or leave it out", key=key)
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def parse_option(key: str, options: Mapping[str, str]) -> Any:
    option = OPTIONS_BY_KEY[key]
    raw = options.get(key, option.default)
    if raw is None:
        return None
    try:
        return option.parse(raw)
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"option {key}={raw!r} is invalid: {exc}", key=key) from exc


def resolve_write_config(options: Mapping[str, Any] | None) -> WriteConfig:
    """Validate ``options`` and return the typed writer configuration."""
    raw = validate_keys(options or {})
    values = {name: parse_option(key, raw) for name, key in _FIELDS.items()}
    config = WriteConfig(**values)
    if config.small_file_limit >= config.max_file_size:
        raise ConfigError(
            "hoodie.parquet.small.file.limit must be below hoodie.parquet.max.file.size "
            f"({config.small_file_limit} >= {config.max_file_size})",
            key="hoodie.parquet.small.file.limit",
        )
    return config
