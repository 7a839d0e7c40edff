"""Options: unknown keys get a suggestion, bad values name their key."""

from __future__ import annotations

import pytest

from tidemark import ConfigError, UnknownOptionError
from tidemark.config import OPTIONS, resolve_write_config


def test_defaults_resolve() -> None:
    config = resolve_write_config({})
    assert config.max_file_size == 120 * 1024 * 1024
    assert config.concurrency_mode == "single_writer"
    assert config.failed_writes_policy == "EAGER"


def test_unknown_option_suggests_the_closest_key() -> None:
    with pytest.raises(UnknownOptionError) as info:
        resolve_write_config({"hoodie.parquet.max.filesize": "100"})
    assert info.value.suggestion == "hoodie.parquet.max.file.size"
    assert info.value.key == "hoodie.parquet.max.filesize"


def test_unknown_option_without_a_close_key() -> None:
    with pytest.raises(UnknownOptionError) as info:
        resolve_write_config({"completely.different": "1"})
    assert info.value.suggestion is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.parquet.max.file.size", "-5"),
        ("hoodie.parquet.max.file.size", "big"),
        ("hoodie.combine.before.insert", "maybe"),
        ("hoodie.write.concurrency.mode", "chaos"),
        ("hoodie.parquet.small.file.limit", str(200 * 1024 * 1024)),  # above the max file size
    ],
)
def test_bad_values_name_their_key(key: str, value: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_write_config({key: value})
    assert info.value.key == key


def test_every_option_has_docs_and_a_valid_default() -> None:
    for option in OPTIONS:
        assert option.doc
        if option.default is not None:
            option.parse(option.default)
