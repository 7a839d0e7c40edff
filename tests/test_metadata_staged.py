"""A commit's metadata deltacommit is written before the table lock and completed under it.

(src/tidemark/metadata/staged_deltacommit.py.) Checked here: what a commit publishes (the
deltacommit of the write's own time, completed after every other metadata instant, its log
file, no staged file left behind); what another writer does between the staging and the lock
(a compaction of the files partition; removing the metadata table; rolling the write back) is
handled; and the in-sync verdict under the lock is taken from what the check before it found
only while nothing it reads changed. A crash between staging and publishing (a real process
killed there) is in tests/test_metadata_maintained.py (``test_a_failed_write_rolled_back_keeps_it_true``).
hudi-rs, which lists files through the ``files`` partition, reads the right rows throughout.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
import tidemark.write.commit as commit_module
from conftest import hudi_rs_read
from tidemark.errors import HeartbeatExpiredError
from tidemark.metadata import METADATA_DIR, sync_state
from tidemark.metadata.files import read_files_partition
from tidemark.recovery.rollback import rollback
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Instant, State, Timeline, new_instant_time
from tidemark.timeline.instant import parse_instant_file_name

MDT_TIMELINE = f"{METADATA_DIR}/.hoodie/timeline"
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "filesystem",
       "hoodie.metadata.compact.max.delta.commits": "3"}


def _row(i: int, v: str = "x") -> pa.Table:
    """One row in partition ``v`` (writers in different partitions never conflict)."""
    return pa.table({"id": [i], "v": [f"{v}{i}"], "p": [v]})


def _ids(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["v"]) for r in rows.select(["id", "v"]).to_pylist())


def _folder_listing(path: Path) -> dict[str, dict[str, int]]:
    """The data files in the table's partition folders, by name, with their sizes."""
    return {p.name: {f.name: f.stat().st_size for f in p.iterdir() if not f.name.startswith(".")}
            for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")}


def _create(path: Path) -> tidemark.Table:
    return tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", options=OCC)


def _assert_true(path: Path, table: tidemark.Table) -> None:
    """The files partition lists exactly the folder's files; hudi-rs (listing through it) reads
    what tidemark reads."""
    listing = read_files_partition(LocalStorage(str(path)))
    assert listing is not None
    assert {p: dict(f) for p, f in listing.files.items()} == _folder_listing(path)
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())


def _mdt(path: Path) -> list[Instant]:
    return [i for n in os.listdir(path / MDT_TIMELINE) if (i := parse_instant_file_name(n)) is not None]


def _between_staging_and_lock(monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], None]) -> list[Any]:
    """Run ``meanwhile`` (another writer's work) once, right after the next commit staged its
    metadata deltacommit and before it takes the lock; returns what staging returned."""
    real = commit_module.stage_deltacommit
    staged: list[Any] = []

    def stage_then_wait(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if not staged:
            staged.append(result)
            meanwhile()
        return result

    monkeypatch.setattr(commit_module, "stage_deltacommit", stage_then_wait)
    return staged


def test_a_commit_publishes_its_staged_deltacommit(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _create(path)
    for i in range(2):
        table.upsert(_row(i))
    before = _mdt(path)
    latest_before = max(t for i in before for t in (i.requested_time, i.completion_time or ""))
    table.upsert(_row(7))
    t = max(i.requested_time for i in table.timeline() if i.action is Action.COMMIT)
    ours = [i for i in _mdt(path) if i.requested_time == t and i.action is Action.DELTA_COMMIT]
    assert {i.state for i in ours} == {State.REQUESTED, State.INFLIGHT, State.COMPLETED}
    completed = next(i for i in ours if i.state is State.COMPLETED)
    # Completed after every instant the metadata timeline had, and before the data instant.
    assert completed.completion_time is not None and completed.completion_time > latest_before
    data = Timeline.load(table.storage).completed_instant(t)
    assert data is not None and (data.completion_time or "") > completed.completion_time
    assert (path / METADATA_DIR / "files" / f".files-0000-0_{t}.log.1_0-0-0").exists()
    assert not [n for n in os.listdir(path / MDT_TIMELINE) if n.startswith(".")]  # no staged file left
    _assert_true(path, table)


def test_a_compaction_by_another_writer_while_waiting_for_the_lock(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Writer B commits (and compacts the files partition) between A's staging and A's lock: A's
    log file completes after B's compaction and lands in the new slice."""
    path = tmp_path / "t"
    a = _create(path)
    b = tidemark.Table.open(str(path), spark=None, options=OCC)
    a.upsert(_row(0))

    def b_commits_until_compacted() -> None:
        compactions = len([i for i in _mdt(path) if i.action is Action.COMPACTION])
        for i in range(10, 20):
            b.upsert(_row(i, "b"))
            if len([i for i in _mdt(path) if i.action is Action.COMPACTION]) > compactions:
                return
        raise AssertionError("writer B never compacted the files partition")

    staged = _between_staging_and_lock(monkeypatch, b_commits_until_compacted)
    a.upsert(_row(1, "a"))
    assert staged and staged[0] is not None
    t = staged[0].files.instant_time
    compaction = max(i.requested_time for i in _mdt(path) if i.action is Action.COMPACTION)
    assert t < compaction  # A's deltacommit was requested before the compaction ...
    mine = next(i for i in _mdt(path) if i.requested_time == t and i.state is State.COMPLETED)
    assert (mine.completion_time or "") > compaction  # ... and completed after it: in the new slice
    assert (1, "a1") in _ids(hudi_rs_read(str(path)))
    _assert_true(path, a)


def test_the_metadata_table_removed_while_waiting_for_the_lock(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Writer B (hoodie.metadata.enable=false) removes the metadata table between A's staging and
    A's lock: A commits without recording anything and leaves no metadata folder behind."""
    path = tmp_path / "t"
    a = _create(path)
    b = tidemark.Table.open(str(path), spark=None, options={**OCC, "hoodie.metadata.enable": "false"})
    a.upsert(_row(0))
    staged = _between_staging_and_lock(monkeypatch, lambda: b.upsert(_row(5, "b")))
    a.upsert(_row(1, "a"))
    assert staged and staged[0] is not None  # A had staged into the metadata table B removed
    assert not (path / METADATA_DIR).exists()
    assert _ids(hudi_rs_read(str(path))) == _ids(a.read()) == [(0, "x0"), (1, "a1"), (5, "b5")]


def test_a_write_rolled_back_while_waiting_for_the_lock_withdraws_its_deltacommit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer rolls A's pending write back (as after an expired heartbeat) between A's
    staging and its lock: A refuses to publish and nothing of its deltacommit stays."""
    path = tmp_path / "t"
    a = _create(path)
    a.upsert(_row(0))
    storage = LocalStorage(str(path))

    def roll_back_a() -> None:
        timeline = Timeline.load(storage)
        (pending,) = [i for i in timeline if i.action is Action.COMMIT and not i.is_completed]
        rollback(storage, pending, timeline=timeline)

    staged = _between_staging_and_lock(monkeypatch, roll_back_a)
    with pytest.raises(HeartbeatExpiredError):
        a.upsert(_row(1, "a"))
    t = staged[0].files.instant_time
    assert not [i for i in _mdt(path) if i.requested_time == t]
    assert not [n for n in os.listdir(path / METADATA_DIR / "files") if f"_{t}.log." in n]
    assert not [n for n in os.listdir(path / MDT_TIMELINE) if n.startswith(".")]
    a.upsert(_row(2, "a"))  # the table goes on, its metadata table kept and true
    _assert_true(path, a)
    assert _ids(a.read()) == [(0, "x0"), (2, "a2")]


def test_the_guard_under_the_lock_works_the_verdict_out_again_when_the_table_changed(tmp_path: Path) -> None:
    """The remembered in-sync verdict holds only while the table only grew by instants that keep
    it in sync: a data instant completed without its metadata deltacommit (a writer that does
    not keep the metadata table) is caught and the metadata table removed."""
    path = tmp_path / "t"
    table = _create(path)
    table.upsert(_row(0))
    table.upsert(_row(1))
    storage = LocalStorage(str(path))
    assert sync_state._IN_SYNC.get(storage.base_path) is not None  # remembered
    # A completed commit the metadata table does not know (as a writer that ignores it leaves).
    last = max(i.requested_time for i in table.timeline())
    stranger = new_instant_time(floor=last)
    timeline_dir = path / ".hoodie" / "timeline"
    (timeline_dir / f"{stranger}.commit.requested").write_bytes(b"")
    (timeline_dir / f"{stranger}.inflight").write_bytes(b"")
    done = next(n for n in os.listdir(timeline_dir) if n.startswith(f"{last}_") and n.endswith(".commit"))
    completed = timeline_dir / f"{stranger}_{new_instant_time(floor=stranger)}.commit"
    completed.write_bytes((timeline_dir / done).read_bytes())
    table.upsert(_row(2))
    assert not (path / METADATA_DIR).exists()  # found behind: removed, as before
    assert _ids(hudi_rs_read(str(path))) == _ids(table.read())


def test_an_orphaned_staged_deltacommit_is_withdrawn_at_the_next_compaction(tmp_path: Path) -> None:
    """A write rolled back by another writer, whose process then staged its deltacommit and died
    before the lock, leaves a pending deltacommit whose data instant is gone. The next compaction
    of the files partition withdraws it (archival would otherwise stop at it for good), and the
    metadata timeline is archived past it."""
    from tidemark.metadata.staged_deltacommit import stage_deltacommit

    path = tmp_path / "t"
    # The data table archives early, so the metadata timeline may be archived within the test.
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="p", options={
        **OCC, "hoodie.clean.commits.retained": "1", "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"})
    table.upsert(_row(0))
    storage = LocalStorage(str(path))
    orphan = new_instant_time(floor=max(i.requested_time for i in table.timeline()))
    assert stage_deltacommit(storage, orphan, []) is not None  # staged; its data instant never existed
    assert {i.state for i in _mdt(path) if i.requested_time == orphan} == {State.REQUESTED, State.INFLIGHT}
    for i in range(1, 16):  # compactions every 3 deltacommits (OCC above), each followed by clean + archive
        table.upsert(_row(i))
    assert not [i for i in _mdt(path) if i.requested_time == orphan]
    assert not [n for n in os.listdir(path / METADATA_DIR / "files") if f"_{orphan}.log." in n]
    oldest = min(i.requested_time for i in _mdt(path) if not i.requested_time.startswith("0000"))
    assert oldest > orphan  # archival went past where the orphan stood
    _assert_true(path, table)
    assert _ids(table.read()) == [(i, f"x{i}") for i in range(16)]
