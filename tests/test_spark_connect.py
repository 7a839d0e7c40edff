"""tidemark through Spark Connect: a real Connect server (fixture ``spark_connect``) and clients
in processes of their own (a process is either a Connect client or a classic driver).

Every write, read, table service and ``spark.read.format("tidemark")`` goes through the
Connect session and is checked against a model and hudi-rs after every operation; early
conflict detection cancels a doomed Connect write by its operation tag; a Connect writer and
an Arrow writer race under optimistic concurrency control.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from spark_histories import check_history, run_history, tables
from test_early_conflict import OCC, Writer, data_files_of, detection, file_group_of, model, rows, seed_rows, visible

SCHEMA = "id long, part string, v string"


def test_every_operation_through_spark_connect_agrees_with_the_model_and_hudi_rs(
    spark_connect: Any, tmp_path: Path
) -> None:
    specs = tables(tmp_path)
    report = run_history(tmp_path, {"remote": spark_connect.url}, specs)
    assert report["connect"] is True
    check_history(specs, report)


def test_cancelling_a_connect_job_interrupts_its_tasks_and_plans_answer_what_the_jvm_did(
    spark_connect: Any, tmp_path: Path
) -> None:
    """JobHandle.cancel (what early conflict detection calls) stops a running Connect job by its
    operation tag: the job ends at once and its Python tasks stop (they would sleep 10 min)."""
    report = run_history(tmp_path, {"remote": spark_connect.url}, [], extra={"cancel_probe": True})
    assert report["kind"] == "connect"
    assert report["failure"] is not None and "OPERATION_CANCELED" in report["failure"]
    assert report["seconds"] < 120
    assert report["next_job_rows"] == 4 and report["next_job_seconds"] < 300  # the slots are free again
    # What a classic session asks the JVM, read from the Connect server's plans.
    assert report["estimated_bytes"] == 800
    assert report["default_parallelism"] == 2  # the server runs local[2]
    assert report["task_reachable_host"] == "127.0.0.1"  # the server is on this machine


def test_plan_sizes_are_read_from_explain_text() -> None:
    from tidemark.engines.spark.connect import size_from_explain

    plan = ("== Optimized Logical Plan ==\nProject [id#7L], Statistics(sizeInBytes={})\n"
            "+- Range (0, 100, step=1, splits=Some(2)), Statistics(sizeInBytes=1.0 B)")
    assert size_from_explain(plan.format("1800.0 B")) == 1800
    assert size_from_explain(plan.format("1.5 MiB")) == 3 << 19
    assert size_from_explain(plan.format("8.0 EiB")) is None  # Spark's "unknown"
    assert size_from_explain("== Physical Plan ==\n*(1) Range") is None


@pytest.fixture
def table(tmp_path: Path) -> Any:
    t = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", options=OCC)
    t.upsert(pa.Table.from_pylist(seed_rows()))  # one file group per partition
    yield t
    t.close()


def test_early_conflict_detection_stops_a_doomed_connect_write(
    spark_connect: Any, tmp_path: Path, table: tidemark.Table
) -> None:
    """A (Arrow, older) takes file group F of p0 after B's driver check passed; B's Connect tasks
    find A's marker, the client cancels B's job by its tag and rolls B back."""
    opts = detection("simple_direct")
    a = Writer(tmp_path, table, opts, rows([0], "a"), pauses=("pause_before_write", "pause_before_commit"))
    a_instant = a.reached("pause_before_write")  # older than B, no marker yet
    b = Writer(tmp_path, table, opts, rows(list(range(1, 32)), "b"), pauses=("pause_after_early_check",),
               engine="spark", spark_remote=spark_connect.url, schema=SCHEMA)
    b_instant = b.reached("pause_after_early_check", timeout=300)
    assert a_instant < b_instant
    a.release("pause_before_write")
    a.reached("pause_before_commit")  # A now holds F's marker
    b.release("pause_after_early_check")
    b_out = b.outcome(timeout=600)
    assert b_out["status"] == "error" and b_out["error"] == "EarlyConflictError", b_out
    assert b_out["conflicting_instant"] == a_instant
    assert b_out["file_groups"] == [["part=p0", file_group_of(table, "p0")]]
    assert data_files_of(table, b_instant) == []  # everything B wrote was rolled back
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    expected = model(([0], "a"))
    assert visible(table) == expected
    assert {r["id"]: r["v"] for r in hudi_rs_read(table.path).to_pylist()} == expected


def test_a_connect_writer_and_an_arrow_writer_under_occ(
    spark_connect: Any, tmp_path: Path, table: tidemark.Table
) -> None:
    """Both write file group F of p0 and stand before their commit; the first to commit wins,
    the other fails with a write conflict and leaves nothing behind. Then the loser's rows
    written again by the Connect writer commit on top."""
    opts = {**OCC, "hoodie.write.num.retries.on.conflict.failures": "0"}
    connect = {"engine": "spark", "spark_remote": spark_connect.url, "schema": SCHEMA}
    c = Writer(tmp_path, table, opts, rows([0, 9], "connect"), pauses=("pause_before_commit",), **connect)
    c_instant = c.reached("pause_before_commit", timeout=300)
    a = Writer(tmp_path, table, opts, rows([0, 17], "arrow"), pauses=("pause_before_commit",))
    a_instant = a.reached("pause_before_commit")
    a.release("pause_before_commit")
    assert a.outcome()["status"] == "committed"
    c.release("pause_before_commit")
    c_out = c.outcome(timeout=600)
    assert c_out["status"] == "error" and c_out["error"] == "WriteConflictError", c_out
    assert c_out["conflicting_instant"] == a_instant
    assert data_files_of(table, c_instant) == []
    expected = model(([0, 17], "arrow"))
    assert visible(table) == expected
    assert {r["id"]: r["v"] for r in hudi_rs_read(table.path).to_pylist()} == expected
    again = Writer(tmp_path, table, opts, rows([0, 9], "connect"), **connect)
    assert again.outcome(timeout=600)["status"] == "committed"
    expected = model(([0, 17], "arrow"), ([0, 9], "connect"))
    assert visible(table) == expected
    assert {r["id"]: r["v"] for r in hudi_rs_read(table.path).to_pylist()} == expected
