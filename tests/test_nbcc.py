"""Non-blocking concurrency control: writers in real OS processes on the same file groups.

Checked: no writer ever aborts or retries; the final table equals the
deterministic merge of every committed batch (event time, ordering values
unique across writers) in our reads and in hudi-rs; a compaction scheduled
while deltacommits are inflight loses none of them; a SIGKILLed writer's logs
are never visible and are rolled back once its heartbeat expired; and the
operations that would need conflict checks are refused with a ConfigError.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from signals import wait_for_file, write_atomically
from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline

WRITER = str(Path(__file__).with_name("nbcc_writer.py"))
NBCC = {
    "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
    "hoodie.client.heartbeat.interval_in_ms": "300",
    "hoodie.client.heartbeat.tolerable.misses": "4",
    "hoodie.write.lock.wait_time_ms_between_retry": "20",
}
TABLE = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"}


@pytest.fixture(params=["filesystem", "zookeeper"])
def options(request: Any) -> dict[str, str]:
    opts = dict(NBCC)
    if request.param == "zookeeper":
        server = request.getfixturevalue("zookeeper_server")
        opts.update(server.lock_options("tidemark-nbcc"))
    else:
        opts["hoodie.write.lock.provider"] = "filesystem"
    return opts


def _create(path: str, options: dict[str, str]) -> tidemark.Table:
    return tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", ordering_field="ts",
                                 table_type="MERGE_ON_READ", options={**options, **TABLE})


def _spawn(tmp: Path, path: str, options: dict[str, str], writer: int, **spec: Any) -> subprocess.Popen[bytes]:
    full = {"table": path, "options": options, "writer": writer, "seed": 100 + writer,
            "log": str(tmp / f"w{writer}.log"), **spec}
    spec_path = tmp / f"w{writer}.json"
    spec_path.write_text(json.dumps(full))
    return subprocess.Popen([sys.executable, WRITER, str(spec_path)])


def _barrier(tmp: Path, name: str, writer: int) -> dict[str, str]:
    return {"ready": str(tmp / f"{name}-{writer}.ready"), "go": str(tmp / f"{name}.go")}


def _await(paths: list[str], procs: list[subprocess.Popen[bytes]], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    for path in paths:
        wait_for_file(path, processes=procs, timeout=max(deadline - time.monotonic(), 0), what="the barrier")


def _outcomes(tmp: Path, writers: int) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    intents: dict[str, list[dict[str, Any]]] = {}
    outcomes: list[dict[str, Any]] = []
    for w in range(writers):
        for line in (tmp / f"w{w}.log").read_text().splitlines():
            entry = json.loads(line)
            if entry["state"] == "intent":
                intents[entry["batch"]] = entry["rows"]
            else:
                outcomes.append(entry)
    return intents, outcomes


def _model(batches: list[list[dict[str, Any]]]) -> dict[int, dict[str, Any]]:
    """Event-time merge: per key the row with the greatest ordering value (unique by construction)."""
    model: dict[int, dict[str, Any]] = {}
    for rows in batches:
        for row in rows:
            if row["id"] not in model or row["ts"] > model[row["id"]]["ts"]:
                model[row["id"]] = row
    return model


def _snapshot(rows: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    out = {r["id"]: r for r in rows}
    assert len(out) == len(rows), "duplicate keys in a snapshot read"
    return out


def _overlapping_pairs(timeline: Timeline) -> list[tuple[str, str]]:
    """Deltacommits that ran at the same time (each requested before the other completed)."""
    commits = [i for i in timeline.completed if i.action is Action.DELTA_COMMIT]
    return [(a.requested_time, b.requested_time) for a in commits for b in commits
            if a.requested_time < b.requested_time < (a.completion_time or "")]


def test_writers_on_the_same_file_groups_never_abort_and_compaction_loses_nothing(
    tmp_path: Path, options: dict[str, str]
) -> None:
    path = str(tmp_path / "t")
    table = _create(path, options)
    seed = [{"id": k, "part": f"p{k % 2}", "ts": -1, "batch": "seed", "v": 0.0} for k in range(30)]
    table.upsert(pa.Table.from_pylist(seed))
    table.upsert(pa.Table.from_pylist(seed[:10]))  # logs to compact while the writers are inflight
    writers, iterations = 3, 10
    procs = [
        _spawn(tmp_path, path, options, w, iterations=iterations, keys=30, batch_size=6,
               start=_barrier(tmp_path, "start", w), first_commit=_barrier(tmp_path, "first", w))
        for w in range(writers)
    ]
    _await([str(tmp_path / f"start-{w}.ready") for w in range(writers)], procs)
    write_atomically(tmp_path / "start.go")
    _await([str(tmp_path / f"first-{w}.ready") for w in range(writers)], procs)
    # Every writer has its first logs written and is about to commit: compact now.
    during = table.compact()
    assert during is not None and during.file_groups, "nothing was compacted while the writers were inflight"
    write_atomically(tmp_path / "first.go")

    compactions = 1
    deadline = time.monotonic() + 300
    while any(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "writers did not finish"
        compactions += table.compact() is not None
        _snapshot(table.read().to_pylist())
    assert [p.returncode for p in procs] == [0] * writers

    intents, outcomes = _outcomes(tmp_path, writers)
    assert len(outcomes) == writers * iterations
    failed = [o for o in outcomes if o["state"] != "committed"]
    assert failed == [], f"non-blocking writers failed: {failed[:3]}"
    assert all(o["attempts"] == 1 for o in outcomes), "a non-blocking write was retried"

    model = _model([seed, seed[:10], *(intents[o["batch"]] for o in outcomes)])
    columns = ["id", "part", "ts", "batch", "v"]
    assert _snapshot(table.read().select(columns).to_pylist()) == model
    assert _snapshot(hudi_rs_read(path).select(columns).to_pylist()) == model

    timeline = Timeline.load(LocalStorage(path)).with_history()  # inline archival moved the first ones
    # The writers really ran at the same time, on the same file groups.
    first = {o["instant"]: o for o in outcomes if o["batch"].endswith("-0")}
    assert len({g for o in first.values() for g in o["file_groups"]}) < sum(len(o["file_groups"]) for o in
                                                                           first.values())
    assert any(a in first and b in first for a, b in _overlapping_pairs(timeline))
    # The compaction was planned while every first deltacommit was inflight, which completed after it.
    assert all(during.instant.requested_time < o["completion"] for o in first.values())
    assert all(o["instant"] < during.instant.requested_time for o in first.values())
    # Everything compacted at the end equals the model too.
    table.compact()
    assert _snapshot(table.read().select(columns).to_pylist()) == model
    assert _snapshot(hudi_rs_read(path, hudi_options={"hoodie.read.use.read_optimized.mode": "true"})
                     .select(columns).to_pylist()) == model
    assert not Timeline.load(LocalStorage(path)).pending
    print(f"\n{len(outcomes)} deltacommits, {len(_overlapping_pairs(timeline))} overlapping pairs, "
          f"{compactions} compactions, 0 aborts")
    table.close()


def test_a_killed_writers_logs_stay_invisible_and_are_rolled_back_after_its_heartbeat(tmp_path: Path) -> None:
    options = {**NBCC, "hoodie.write.lock.provider": "filesystem"}
    path = str(tmp_path / "t")
    table = _create(path, options)
    storage = LocalStorage(path)
    columns = ["id", "part", "ts", "batch", "v"]
    victim = _spawn(tmp_path, path, options, 0, iterations=3, keys=20, batch_size=5,
                    hang_before_commit={"ready": str(tmp_path / "hang.ready")})
    _await([str(tmp_path / "hang.ready")], [victim])
    hanging = (tmp_path / "hang.ready").read_text()
    dead_logs = list(Path(path).rglob(f".*_{hanging}.log.*"))
    assert dead_logs, "the hanging writer had written no log file"
    intents, outcomes = _outcomes(tmp_path, 1)
    before = _model([intents[o["batch"]] for o in outcomes])
    assert _snapshot(table.read().select(columns).to_pylist()) == before  # its logs are not visible
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    assert _snapshot(hudi_rs_read(path).select(columns).to_pylist()) == before

    survivor = _spawn(tmp_path, path, options, 1, iterations=6, keys=20, batch_size=5)
    assert survivor.wait(timeout=180) == 0
    intents, outcomes = _outcomes(tmp_path, 2)
    committed = [o for o in outcomes if o["state"] == "committed"]
    assert len(committed) == 2 + 6 and all(o["attempts"] == 1 for o in committed)
    model = _model([intents[o["batch"]] for o in committed])
    assert _snapshot(table.read().select(columns).to_pylist()) == model
    assert _snapshot(hudi_rs_read(path).select(columns).to_pylist()) == model

    # Once its heartbeat expired, the next writer (or this explicit cleanup) rolls it back.
    policy = HeartbeatPolicy(300, 4)
    deadline = time.monotonic() + 30
    while not policy.is_expired(storage, hanging):
        assert time.monotonic() < deadline, "the killed writer's heartbeat never expired"
        time.sleep(0.1)
    table.rollback_failed_writes()
    timeline = Timeline.load(storage)
    assert not timeline.pending
    assert not timeline.is_completed(hanging)
    assert any(i.action is Action.ROLLBACK for i in timeline.completed)
    assert not [p for p in dead_logs if p.exists()], "the killed writer's logs were not cleaned"
    assert _snapshot(table.read().select(columns).to_pylist()) == model
    table.close()


def test_non_blocking_mode_needs_merge_on_read_and_a_bucket_index(tmp_path: Path) -> None:
    options = {**NBCC, "hoodie.write.lock.provider": "filesystem"}
    with pytest.raises(tidemark.ConfigError, match="MERGE_ON_READ"):
        tidemark.Table.create(str(tmp_path / "cow"), spark=None, record_key="id", options={**options, **TABLE})
    with pytest.raises(tidemark.ConfigError, match="BUCKET"):
        tidemark.Table.create(str(tmp_path / "mor"), spark=None, record_key="id", table_type="MERGE_ON_READ",
                              options=options)
    assert not (tmp_path / "cow").exists() and not (tmp_path / "mor").exists()
    tidemark.Table.create(str(tmp_path / "plain"), spark=None, record_key="id", table_type="MERGE_ON_READ")
    with pytest.raises(tidemark.ConfigError, match="BUCKET"):
        tidemark.Table.open(str(tmp_path / "plain"), spark=None, options=options)
    with pytest.raises(tidemark.ConfigError, match="early conflict detection"):
        _create(str(tmp_path / "early"), {**options,
                                          "hoodie.write.concurrency.early.conflict.detection.enable": "true"})
    with pytest.raises(tidemark.ConfigError, match="clustering.inline"):
        _create(str(tmp_path / "inline"), {**options, "hoodie.clustering.inline": "true"})


def test_operations_that_write_base_files_are_refused_and_change_nothing(tmp_path: Path) -> None:
    options = {**NBCC, "hoodie.write.lock.provider": "filesystem"}
    path = str(tmp_path / "t")
    table = _create(path, options)
    rows = pa.Table.from_pylist([{"id": k, "part": "p0", "ts": k, "batch": "a", "v": 1.0} for k in range(8)])
    table.upsert(rows)
    before = sorted(os.listdir(tmp_path / "t" / ".hoodie" / "timeline"))
    files = sorted(str(p) for p in (tmp_path / "t").rglob("*") if p.is_file() and ".hoodie" not in p.parts)
    for operation in ("bulk_insert", "insert_overwrite"):
        with pytest.raises(tidemark.ConfigError, match="non_blocking_concurrency_control"):
            getattr(table, operation)(rows)
    with pytest.raises(tidemark.ConfigError, match="non_blocking_concurrency_control"):
        table.cluster()
    assert sorted(os.listdir(tmp_path / "t" / ".hoodie" / "timeline")) == before
    assert sorted(str(p) for p in (tmp_path / "t").rglob("*") if p.is_file() and ".hoodie" not in p.parts) == files
    # insert and delete append logs like upsert; a delete reaches a bucket nobody wrote yet too
    table.insert(pa.Table.from_pylist([{"id": 100, "part": "p0", "ts": 1, "batch": "b", "v": 2.0}]))
    table.delete(pa.Table.from_pylist([{"id": 3, "part": "p0", "ts": 99}, {"id": 500, "part": "p9", "ts": 1}]))
    got = sorted(r["id"] for r in table.read().to_pylist())
    assert got == sorted([k for k in range(8) if k != 3] + [100])
    assert sorted(r["id"] for r in hudi_rs_read(path).to_pylist()) == got
    table.close()


def test_writers_starting_on_an_empty_table_create_each_bucket_once(tmp_path: Path) -> None:
    options = {**NBCC, "hoodie.write.lock.provider": "filesystem"}
    path = str(tmp_path / "t")
    table = _create(path, options)
    writers, iterations = 3, 3
    procs = [_spawn(tmp_path, path, options, w, iterations=iterations, keys=40, batch_size=8,
                    start=_barrier(tmp_path, "start", w)) for w in range(writers)]
    _await([str(tmp_path / f"start-{w}.ready") for w in range(writers)], procs)
    write_atomically(tmp_path / "start.go")  # all need the same new buckets at once
    assert [p.wait(timeout=180) for p in procs] == [0] * writers

    intents, outcomes = _outcomes(tmp_path, writers)
    assert [o for o in outcomes if o["state"] != "committed" or o["attempts"] != 1] == []
    from tidemark.fsview import FileSystemView
    from tidemark.write.bucket import bucket_of_file_id

    groups = FileSystemView(LocalStorage(path), Timeline.load(LocalStorage(path))).file_groups()
    buckets = [(g.partition_path, bucket_of_file_id(g.file_id)) for g in groups]
    assert len(buckets) == len(set(buckets)), "a bucket got two file groups"
    model = _model([intents[o["batch"]] for o in outcomes])
    columns = ["id", "part", "ts", "batch", "v"]
    assert _snapshot(table.read().select(columns).to_pylist()) == model
    assert _snapshot(hudi_rs_read(path).select(columns).to_pylist()) == model
    table.close()


GROUPS = {"ts_a": ["a1", "a2"], "ts_b": ["b1"]}


def test_two_streams_on_their_own_column_groups_give_the_per_group_latest_values(tmp_path: Path) -> None:
    """The multi-stream join in real processes: each writer owns one column group, events out of
    order; with a compaction in the middle, the table holds per key and group the latest event."""
    options = {**NBCC, "hoodie.write.lock.provider": "filesystem", "hoodie.write.set.null.for.missing.columns": "true"}
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("ts_a", pa.int64()), ("a1", pa.string()),
                        ("a2", pa.string()), ("ts_b", pa.int64()), ("b1", pa.string())])
    table = tidemark.Table.create(
        path, spark=None, record_key="id", partition_by="part", table_type="MERGE_ON_READ", schema=schema,
        options={**options, **TABLE, "hoodie.record.merge.column.groups": "ts_a:a1,a2;ts_b:b1"})
    streams = [{"ordering": field, "columns": columns} for field, columns in GROUPS.items()]
    procs = [_spawn(tmp_path, path, options, w, iterations=8, keys=24, batch_size=6, group=streams[w],
                    start=_barrier(tmp_path, "start", w), first_commit=_barrier(tmp_path, "first", w))
             for w in range(2)]
    _await([str(tmp_path / f"start-{w}.ready") for w in range(2)], procs)
    write_atomically(tmp_path / "start.go")
    _await([str(tmp_path / f"first-{w}.ready") for w in range(2)], procs)
    write_atomically(tmp_path / "first.go")
    while any(p.poll() is None for p in procs):
        table.compact()
    assert [p.returncode for p in procs] == [0, 0]

    intents, outcomes = _outcomes(tmp_path, 2)
    assert [o for o in outcomes if o["state"] != "committed" or o["attempts"] != 1] == []
    model: dict[int, dict[str, Any]] = {}
    for o in outcomes:
        for row in intents[o["batch"]]:
            record = model.setdefault(row["id"], {c: None for c in schema.names} | {"id": row["id"],
                                                                                      "part": row["part"]})
            for field, columns in GROUPS.items():
                if field in row and (record[field] is None or row[field] > record[field]):
                    record.update({c: row[c] for c in (field, *columns)})
    assert _snapshot(table.read().select(schema.names).to_pylist()) == model
    table.compact()
    assert _snapshot(table.read().select(schema.names).to_pylist()) == model
    # hudi-rs knows no column groups, but after compaction the base files hold the merged rows
    ro = {"hoodie.read.use.read_optimized.mode": "true"}
    assert _snapshot(hudi_rs_read(path, hudi_options=ro).select(schema.names).to_pylist()) == model
    table.close()


def test_the_one_conflict_left_is_a_file_group_replaced_since_the_snapshot(tmp_path: Path) -> None:
    """Deltacommits never conflict under NBCC; logs appended to a file group that a writer in
    another mode replaced meanwhile would vanish, so that one still raises."""
    from tidemark.concurrency.conflict import NonBlockingConflictResolution, PendingCommit
    from tidemark.format.commit_metadata import WriteStat
    from tidemark.fsview import FileSystemView

    options = {**NBCC, "hoodie.write.lock.provider": "filesystem"}
    path = str(tmp_path / "t")
    table = _create(path, options)
    rows = [{"id": k, "part": f"p{k % 2}", "ts": 1, "batch": "a", "v": 1.0} for k in range(12)]
    table.upsert(pa.Table.from_pylist(rows))
    storage = LocalStorage(path)
    snapshot = Timeline.load(storage)
    groups = [(g.partition_path, g.file_id) for g in FileSystemView(storage, snapshot).file_groups()]
    seen = frozenset(i.requested_time for i in snapshot.completed)
    occ_options = {**options, "hoodie.write.concurrency.mode": "optimistic_concurrency_control"}
    table.set_concurrency(occ_options)  # a writer in another mode is refused unless the table is switched
    occ = tidemark.Table.open(path, spark=None, options=occ_options)
    occ.upsert(pa.Table.from_pylist([{**rows[0], "ts": 2}]))  # a deltacommit: no conflict
    occ.insert_overwrite(pa.Table.from_pylist([r for r in rows if r["part"] == "p0"]))  # replaces p0's groups
    timeline = Timeline.load(storage)

    def mine(partition: str, file_id: str) -> PendingCommit:
        stat = WriteStat(partition, file_id, f"{partition}/.{file_id}_x.log.1_0-0-0", None, 1, 0, 1, 0, 10)
        return PendingCommit("29990101000000000", (stat,), {}, seen)

    p0 = [g for g in groups if g[0].endswith("p0")]
    p1 = [g for g in groups if g[0].endswith("p1")]
    with pytest.raises(tidemark.WriteConflictError):
        NonBlockingConflictResolution().check(storage, timeline, mine(*p0[0]))
    NonBlockingConflictResolution().check(storage, timeline, mine(*p1[0]))  # untouched by the overwrite
    occ.close()
    table.close()
