"""The streaming sink beside table services, and beside a batch writer under NBCC.

Real streaming queries (the shared local[2] session, a file source read one file per
micro-batch) upsert a MERGE_ON_READ table while (1) another OS process compacts, clusters,
cleans and archives it in a loop under OCC, and (2) a batch ``df.write`` upserts the same
keys under non-blocking concurrency control. Every input row must appear exactly once, with
the value the table's ordering field picks, in tidemark's reader and in hudi-rs, and every
micro-batch must be committed exactly once.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from signals import wait_for_file, write_atomically
from tidemark.engines.spark.streaming_sink import SINK_CHECKPOINT_KEY, query_identity
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline

TESTS = Path(__file__).resolve().parent
FILES, ROWS, STRIDE = 6, 10, 5  # file f holds ids f*STRIDE .. f*STRIDE+ROWS-1: neighbours overlap


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    tidemark.register(spark)
    return spark


def _source(folder: Path, files: int = FILES) -> dict[int, int]:
    """Write the stream's input; return the expected table: id -> greatest ts among its rows."""
    folder.mkdir(parents=True)
    expected: dict[int, int] = {}
    for f in range(files):
        rows = [{"id": f * STRIDE + i, "ts": 1000 * (f + 1) + i} for i in range(ROWS)]
        (folder / f"f{f:03d}.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for r in rows:
            expected[r["id"]] = max(expected.get(r["id"], -1), r["ts"])
    return expected


def _start(session: Any, source: Path, path: str, checkpoint: Path, options: dict[str, str]) -> Any:
    return (
        session.readStream.schema("id long, ts long").option("maxFilesPerTrigger", 1).json(str(source))
        .writeStream.format("tidemark").option("checkpointLocation", str(checkpoint)).options(**options)
        .trigger(availableNow=True).start(path)
    )


def _table(rows: pa.Table) -> dict[int, int]:
    ids, ts = rows.column("id").to_pylist(), rows.column("ts").to_pylist()
    assert len(set(ids)) == len(ids), Counter(ids).most_common(3)  # each key exactly once
    return dict(zip(ids, ts, strict=True))


def _history(path: str) -> Timeline:
    """The whole timeline, archived instants too (the service process archives)."""
    timeline = Timeline.load(LocalStorage(path))
    return timeline.with_history() if timeline.archived_before is not None else timeline


def _batches_of(path: str, identity: str) -> list[int]:
    timeline = _history(path)
    out = []
    for instant in timeline.by_completion_time():
        raw = timeline.commit_metadata(instant).extra.get(SINK_CHECKPOINT_KEY)
        if raw and identity in json.loads(raw):
            out.append(int(json.loads(raw)[identity]))
    return sorted(out)


def _check(path: str, expected: dict[int, int], checkpoint: Path, files: int = FILES) -> None:
    assert _table(tidemark.Table.open(path, spark=None).read()) == expected
    assert _table(hudi_rs_read(path)) == expected
    assert _batches_of(path, query_identity({}, str(checkpoint))) == list(range(files))  # no batch lost or doubled


OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.write.num.retries.on.conflict.failures": "3",
    "hoodie.clustering.plan.strategy.sort.columns": "id",  # so the one file group is clustered too
    "hoodie.clean.commits.retained": "1",
}


def test_a_stream_upserts_while_another_process_compacts_clusters_and_cleans(
    session: Any, tmp_path: Path
) -> None:
    path, checkpoint = str(tmp_path / "t"), tmp_path / "ck"
    expected = _source(tmp_path / "in")
    table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="ts",
                                  table_type="MERGE_ON_READ", options=OCC)
    table.upsert(pa.table({"id": pa.array(range(0, 40), pa.int64()), "ts": pa.array([0] * 40, pa.int64())}))
    table.close()
    expected = {**{i: 0 for i in range(40)}, **expected}
    spec = {"table": path, "options": OCC, "stop": str(tmp_path / "stop"), "result": str(tmp_path / "result"),
            "ready": str(tmp_path / "ready"), "compact": True, "cluster": True, "pause_s": 0.1}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    services = subprocess.Popen([sys.executable, str(TESTS / "service_process.py"), str(tmp_path / "spec.json")])
    try:
        wait_for_file(spec["ready"], processes=[services], timeout=60, what="the service process")
        sink = {**OCC, "hoodie.datasource.write.recordkey.field": "id",
                "hoodie.datasource.write.precombine.field": "ts",
                "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                "hoodie.datasource.write.streaming.retry.count": "10",
                "hoodie.datasource.write.streaming.retry.interval.ms": "100"}
        _start(session, tmp_path / "in", path, checkpoint, sink).awaitTermination()
        first_done = _history(path)
        write_atomically(spec["stop"])
        services.wait(timeout=120)
    finally:
        if services.poll() is None:
            services.kill()
            services.wait()
    outcome = json.loads(Path(spec["result"]).read_text())
    assert outcome["status"] == "ok", outcome
    assert outcome["compactions"] >= 1 and outcome["cleans"] >= 1 and outcome["clustered"] >= 1, outcome
    # The services did run between the stream's commits, not only before or after them.
    stream_times = [i.completion_time for i in first_done.by_completion_time()
                    if i.action is Action.DELTA_COMMIT and i.completion_time]
    services_between = [i for i in first_done.by_completion_time()
                        if i.action is not Action.DELTA_COMMIT and stream_times[1] < (i.completion_time or "")
                        < stream_times[-1]]
    assert services_between, [(i.action, i.completion_time) for i in first_done.by_completion_time()]
    _check(path, expected, checkpoint)


NBCC = {
    "hoodie.write.concurrency.mode": "non_blocking_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.index.type": "BUCKET",
    "hoodie.bucket.index.num.buckets": "4",
    "hoodie.datasource.write.table.type": "MERGE_ON_READ",
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.precombine.field": "ts",
}


def test_a_stream_and_a_batch_job_upsert_the_same_keys_under_nbcc(session: Any, tmp_path: Path) -> None:
    """Nothing aborts or retries; per key the row with the greatest ts wins, whoever committed last."""
    path, checkpoint = str(tmp_path / "t"), tmp_path / "ck"
    files = 2 * FILES  # a longer stream, so the batch job's commits land among its micro-batches
    expected = _source(tmp_path / "in", files)
    session.createDataFrame([(i, 0) for i in range(40)], "id long, ts long").write.format("tidemark").options(
        **NBCC).mode("append").save(path)
    # The batch job's rows: even ids win over the stream (greater ts), odd ids lose to it.
    batch = [(i, 99_999 if i % 2 == 0 else 500) for i in range(0, 50, 3)]
    for key, ts in batch:
        expected[key] = max(expected.get(key, 0), ts)
    for i in range(40):
        expected.setdefault(i, 0)
    errors: list[BaseException] = []

    def sink_committed() -> bool:
        timeline = Timeline.load(LocalStorage(path))
        return any(SINK_CHECKPOINT_KEY in timeline.commit_metadata(i).extra for i in timeline.completed)

    def batch_job() -> None:
        try:
            while not sink_committed() and query.isActive:  # start once the stream is writing
                time.sleep(0.05)
            for n in range(3):  # several commits, so they interleave with the micro-batches
                rows = batch[n::3]
                session.createDataFrame(rows, "id long, ts long").write.format("tidemark").options(**NBCC).mode(
                    "append").save(path)
        except BaseException as error:
            errors.append(error)

    query = _start(session, tmp_path / "in", path, checkpoint, NBCC)
    job = threading.Thread(target=batch_job)
    job.start()
    query.awaitTermination()
    job.join()
    assert not errors, [str(e)[-3000:] for e in errors]
    timeline = Timeline.load(LocalStorage(path))
    assert not [i for i in timeline.instants if i.action is Action.ROLLBACK], "an NBCC writer was rolled back"
    # The batch job's commits landed between the micro-batches' (the writers did run at once).
    sink = [i.completion_time or "" for i in timeline.by_completion_time()
            if SINK_CHECKPOINT_KEY in timeline.commit_metadata(i).extra]
    others = [i.completion_time or "" for i in timeline.by_completion_time()[1:]
              if i.action is Action.DELTA_COMMIT and SINK_CHECKPOINT_KEY not in timeline.commit_metadata(i).extra]
    assert len(sink) == files and len(others) >= 3 and any(sink[0] < t < sink[-1] for t in others), (sink, others)
    _check(path, expected, checkpoint, files)
