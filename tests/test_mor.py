"""Merge-on-read tables: log files, snapshot / read-optimized / incremental reads, compaction.

Arrow engine (``spark=None``) throughout, except one Spark scenario at the end;
hudi-rs reads every table and must agree with us.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.cli.main import main
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.log_file import (
    BlockType,
    DeleteRecord,
    avro_data_block,
    decode_avro_records,
    decode_blocks,
    decode_delete_records,
    encode_avro_records,
    encode_block,
    encode_delete_records,
    log_file_name,
    log_schema_json,
    parse_log_file_name,
    read_log_file,
)
from tidemark.fsview import FileSystemView
from tidemark.services import compaction
from tidemark.timeline import Action, State, Timeline
from tidemark.write.commit import CommitProtocol

REAL = Path("/work/shared/reference/hudi-format/real-tables")
COLS = ["id", "city", "v"]
OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "in_process"}


def batch(rows: list[tuple[int, str, int, str]]) -> pa.Table:
    ids, cities, ts, vs = zip(*rows, strict=True) if rows else ((), (), (), ())
    return pa.table({"id": pa.array(ids, pa.int64()), "city": list(cities), "ts": pa.array(ts, pa.int64()),
                     "v": list(vs)})


def keys(rows: list[tuple[int, str]]) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()), "city": [r[1] for r in rows]})


def mor_table(path: Path, **options: Any) -> Table:
    return Table.create(str(path), spark=None, record_key="id", partition_by="city", ordering_field="ts",
                        table_type="MERGE_ON_READ", options=options or None)


def hudi_rs_read_optimized(path: str) -> pa.Table:
    return hudi_rs_read(path, hudi_options={"hoodie.read.use.read_optimized.mode": "true"})


def log_files(path: Path) -> list[str]:
    return sorted(p.name for p in path.rglob(".*.log.*") if ".hoodie" not in p.parts)


# -- the log format ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def real_log_files(tmp_path_factory: Any) -> list[Path]:
    folder = tmp_path_factory.mktemp("real")
    with zipfile.ZipFile(REAL / "v8_trips_8i3u1d.zip") as z:
        z.extractall(folder, [n for n in z.namelist() if not n.startswith("__MACOSX") and ".log." in n
                              and "/.hoodie/" not in n])
    found = sorted(folder.rglob(".*.log.*"))
    assert found, "the real v8 merge-on-read table should hold log files"
    return [*found, REAL / "v8_delete_block.log"]


def test_real_hudi_log_files_decode_and_encode_back_byte_for_byte(real_log_files: list[Path]) -> None:
    kinds = set()
    for path in real_log_files:
        data = path.read_bytes()
        blocks = decode_blocks(data)
        assert blocks and b"".join(encode_block(b) for b in blocks) == data
        for block in blocks:
            kinds.add(block.block_type)
            assert block.instant_time and block.schema_json
            if block.block_type == BlockType.DELETE:
                records = decode_delete_records(block.content)
                assert records and all(r.ordering_value == 0 for r in records)
                assert encode_delete_records(records) == block.content  # long branch, like Hudi
            else:
                rows = decode_avro_records(block.content, block.schema_json)
                assert rows[0]["_hoodie_commit_time"] == block.instant_time
                assert encode_avro_records(block.schema_json, rows) == block.content
    assert kinds == {BlockType.AVRO_DATA, BlockType.DELETE}


def test_log_file_names_round_trip_and_reject_base_files() -> None:
    name = log_file_name("6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0", "20251220210127080", 1, "0-1072-3078")
    assert name == ".6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_20251220210127080.log.1_0-1072-3078"
    parsed = parse_log_file_name(name)
    assert parsed is not None and (parsed.instant_time, parsed.version, parsed.write_token) == (
        "20251220210127080", 1, "0-1072-3078")
    assert parse_log_file_name("6e1d5cc4-0_0-1-0_20251220210127080.parquet") is None


def test_a_torn_block_at_the_end_of_a_log_is_ignored(tmp_path: Path) -> None:
    schema = log_schema_json(pa.schema([("id", pa.int64())]), "t")
    rows = pa.table({c: ["x"] for c in ("_hoodie_commit_time", "_hoodie_commit_seqno", "_hoodie_record_key",
                                        "_hoodie_partition_path", "_hoodie_file_name")}).append_column(
        "id", pa.array([7], pa.int64()))
    whole = encode_block(avro_data_block("20260101000000000", schema, rows))
    path = tmp_path / "log"
    path.write_bytes(whole + whole[: len(whole) // 2])
    assert len(read_log_file(str(path))) == 1
    assert encode_delete_records([DeleteRecord("k", "p", None)])[8:] == bytes([2, 2, 2, 107, 2, 2, 112, 0, 0])


# -- writes --------------------------------------------------------------------------------
def test_updates_and_deletes_append_log_files_in_deltacommits(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t")
    first = t.upsert(batch([(1, "sf", 1, "a"), (2, "sf", 1, "b"), (3, "la", 1, "c")]))
    base_files = sorted(p.name for p in (tmp_path / "t").rglob("*.parquet"))
    update = t.upsert(batch([(1, "sf", 2, "a2")]))
    delete = t.delete(keys([(2, "sf")]))

    assert sorted(p.name for p in (tmp_path / "t").rglob("*.parquet")) == base_files  # no base rewritten
    assert len(log_files(tmp_path / "t")) == 2
    timeline = Timeline.load(t.storage)
    assert {i.action for i in timeline} == {Action.DELTA_COMMIT}
    names = set(os.listdir(tmp_path / "t" / ".hoodie" / "timeline"))
    assert f"{update.instant_time}.deltacommit.requested" in names
    assert f"{update.instant_time}.deltacommit.inflight" in names
    assert f"{update.instant_time}_{update.completion_time}.deltacommit" in names
    (stat,) = timeline.commit_metadata(timeline.get(update.instant_time)).write_stats
    assert stat.log_files and stat.path.endswith(stat.log_files[0]) and stat.log_version == 1
    assert stat.base_file in base_files and stat.num_updates == 1 and stat.prev_commit == first.instant_time
    assert (update.num_updates, delete.num_deletes) == (1, 1)
    log = read_log_file(str(tmp_path / "t" / stat.path))[0]
    record = decode_avro_records(log.content, log.schema_json or "")[0]
    assert (record["_hoodie_commit_time"], record["v"], record["_hoodie_file_name"]) == (
        update.instant_time, "a2", stat.file_id)


def test_copy_on_write_tables_still_rewrite_base_files(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="city", ordering_field="ts")
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "b")]))
    assert log_files(tmp_path / "t") == []
    assert {i.action for i in Timeline.load(t.storage)} == {Action.COMMIT}


# -- reads ---------------------------------------------------------------------------------
@pytest.fixture()
def history(tmp_path: Path) -> tuple[Table, list[Any]]:
    t = mor_table(tmp_path / "t")
    results = [
        t.upsert(batch([(1, "sf", 1, "a"), (2, "sf", 1, "b"), (3, "la", 1, "c")])),
        t.upsert(batch([(1, "sf", 2, "a2"), (4, "la", 1, "d")])),
        t.delete(keys([(2, "sf")])),
        t.upsert(batch([(3, "la", 5, "c5"), (2, "sf", 3, "b-again")])),
    ]
    return t, results


def test_snapshot_merges_logs_and_agrees_with_hudi_rs(history: tuple[Table, list[Any]]) -> None:
    t, _ = history
    expected = [(1, "sf", "a2"), (2, "sf", "b-again"), (3, "la", "c5"), (4, "la", "d")]
    assert rows_of(t.read(), COLS) == expected
    assert rows_of(hudi_rs_read(t.path), COLS) == expected
    assert rows_of(t.read(), ["id", "_hoodie_commit_time"]) == rows_of(
        hudi_rs_read(t.path), ["id", "_hoodie_commit_time"])


def test_read_optimized_reads_base_files_only_like_hudi_rs(history: tuple[Table, list[Any]]) -> None:
    t, _ = history
    expected = [(1, "sf", "a"), (2, "sf", "b"), (3, "la", "c"), (4, "la", "d")]
    assert rows_of(t.read(query_type="read_optimized"), COLS) == expected
    assert rows_of(hudi_rs_read_optimized(t.path), COLS) == expected


def test_event_time_ordering_keeps_the_stored_record_against_a_stale_update(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(batch([(1, "sf", 5, "new")]))
    t.upsert(batch([(1, "sf", 3, "stale")]))
    assert rows_of(t.read(), COLS) == [(1, "sf", "new")] == rows_of(hudi_rs_read(t.path), COLS)


def test_time_travel_on_merge_on_read(history: tuple[Table, list[Any]]) -> None:
    t, (c1, c2, c3, _) = history
    assert rows_of(t.read(as_of=c2.instant_time), COLS) == [(1, "sf", "a2"), (2, "sf", "b"), (3, "la", "c"),
                                                             (4, "la", "d")]
    assert rows_of(t.read(as_of=c3.instant_time), COLS) == [(1, "sf", "a2"), (3, "la", "c"), (4, "la", "d")]
    assert rows_of(hudi_rs_read(t.path, as_of=c3.instant_time), COLS) == rows_of(t.read(as_of=c3.instant_time), COLS)


def test_incremental_reads_rows_changed_by_deltacommits(history: tuple[Table, list[Any]]) -> None:
    t, (c1, c2, c3, c4) = history
    assert rows_of(t.read_incremental(start=c1.completion_time, end=c2.completion_time), COLS) == [
        (1, "sf", "a2"), (4, "la", "d")]
    assert rows_of(t.read_incremental(start=c3.completion_time), COLS) == [(2, "sf", "b-again"), (3, "la", "c5")]
    for start, end in ((c1.completion_time, c2.completion_time), (c3.completion_time, None)):
        theirs = hudi_rs_read(t.path, start=start, end=end)
        assert rows_of(theirs, COLS) == rows_of(t.read_incremental(start=start, end=end), COLS)


def test_rollback_of_a_deltacommit_deletes_its_log_files(history: tuple[Table, list[Any]]) -> None:
    t, (_, _, _, c4) = history
    before = log_files(Path(t.path))
    result = t.rollback(c4.instant_time)
    assert any(".log." in f for f in result.deleted_files)
    assert len(log_files(Path(t.path))) == len(before) - 2
    assert rows_of(t.read(), COLS) == [(1, "sf", "a2"), (3, "la", "c"), (4, "la", "d")]


def test_rollback_of_a_failed_deltacommit_finds_its_logs_through_markers(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(batch([(1, "sf", 1, "a")]))

    def die(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt("writer killed before it committed")

    monkeypatch.setattr(CommitProtocol, "complete", die)
    monkeypatch.setattr(CommitProtocol, "abort_if_pending", lambda self, pending: None)  # it died: no clean-up
    with pytest.raises(KeyboardInterrupt):
        t.upsert(batch([(1, "sf", 2, "lost")]))
    monkeypatch.undo()
    assert len(log_files(tmp_path / "t")) == 1 and rows_of(t.read(), COLS) == [(1, "sf", "a")]
    reopened = Table.open(str(tmp_path / "t"), spark=None)
    (rolled,) = reopened.rollback_failed_writes()
    assert any(".log." in f for f in rolled.deleted_files) and log_files(tmp_path / "t") == []


# -- compaction ----------------------------------------------------------------------------
def test_compaction_merges_logs_into_new_base_files_read_by_hudi_rs(history: tuple[Table, list[Any]]) -> None:
    t, _ = history
    before = rows_of(t.read(), ["id", "city", "v", "_hoodie_commit_time"])
    result = t.compact()
    assert result is not None and len(result.stats) == 2
    timeline = Timeline.load(t.storage)
    done = timeline.completed_instant(result.instant.requested_time)
    assert done is not None and done.action is Action.COMMIT
    names = os.listdir(Path(t.path) / ".hoodie" / "timeline")
    assert f"{result.instant.requested_time}.compaction.requested" in names
    meta = timeline.commit_metadata(done)
    assert meta.compacted and meta.operation == "COMPACT"
    plan = compaction.load_plan(t.storage, result.instant.requested_time)
    assert sum(len(op.log_files) for op in plan.operations) == 4
    assert FileSystemView(t.storage, timeline).latest_file_slices()[0].logs == []
    assert rows_of(t.read(), ["id", "city", "v", "_hoodie_commit_time"]) == before  # commit times kept
    assert rows_of(t.read(query_type="read_optimized"), COLS) == rows_of(t.read(), COLS)
    assert rows_of(hudi_rs_read(t.path), COLS) == rows_of(t.read(), COLS)
    assert rows_of(hudi_rs_read_optimized(t.path), COLS) == rows_of(t.read(), COLS)
    assert t.compact() is None  # nothing left


def test_a_log_completing_after_the_plan_stays_visible_on_the_compacted_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = mor_table(tmp_path / "t", **OCC)
    t.upsert(batch([(1, "sf", 1, "a"), (2, "sf", 1, "b")]))
    t.upsert(batch([(1, "sf", 2, "a2")]))
    planned: list[Any] = []
    original = CommitProtocol.complete

    def plan_compaction_first(self: CommitProtocol, pending: Any, *args: Any, **kwargs: Any) -> Any:
        # The late writer has written its log; a compaction gets planned before it commits.
        with self.lock.hold("schedule"):
            planned.append(compaction.schedule(self.storage, Timeline.load(self.storage)))
        return original(self, pending, *args, **kwargs)

    monkeypatch.setattr(CommitProtocol, "complete", plan_compaction_first)
    late = t.upsert(batch([(2, "sf", 2, "b-late")]))  # no conflict with the pending compaction
    monkeypatch.undo()
    (plan,) = planned
    assert plan is not None and plan.instant_time < late.completion_time
    assert all(late.instant_time not in f for op in plan.operations for f in op.log_files)

    result = t.compact()  # runs the pending plan
    assert result is not None and result.instant.requested_time == plan.instant_time
    current = FileSystemView(t.storage, Timeline.load(t.storage)).latest_file_slices()[0]
    assert current.base_instant_time == plan.instant_time
    assert [log.instant_time for log in current.logs] == [late.instant_time]
    expected = [(1, "sf", "a2"), (2, "sf", "b-late")]
    assert rows_of(t.read(), COLS) == expected == rows_of(hudi_rs_read(t.path), COLS)
    assert rows_of(t.read(query_type="read_optimized"), COLS) == [(1, "sf", "a2"), (2, "sf", "b")]


def test_a_deltacommit_after_a_completed_compaction_does_not_conflict(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", **OCC)
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "a2")]))
    other = Table.open(str(tmp_path / "t"), spark=None, options=OCC)
    assert other.compact() is not None
    t.upsert(batch([(1, "sf", 3, "a3")]))  # planned against a timeline without the compaction
    assert rows_of(t.read(), COLS) == [(1, "sf", "a3")] == rows_of(hudi_rs_read(t.path), COLS)
    t.close()
    other.close()


def test_inline_compaction_runs_after_max_delta_commits(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", **{"hoodie.compact.inline": "true",
                                     "hoodie.compact.inline.max.delta.commits": "3"})
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "b")]))
    assert log_files(tmp_path / "t") and not compaction_instants(t)
    t.upsert(batch([(1, "sf", 3, "c")]))
    assert len(compaction_instants(t)) == 1
    assert rows_of(t.read(query_type="read_optimized"), COLS) == [(1, "sf", "c")]
    assert rows_of(hudi_rs_read(t.path), COLS) == [(1, "sf", "c")]


def compaction_instants(t: Table) -> list[Any]:
    timeline = Timeline.load(t.storage)
    return [i for i in timeline.completed if i.action is Action.COMMIT and timeline.commit_metadata(i).compacted]


def test_a_compaction_that_died_is_finished_by_the_next_compact(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "b")]))
    with t._protocol().lock.hold("test"):
        plan = compaction.schedule(t.storage, Timeline.load(t.storage))
    assert plan is not None
    partial = Path(t.path) / "city=sf" / f"{plan.operations[0].file_id}_9-9-9_{plan.instant_time}.parquet"
    partial.write_bytes(b"torn")  # what a killed executor leaves: a marked, unfinished file
    from tidemark.markers import IOType, MarkerSpec, open_marker_writer

    writer = open_marker_writer(t.storage, plan.instant_time, MarkerSpec())
    writer.create(f"city=sf/{partial.name}", IOType.MERGE)
    writer.close()
    assert compaction.pending_compactions(Timeline.load(t.storage))
    result = t.compact()
    assert result is not None and result.instant.requested_time == plan.instant_time and not partial.exists()
    assert rows_of(t.read(), COLS) == [(1, "sf", "b")] == rows_of(hudi_rs_read(t.path), COLS)


def test_compact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "b")]))
    assert main(["compact", t.path, "--dry-run"]) == 0
    assert "1 file group(s) with logs" in capsys.readouterr().out
    assert main(["compact", t.path]) == 0
    assert "compaction" in capsys.readouterr().out
    assert main(["compact", t.path]) == 0 and "nothing to compact" in capsys.readouterr().out
    cow = Table.create(str(tmp_path / "cow"), spark=None, record_key="id")
    assert main(["compact", cow.path]) == 2
    assert main(["compact", str(tmp_path / "missing")]) == 2


def test_compaction_plan_is_hudi_s_avro_and_reads_a_real_plan(tmp_path: Path) -> None:
    with zipfile.ZipFile(REAL / "v8_trips_8i3u1d.zip") as z:
        data = z.read("v8_trips_8i3u1d/.hoodie/timeline/20251220210129235.compaction.requested")
    plan = compaction.CompactionPlan.from_bytes("20251220210129235", data)
    assert len(plan.operations) == 3
    assert {len(op.log_files) for op in plan.operations} == {1, 2}
    again = compaction.CompactionPlan.from_bytes(plan.instant_time, plan.to_bytes())
    assert [(o.file_id, o.log_files, o.base_file) for o in again.operations] == [
        (o.file_id, o.log_files, o.base_file) for o in plan.operations]
    with zipfile.ZipFile(REAL / "v8_trips_8i3u1d.zip") as z:
        commit = z.read("v8_trips_8i3u1d/.hoodie/timeline/20251220210129235_20251220210129883.commit")
    assert CommitMetadata.from_bytes(commit).compacted


def test_real_hudi_merge_on_read_table_reads_like_hudi_rs(tmp_path: Path) -> None:
    with zipfile.ZipFile(REAL / "v8_trips_8i3u1d.zip") as z:
        z.extractall(tmp_path, [n for n in z.namelist() if not n.startswith("__MACOSX")])
    t = Table.open(str(tmp_path / "v8_trips_8i3u1d"), spark=None)
    cols = ["uuid", "fare", "city"]
    assert rows_of(t.read(), cols) == rows_of(hudi_rs_read(t.path), cols)
    assert rows_of(t.read(query_type="read_optimized"), cols) == rows_of(hudi_rs_read_optimized(t.path), cols)


# -- Spark ---------------------------------------------------------------------------------
def test_spark_writes_and_reads_merge_on_read_like_hudi_rs(spark: Any, tmp_path: Path) -> None:
    schema = "id long, city string, ts long, v string"
    t = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="city", ordering_field="ts",
                     table_type="MERGE_ON_READ")
    t.upsert(spark.createDataFrame([(1, "sf", 1, "a"), (2, "sf", 1, "b"), (3, "la", 1, "c")], schema))
    t.upsert(spark.createDataFrame([(1, "sf", 2, "a2")], schema))
    t.delete(spark.createDataFrame([(3, "la")], "id long, city string"))
    assert len(log_files(tmp_path / "t")) == 2
    expected = [(1, "sf", "a2"), (2, "sf", "b")]
    assert rows_of(t.read(), COLS) == expected == rows_of(hudi_rs_read(t.path), COLS)
    assert rows_of(spark.read.format("tidemark").load(t.path), COLS) == expected
    ro = spark.read.format("tidemark").option("hoodie.datasource.query.type", "read_optimized").load(t.path)
    assert rows_of(ro, COLS) == [(1, "sf", "a"), (2, "sf", "b"), (3, "la", "c")]
    assert rows_of(t.read(query_type="read_optimized"), COLS) == rows_of(ro, COLS)
    assert t.compact() is not None
    assert rows_of(t.read(), COLS) == expected == rows_of(hudi_rs_read_optimized(t.path), COLS)
    assert {i.state for i in Timeline.load(t.storage)} == {State.COMPLETED}


def test_parquet_log_blocks_merge_like_avro_ones_and_hudi_rs_reads_them(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", **{"hoodie.logfile.data.block.format": "parquet"})
    t.upsert(batch([(1, "sf", 1, "a"), (2, "sf", 1, "b")]))
    update = t.upsert(batch([(1, "sf", 2, "a2")]))
    t.delete(keys([(2, "sf")]))
    (stat,) = Timeline.load(t.storage).commit_metadata(Timeline.load(t.storage).get(update.instant_time)).write_stats
    assert read_log_file(str(tmp_path / "t" / stat.path))[0].block_type == BlockType.PARQUET_DATA
    assert rows_of(t.read(), COLS) == [(1, "sf", "a2")] == rows_of(hudi_rs_read(t.path), COLS)


def test_early_conflict_detection_lets_a_deltacommit_pass_a_compaction(tmp_path: Path) -> None:
    early = dict(OCC, **{"hoodie.write.concurrency.early.conflict.detection.enable": "true",
                         "hoodie.write.concurrency.early.conflict.check.commit.conflict": "true"})
    t = mor_table(tmp_path / "t", **early)
    t.upsert(batch([(1, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "a2")]))
    compactor = Table.open(str(tmp_path / "t"), spark=None, options=OCC)
    original = CommitProtocol.inflight

    def compact_meanwhile(self: CommitProtocol, pending: Any, *args: Any, **kwargs: Any) -> Any:
        original(self, pending, *args, **kwargs)
        if pending.action is Action.DELTA_COMMIT and compactor.compact() is None:
            raise AssertionError("the compaction should have run")

    import unittest.mock

    with unittest.mock.patch.object(CommitProtocol, "inflight", compact_meanwhile):
        t.upsert(batch([(1, "sf", 3, "a3")]))
    assert rows_of(t.read(), COLS) == [(1, "sf", "a3")] == rows_of(hudi_rs_read(t.path), COLS)
    t.close()
    compactor.close()


def test_without_an_ordering_field_the_later_commit_wins(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", table_type="MERGE_ON_READ")
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    t.upsert(pa.table({"id": [1], "v": ["a2"]}))
    t.upsert(pa.table({"id": [1], "v": ["a3"]}))
    t.delete(pa.table({"id": [2]}))
    assert rows_of(t.read(), ["id", "v"]) == [(1, "a3")]
    assert t.compact() is not None
    assert rows_of(t.read(query_type="read_optimized"), ["id", "v"]) == [(1, "a3")]


def test_cleaning_a_merge_on_read_table_removes_old_slices_with_their_logs(tmp_path: Path) -> None:
    """An old file slice is its base file and the logs on it: cleaning takes them together."""
    t = mor_table(tmp_path / "t", **{"hoodie.clean.automatic": "false", "hoodie.clean.commits.retained": "1"})
    t.upsert(batch([(1, "sf", 1, "a"), (2, "sf", 1, "a")]))
    t.upsert(batch([(1, "sf", 2, "b")]))  # a log on the first slice
    assert t.compact() is not None  # a new slice: base file of the compaction
    t.upsert(batch([(2, "sf", 3, "c")]))  # a log on the new slice
    t.upsert(batch([(1, "sf", 4, "d")]))
    before_logs = log_files(Path(t.path))
    assert len(before_logs) == 3
    expected = rows_of(t.read(), COLS)
    result = t.clean()
    deleted = {Path(p).name for p in result.deleted_files}
    old_log = [name for name in before_logs if name not in log_files(Path(t.path))]
    assert len(old_log) == 1 and old_log[0] in deleted  # the first slice's log went with its base
    assert any(name.endswith(".parquet") for name in deleted)
    assert len(log_files(Path(t.path))) == 2  # the new slice keeps its logs
    assert rows_of(t.read(), COLS) == expected
    assert rows_of(hudi_rs_read(t.path), COLS) == expected
    t.close()


def test_delete_blocks_of_other_writers_decode_in_every_ordering_branch() -> None:
    """Hudi's writers put a delete's ordering value in the union branch of its type (string,
    double, decimal, date, timestamps); tidemark writes longs but reads them all."""
    import io
    import struct
    from datetime import UTC, date, datetime
    from decimal import Decimal

    import fastavro

    from tidemark.format import log_file

    values = [7, 2.5, "2026-01-02", Decimal("1.500000000000000"), date(2026, 1, 2),
              datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)]
    branches = [("long", 7), ("double", 2.5), ("string", "2026-01-02")]
    # fastavro would put a datetime in the date branch (a datetime is a date): the writer's union
    # keeps every position but makes the branches before timestamp-micros unmatchable for it.
    union = [b if i not in (8, 9, 10, 11) else {"type": "fixed", "name": f"unused{i}", "size": 0}
             for i, b in enumerate(log_file._ORDERING_BRANCHES)]
    schema = fastavro.parse_schema(log_file._delete_record_list(union))
    values[4] = None  # the date branch is written by its own block below
    datum = {"deleteRecordList": [
        {"recordKey": f"k{i}", "partitionPath": "p", "orderingVal": branches[i] if i < 3 else v}
        for i, v in enumerate(values)
    ]}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, datum)
    content = struct.pack(">ii", 3, len(buf.getvalue())) + buf.getvalue()
    decoded = decode_delete_records(content)
    assert [d.record_key for d in decoded] == [f"k{i}" for i in range(len(values))]
    assert [d.ordering_value for d in decoded][:4] == values[:4]
    assert decoded[4].ordering_value is None
    assert decoded[5].ordering_value == values[5]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, log_file._PARSED_DELETE, {"deleteRecordList": [
        {"recordKey": "d", "partitionPath": "p", "orderingVal": date(2026, 1, 2)}]})
    content = struct.pack(">ii", 3, len(buf.getvalue())) + buf.getvalue()
    assert decode_delete_records(content)[0].ordering_value == date(2026, 1, 2)
