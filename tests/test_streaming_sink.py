"""``df.writeStream.format("tidemark")``: one commit per micro-batch, exactly once.

Real streaming queries over a file source (the shared local[2] session), a replay after a crash
between our commit and Spark's checkpoint, queries and a batch job racing under OCC, and a real
streaming process SIGKILLed at random points and restarted from its checkpoint. Tables are
checked with tidemark's reader and hudi-rs.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.engines.spark.streaming_sink import SINK_CHECKPOINT_KEY, query_identity
from tidemark.errors import ConfigError
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"


@pytest.fixture(scope="module")
def session(spark: Any) -> Any:
    tidemark.register(spark)
    return spark


def _source(folder: Path, files: int, rows: int, first_id: int = 0) -> Path:
    folder.mkdir(parents=True)
    for f in range(files):
        lines = [json.dumps({"id": first_id + f * rows + i, "batch": f}) for i in range(rows)]
        (folder / f"f{f:03d}.json").write_text("\n".join(lines) + "\n")
    return folder


def _checkpoints(path: str) -> list[dict[str, str]]:
    """The sink checkpoint recorded by each completed commit, in completion order."""
    timeline = Timeline.load(LocalStorage(path))
    out = []
    for instant in timeline.by_completion_time():
        raw = timeline.commit_metadata(instant).extra.get(SINK_CHECKPOINT_KEY)
        out.append(json.loads(raw) if raw else {})
    return out


def _ids(path: str) -> list[int]:
    return sorted(tidemark.Table.open(path, spark=None).read().column("id").to_pylist())


def _start(session: Any, source: Path, path: str, checkpoint: Path, **options: str) -> Any:
    return (
        session.readStream.schema("id long, batch long").option("maxFilesPerTrigger", 1).json(str(source))
        .writeStream.format("tidemark").option("checkpointLocation", str(checkpoint))
        .options(**{"hoodie.datasource.write.recordkey.field": "id", **options})
        .trigger(availableNow=True).start(path)
    )


def _run(session: Any, source: Path, path: str, checkpoint: Path, **options: str) -> None:
    _start(session, source, path, checkpoint, **options).awaitTermination()


def test_each_micro_batch_is_one_commit_and_a_replay_is_not_written_twice(session: Any, tmp_path: Path) -> None:
    source = _source(tmp_path / "in", files=3, rows=5)
    path, checkpoint = str(tmp_path / "t"), tmp_path / "ck"
    _run(session, source, path, checkpoint, **{"hoodie.datasource.write.operation": "bulk_insert"})
    identity = query_identity({}, str(checkpoint))
    assert _checkpoints(path) == [{identity: "0"}, {identity: "1"}, {identity: "2"}]
    assert _ids(path) == list(range(15))
    # A crash after our commit of batch 2 and before Spark's: its checkpoint lacks commits/2.
    (checkpoint / "commits" / "2").unlink()
    for crc in (checkpoint / "commits").glob(".2.crc"):
        crc.unlink()
    _run(session, source, path, checkpoint, **{"hoodie.datasource.write.operation": "bulk_insert"})
    assert (checkpoint / "commits" / "2").exists()  # Spark ran batch 2 again...
    assert len(_checkpoints(path)) == 3  # ...and the sink recognised it: no fourth commit
    assert _ids(path) == list(range(15))  # bulk_insert would have duplicated every row of it
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == list(range(15))
    assert not [n for n in os.listdir(Path(path) / ".hoodie" / ".temp") if n.startswith("datasource-")]


def test_query_identity_comes_from_the_option_or_the_checkpoint(tmp_path: Path) -> None:
    option = "hoodie.datasource.write.streaming.checkpoint.identifier"
    assert query_identity({option: "ingest-1"}, str(tmp_path)) == "ingest-1"
    assert query_identity({}, str(tmp_path / "a")) == query_identity({}, str(tmp_path / "a" / "."))
    assert query_identity({}, str(tmp_path / "a")) != query_identity({}, str(tmp_path / "b"))
    with pytest.raises(ConfigError, match="checkpointLocation"):
        query_identity({}, None)


def test_streaming_queries_and_a_batch_job_share_a_table_under_occ(session: Any, tmp_path: Path) -> None:
    """Two queries and a batch job upsert overlapping keys at once: conflicts retry, nothing is lost."""
    path = str(tmp_path / "t")
    occ = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.write.num.retries.on.conflict.failures": "2",
           "hoodie.datasource.write.streaming.retry.count": "10",
           "hoodie.datasource.write.streaming.retry.interval.ms": "100",
           "hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.precombine.field": "batch"}
    session.createDataFrame([(0, 0)], "id long, batch long").write.format("tidemark").options(**occ).mode(
        "append").save(path)
    sources = [_source(tmp_path / f"in{n}", files=3, rows=10, first_id=n * 20) for n in (0, 1)]  # ids overlap
    errors: list[BaseException] = []

    def batch_job() -> None:
        try:
            rows = [(i, 100) for i in range(50, 60)] + [(5, 100)]  # key 5 is in query 0's first file too
            session.createDataFrame(rows, "id long, batch long").write.format("tidemark").options(**occ).mode(
                "append").save(path)
        except BaseException as error:
            errors.append(error)

    # Both queries run at once in their stream threads (start() returns at once), the batch job in another.
    queries = [_start(session, sources[n], path, tmp_path / f"ck{n}", **occ) for n in (0, 1)]
    job = threading.Thread(target=batch_job)
    job.start()
    for query in queries:
        query.awaitTermination()
    job.join()
    assert not errors, [str(e)[-3000:] for e in errors]
    expected = sorted({0, *range(0, 30), *range(20, 50), *range(50, 60)})
    assert _ids(path) == expected
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == expected
    recorded = [c for c in _checkpoints(path) if c]
    for n in (0, 1):
        identity = query_identity({}, str(tmp_path / f"ck{n}"))
        assert sorted(int(c[identity]) for c in recorded if identity in c) == [0, 1, 2]  # each batch once


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def test_sigkilled_streaming_process_restarts_exactly_once(tmp_path: Path) -> None:
    """A streaming process killed with SIGKILL (once right after a commit published, then at random
    moments) and restarted from its checkpoint until it finishes: every input row exactly once."""
    source = _source(tmp_path / "in", files=6, rows=10)
    path, checkpoint = str(tmp_path / "t"), str(tmp_path / "ck")
    flag = tmp_path / "crashed-after-publish"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS / "streaming_crash"), str(SRC)]),
           "PYSPARK_PYTHON": sys.executable, "TIDEMARK_CRASH_AFTER_PUBLISH": str(flag)}
    rng = random.Random(int(os.environ.get("TIDEMARK_KILL_SEED", time.time())))
    runs = []
    for attempt in range(8):
        process = subprocess.Popen(
            [sys.executable, str(TESTS / "streaming_process.py"), str(source), path, checkpoint],
            env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        # The first run crashes itself after its first commit; later ones are killed at random.
        kill_after = None if attempt == 0 or attempt >= 3 else rng.uniform(5.0, 30.0)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=kill_after if kill_after is not None else 600)
        finished = process.poll() == 0
        _kill_group(process)  # the JVM and Python workers too
        runs.append((kill_after, process.returncode))
        if finished:
            break
    else:
        pytest.fail(f"the streaming process never finished: {runs}")
    assert flag.exists() and runs[0][1] != 0, runs  # the crash right after a commit did happen
    assert _ids(path) == list(range(60)), runs
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == list(range(60))
    batches = Counter(b for c in _checkpoints(path) for b in c.values())
    assert batches and max(batches.values()) == 1, batches  # no batch committed twice
    shutil.rmtree(checkpoint)


def test_the_last_batch_is_found_in_the_archived_history(tmp_path: Path) -> None:
    """A query whose last commit was archived (other writers committed since) still sees it."""
    import pyarrow as pa

    from tidemark.engines.spark.streaming_sink import last_committed_batch, record_batch_with_commits

    options = {"hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3", "hoodie.clean.commits.retained": "1"}
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", options=options)
    record_batch_with_commits(table, "ingest", 7)
    table.upsert(pa.table({"id": [0]}))
    other = tidemark.Table.open(path, spark=None, options=options)
    for i in range(1, 8):
        other.upsert(pa.table({"id": [i]}))
    timeline = Timeline.load(LocalStorage(path))
    assert timeline.archived_before is not None and _checkpoints(path) == [{}] * len(timeline.completed)
    assert last_committed_batch(other, "ingest") == 7
    assert last_committed_batch(other, "another query") is None
