"""A writer in its own OS process, for the multi-writer scenario tests.

Run as ``python writer_process.py SPEC.json``. The spec says which table and
options, which operation and rows, and optionally:

* ``pause_before_commit``: {"ready": path, "go": path} — after writing its files
  the writer creates ``ready`` and waits for ``go`` before committing, so tests
  can line several writers up for a real race;
* ``pause_before_write``: the same barrier right after the instant went inflight,
  before any marker or file (so the writer is old but holds no marker yet);
* ``pause_after_early_check``: the same barrier after the driver's early conflict
  check passed, before the write job starts;
* ``spark_master``: the Spark master of a Spark writer (default ``local[1]``);
* ``spark_remote``: instead, the URL of a Spark Connect server the Spark writer is a client of;
* ``crash_at``: a protocol step at which the process SIGKILLs itself:
  ``after_requested``, ``while_writing``, ``holding_lock``, ``after_publish``;
* ``loop``: run many random upserts (the randomized history test);
* ``stop_before_fence``: a path; inside the commit's critical section, right before the lock's
  fence (``assert_held``), the writer writes its instant time there and SIGSTOPs itself (the
  paused-holder test continues it with SIGCONT);
* ``storage_options``: handed to ``Table.open`` (tables on object stores).

The outcome goes to ``result`` as JSON: committed (instant, completion) or the
error's type and fields.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import tidemark
from signals import write_atomically
from tidemark.write import commit as commit_module


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _barrier(pause: dict[str, str], instant_time: str) -> None:
    write_atomically(pause["ready"], instant_time)  # appears with its content, never empty
    deadline = time.monotonic() + 120
    while not Path(pause["go"]).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never released from the barrier")
        time.sleep(0.01)


def _install_hooks(spec: dict[str, Any]) -> None:
    crash = spec.get("crash_at")
    pause = spec.get("pause_before_commit")
    protocol_cls = commit_module.CommitProtocol

    if spec.get("stop_before_fence"):
        from tidemark.concurrency.transaction import TableLock

        original_fence = TableLock.assert_held
        stopped = []

        def stop_then_fence(self: Any) -> None:
            if not stopped:
                stopped.append(True)
                write_atomically(spec["stop_before_fence"], "stopped")
                os.kill(os.getpid(), signal.SIGSTOP)
            original_fence(self)
        TableLock.assert_held = stop_then_fence  # type: ignore[method-assign]

    if spec.get("pause_before_write"):
        original_inflight = protocol_cls.inflight

        def inflight_then_wait(self: Any, pending: Any, planned: Any = ()) -> None:
            original_inflight(self, pending, planned)
            _barrier(spec["pause_before_write"], pending.instant_time)
        protocol_cls.inflight = inflight_then_wait  # type: ignore[method-assign]

    if spec.get("pause_after_early_check"):
        from tidemark.write.client import WriteClient

        original_check = WriteClient._check_early

        def check_then_wait(self: Any, pending: Any, file_groups: Any) -> None:
            original_check(self, pending, file_groups)
            _barrier(spec["pause_after_early_check"], pending.instant_time)
        WriteClient._check_early = check_then_wait  # type: ignore[method-assign]

    if crash == "after_requested":
        def inflight(self: Any, pending: Any, planned: Any = ()) -> None:
            write_atomically(spec["crash_signal"], pending.instant_time)
            _die()
        protocol_cls.inflight = inflight  # type: ignore[method-assign]

    if crash == "while_writing":
        from tidemark.engines.arrow import file_groups

        original_writes = {name: getattr(file_groups, name) for name in ("write_file_group", "write_merged")}
        # File groups are written on threads: only the first one to finish signals and dies (two
        # signalling at once would race on the signal's temporary file and could leave it empty).
        crashing = threading.Lock()

        def crash_after(original_write: Any) -> Any:
            def write(spec_: Any, *args: Any, **kwargs: Any) -> Any:
                stat = original_write(spec_, *args, **kwargs)
                crashing.acquire()  # never released: the process dies holding it
                write_atomically(spec["crash_signal"], spec_.instant_time)
                _die()
                return stat
            return write
        # A file group's rewrite alone, or many small ones' after one merge (write/small_rewrites.py).
        for name, original_write in original_writes.items():
            setattr(file_groups, name, crash_after(original_write))

    if pause or crash in ("holding_lock", "after_publish"):
        original_complete = protocol_cls.complete

        def complete(self: Any, pending: Any, stats: Any, **kwargs: Any) -> Any:
            if pause:
                _barrier(pause, pending.instant_time)
            if crash == "holding_lock":
                original_check = self.strategy.check

                def check(*args: Any, **kw: Any) -> None:
                    write_atomically(spec["crash_signal"], pending.instant_time)
                    _die()
                    original_check(*args, **kw)
                self.strategy.check = check
            result = original_complete(self, pending, stats, **kwargs)
            if crash == "after_publish":
                write_atomically(spec["crash_signal"], pending.instant_time)
                _die()
            return result
        protocol_cls.complete = complete  # type: ignore[method-assign]


def _storage_kwargs(spec: dict[str, Any]) -> dict[str, Any]:
    return {"storage_options": spec["storage_options"]} if spec.get("storage_options") else {}


def _outcome_of(error: BaseException) -> dict[str, Any]:
    return {
        "status": "error",
        "error": type(error).__name__,
        "message": str(error),
        "conflicting_instant": getattr(error, "conflicting_instant", None),
        "instant_time": getattr(error, "instant_time", None),
        "holder": getattr(error, "holder", None),
        "file_groups": [list(g) for g in getattr(error, "file_groups", [])],
        "reason": getattr(error, "reason", None),
    }


def _spark_session(master: str, conf: dict[str, str]) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = (
        builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_once(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("engine") == "spark" and spec.get("spark_remote"):  # a Spark Connect client
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(spec["spark_remote"]).create()
        table = tidemark.Table.open(spec["table"], spark=spark, options=spec.get("options"))
        rows: Any = spark.createDataFrame(spec["rows"], spec["schema"])
    elif spec.get("engine") == "spark":  # a whole Spark application of its own
        spark = _spark_session(spec.get("spark_master", "local[1]"), spec.get("spark_conf", {}))
        table = tidemark.Table.open(spec["table"], spark=spark, options=spec.get("options"))
        rows: Any = spark.createDataFrame(spec["rows"], spec["schema"])
    else:
        table = tidemark.Table.open(spec["table"], spark=None, options=spec.get("options"), **_storage_kwargs(spec))
        rows = pa.Table.from_pylist(spec["rows"])
    try:
        result = getattr(table, spec["operation"])(rows)
    except tidemark.TidemarkError as error:
        return _outcome_of(error)
    finally:
        table.close()
    return {
        "status": "committed",
        "instant_time": result.instant_time,
        "completion_time": result.completion_time,
        "file_groups": list(result.file_groups),
        "attempts": result.attempts,
    }


def _loop_rows(spec: dict[str, Any], rng: random.Random, writer: int, i: int, batch_id: str) -> list[dict[str, Any]]:
    own = spec.get("own_partition")  # {"inserts_only": bool}: this writer's keys and partition alone
    if own is None:
        keys = rng.sample(range(spec["keys"]), rng.randint(1, 4))
        return [{"id": k, "part": f"p{k % spec['partitions']}", "batch": batch_id, "v": rng.random()} for k in keys]
    base = writer * 1_000_000
    if own.get("inserts_only"):
        keys = [base + i * 10 + n for n in range(rng.randint(1, 4))]
    else:  # updates of existing keys, and one new key (a new small file group) each time
        keys = rng.sample(range(base, base + spec["keys"]), rng.randint(1, 3)) + [base + spec["keys"] + i]
    return [{"id": k, "part": f"w{writer}", "batch": batch_id, "v": rng.random()} for k in keys]


def run_loop(spec: dict[str, Any]) -> None:
    """Random upserts over overlapping keys; one JSON line per attempt in ``log``.

    With ``own_partition`` each writer writes only its own partition ``w<writer>``
    (its upserts never conflict with another writer's), or only inserts new keys.
    """
    rng = random.Random(spec["seed"])
    writer = spec["writer"]
    table = tidemark.Table.open(spec["table"], spark=None, options=spec.get("options"), **_storage_kwargs(spec))
    with open(spec["log"], "a") as log:
        for i in range(spec["iterations"]):
            batch_id = f"w{writer}-{i}"
            rows = _loop_rows(spec, rng, writer, i, batch_id)
            log.write(json.dumps({"batch": batch_id, "rows": rows, "state": "intent"}) + "\n")
            log.flush()
            try:
                result = table.upsert(pa.Table.from_pylist(rows))
            except tidemark.TidemarkError as error:
                state = "conflict" if isinstance(error, tidemark.WriteConflictError) else "error"
                log.write(json.dumps({"batch": batch_id, "state": state, **_outcome_of(error)}) + "\n")
            else:
                log.write(json.dumps({"batch": batch_id, "state": "committed", "instant": result.instant_time,
                                      "completion": result.completion_time, "attempts": result.attempts}) + "\n")
            log.flush()
            time.sleep(spec.get("pause_s", 0))
    table.close()


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    _install_hooks(spec)
    if spec.get("loop"):
        run_loop(spec)
        return
    outcome = run_once(spec)
    write_atomically(spec["result"], json.dumps(outcome))


if __name__ == "__main__":
    main()
