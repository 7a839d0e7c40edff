"""A multi-operation history run by a Spark session of its own: Spark Connect, or a classic
session on a standalone cluster.

Run as ``python spark_history.py SPEC.json``. A process of its own because PySpark lets a
process be either a Spark Connect client or a classic driver, never both (creating a Connect
session switches ``pyspark.sql.functions`` to Connect for the whole process), and one JVM
holds one SparkContext (the test run's shared local session is one).

The spec::

    {"session": {"remote": "sc://127.0.0.1:P"} | {"master": "spark://127.0.0.1:P", "conf": {...}},
     "tables": [{"path": ..., "table_type": "COPY_ON_WRITE", "options": {...},
                 "storage_options": {...},   # optional: an object-store table's (s3://...)
                 "ops": [{"op": "bulk_insert", "rows": [...]}, {"op": "compact"}, ...]}],
     "report": path}

After every operation the report records what it returned and the rows each reader sees:
tidemark's read through the session, ``spark.read.format("tidemark")``, and hudi-rs. The
test (this script's caller) compares them with its model; this script asserts nothing.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

SCHEMA = "id long, part string, v string, ts long"
COLUMNS = ["id", "part", "v", "ts"]


def session(spec: dict[str, Any]) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    if "remote" in spec:
        return SparkSession.builder.remote(spec["remote"]).create()
    builder = SparkSession.builder.master(spec["master"]).appName("tidemark-tests-cluster")
    for key, value in spec.get("conf", {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def rows_of(df: Any) -> list[list[Any]]:
    return sorted([r[c] for c in COLUMNS] for r in df.select(*COLUMNS).collect())


def hudi_rows(path: str, storage_options: dict[str, str] | None = None) -> list[list[Any]]:
    from conftest import hudi_rs_read

    table = hudi_rs_read(path, storage_options=storage_options)
    if table.num_rows == 0:
        return []
    return sorted([r[c] for c in COLUMNS] for r in table.select(COLUMNS).to_pylist())


def run_op(spark: Any, table: Any, op: dict[str, Any]) -> dict[str, Any]:
    name = op["op"]
    began = time.monotonic()
    out: dict[str, Any] = {"op": name}
    if name == "compact":
        result = table.compact()
        out["instant"] = result.instant.requested_time if result is not None else None
    elif name == "clean":
        result = table.clean()
        out["instant"] = result.clean_instant.requested_time if result.clean_instant is not None else None
        out["deleted_files"] = len(result.deleted_files)
    elif name == "cluster":
        progress: list[list[int]] = []
        result = table.cluster(small_file_limit=1 << 30, target_file_size=1 << 30,
                               progress=lambda p: progress.append([p.groups_done, p.groups_total]))
        out["instant"] = result.instant_time
        out["groups"] = result.groups
        out["progress"] = progress
    else:
        df = spark.createDataFrame(op["rows"], SCHEMA)
        result = getattr(table, name)(df)
        out["instant"] = result.instant_time
    out["seconds"] = round(time.monotonic() - began, 2)
    return out


def cancel_probe(spark: Any) -> dict[str, Any]:
    """Run a job of two tasks that would sleep 10 minutes under a JobHandle and cancel it from
    another thread (again and again, until the job ends: it may not have started yet)."""
    import threading

    from tidemark.engines.spark.connect import JobHandle

    def sleepy(batches: Any) -> Any:
        time.sleep(600)
        yield from batches

    job = JobHandle(spark, "tidemark-test-cancel", "a job to cancel")
    ended = threading.Event()

    def cancel_until_ended() -> None:
        while not ended.wait(1.0):
            job.cancel()

    canceller = threading.Thread(target=cancel_until_ended, daemon=True)
    began = time.monotonic()
    outcome: dict[str, Any] = {"kind": "classic" if not job.connect else "connect"}
    try:
        with job.running():
            canceller.start()
            spark.range(0, 2, 1, 2).mapInArrow(sleepy, "id long").collect()
        outcome["failure"] = None
    except Exception as error:  # noqa: BLE001 - what the cancellation raised is the result
        outcome["failure"] = f"{type(error).__name__}: {error}"[:2000]
    finally:
        ended.set()
    outcome["seconds"] = round(time.monotonic() - began, 2)
    # The next job needs the task slots: it waits for them if the cancelled tasks still sleep.
    began = time.monotonic()
    outcome["next_job_rows"] = spark.range(0, 4, 1, 4).mapInArrow(lambda b: b, "id long").count()
    outcome["next_job_seconds"] = round(time.monotonic() - began, 2)
    from tidemark.engines.spark.connect import default_parallelism, estimated_bytes, task_reachable_host

    outcome["estimated_bytes"] = estimated_bytes(spark.range(100))  # 100 longs
    outcome["default_parallelism"] = default_parallelism(spark)
    outcome["task_reachable_host"] = task_reachable_host(spark)
    return outcome


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    import tidemark

    spark = session(spec["session"])
    if spec.get("cancel_probe"):
        try:
            Path(spec["report"]).write_text(json.dumps(cancel_probe(spark)))
        finally:
            spark.stop()
        return
    report: dict[str, Any] = {"tables": [], "connect": "remote" in spec["session"]}
    try:
        for t in spec["tables"]:
            steps: list[dict[str, Any]] = []
            report["tables"].append({"path": t["path"], "steps": steps})
            table = tidemark.Table.create(t["path"], spark=spark, record_key="id", partition_by="part",
                                          ordering_field="ts", table_type=t.get("table_type", "COPY_ON_WRITE"),
                                          options=t.get("options"), storage_options=t.get("storage_options"))
            for op in t["ops"]:
                step = run_op(spark, table, op)
                step["tidemark"] = rows_of(table.read())
                step["hudi_rs"] = hudi_rows(t["path"], t.get("storage_options"))
                if op.get("datasource"):
                    reader = spark.read.format("tidemark").options(**(t.get("storage_options") or {}))
                    step["datasource"] = rows_of(reader.load(t["path"]))
                steps.append(step)
                Path(spec["report"]).write_text(json.dumps(report))
            table.close()
        if "remote" not in spec["session"]:  # the executors that ran the jobs (never the driver)
            ids = spark.sparkContext._jsc.sc().getExecutorIds()  # a Scala Seq
            report["executors"] = sorted(str(ids.apply(i)) for i in range(ids.size()))
    except Exception as error:  # noqa: BLE001 - reported to the test, which fails with it
        report["error"] = f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    finally:
        Path(spec["report"]).write_text(json.dumps(report))
        spark.stop()


if __name__ == "__main__":
    main()
