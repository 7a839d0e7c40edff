"""The storage seam's guarantees, on every backend: create-if-absent and compare-and-swap."""

from __future__ import annotations

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
