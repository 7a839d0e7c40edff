"""The file-system view's listing: the metadata table's ``files`` partition, or partition folders.

With ``hoodie.metadata.enable=true`` the view (the commit path's, reads', the planners')
takes its files from the metadata table when it is in sync with the data timeline and lists
no data folder; with ``false``, or when the metadata table is behind, it lists the partition
folders it is asked about. Either way it must see exactly the file groups and slices a walk
of the whole table sees, and hudi-rs must agree with what tidemark reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.fsview import FileSystemView
from tidemark.metadata.files_writer import TIMELINE as METADATA_TIMELINE
from tidemark.metadata.listing import metadata_listing, table_listing, table_view
from tidemark.storage import Storage
from tidemark.timeline import Timeline

COLS = ["id", "part", "v"]


def _rows(*pairs: tuple[int, str]) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": f"p{i % 3}", "ts": 1, "v": v} for i, v in pairs])


def _slices(view: FileSystemView) -> list[tuple[str, str, str, tuple[str, ...]]]:
    return sorted((s.base.partition_path, s.base.file_id, s.base.path, tuple(lf.path for lf in s.logs))
                  for s in view.latest_file_slices())


def _groups(view: FileSystemView) -> list[tuple[str, str, tuple[str, ...]]]:
    return sorted((g.partition_path, g.file_id, tuple(b.path for b in g.base_files)) for g in view.file_groups())


class _Counting:
    """A storage that records which folders were listed (delegates everything)."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner
        self.listed: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def list_dir(self, path: str) -> Any:
        self.listed.append(path)
        return self._inner.list_dir(path)

    def walk_files(self, path: str = "", **kw: Any) -> Any:
        self.listed.append(f"walk:{path}")
        return self._inner.walk_files(path, **kw)


def _history(t: Table) -> None:
    t.upsert(_rows(*[(i, "a") for i in range(9)]))
    t.upsert(_rows((1, "b"), (4, "b")))
    t.delete(_rows((2, "x")))
    t.upsert(_rows((10, "c"), (5, "c")))
    t.clean()
    t.upsert(_rows((7, "d")))


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@pytest.mark.parametrize("enable", ["true", "false"])
def test_the_view_sees_what_a_walk_sees_through_either_listing(tmp_path: Path, enable: str, table_type: str) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", ordering_field="ts",
                     table_type=table_type, options={"hoodie.metadata.enable": enable,
                                                     "hoodie.clean.commits.retained": "1"})
    _history(t)
    timeline = Timeline.load(t.storage)
    listing = table_listing(t.storage, timeline)
    assert listing.source == ("metadata table" if enable == "true" else "folders")
    walked = FileSystemView(t.storage, timeline)
    counting = _Counting(t.storage)
    listed = FileSystemView(counting, timeline, listing=table_listing(counting, timeline))  # type: ignore[arg-type]
    assert _groups(listed) == _groups(walked)
    assert _slices(listed) == _slices(walked)
    if enable == "true":
        # On a local disk the view keeps only the metadata table's files still in their folder (one
        # directory read per partition asked, no walk), so a file deleted by hand is reported; on an
        # object store no data folder is listed (tests/test_object_store_requests.py).
        assert sorted(counting.listed) == sorted({g.partition_path for g in walked.file_groups()})
    else:
        assert counting.listed == ["walk:"]  # all partitions of a partitioned table: one walk, as before
        one = FileSystemView(counting, timeline, listing=table_listing(counting, timeline))  # type: ignore[arg-type]
        counting.listed.clear()
        second = walked.partitions()[1]
        assert {g.partition_path for g in one.file_groups([second])} == {second}
        assert counting.listed == [second]  # asked for one partition: only its folder
    expected = sorted(rows_of(t.read(), COLS))
    assert len(expected) == 9
    assert sorted(rows_of(hudi_rs_read(t.path), COLS)) == expected
    t.close()


def test_a_metadata_table_behind_the_timeline_is_not_trusted(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", ordering_field="ts",
                     options={"hoodie.metadata.enable": "true"})
    t.upsert(_rows((1, "a"), (2, "a")))
    last = t.upsert(_rows((3, "b")))
    found, why = metadata_listing(t.storage, Timeline.load(t.storage))
    assert found is not None and why == ""
    # The deltacommit that recorded the last commit's files goes missing: the listing lacks them.
    done = [n for n in t.storage.list_names(METADATA_TIMELINE)
            if n.startswith(f"{last.instant_time}_") and n.endswith(".deltacommit")]
    assert len(done) == 1
    t.storage.delete(f"{METADATA_TIMELINE}/{done[0]}")
    timeline = Timeline.load(t.storage)
    found, why = metadata_listing(t.storage, timeline)
    assert found is None and last.instant_time in why
    view = table_view(t.storage, timeline)
    assert view.listing is not None and view.listing.source == "folders"
    assert _slices(view) == _slices(FileSystemView(t.storage, timeline))
    assert sorted(rows_of(t.read(), COLS)) == [(1, "p1", "a"), (2, "p2", "a"), (3, "p0", "b")]
    t.close()
