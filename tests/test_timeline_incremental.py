"""The commit's critical section works on what changed since the write's snapshot.

A reload parses only the new names of the listing; the instants completed since a snapshot
are found among the names that are new (``Timeline.completed_since``), which must be exactly
the instants the snapshot did not hold completed, whatever their requested or completion
times; the completed file's bytes are staged before the lock and named under it.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from tidemark import WriteConflictError
from tidemark.concurrency.conflict import CommitWindow, ConflictResolutionStrategy, PendingCommit
from tidemark.format.commit_metadata import CommitMetadata, WriteStat
from tidemark.storage import CreateOutcome, LocalStorage
from tidemark.storage.staged import stage
from tidemark.timeline import Action, Instant, State, Timeline, instant_file_name
from tidemark.timeline import timeline as timeline_module
from tidemark.timeline.instant_time import format_instant_time, parse_instant_time

TL = ".hoodie/timeline"
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "filesystem"}


def _stat(partition: str, file_id: str) -> WriteStat:
    return WriteStat(partition, file_id, f"{partition}/{file_id}_0-0-0_x.parquet", None, 0, 1, 0, 0, 1)


def _request(storage: LocalStorage, t: str) -> None:
    storage.create_if_absent(f"{TL}/{instant_file_name(t, Action.COMMIT, State.REQUESTED)}")


def _complete(storage: LocalStorage, t: str, c: str, stats: tuple[WriteStat, ...] = ()) -> Instant:
    inst = Instant(t, Action.COMMIT, State.COMPLETED, c)
    storage.create_if_absent(f"{TL}/{inst.file_name}", CommitMetadata("UPSERT", stats).to_bytes())
    return inst


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id").close()
    return LocalStorage(str(tmp_path / "t"))


def _fresh(storage: LocalStorage) -> Timeline:
    """The timeline parsed from scratch (no incremental state of earlier loads)."""
    timeline_module._LOADED.pop(storage.base_path, None)
    return Timeline.load(storage)


def test_a_reload_extended_with_new_names_equals_a_fresh_parse(storage: LocalStorage) -> None:
    _request(storage, "20260101000000100")
    _complete(storage, "20260101000000200", "20260101000000300")
    first = Timeline.load(storage)
    assert first.max_time() == "20260101000000300"
    _complete(storage, "20260101000000100", "20260101000000500")  # pending -> completed
    _request(storage, "20260101000000400")
    again = Timeline.load(storage)
    assert again.max_time() == "20260101000000500"
    assert [i.requested_time for i in again.pending] == ["20260101000000400"]
    assert again.pending_instant("20260101000000400") is not None
    assert again.pending_instant("20260101000000100") is None  # completed now
    fresh = _fresh(storage)
    assert list(again) == list(fresh)
    assert again.pending == fresh.pending == [i for i in fresh if not i.is_completed]
    assert again.max_time() == fresh.max_time()


def test_a_vanished_hidden_temp_file_does_not_count_as_an_instant_removed(storage: LocalStorage) -> None:
    _complete(storage, "20260101000000200", "20260101000000300")
    staged = stage(storage, TL, b"x")  # a hidden .tmp file in the folder, as a commit stages it
    loaded = Timeline.load(storage)
    state = timeline_module._LOADED[storage.base_path]
    staged.discard()
    Timeline.load(storage)
    # extended, not parsed again: the same parsed instants are carried over
    assert timeline_module._LOADED[storage.base_path].best is state.best
    assert list(Timeline.load(storage)) == list(loaded)
    # a removed instant file does make it parse again
    (Path(storage.base_path) / TL / Instant("20260101000000200", Action.COMMIT, State.COMPLETED,
                                            "20260101000000300").file_name).unlink()
    assert list(Timeline.load(storage)) == []


def test_completed_since_finds_instants_completing_with_older_times(storage: LocalStorage) -> None:
    _request(storage, "20260101000000100")  # pending in the snapshot
    done = _complete(storage, "20260101000000200", "20260101000000300")
    snapshot = Timeline.load(storage)
    # After the snapshot: the pending one completes with a completion time older than the
    # snapshot's latest time (another writer's clock), and an instant the snapshot never saw
    # appears with a requested time older than anything in it.
    late = _complete(storage, "20260101000000100", "20260101000000250")
    unseen = _complete(storage, "20260101000000050", "20260101000000060")
    now = Timeline.load(storage)
    since = now.completed_since(snapshot.file_names)
    assert since == [unseen, late]
    window = CommitWindow("20260101000000900", frozenset(i.requested_time for i in snapshot.completed),
                          snapshot.file_names)
    slow = CommitWindow(window.requested_time, window.seen)  # the pass over every instant
    assert window.candidates(now) == slow.candidates(now) == [unseen, late]
    assert done not in since


def test_a_writer_completing_between_the_snapshot_and_the_lock_is_conflict_checked(storage: LocalStorage) -> None:
    _complete(storage, "20260101000000100", "20260101000000150", (_stat("p", "f0"),))
    _request(storage, "20260101000000200")  # the other writer, pending when we plan
    snapshot = Timeline.load(storage)
    _request(storage, "20260101000000300")  # ours
    _complete(storage, "20260101000000200", "20260101000000250", (_stat("p", "f1"),))
    now = Timeline.load(storage)
    seen = frozenset(i.requested_time for i in snapshot.completed)
    disjoint = PendingCommit("20260101000000300", (_stat("p", "f2"),), {}, seen, snapshot.file_names)
    ConflictResolutionStrategy().check(storage, now, disjoint)
    shared = PendingCommit("20260101000000300", (_stat("p", "f1"),), {}, seen, snapshot.file_names)
    with pytest.raises(WriteConflictError) as info:
        ConflictResolutionStrategy().check(storage, now, shared)
    assert info.value.conflicting_instant == "20260101000000200"
    # f0 was completed in the snapshot: not a candidate, so sharing it is no conflict
    ConflictResolutionStrategy().check(storage, now, PendingCommit(
        "20260101000000300", (_stat("p", "f0"),), {}, seen, snapshot.file_names))


def test_candidates_from_new_names_equal_the_full_pass_on_random_histories(storage: LocalStorage) -> None:
    rng = random.Random(18)
    start = parse_instant_time("20260101000000000")

    def some_time() -> str:
        return format_instant_time(start + timedelta(milliseconds=rng.randrange(10**6)))

    times = sorted({some_time() for _ in range(200)})
    found = 0
    for round_ in range(6):
        pending: list[str] = []
        before = Timeline.load(storage)
        for t in times[round_ * 30:(round_ + 1) * 30]:
            if not before.is_completed(t):  # one completed file per instant
                _request(storage, t)
                pending.append(t)
        rng.shuffle(pending)
        for t in pending[: rng.randrange(len(pending) + 1)]:
            _complete(storage, t, some_time())
        snapshot = Timeline.load(storage)
        seen = frozenset(i.requested_time for i in snapshot.completed)
        for t in rng.sample(times[: (round_ + 2) * 30], 25):  # more complete after the snapshot
            if not Timeline.load(storage).is_completed(t):
                _request(storage, t)
                _complete(storage, t, some_time())
        now = Timeline.load(storage)
        assert snapshot.file_names is not None  # the fast path is the one taken
        fast = CommitWindow("29990101000000000", seen, snapshot.file_names).candidates(now)
        assert fast == CommitWindow("29990101000000000", seen).candidates(now)
        found += len(fast)
        assert list(now) == list(_fresh(storage))
    assert found > 20


def test_staged_bytes_are_published_whole_once_and_never_over_an_existing_file(storage: LocalStorage) -> None:
    staged = stage(storage, TL, b"payload")
    hidden = [n for n in storage.list_names(TL) if n.endswith(".tmp")]
    assert len(hidden) == 1 and hidden[0].startswith(".")
    assert list(Timeline.load(storage)) == []  # the staged file names no instant
    name = f"{TL}/{Instant('20260101000000100', Action.COMMIT, State.COMPLETED, '20260101000000200').file_name}"
    assert staged.publish(name) is CreateOutcome.CREATED
    assert storage.read_bytes(name) == b"payload"
    other = stage(storage, TL, b"other")
    assert other.publish(name) is CreateOutcome.ALREADY_EXISTS
    assert storage.read_bytes(name) == b"payload"
    other.restage(b"third")
    assert other.data == b"third"
    staged.discard()
    other.discard()
    assert [n for n in storage.list_names(TL) if n.endswith(".tmp")] == []
    assert storage.read_bytes(name) == b"payload"  # discarding the staged copy keeps the published file


def test_instant_times_parse_by_position_and_refuse_impossible_dates() -> None:
    for text in ["20200229235959999", "20261124045959001", "20200101000000"]:
        assert format_instant_time(parse_instant_time(text)) == text.ljust(17, "0")
    for bad in ["20200230000000000", "20201301000000000", "2020010100000x000", "2020"]:
        with pytest.raises(ValueError):
            parse_instant_time(bad)


def test_commits_record_their_lock_time_and_leave_no_staged_files(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=OCC)
    for i in range(3):
        table.upsert(pa.table({"id": [i % 2], "v": [f"x{i}"]}))
    timing = table._protocol().last_commit_timing
    assert timing is not None and 0 < timing.critical_section_ms < 10_000
    committed = table._protocol().committed_timeline
    assert committed is not None and committed.completed_data_instants[-1] == Timeline.load(
        LocalStorage(str(tmp_path / "t"))).completed_data_instants[-1]
    names = LocalStorage(str(tmp_path / "t")).list_names(TL)
    assert not [n for n in names if n.endswith(".tmp")]
    assert sorted(table.read().column("id").to_pylist()) == [0, 1]
    table.close()
