"""Table services, one scenario each: cleaning, savepoint and restore, archival.

Arrow engine (no Spark): each scenario writes a few dozen small commits.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import (
    ConfigError,
    InstantNotFoundError,
    NotSavepointedError,
    Table,
    TidemarkError,
    WriteConflictError,
)
from tidemark.config import resolve_write_config
from tidemark.config.resolve import CleanConfig, CleanPolicy
from tidemark.engines.base import missing_data_files
from tidemark.errors import BaseFileGoneError, DataFileNotFoundError
from tidemark.format.commit_metadata import WriteStat, read_avro
from tidemark.recovery.clean import plan_clean, schedule_clean, superseded_base_file
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Instant, State, Timeline
from tidemark.timeline.history import HISTORY_DIR, read_manifest
from tidemark.timeline.instant_time import parse_instant_time

NO_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "in_process",
}
COLUMNS = ["id", "v"]


def _table(tmp_path: Path, **options: str) -> Table:
    return Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                        options={**NO_SERVICES, **options})


def _upsert(table: Table, *pairs: tuple[int, int]) -> Any:
    return table.upsert(pa.table({
        "id": [k for k, _ in pairs], "part": [f"p{k % 2}" for k, _ in pairs], "v": [v for _, v in pairs],
    }))


def _versions(table: Table) -> list[str]:
    """Every base file on disk, table-relative."""
    return sorted(f.path for f in table.storage.walk_files("") if f.name.endswith(".parquet"))


def _reopen(table: Table, **options: str) -> Table:
    return Table.open(table.path, spark=None, options={**NO_SERVICES, **options})


# -- cleaning ------------------------------------------------------------------------------


def test_keep_latest_commits_keeps_time_travel_to_the_retained_commits(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.commits.retained": "3"})
    commits = [_upsert(table, (1, i), (2, i)) for i in range(8)]
    before = {c.instant_time: rows_of(table.read(as_of=c.instant_time), COLUMNS) for c in commits[-3:]}
    versions_before = len(_versions(table))

    result = table.clean()

    assert result.clean_instant is not None and result.deleted_files
    assert len(_versions(table)) == versions_before - len(result.deleted_files)
    # time travel to each retained commit reads the same rows as before the clean
    for instant_time, rows in before.items():
        assert rows_of(table.read(as_of=instant_time), COLUMNS) == rows
        assert rows_of(hudi_rs_read(table.path, as_of=instant_time), COLUMNS) == rows
    assert rows_of(table.read(), COLUMNS) == [(1, 7), (2, 7)]
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == [(1, 7), (2, 7)]
    # the plan and the metadata are on the timeline, as Hudi writes them
    timeline = Timeline.load(table.storage)
    clean = timeline.filter(actions=[Action.CLEAN], states=[State.COMPLETED])
    assert [c.requested_time for c in clean] == [result.clean_instant.requested_time]
    requested = f".hoodie/timeline/{result.clean_instant.requested_time}.clean.requested"
    plan = read_avro(table.storage.read_bytes(requested))
    assert plan["policy"] == "KEEP_LATEST_COMMITS"
    assert plan["earliestInstantToRetain"]["timestamp"] == commits[-3].instant_time
    meta = read_avro(table.storage.read_bytes(f".hoodie/timeline/{result.clean_instant.file_name}"))
    assert meta["totalFilesDeleted"] == len(result.deleted_files)
    # a second clean finds nothing more to delete
    assert table.clean().clean_instant is None


def test_keep_latest_file_versions_keeps_that_many_versions_per_file_group(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.policy": "KEEP_LATEST_FILE_VERSIONS",
                                "hoodie.clean.fileversions.retained": "2"})
    for i in range(6):
        _upsert(table, (1, i), (2, i))
    table.clean()
    groups: dict[str, int] = {}
    for path in _versions(table):
        file_id = path.rsplit("/", 1)[-1].split("_")[0]
        groups[file_id] = groups.get(file_id, 0) + 1
    assert groups and all(n == 2 for n in groups.values())
    assert rows_of(table.read(), COLUMNS) == [(1, 5), (2, 5)]


def test_keep_latest_by_hours_keeps_what_the_window_needs(tmp_path: Path) -> None:
    table = _table(tmp_path)
    commits = [_upsert(table, (1, i)) for i in range(4)]
    timeline = Timeline.load(table.storage)
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_BY_HOURS, hours_retained=timedelta(hours=1))
    # "now" as the instants' clock says (instant times only go up, so they can run ahead of it)
    now = parse_instant_time(commits[-1].completion_time)
    # every commit is minutes old: the hour-long window needs every version
    assert plan_clean(table.storage, timeline, config, instant_time="99990101000000000", now=now) is None
    # two hours later the old versions have left the window; the latest stays
    later = plan_clean(table.storage, timeline, config, instant_time="99990101000000000",
                       now=now + timedelta(hours=2))
    assert later is not None and later.num_files == 3


def test_clean_spares_the_version_a_pending_write_merges_against(tmp_path: Path) -> None:
    table = _table(tmp_path, **OCC, **{"hoodie.clean.commits.retained": "1"})
    for i in range(3):
        _upsert(table, (1, i))
    read_by_pending = [p for p in _versions(table) if p.endswith(f"{table.timeline()[-1].requested_time}.parquet")]
    assert len(read_by_pending) == 1
    pending = table._protocol().start("UPSERT", Action.COMMIT)  # a live writer, planned against v2
    try:
        for i in range(3, 6):
            _upsert(table, (1, i))
        result = table.clean()
        assert len(result.deleted_files) == 2  # v0 and v1: superseded before the pending write began
        assert set(read_by_pending) <= set(_versions(table)), "the pending write's base file was cleaned"
    finally:
        table._protocol().abort(pending)
    # once the write is gone, its version may go too
    assert set(read_by_pending) & set(table.clean().deleted_files)


def test_clean_rolls_back_expired_failed_writes_first(tmp_path: Path) -> None:
    table = _table(tmp_path, **OCC, **{"hoodie.client.heartbeat.interval_in_ms": "50",
                                       "hoodie.client.heartbeat.tolerable.misses": "1"})
    _upsert(table, (1, 0))
    dead = table._protocol().start("UPSERT", Action.COMMIT)
    assert dead.heartbeat is not None
    dead.heartbeat.stop(delete=False)  # the writer died
    import time

    time.sleep(0.2)
    result = table.clean()
    assert [r.rolled_back.requested_time for r in result.rolled_back] == [dead.instant_time]


def test_inline_cleaning_bounds_the_file_count(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                         options={"hoodie.clean.commits.retained": "2", "hoodie.archive.automatic": "false"})
    for i in range(15):
        _upsert(table, (1, i), (2, i))
    # two file groups, each with at most retained + 1 versions
    assert len(_versions(table)) <= 2 * 3
    assert rows_of(table.read(), COLUMNS) == [(1, 14), (2, 14)]


# -- savepoint and restore -----------------------------------------------------------------


def test_savepointed_files_are_never_cleaned(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.commits.retained": "1"})
    _upsert(table, (1, 0), (2, 0))
    saved = _upsert(table, (1, 1))
    expected = rows_of(table.read(as_of=saved.instant_time), COLUMNS)
    point = table.savepoint(saved.instant_time, comment="before the backfill")
    assert point.savepoint.action is Action.SAVEPOINT and point.files
    for i in range(2, 8):
        _upsert(table, (1, i), (2, i))
    result = table.clean()
    assert result.deleted_files and not set(result.deleted_files) & set(point.files)
    assert rows_of(table.read(as_of=saved.instant_time), COLUMNS) == expected == [(1, 1), (2, 0)]
    assert rows_of(hudi_rs_read(table.path, as_of=saved.instant_time), COLUMNS) == expected
    assert [s.requested_time for s in table.savepoints()] == [saved.instant_time]
    # without the savepoint its files become cleanable
    table.delete_savepoint(saved.instant_time)
    assert set(point.files) & set(table.clean().deleted_files)


def test_savepoint_of_an_unknown_instant_is_refused(tmp_path: Path) -> None:
    table = _table(tmp_path)
    _upsert(table, (1, 0))
    with pytest.raises(InstantNotFoundError):
        table.savepoint("20200101000000000")


def test_restore_rolls_back_every_write_after_the_savepoint(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.commits.retained": "1"})
    _upsert(table, (1, 0), (2, 0))
    saved = _upsert(table, (1, 1), (3, 1))
    expected = rows_of(table.read(), COLUMNS)
    table.savepoint(saved.instant_time)
    for i in range(2, 6):
        _upsert(table, (1, i), (4, i))
    table.clean()

    result = table.restore(saved.instant_time)

    assert len(result.rollbacks) == 4
    assert rows_of(table.read(), COLUMNS) == expected
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == expected
    timeline = Timeline.load(table.storage)
    assert timeline.filter(actions=[Action.RESTORE], states=[State.COMPLETED])
    assert max(i.requested_time for i in timeline.completed_data_instants) == saved.instant_time
    # the table keeps working after a restore
    _upsert(table, (5, 5))
    assert (5, 5) in rows_of(table.read(), COLUMNS)


def test_restore_refuses_an_instant_without_a_savepoint(tmp_path: Path) -> None:
    table = _table(tmp_path)
    first = _upsert(table, (1, 0))
    _upsert(table, (1, 1))
    with pytest.raises(NotSavepointedError) as info:
        table.restore(first.instant_time)
    assert info.value.instant_time == first.instant_time
    assert rows_of(table.read(), COLUMNS) == [(1, 1)]


# -- archival --------------------------------------------------------------------------------

ARCHIVE = {
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "4",
    "hoodie.keep.max.commits": "6",
    "hoodie.clean.commits.retained": "2",
    "hoodie.timeline.compaction.batch.size": "3",
}


def test_archival_bounds_the_active_timeline_and_reads_reach_the_history(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE)
    commits = [_upsert(table, (i, i), (100, i)) for i in range(30)]
    timeline = Timeline.load(table.storage)
    assert 4 <= len(timeline.completed_data_instants) <= 6
    assert timeline.archived_before is not None
    assert read_manifest(table.storage).files
    assert os.path.exists(os.path.join(table.path, HISTORY_DIR, "_version_"))
    # every instant is still listed: active plus archived, nothing lost or doubled
    everything = [i for i in table.timeline(include_archived=True) if i.action is Action.COMMIT]
    assert [i.requested_time for i in everything] == [c.instant_time for c in commits]
    # snapshot, time travel and incremental reads across archived instants
    expected = [(i, i) for i in range(30)] + [(100, 29)]
    assert rows_of(table.read(), COLUMNS) == expected
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == expected
    assert rows_of(table.read(as_of=commits[-2].instant_time), COLUMNS) == [(i, i) for i in range(29)] + [(100, 28)]
    changes = table.read_changes(start=commits[2].completion_time)
    assert [i.requested_time for i in changes.instants] == [c.instant_time for c in commits[3:]]
    assert rows_of(changes.rows, COLUMNS) == [(i, i) for i in range(3, 30)] + [(100, 29)]
    assert rows_of(table.read_incremental(), COLUMNS) == expected
    # history files were merged by level (the LSM stays a handful of files)
    assert len(read_manifest(table.storage).files) < 6


def test_a_timeline_listed_before_an_archival_still_reads_the_instants_it_moved(tmp_path: Path) -> None:
    """Another process may archive (and compact the history) between a reader's listing and its
    reads: the metadata of an instant archived meanwhile comes from the history, not an OSError."""
    from tidemark.timeline import history as history_module
    from tidemark.timeline import timeline as timeline_module

    table = _table(tmp_path, **ARCHIVE)
    first = [_upsert(table, (i, i)) for i in range(3)]
    before = Timeline.load(table.storage)
    expected = {i.requested_time: before.commit_metadata(i) for i in before.completed_data_instants}
    raw = {c.instant_time: before.instant_bytes(before.get(c.instant_time)) for c in first}
    for i in range(8):
        _upsert(table, (50 + i, i))
    with_history = Timeline.load(table.storage).with_history()
    assert with_history.has_history
    for i in range(40):  # more archivals: the history's level-0 files are merged and removed
        _upsert(table, (100 + i, i))
    active = {i.requested_time for i in Timeline.load(table.storage).completed}
    assert not active & {c.instant_time for c in first}, "the first commits were never archived"
    timeline_module._METADATA.clear()  # read the files again, as another process would
    history_module._CONTENTS.clear()
    for inst in before.completed_data_instants:
        assert before.commit_metadata(inst).write_stats == expected[inst.requested_time].write_stats
    for c in first:
        assert before.instant_bytes(before.get(c.instant_time)) == raw[c.instant_time]
    for inst in with_history.completed_data_instants:
        assert with_history.commit_metadata(inst).write_stats, inst
    ghost = Instant("20200101000000000", Action.COMMIT, State.COMPLETED, "20200101000000001")
    with pytest.raises(InstantNotFoundError, match="load the timeline again"):
        before.commit_metadata(ghost)
    with pytest.raises(InstantNotFoundError, match="load the timeline again"):
        before.instant_bytes(ghost)


def test_archival_keeps_deltacommits_whose_logs_are_not_compacted(tmp_path: Path) -> None:
    """Readers place a log in its file slice by its deltacommit's completion time, read from the
    active timeline (hudi-rs has no other source): those deltacommits stay until compacted."""
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="v",
                         table_type="MERGE_ON_READ", options=ARCHIVE)
    table.upsert(pa.table({"id": list(range(10)), "v": [0] * 10}))
    updates = [table.upsert(pa.table({"id": [i % 10], "v": [i + 1]})) for i in range(12)]
    timeline = Timeline.load(table.storage)
    active = {i.requested_time for i in timeline.completed}
    assert all(u.instant_time in active for u in updates), "a deltacommit with uncompacted logs was archived"
    expected = [(i, max([0] + [u + 1 for u in range(12) if u % 10 == i])) for i in range(10)]
    assert rows_of(table.read(), ["id", "v"]) == expected
    table.compact()
    more = [table.upsert(pa.table({"id": [i], "v": [100 + i]})) for i in range(8)]
    timeline = Timeline.load(table.storage)
    active = {i.requested_time for i in timeline.completed}
    assert not all(u.instant_time in active for u in updates), "compacted deltacommits were never archived"
    assert all(m.instant_time in active for m in more)
    expected = [(i, 100 + i) if i < 8 else row for i, row in enumerate(expected)]
    assert rows_of(table.read(), ["id", "v"]) == expected
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == expected


def test_archival_never_passes_the_earliest_pending_instant(tmp_path: Path) -> None:
    table = _table(tmp_path, **OCC, **ARCHIVE)
    _upsert(table, (1, 0))
    pending = table._protocol().start("UPSERT", Action.COMMIT)
    try:
        for i in range(12):
            _upsert(table, (2, i))
        assert table.archive().archived == ()
        archived = [i for i in table.timeline(include_archived=True) if i not in table.timeline()]
        assert all(i.requested_time < pending.instant_time and (i.completion_time or "") < pending.instant_time
                   for i in archived)
    finally:
        table._protocol().abort(pending)
    assert table.archive().archived


def test_a_writer_whose_snapshot_predates_archival_still_sees_its_conflicts(tmp_path: Path) -> None:
    options = {**OCC, **ARCHIVE, "hoodie.archive.automatic": "false",
               "hoodie.keep.min.commits": "3", "hoodie.keep.max.commits": "3"}
    table = _table(tmp_path, **options)
    first = _upsert(table, (1, 0))
    group = first.file_groups[0]
    protocol = table._protocol()
    # writer 1 plans against this snapshot (index lookup, file sizing) ...
    snapshot = Timeline.load(table.storage)
    # ... meanwhile writer 2 commits to the same file group, others commit elsewhere,
    rival = _upsert(table, (1, 1))
    for i in range(6):
        _upsert(table, (2 * i, i))
    # and archival moves writer 2's commit into the history before writer 1 even starts
    assert rival.instant_time in {i.requested_time for i in table.archive().archived}
    pending = protocol.start("UPSERT", Action.COMMIT)
    pending.seen = frozenset(i.requested_time for i in snapshot.completed)
    path = f"part=p1/{group}_0-0-0_{pending.instant_time}.parquet"  # its new version of the group
    table.storage.write_atomic(path, b"written by writer 1")
    stat = WriteStat("part=p1", group, path, first.instant_time, 1, 0, 1, 0, 1)
    with pytest.raises(WriteConflictError) as info:
        protocol.complete(pending, [stat], schema_json=None)
    assert info.value.conflicting_instant == rival.instant_time


def test_hudi_rs_reads_a_table_with_every_service_instant(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE)
    saved = None
    for i in range(20):
        result = _upsert(table, (i % 3, i))
        if i == 15:
            table.savepoint(result.instant_time)
            saved = result
    assert saved is not None
    table.clean()
    table.archive()
    kinds = {i.action for i in table.timeline()}
    assert {Action.CLEAN, Action.SAVEPOINT, Action.COMMIT} <= kinds
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == rows_of(table.read(), COLUMNS)
    assert rows_of(hudi_rs_read(table.path, as_of=saved.instant_time), COLUMNS) == rows_of(
        table.read(as_of=saved.instant_time), COLUMNS)
    table.restore(saved.instant_time)
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == rows_of(table.read(), COLUMNS)


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"hoodie.keep.min.commits": "40"}, "hoodie.keep.min.commits"),
        ({"hoodie.keep.min.commits": "5"}, "hoodie.keep.min.commits"),  # not above commits.retained
        ({"hoodie.clean.policy": "KEEP_EVERYTHING"}, "hoodie.clean.policy"),
        ({"hoodie.clean.commits.retained": "0"}, "hoodie.clean.commits.retained"),
        ({"hoodie.timeline.compaction.batch.size": "1"}, "hoodie.timeline.compaction.batch.size"),
    ],
)
def test_bad_service_options_are_refused_with_their_key(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_write_config(options)
    assert info.value.key == key


def test_service_options_resolve_to_typed_config() -> None:
    config = resolve_write_config({"hoodie.clean.policy": "keep_latest_by_hours", "hoodie.clean.hours.retained": "6"})
    assert config.clean.policy is CleanPolicy.KEEP_LATEST_BY_HOURS
    assert config.clean.hours_retained == timedelta(hours=6)
    assert (config.archive.min_commits, config.archive.max_commits) == (20, 30)


def test_service_results_and_errors_are_exported() -> None:
    import tidemark

    for name in ["CleanResult", "ArchiveResult", "SavepointResult", "RestoreResult", "NotSavepointedError",
                 "BaseFileGoneError"]:
        assert name in tidemark.__all__ and hasattr(tidemark, name)


def test_storage_seam_is_used_for_history(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE)
    for i in range(10):
        _upsert(table, (i, i))
    table.archive()
    history = LocalStorage(table.path).list_names(HISTORY_DIR)
    assert "_version_" in history and any(n.startswith("manifest_") for n in history)
    assert all(n.count("_") == 2 for n in history if n.endswith(".parquet"))


def test_a_base_file_cleaned_under_a_writer_is_reported_as_the_conflict_it_is(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.commits.retained": "1"})
    first = _upsert(table, (1, 0))
    read_by_slow_writer = _versions(table)[0]  # a writer planned against this version ...
    second = _upsert(table, (1, 1))  # ... another writer replaced it,
    _upsert(table, (1, 2))
    assert read_by_slow_writer in table.clean().deleted_files  # and the cleaner took it
    gone = FileNotFoundError(os.path.join(table.path, read_by_slow_writer))
    conflict = superseded_base_file(table.storage, gone)
    assert isinstance(conflict, WriteConflictError) and isinstance(conflict, BaseFileGoneError)
    assert conflict.conflicting_instant == second.instant_time
    assert conflict.file_groups == [("part=p1", first.file_groups[0])]
    assert superseded_base_file(table.storage, FileNotFoundError("/elsewhere/x.parquet")) is None
    # a Spark job reports the same loss in its own words
    spark_error = RuntimeError(f"[FAILED_READ_FILE.FILE_NOT_EXIST] ... file://{table.path}/{read_by_slow_writer}. "
                               "File does not exist.")
    via_spark = superseded_base_file(table.storage, DataFileNotFoundError(missing_data_files(spark_error), spark_error))
    assert via_spark is not None and via_spark.conflicting_instant == second.instant_time
    assert missing_data_files(RuntimeError("no file named here")) == ()


def test_a_replacecommit_is_archived_only_once_its_replaced_files_are_cleaned(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE, **{"hoodie.clean.automatic": "false"})
    _upsert(table, (1, 0), (3, 0))  # partition p1
    overwrite = table.insert_overwrite(pa.table({"id": [5], "part": ["p1"], "v": [50]}))
    for i in range(10):
        _upsert(table, (2 * i, i))  # partition p0
    table.archive()
    # the replaced file group still has its file: the replacecommit must stay active
    assert overwrite.instant_time in {i.requested_time for i in table.timeline()}
    expected = rows_of(table.read(), COLUMNS)
    assert (1, 0) not in expected and (5, 50) in expected
    assert table.clean().deleted_files
    archived = {i.requested_time for i in table.archive().archived}
    assert overwrite.instant_time in archived
    assert rows_of(table.read(), COLUMNS) == expected
    assert rows_of(hudi_rs_read(table.path), COLUMNS) == expected


def test_a_clean_left_pending_by_a_dead_cleaner_is_finished_by_the_next(tmp_path: Path) -> None:
    table = _table(tmp_path, **{"hoodie.clean.commits.retained": "1"})
    for i in range(4):
        _upsert(table, (1, i))
    protocol = table._protocol()
    scheduled, _ = schedule_clean(table.storage, Timeline.load(table.storage), table.write_config.clean,
                                  protocol.heartbeats, multi_writer=False)
    [orphan] = scheduled  # planned, then the cleaner died before deleting anything
    assert Timeline.load(table.storage).filter(actions=[Action.CLEAN], states=[State.REQUESTED])
    result = table.clean()
    assert result.clean_instant is not None
    assert result.clean_instant.requested_time == orphan.plan.instant_time
    assert sorted(result.deleted_files) == sorted(p for ps in orphan.plan.files.values() for p in ps)
    assert not Timeline.load(table.storage).filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT])
    assert rows_of(table.read(), COLUMNS) == [(1, 3)]


def test_restore_refuses_once_later_instants_were_archived(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE, **{"hoodie.archive.beyond.savepoint": "true"})
    saved = _upsert(table, (1, 0))
    table.savepoint(saved.instant_time)
    for i in range(12):
        _upsert(table, (1, i + 1))
    assert any(i.requested_time > saved.instant_time
               for i in table.timeline(include_archived=True) if i not in table.timeline())
    with pytest.raises(TidemarkError, match="archived"):
        table.restore(saved.instant_time)
    assert rows_of(table.read(), COLUMNS) == [(1, 12)]
    # the savepoint still pins its files: time travel to it works
    assert rows_of(table.read(as_of=saved.instant_time), COLUMNS) == [(1, 0)]


def test_archival_stops_at_a_savepoint_by_default(tmp_path: Path) -> None:
    table = _table(tmp_path, **ARCHIVE)
    _upsert(table, (1, 0))
    saved = _upsert(table, (1, 1))
    table.savepoint(saved.instant_time)
    for i in range(12):
        _upsert(table, (1, i + 2))
    archived = [i for i in table.timeline(include_archived=True) if i not in table.timeline()]
    assert archived and all(i.requested_time < saved.instant_time for i in archived)
    table.restore(saved.instant_time)
    assert rows_of(table.read(), COLUMNS) == [(1, 1)]
