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


def test_a_temporary_file_left_by_a_killed_writer_is_no_file_a_hudi_reader_takes(tmp_path: Path) -> None:
    """A writer killed between writing a temporary file and removing it leaves the temporary
    behind. Its name holds nothing of the file it stood for: hudi-rs parses any name of the form
    ``.<file id>_<instant>.log.<version>_<token>...`` as a log file, and a leftover of the metadata
    table's log file of a completed instant (named after it) made every hudi-rs read fail with
    "No schema available for merge output"."""
    import pyarrow as pa

    import tidemark
    from conftest import hudi_rs_read

    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part")
    table.bulk_insert(pa.table({"id": [1, 2], "part": ["a", "b"], "v": [1, 2]}))
    table.upsert(pa.table({"id": [1], "part": ["a"], "v": [5]}))
    storage = LocalStorage(str(path))
    files = path / ".hoodie" / "metadata" / "files"
    targets = [*sorted(files.glob(".files-*.log.*")), *sorted((path / "part=a").glob("*.parquet"))]
    assert len(targets) >= 3
    for target in targets:  # as left by a kill: the temporary of a completed file, empty
        leftover = Path(storage._temp_for(str(target)))  # noqa: SLF001 - the name a killed writer leaves
        leftover.touch()
        assert leftover.parent == target.parent and leftover.name.startswith(".") and target.name not in leftover.name
        assert ".log." not in leftover.name and not leftover.name.endswith((".parquet", ".hfile"))
    expected = {1: 5, 2: 2}
    for read in (hudi_rs_read(str(path)), tidemark.Table.open(str(path), spark=None).read()):
        assert dict(zip(read.column("id").to_pylist(), read.column("v").to_pylist(), strict=True)) == expected
