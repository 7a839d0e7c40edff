"""tidemark on a Spark standalone cluster: a master and two workers started by the tests
(fixture ``spark_cluster_session``), executors in JVMs of their own, a driver in a process of
its own (tests/spark_history.py). Nothing may live only on the driver: tasks write data files,
log files and markers themselves, and reach the driver's marker server at its address."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from spark_histories import check_history, copy_on_write_ops, run_history

MOR_OPS = [
    {"op": "bulk_insert", "rows": [{"id": i, "part": f"p{i % 4}", "v": "a", "ts": 1} for i in range(12)]},
    {"op": "upsert", "rows": [{"id": i, "part": f"p{i % 4}", "v": "b", "ts": 2} for i in (0, 1, 2, 30)],
     "datasource": True},
    {"op": "compact", "datasource": True},
]


def test_every_operation_on_a_standalone_cluster_agrees_with_the_model_and_hudi_rs(
    spark_cluster_session: Any, tmp_path: Path
) -> None:
    cluster = spark_cluster_session
    markers = {"hoodie.write.markers.type": "TIMELINE_SERVER_BASED"}  # a server in the driver process
    # Spark Connect runs every operation (test_spark_connect.py); here each kind of task once.
    cow_ops = [op for op in copy_on_write_ops() if op["op"] in ("bulk_insert", "insert", "upsert", "delete", "cluster")]
    specs = [
        {"path": str(tmp_path / "cow"), "table_type": "COPY_ON_WRITE", "ops": cow_ops,
         "options": {"hoodie.clean.commits.retained": "1", **markers}},
        {"path": str(tmp_path / "mor"), "table_type": "MERGE_ON_READ", "ops": MOR_OPS, "options": markers},
    ]
    report = run_history(tmp_path, {"master": cluster.master_url, "conf": cluster.driver_conf()}, specs)
    assert len(report["executors"]) == 2  # one per worker, each a JVM of its own; the driver ran no task
    check_history(specs, report)


def test_a_table_on_s3_written_by_the_cluster_agrees_with_the_model_and_hudi_rs(
    spark_cluster_session: Any, moto_server: Any, s3_bucket: str, tmp_path: Path
) -> None:
    """The same cluster, tables on the S3 server: executors' Python workers put data files, log
    files and (direct) markers straight into the bucket through obstore, with the storage options
    the driver was given (no Hadoop S3 jars); hudi-rs reads the bucket and agrees after each step."""
    cluster = spark_cluster_session
    s3 = moto_server.storage_options()
    cow_ops = [op for op in copy_on_write_ops() if op["op"] in ("bulk_insert", "upsert", "delete")]
    specs = [
        {"path": f"s3://{s3_bucket}/cow", "table_type": "COPY_ON_WRITE", "ops": cow_ops,
         "storage_options": s3, "options": {"hoodie.write.markers.type": "DIRECT"}},
        {"path": f"s3://{s3_bucket}/mor", "table_type": "MERGE_ON_READ", "ops": MOR_OPS,
         "storage_options": s3, "options": {"hoodie.write.markers.type": "DIRECT"}},
    ]
    report = run_history(tmp_path, {"master": cluster.master_url, "conf": cluster.driver_conf()}, specs)
    assert len(report["executors"]) == 2
    check_history(specs, report)
    keys = [o["Key"] for page in moto_server.boto3_client("s3").get_paginator("list_objects_v2")
            .paginate(Bucket=s3_bucket) for o in page.get("Contents", [])]
    # Base files in both tables, log files in the merge-on-read one: all on the S3 server.
    assert any(k.startswith("cow/p") and k.endswith(".parquet") for k in keys)
    assert any(k.startswith("mor/p") and ".log." in k for k in keys)
    assert any(k.startswith("mor/.hoodie/timeline/") and k.endswith(".commit") for k in keys)  # the compaction
    assert not (tmp_path / "cow").exists() and not (tmp_path / "mor").exists()
