"""The storage seam's guarantees, on every backend: create-if-absent and compare-and-swap."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidemark.storage import CreateOutcome, LocalStorage
from tidemark.storage.location import StorageLocation


@pytest.fixture
def storage(tmp_path):  # noqa: ANN001 - pytest fixture
    return LocalStorage(str(tmp_path))


def test_replace_if_match_swaps_only_from_the_version_read(storage) -> None:  # noqa: ANN001
    assert storage.read_versioned("lock") is None
    assert storage.create_if_absent("lock", b"a") is CreateOutcome.CREATED
    first = storage.read_versioned("lock")
    assert first is not None and first.data == b"a"
    assert storage.replace_if_match("lock", b"b", first.version)
    # The version read before the swap is stale now: a second swap from it must fail.
    assert not storage.replace_if_match("lock", b"c", first.version)
    second = storage.read_versioned("lock")
    assert second is not None and second.data == b"b" and second.version != first.version


def test_replace_if_match_of_a_missing_file_fails(storage) -> None:  # noqa: ANN001
    assert not storage.replace_if_match("absent", b"x", "any-version")
    assert not storage.exists("absent")


def test_location_never_shows_secrets() -> None:
    location = StorageLocation("s3://bucket/t", {"aws_access_key_id": "AKIDNAME", "aws_secret_access_key": "s3cr3t"})
    assert "s3cr3t" not in repr(location)
    assert "AKIDNAME" in repr(location)


@pytest.mark.parametrize("data", [b"", b"payload"])
def test_create_if_absent_creates_once_with_its_folders_and_never_overwrites(storage, data: bytes) -> None:  # noqa: ANN001
    """An empty file (a marker) takes a shortcut, one exclusive create; the outcome is the same."""
    assert storage.create_if_absent("a/b/c.marker", data) is CreateOutcome.CREATED
    assert storage.read_bytes("a/b/c.marker") == data
    assert storage.create_if_absent("a/b/c.marker", b"") is CreateOutcome.ALREADY_EXISTS
    assert storage.create_if_absent("a/b/c.marker", b"other") is CreateOutcome.ALREADY_EXISTS
    assert storage.read_bytes("a/b/c.marker") == data
    assert [p.name for p in (Path(storage.base_path) / "a" / "b").iterdir()] == ["c.marker"]  # no temporary left
