"""Clustering: small files rewritten into target-size ones, as a table service next to writers.

Most scenarios use the Arrow engine (no JVM); one runs the rewrite on Spark. Every
clustered table is read back by hudi-rs, which must agree with us.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import ClusteringAbortedError, ClusteringConflictError, ConfigError, Table
from tidemark.cli.main import main
from tidemark.config import resolve_write_config
from tidemark.engines.arrow.cluster import ArrowExecutor
from tidemark.format.clustering_plan import CLUSTER_OPERATION, ClusteringPlan
from tidemark.format.names import COMMIT_SEQNO, COMMIT_TIME, RECORD_KEY, TIMELINE_DIR
from tidemark.services.cluster import ClusteringService, clustering_config
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline
from tidemark.write.commit import CommitProtocol

# Every insert makes new small file groups (no top-up of small files), as streaming ingestion does.
SMALL_FILES = {"hoodie.parquet.small.file.limit": "0"}
OCC = {
    **SMALL_FILES,
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "in_process",
}


def batch(ids: range | list[int], v: str, parts: int = 2) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "part": f"p{i % parts}", "v": v, "score": float(-i)} for i in ids])


def small_file_table(path: Path, *, commits: int = 6, options: dict[str, str] | None = None) -> Table:
    table = Table.create(str(path), spark=None, record_key="id", partition_by="part",
                         options=options or SMALL_FILES)
    for c in range(commits):
        table.insert(batch(range(c * 100, c * 100 + 40), f"c{c}"))
    return table


def snapshot(table: Table) -> list[tuple[Any, ...]]:
    return rows_of(table.read(), ["id", "part", "v", COMMIT_TIME, COMMIT_SEQNO])


def hudi_rows(table: Table, **options: Any) -> list[tuple[Any, ...]]:
    return rows_of(hudi_rs_read(table.path, **options), ["id", "v"])


def ours(table: Table, **options: Any) -> list[tuple[Any, ...]]:
    return rows_of(table.read(**options), ["id", "v"])


def data_files(table: Table) -> int:
    return len(table.read_plan().files)


# -- what clustering does ------------------------------------------------------------------


def test_clustering_rewrites_small_file_groups_and_keeps_every_row_with_its_commit_time(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t")
    before = snapshot(table)
    assert data_files(table) == 12

    result = table.cluster()

    assert result.clustered and result.groups == 2
    assert (result.files_before, result.files_after, result.file_groups_replaced) == (12, 2, 12)
    assert result.partitions == ("part=p0", "part=p1")
    assert data_files(table) == 2
    # same rows, same _hoodie_commit_time and _hoodie_commit_seqno: clustering moved them, nothing more
    assert snapshot(table) == before
    assert hudi_rows(table) == ours(table)

    storage = LocalStorage(table.path)
    timeline = Timeline.load(storage)
    done = timeline.completed_instant(result.instant_time or "")
    assert done is not None and done.action is Action.REPLACE_COMMIT
    meta = timeline.commit_metadata(done)
    assert meta.operation == CLUSTER_OPERATION
    assert sum(len(ids) for ids in meta.replaced_file_ids.values()) == 12
    # Hudi 1.x names: pending as <t>.clustering.requested/.inflight, completed as a replacecommit
    names = os.listdir(storage.full_path(TIMELINE_DIR))
    assert f"{result.instant_time}.clustering.requested" in names
    assert f"{result.instant_time}.clustering.inflight" in names
    plan = timeline.clustering_plan(done)
    assert plan is not None and plan.file_groups() == meta.file_groups() - {
        (s.partition_path, s.file_id) for s in meta.write_stats}


def test_target_file_size_splits_a_group_into_several_files(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t")
    sizes = [f.size for f in table.read_plan().files if f.partition_path == "part=p0"]
    target = sum(sizes) // 3 + 1
    result = table.cluster(target_file_size=target)
    plan_outputs = 3
    per_partition = [f for f in table.read_plan().files if f.partition_path == "part=p0"]
    assert len(per_partition) == plan_outputs
    rows = [pq.read_metadata(table.storage.full_path(f.path)).num_rows for f in per_partition]
    assert max(rows) - min(rows) <= 1  # rows spread evenly over the new files
    timeline = Timeline.load(table.storage)
    plan = timeline.clustering_plan(timeline.get(result.instant_time or ""))
    assert plan is not None and result.files_after == sum(g.num_output_groups for g in plan.groups)
    assert hudi_rows(table) == ours(table)


def test_sort_columns_order_the_rows_of_each_new_file(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t")
    result = table.cluster(sort_by=["score"])
    assert result.sort_columns == ("score",)
    for f in table.read_plan().files:
        scores = pq.read_table(table.storage.full_path(f.path), columns=["score"]).column("score").to_pylist()
        assert scores == sorted(scores)
    plan = Timeline.load(table.storage).clustering_plan(Timeline.load(table.storage).get(result.instant_time or ""))
    assert plan is not None and plan.sort_columns == ("score",)
    assert hudi_rows(table) == ours(table)


def test_nothing_to_cluster_when_every_partition_has_one_file(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=1)
    result = table.cluster()
    assert not result.clustered and result.instant_time is None
    assert all(i.action is Action.COMMIT for i in table.timeline())
    # a sort is worth a rewrite even of one file
    assert table.cluster(sort_by="score").clustered


def test_clustered_files_are_not_clustered_again(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t")
    table.cluster(target_file_size=10 * 1024 * 1024)
    assert not table.cluster(target_file_size=10 * 1024 * 1024).clustered


def test_incremental_reads_do_not_see_clustered_rows_as_changes(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3)
    last_write = table.timeline()[-1].completion_time
    result = table.cluster()
    changes = table.read_changes(start=last_write)
    assert changes.rows.num_rows == 0
    assert changes.checkpoint == result.completion_time
    assert hudi_rs_read(table.path, start=last_write).num_rows == 0
    # a range holding the writes and the clustering sees every written row exactly once
    first = table.timeline()[0].completion_time
    assert rows_of(table.read_incremental(start=first), ["id", "v"]) == hudi_rows(table, start=first)
    assert len(rows_of(table.read_incremental(start=None), ["id"])) == 120


def test_time_travel_before_the_clustering_reads_the_old_files(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3)
    as_of = table.timeline()[-1].requested_time
    table.cluster()
    assert len(table.read_plan(as_of=as_of).files) == 6
    assert ours(table, as_of=as_of) == hudi_rows(table, as_of=as_of) == ours(table)


def test_writes_after_clustering_go_to_the_new_file_groups(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3)
    table.cluster()
    table.upsert(batch([0, 1, 101], "after"))
    table.delete(pa.Table.from_pylist([{"id": 201, "part": "p1"}]))
    got = dict(ours(table))
    assert got[0] == got[1] == got[101] == "after"
    assert 201 not in got and len(got) == 119
    assert hudi_rows(table) == ours(table)


def test_rolling_back_a_completed_clustering_restores_the_small_files(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3)
    before = snapshot(table)
    result = table.cluster()
    table.rollback(result.instant_time or "")
    assert snapshot(table) == before and data_files(table) == 6
    assert not any(i.action in (Action.CLUSTERING, Action.REPLACE_COMMIT) for i in table.timeline())


# -- options ---------------------------------------------------------------------------------


def test_clustering_options_are_validated() -> None:
    config = resolve_write_config({})
    assert config.clustering.updates_strategy == "allow"  # ingestion wins by default
    assert not config.clustering.inline and config.clustering.inline_max_commits == 4
    hudi = "org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy"
    assert resolve_write_config({"hoodie.clustering.updates.strategy": hudi}).clustering.reject_updates
    assert resolve_write_config(
        {"hoodie.clustering.plan.strategy.sort.columns": "a, b"}).clustering.sort_columns == ("a", "b")
    for bad in (
        {"hoodie.clustering.updates.strategy": "sometimes"},
        {"hoodie.clustering.inline.max.commits": "0"},
        {"hoodie.clustering.plan.strategy.target.file.max.bytes": "-1"},
        {"hoodie.clustering.plan.strategy.small.file.limit": "2000",
         "hoodie.clustering.plan.strategy.target.file.max.bytes": "1000"},
    ):
        with pytest.raises(ConfigError) as info:
            resolve_write_config(bad)
        assert info.value.key in bad


def test_cluster_arguments_are_checked(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=2)
    with pytest.raises(ConfigError) as info:
        table.cluster(sort_by="nope")
    assert info.value.key == "hoodie.clustering.plan.strategy.sort.columns"
    with pytest.raises(ConfigError):
        table.cluster(target_file_size=0)
    assert all(i.action is Action.COMMIT for i in table.timeline())  # nothing was scheduled


def test_inline_clustering_runs_after_the_configured_number_of_commits(tmp_path: Path) -> None:
    options = {**SMALL_FILES, "hoodie.clustering.inline": "true", "hoodie.clustering.inline.max.commits": "3"}
    table = small_file_table(tmp_path / "t", commits=2, options=options)
    assert not any(i.action is Action.REPLACE_COMMIT for i in table.timeline())
    table.insert(batch(range(900, 910), "third"))
    clusterings = [i for i in table.timeline() if i.action is Action.REPLACE_COMMIT]
    assert len(clusterings) == 1 and data_files(table) == 2
    table.insert(batch(range(910, 920), "fourth"))  # 1 commit since the clustering: not yet
    assert len([i for i in table.timeline() if i.action is Action.REPLACE_COMMIT]) == 1
    assert hudi_rows(table) == ours(table)


# -- clustering and writers: ingestion wins --------------------------------------------------


def service_of(table: Table, **overrides: Any) -> tuple[ClusteringService, Any]:
    schema = table.schema
    assert schema is not None
    settings = clustering_config(table.write_config.clustering, sort_by=None, target_file_size=None,
                                 small_file_limit=None, max_groups=None, schema=schema)
    service = ClusteringService(table.storage, table.write_config, CommitProtocol(table.storage, table.write_config),
                                schema=schema, table_name=table.config.name, executor=ArrowExecutor())
    return service, settings


def test_a_write_that_commits_during_clustering_wins_and_the_clustering_aborts(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)  # writer 1 (clustering) plans
    assert scheduled is not None
    stats = service.execute(scheduled)  # ... and rewrites the files
    written = table.upsert(batch([0], "ingested"))  # writer 2 updates a planned file group and commits
    assert written.attempts == 1

    with pytest.raises(ClusteringAbortedError) as info:
        service.commit(scheduled, stats)
    assert info.value.conflicting_instant == written.instant_time
    assert info.value.instant_time == scheduled.instant_time

    storage = LocalStorage(table.path)
    timeline = Timeline.load(storage)
    assert all(i.requested_time != scheduled.instant_time for i in timeline)  # rolled back
    assert [i.action for i in timeline.filter(actions=[Action.ROLLBACK])] == [Action.ROLLBACK]
    assert not [f for f in storage.walk_files("") if scheduled.instant_time in f.name]
    assert dict(ours(table))[0] == "ingested"
    assert hudi_rows(table) == ours(table)


def test_a_pending_write_that_shows_its_files_makes_the_clustering_abort(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)
    assert scheduled is not None
    stats = service.execute(scheduled)
    protocol = table._protocol()
    original = protocol.complete
    aborted: list[ClusteringAbortedError] = []

    def complete(pending: Any, stats_: Any, **kwargs: Any) -> Any:
        # The write has written its files (markers) and waits for the lock: the clustering commits now.
        try:
            service.commit(scheduled, stats)
        except ClusteringAbortedError as error:
            aborted.append(error)
        return original(pending, stats_, **kwargs)

    protocol.complete = complete
    written = table.upsert(batch([0], "ingested"))
    assert written.attempts == 1
    assert len(aborted) == 1 and aborted[0].conflicting_instant == written.instant_time
    assert dict(ours(table))[0] == "ingested"
    assert not Timeline.load(table.storage).pending_clustering


def test_scheduling_leaves_out_the_file_groups_of_a_pending_write(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    protocol = table._protocol()
    original = protocol.complete
    results: list[Any] = []

    def complete(pending: Any, stats: Any, **kwargs: Any) -> Any:
        results.append(Table.open(table.path, spark=None, options=OCC).cluster())
        results.append({(s.partition_path, s.file_id) for s in stats})
        return original(pending, stats, **kwargs)

    protocol.complete = complete
    written = table.upsert(batch([0], "ingested"))
    clustering, touched = results
    assert written.attempts == 1 and clustering.clustered
    replaced = Timeline.load(table.storage).commit_metadata(
        Timeline.load(table.storage).get(clustering.instant_time)).replaced_file_ids
    assert not touched & {(p, f) for p, ids in replaced.items() for f in ids}
    assert dict(ours(table))[0] == "ingested"
    assert hudi_rows(table) == ours(table)


def test_a_write_planned_before_a_clustering_completed_is_run_again_not_failed(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    protocol = table._protocol()
    original = protocol.start
    clustered: list[str | None] = []

    def start(operation: str, action: Action) -> Any:
        if not clustered:  # the write has looked up its keys; a clustering completes before it starts
            clustered.append(Table.open(table.path, spark=None, options=OCC).cluster().instant_time)
        return original(operation, action)

    protocol.start = start
    written = table.upsert(batch([0, 1], "ingested"))
    assert clustered[0] is not None
    assert written.attempts == 2  # its first attempt lost to the clustering and was rerun
    got = dict(ours(table))
    assert got[0] == got[1] == "ingested" and len(got) == 120
    assert hudi_rows(table) == ours(table)
    assert data_files(table) == 2  # the upsert rewrote the clustered file groups


def test_reject_strategy_fails_writes_to_file_groups_under_pending_clustering(tmp_path: Path) -> None:
    options = {**OCC, "hoodie.clustering.updates.strategy": "reject"}
    table = small_file_table(tmp_path / "t", commits=3, options=options)
    before = ours(table)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)
    assert scheduled is not None

    with pytest.raises(ClusteringConflictError) as info:
        table.upsert(batch([0], "rejected"))
    assert info.value.rejected and info.value.clustering_instant == scheduled.instant_time
    assert ours(table) == before
    table.insert(batch([5000], "new key"))  # a write to new file groups is fine

    instant = service.commit(scheduled, service.execute(scheduled))
    assert instant.is_completed
    assert dict(ours(table))[5000] == "new key"
    assert hudi_rows(table) == ours(table)


def test_a_clustering_whose_process_died_is_rolled_back_by_the_next_one(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)
    assert scheduled is not None
    service.execute(scheduled)  # ... and the process dies before committing
    assert Timeline.load(table.storage).pending_clustering
    before = ours(table)
    assert ours(table) == hudi_rows(table)  # readers never see its files

    result = table.cluster()
    assert result.rolled_back == (scheduled.instant_time,)
    assert result.clustered and ours(table) == before
    assert not Timeline.load(table.storage).pending_clustering


def test_a_pending_clustering_plan_round_trips_through_avro(tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)
    assert scheduled is not None
    name = f"{TIMELINE_DIR}/{scheduled.instant_time}.clustering.requested"
    plan = ClusteringPlan.from_bytes(table.storage.read_bytes(name))
    assert plan is not None and plan.file_groups() == scheduled.plan.file_groups()
    assert [g.num_output_groups for g in plan.groups] == [1, 1]
    # a second clustering leaves the planned file groups of the live one alone
    second, rolled_back = service.schedule(settings)
    assert second is None and rolled_back == []
    service.abort(scheduled)


# -- command line ----------------------------------------------------------------------------


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cluster_command_shows_progress_and_the_result(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t")
    code, out, _ = run_cli(capsys, "cluster", table.path, "--dry-run")
    assert code == 0 and "plan: 2 group(s), 12 file(s)" in out and "nothing was changed" in out
    assert data_files(table) == 12

    code, out, err = run_cli(capsys, "cluster", table.path, "--sort-by", "score", "--target-file-size", "64MB")
    assert code == 0, err
    assert "groups done: 2/2" in out
    assert "clustered 12 file(s)" in out and "into 2 file(s)" in out and "sorted by score" in out
    assert data_files(table) == 2

    code, out, _ = run_cli(capsys, "cluster", table.path)
    assert code == 0 and "nothing to cluster" in out

    code, out, _ = run_cli(capsys, "timeline", table.path)
    assert code == 0
    clustering_line = [line for line in out.splitlines() if "replacecommit" in line]
    assert len(clustering_line) == 1 and "CLUSTER" in clustering_line[0] and "clustering" in clustering_line[0]
    assert "service" in out


def test_cluster_command_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    table = small_file_table(tmp_path / "t", commits=2)
    code, _, err = run_cli(capsys, "cluster", table.path, "--target-file-size", "big")
    assert code == 2 and "not a size" in err
    code, _, err = run_cli(capsys, "cluster", table.path, "--sort-by", "nope")
    assert code == 2 and "nope" in err
    code, _, err = run_cli(capsys, "cluster", str(tmp_path / "missing"))
    assert code == 2
    code, out, _ = run_cli(capsys, "cluster", "--help")
    assert code == 0 and "examples:" in out and "tidemark cluster" in out.split("examples:")[1]


def test_timeline_marks_a_pending_clustering_with_its_heartbeat(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    table = small_file_table(tmp_path / "t", commits=3, options=OCC)
    service, settings = service_of(table)
    scheduled, _ = service.schedule(settings)
    assert scheduled is not None
    code, out, _ = run_cli(capsys, "timeline", table.path)
    assert code == 0
    line = [row for row in out.splitlines() if row.startswith(scheduled.instant_time)][0]
    assert "clustering" in line and "requested" in line and "6 replaced" in line and "alive" in line
    service.abort(scheduled)


# -- Spark -------------------------------------------------------------------------------------


def test_spark_clustering_rewrites_in_tasks_and_agrees_with_hudi_rs(spark: Any, tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=spark, record_key="id", partition_by="part",
                         options=SMALL_FILES)
    schema = "id long, part string, v string, score double"
    for c in range(4):
        table.insert(spark.createDataFrame([(i, f"p{i % 2}", f"c{c}", float(-i)) for i in range(c * 50, c * 50 + 30)],
                                           schema))
    before = rows_of(table.read(), ["id", "v", COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY])
    files_before = len(table.read_plan().files)
    seen: list[Any] = []
    result = table.cluster(sort_by="score", progress=seen.append)
    assert result.clustered and result.files_before == files_before and result.files_after == 2
    assert seen and seen[-1].groups_done == seen[-1].groups_total == 2
    assert rows_of(table.read(), ["id", "v", COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY]) == before
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == rows_of(table.read(), ["id", "v"])
    for f in table.read_plan().files:
        scores = pq.read_table(table.storage.full_path(f.path), columns=["score"]).column("score").to_pylist()
        assert scores == sorted(scores)
    table.upsert(spark.createDataFrame([(0, "p0", "after", 1.0)], schema))
    assert dict(rows_of(table.read(), ["id", "v"]))[0] == "after"
    assert Timeline.load(table.storage).filter(actions=[Action.CLUSTERING], states=[State.REQUESTED]) == []


# -- planning and the timeline, without data -------------------------------------------------


def test_the_plan_bins_small_files_per_partition_by_size() -> None:
    from tidemark.config.resolve import ClusteringConfig
    from tidemark.fsview import BaseFile
    from tidemark.services.cluster import plan_clustering

    def f(partition: str, n: int, size: int) -> BaseFile:
        return BaseFile(partition, f"fg{n}-0", "20260101000000000", f"{partition}/fg{n}.parquet", size)

    files = [f("a", i, 10 + i) for i in range(6)] + [f("b", 10, 5), f("c", 20, 500), f("c", 21, 5)]
    config = ClusteringConfig(small_file_limit=100, target_file_size=100, max_bytes_per_group=40, max_groups=30)
    plan = plan_clustering(files, config)
    assert plan is not None
    by_partition = [(g.partition_path, len(g.slices), g.num_output_groups) for g in plan.groups]
    # a: 75 bytes, first fit largest first into groups of at most 40 (15+14+11, 13+12+10);
    # b: one file, nothing to gain; c: one small file
    assert by_partition == [("a", 3, 1), ("a", 3, 1)]
    assert {s.size for s in plan.groups[0].slices} == {15, 14, 11}
    assert plan_clustering(files, config, exclude={("a", f"fg{i}-0") for i in range(5)}) is None
    limited = plan_clustering(files, ClusteringConfig(small_file_limit=100, target_file_size=100,
                                                      max_bytes_per_group=40, max_groups=1))
    assert limited is not None and len(limited.groups) == 1
    sorted_plan = plan_clustering(files, ClusteringConfig(small_file_limit=100, target_file_size=20,
                                                          sort_columns=("v",)))
    assert sorted_plan is not None
    assert [(g.partition_path, g.num_output_groups) for g in sorted_plan.groups] == [("a", 4), ("b", 1), ("c", 1)]


def test_a_clustering_is_one_instant_on_the_timeline_in_every_state(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    folder = tmp_path / ".hoodie" / "timeline"
    folder.mkdir(parents=True)
    (folder / "20260101000000000.clustering.requested").write_bytes(b"")
    [pending] = Timeline.load(storage).instants
    assert (pending.action, pending.state) == (Action.CLUSTERING, State.REQUESTED)
    (folder / "20260101000000000.clustering.inflight").write_bytes(b"")
    assert Timeline.load(storage).pending_clustering[0].state is State.INFLIGHT
    (folder / "20260101000000000_20260101000000500.replacecommit").write_bytes(b"")
    [done] = Timeline.load(storage).instants
    assert (done.action, done.state, done.completion_time) == (
        Action.REPLACE_COMMIT, State.COMPLETED, "20260101000000500")
    assert Timeline.load(storage).pending == []


def test_merge_on_read_file_groups_with_logs_wait_for_compaction(tmp_path: Path) -> None:
    """Clustering rewrites base files: a file group whose latest slice has logs is left out (its
    logs would be lost); once compacted it is clustered like any other."""
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="v",
                         table_type="MERGE_ON_READ", options=SMALL_FILES)
    for start in range(0, 40, 10):  # four small file groups
        table.upsert(pa.table({"id": list(range(start, start + 10)), "v": [0] * 10}))
    table.upsert(pa.table({"id": [0, 15], "v": [1, 1]}))  # logs on two of them
    expected = rows_of(table.read(), ["id", "v"])
    result = table.cluster()
    assert result.clustered and result.files_before == 2  # only the two groups without logs
    assert rows_of(table.read(), ["id", "v"]) == expected
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == expected
    table.compact()
    result = table.cluster()
    assert result.clustered and result.files_before >= 2
    assert rows_of(table.read(), ["id", "v"]) == expected
    assert rows_of(hudi_rs_read(table.path), ["id", "v"]) == expected
