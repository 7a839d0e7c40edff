"""Tables on an object store: the moto S3 server (tests/moto_server.py), Arrow engine and Spark.

Every table here lives at ``s3://<fresh bucket>/t``; hudi-rs reads it through the same storage
options and must agree with tidemark after each operation.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.storage.location import open_storage
from tidemark.timeline import Action, State, Timeline

COLUMNS = ["id", "v"]
NO_SERVICES = {"hoodie.clean.automatic": "false", "hoodie.archive.automatic": "false"}


def _batch(*pairs: tuple[int, int]) -> pa.Table:
    return pa.table({
        "id": [k for k, _ in pairs], "part": [f"p{k % 2}" for k, _ in pairs], "v": [v for _, v in pairs],
    })


def _create(uri: str, opts: dict[str, str], *, table_type: str = "COPY_ON_WRITE", **options: str) -> Table:
    return Table.create(uri, spark=None, record_key="id", partition_by="part", table_type=table_type,
                        options={**NO_SERVICES, **options}, storage_options=opts)


def _agree(table: Table, opts: dict[str, str], expected: list[tuple[Any, ...]], **read: Any) -> None:
    """tidemark and hudi-rs both read ``expected`` from the S3 table."""
    assert rows_of(table.read(**read), COLUMNS) == expected
    assert rows_of(hudi_rs_read(table.path, storage_options=opts, **read), COLUMNS) == expected


def test_copy_on_write_table_on_s3_writes_reads_and_agrees_with_hudi_rs(moto_server: Any, s3_bucket: str) -> None:
    opts = moto_server.storage_options()
    uri = f"s3://{s3_bucket}/t"
    table = _create(uri, opts)
    assert table.path == uri
    first = table.bulk_insert(_batch((1, 0), (2, 0), (3, 0)))
    _agree(table, opts, [(1, 0), (2, 0), (3, 0)])
    table.upsert(_batch((2, 1), (4, 1)))
    _agree(table, opts, [(1, 0), (2, 1), (3, 0), (4, 1)])
    table.delete(pa.table({"id": [1], "part": ["p1"]}))
    _agree(table, opts, [(2, 1), (3, 0), (4, 1)])
    _agree(table, opts, [(1, 0), (2, 0), (3, 0)], as_of=first.instant_time)
    # a second handle opened from the URI sees the same table
    again = Table.open(uri, spark=None, storage_options=opts)
    assert rows_of(again.read(), COLUMNS) == [(2, 1), (3, 0), (4, 1)]
    # nothing lives on the local disk: the timeline is in the bucket
    keys = [o["Key"] for o in moto_server.boto3_client("s3").list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert "t/.hoodie/hoodie.properties" in keys
    assert sum(k.startswith("t/.hoodie/timeline/") and k.endswith(".commit") for k in keys) == 3


def test_merge_on_read_table_on_s3_compacts_and_agrees_with_hudi_rs(moto_server: Any, s3_bucket: str) -> None:
    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts, table_type="MERGE_ON_READ")
    table.bulk_insert(_batch((1, 0), (2, 0)))
    table.upsert(_batch((1, 1)))
    table.delete(pa.table({"id": [2], "part": ["p0"]}))
    _agree(table, opts, [(1, 1)])
    logs = [f.path for f in table.storage.walk_files("") if ".log." in f.name]
    assert logs, "merge-on-read upserts append log files"
    result = table.compact()
    assert result is not None
    timeline = Timeline.load(table.storage)
    assert timeline.filter(actions=[Action.COMMIT], states=[State.COMPLETED])  # the compaction's commit
    _agree(table, opts, [(1, 1)])
    table.upsert(_batch((3, 3)))
    _agree(table, opts, [(1, 1), (3, 3)])


def test_clean_savepoint_and_restore_on_s3(moto_server: Any, s3_bucket: str) -> None:
    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts, **{"hoodie.clean.commits.retained": "1"})
    table.upsert(_batch((1, 0), (2, 0)))
    saved = table.upsert(_batch((1, 1)))
    expected = [(1, 1), (2, 0)]
    table.savepoint(saved.instant_time)
    for i in range(2, 5):
        table.upsert(_batch((1, i), (3, i)))
    cleaned = table.clean()
    assert cleaned.deleted_files
    assert all(not table.storage.exists(p) for p in cleaned.deleted_files)
    _agree(table, opts, expected, as_of=saved.instant_time)
    restored = table.restore(saved.instant_time)
    assert len(restored.rollbacks) == 3
    _agree(table, opts, expected)
    table.upsert(_batch((5, 5)))
    _agree(table, opts, [*expected, (5, 5)])


def test_a_failed_write_on_s3_is_rolled_back(moto_server: Any, s3_bucket: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from tidemark.write.commit import CommitProtocol

    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts)
    table.upsert(_batch((1, 0), (2, 0)))

    def die(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt("the writer died before publishing its commit")

    with monkeypatch.context() as patch:
        patch.setattr(CommitProtocol, "complete", die)
        with pytest.raises(KeyboardInterrupt):
            table.upsert(_batch((1, 9), (4, 9)))
    _agree(table, opts, [(1, 0), (2, 0)])  # nothing of the failed write is visible
    # the writer rolled its own write back as it failed: a completed rollback, no data file left
    timeline = Timeline.load(table.storage)
    assert not timeline.pending
    rollbacks = timeline.filter(actions=[Action.ROLLBACK], states=[State.COMPLETED])
    assert len(rollbacks) == 1
    stamps = {i.requested_time for i in timeline.instants} - {r.requested_time for r in rollbacks}
    written = {f.name.rsplit("_", 1)[-1].removesuffix(".parquet") for f in table.storage.walk_files("")
               if f.name.endswith(".parquet")}
    assert written <= stamps, "a data file of the failed write is left"
    table.upsert(_batch((4, 4)))
    _agree(table, opts, [(1, 0), (2, 0), (4, 4)])


def test_two_writers_racing_to_create_one_instant_file_exactly_one_wins(moto_server: Any, s3_bucket: str) -> None:
    import threading

    from tidemark.storage import CreateOutcome

    opts = moto_server.storage_options()
    name = ".hoodie/timeline/20260101000000000_20260101000000001.commit"
    outcomes: list[tuple[int, CreateOutcome]] = []
    start = threading.Barrier(8)

    def race(i: int) -> None:
        storage = open_storage(f"s3://{s3_bucket}/t", opts)  # each writer its own client
        start.wait()
        outcomes.append((i, storage.create_if_absent(name, f"writer {i}".encode())))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [i for i, o in outcomes if o is CreateOutcome.CREATED]
    assert len(outcomes) == 8 and len(winners) == 1
    assert [o for _, o in outcomes if o is not CreateOutcome.CREATED] == [CreateOutcome.ALREADY_EXISTS] * 7
    assert open_storage(f"s3://{s3_bucket}/t", opts).read_bytes(name) == f"writer {winners[0]}".encode()


def test_hoodie_properties_changes_are_compare_and_swap_on_s3(moto_server: Any, s3_bucket: str) -> None:
    storage = open_storage(f"s3://{s3_bucket}/t", moto_server.storage_options())
    storage.write_atomic("p", b"v1")
    seen = storage.read_versioned("p")
    assert seen is not None and seen.data == b"v1"
    assert storage.replace_if_match("p", b"v2", seen.version)
    assert not storage.replace_if_match("p", b"v3", seen.version)  # stale ETag: refused
    assert storage.read_bytes("p") == b"v2"
    assert not storage.replace_if_match("absent", b"x", seen.version)



def test_archival_and_clustering_on_s3(moto_server: Any, s3_bucket: str) -> None:
    from tidemark.timeline.history import read_manifest

    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts, **{
        "hoodie.archive.automatic": "true", "hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6",
        "hoodie.clean.commits.retained": "2", "hoodie.timeline.compaction.batch.size": "3",
        "hoodie.parquet.small.file.limit": "0"})
    commits = [table.insert(_batch((i, i))) for i in range(10)]
    timeline = Timeline.load(table.storage)
    assert timeline.archived_before is not None and read_manifest(table.storage).files
    everything = [i for i in table.timeline(include_archived=True) if i.action is Action.COMMIT]
    assert [i.requested_time for i in everything] == [c.instant_time for c in commits]
    expected = [(i, i) for i in range(10)]
    _agree(table, opts, expected)
    before = len([f for f in table.storage.walk_files("") if f.name.endswith(".parquet")])
    result = table.cluster(small_file_limit=1 << 30, target_file_size=1 << 30)
    assert result.clustered and result.file_groups_replaced == before
    _agree(table, opts, expected)


# -- locks -----------------------------------------------------------------------------------

OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control"}


@pytest.mark.parametrize("provider", ["in_process", "filesystem"])
def test_local_lock_providers_refuse_object_store_tables(moto_server: Any, s3_bucket: str, provider: str) -> None:
    from tidemark import ConfigError

    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts)
    table.upsert(_batch((1, 0)))
    before = sorted(f.path for f in table.storage.walk_files("", skip_hidden_dirs=False))
    with pytest.raises(ConfigError) as info:
        writer = Table.open(table.path, spark=None, storage_options=opts,
                            options={**OCC, "hoodie.write.lock.provider": provider})
        writer.upsert(_batch((2, 0)))
    assert info.value.key in ("hoodie.write.lock.provider", "hoodie.write.lock.filesystem.path")
    assert "zookeeper" in str(info.value)
    assert sorted(f.path for f in table.storage.walk_files("", skip_hidden_dirs=False)) == before


def test_zookeeper_lock_works_for_s3_tables(moto_server: Any, s3_bucket: str, zookeeper_server: Any) -> None:
    opts = moto_server.storage_options()
    lock = {**OCC, **zookeeper_server.lock_options("tidemark-s3")}
    table = _create(f"s3://{s3_bucket}/t", opts, **lock)
    table.upsert(_batch((1, 0), (2, 0)))
    other = Table.open(table.path, spark=None, storage_options=opts, options=lock)
    other.upsert(_batch((2, 2)))
    table.upsert(_batch((3, 3)))
    _agree(table, opts, [(1, 0), (2, 2), (3, 3)])
    other.close()
    table.close()


# -- faults ----------------------------------------------------------------------------------

FAST = {"timeout": "3s", "connect_timeout": "1s", "max_retries": "1", "retry_timeout": "3s"}


def test_a_missing_bucket_is_a_typed_error(moto_server: Any) -> None:
    import time

    from tidemark.errors import BucketNotFoundError

    opts = {**moto_server.storage_options(), **FAST}
    started = time.monotonic()
    with pytest.raises(BucketNotFoundError) as info:
        _create("s3://no-such-bucket-tidemark/t", opts)
    assert "create it first" in str(info.value)
    with pytest.raises(BucketNotFoundError):
        Table.open("s3://no-such-bucket-tidemark/t", spark=None, storage_options=opts)
    assert time.monotonic() - started < 15
    assert opts["aws_secret_access_key"] not in str(info.value)


def test_an_unreachable_endpoint_is_a_typed_error_within_the_timeout(s3_bucket: str, moto_server: Any) -> None:
    import time

    from server_process import free_port
    from tidemark.errors import StorageUnreachableError

    opts = {**moto_server.storage_options(), **FAST, "aws_endpoint_url": f"http://127.0.0.1:{free_port('127.0.0.1')}"}
    started = time.monotonic()
    with pytest.raises(StorageUnreachableError) as info:
        _create(f"s3://{s3_bucket}/t", opts)
    assert time.monotonic() - started < 15
    message = str(info.value)
    assert "aws_endpoint_url" in message and opts["aws_secret_access_key"] not in message
    # nothing was created on the real server
    assert "Contents" not in moto_server.boto3_client("s3").list_objects_v2(Bucket=s3_bucket)


def test_wrong_credentials_are_a_typed_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A second moto server that checks signatures (its IAM enforced after the set-up calls)."""
    from moto_server import MotoServer
    from tidemark.errors import StorageAccessDeniedError

    monkeypatch.setenv("INITIAL_NO_AUTH_ACTION_COUNT", "3")
    server = MotoServer().start()
    try:
        iam = server.boto3_client("iam")
        iam.create_user(UserName="writer")
        import json

        iam.put_user_policy(UserName="writer", PolicyName="all", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="writer")["AccessKey"]
        good = {**server.storage_options(), **FAST, "aws_access_key_id": key["AccessKeyId"],
                "aws_secret_access_key": key["SecretAccessKey"]}
        import boto3

        s3 = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=key["AccessKeyId"],
                          aws_secret_access_key=key["SecretAccessKey"], region_name="us-east-1")
        s3.create_bucket(Bucket="authz")
        table = _create("s3://authz/t", good)
        table.upsert(_batch((1, 0)))
        wrong = {**good, "aws_secret_access_key": "not-the-secret"}
        with pytest.raises(StorageAccessDeniedError) as info:
            Table.open("s3://authz/t", spark=None, storage_options=wrong).upsert(_batch((2, 0)))
        assert "not-the-secret" not in str(info.value) and "credentials" in str(info.value)
        assert rows_of(Table.open("s3://authz/t", spark=None, storage_options=good).read(), COLUMNS) == [(1, 0)]
    finally:
        server.stop()


def test_the_server_paused_mid_write_gives_a_typed_error_and_a_consistent_table(
    moto_server: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 server stops answering (SIGSTOP) as the writer publishes, then comes back (SIGCONT)
    with its contents: the write fails typed within its timeouts; the table then reads as before
    the write, and the next writer rolls the failed one back and goes on."""
    import os
    import signal
    import time

    from tidemark.errors import StorageError
    from tidemark.write.commit import CommitProtocol

    opts = {**moto_server.storage_options(), **FAST}
    table = _create(f"s3://{s3_bucket}/t", opts)
    table.upsert(_batch((1, 0), (2, 0)))
    pid = moto_server._proc.pid
    original = CommitProtocol.complete

    def pause_then_complete(self: CommitProtocol, *args: Any, **kwargs: Any) -> Any:
        os.kill(pid, signal.SIGSTOP)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CommitProtocol, "complete", pause_then_complete)
    started = time.monotonic()
    try:
        with pytest.raises(StorageError):
            table.upsert(_batch((1, 9), (3, 9)))
    finally:
        os.kill(pid, signal.SIGCONT)
    assert time.monotonic() - started < 60
    monkeypatch.setattr(CommitProtocol, "complete", original)

    after = Table.open(table.path, spark=None, storage_options=opts)
    _agree(after, opts, [(1, 0), (2, 0)])  # the failed write is not visible
    after.rollback_failed_writes(force=True)
    timeline = Timeline.load(after.storage)
    assert not timeline.pending
    after.upsert(_batch((3, 3)))
    _agree(after, opts, [(1, 0), (2, 0), (3, 3)])


# -- the command line --------------------------------------------------------------------------


def test_cli_commands_take_a_uri_and_storage_options(moto_server: Any, s3_bucket: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from tidemark.cli.main import main

    opts = moto_server.storage_options()
    table = _create(f"s3://{s3_bucket}/t", opts)
    first = table.upsert(_batch((1, 0), (2, 0)))
    table.upsert(_batch((1, 1)))
    flags = [arg for k, v in opts.items() for arg in ("--storage-option", f"{k}={v}")]
    for command in (["show", table.path], ["timeline", table.path], ["savepoint", table.path, first.instant_time],
                    ["clean", table.path], ["markers", table.path]):
        code = main([*command, *flags])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert opts["aws_secret_access_key"] not in out + err
    assert [s.requested_time for s in table.savepoints()] == [first.instant_time]
    # without the options (and no AWS_* environment) the command fails typed, not with a traceback
    code = main(["show", table.path, "--storage-option", "aws_endpoint_url=http://127.0.0.1:1",
                 "--storage-option", "max_retries=0", "--storage-option", "retry_timeout=1s"])
    _, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in err and "error:" in err


# -- Spark ---------------------------------------------------------------------------------------


def test_spark_engine_writes_and_reads_an_s3_table_from_python_workers(
    moto_server: Any, s3_bucket: str, spark: Any
) -> None:
    """No Hadoop S3 connector: executors' Python workers write and read files through obstore."""
    opts = moto_server.storage_options()
    uri = f"s3://{s3_bucket}/t"
    table = Table.create(uri, spark=spark, record_key="id", partition_by="part",
                         options=NO_SERVICES, storage_options=opts)
    table.bulk_insert(spark.createDataFrame(_batch((1, 0), (2, 0), (3, 0)).to_pandas()))
    table.upsert(spark.createDataFrame(_batch((2, 2), (4, 4)).to_pandas()))
    expected = [(1, 0), (2, 2), (3, 0), (4, 4)]
    assert rows_of(table.read(), COLUMNS) == expected
    assert rows_of(hudi_rs_read(uri, storage_options=opts), COLUMNS) == expected
    source = spark.read.format("tidemark")
    for key, value in opts.items():
        source = source.option(key, value)
    assert rows_of(source.load(uri), COLUMNS) == expected


# -- markers and early conflict detection --------------------------------------------------------


def test_early_conflict_detection_on_s3_stops_the_younger_writer_before_its_marker(
    moto_server: Any, s3_bucket: str, zookeeper_server: Any
) -> None:
    import threading
    import time

    from tidemark.config import resolve_write_config
    from tidemark.config.early_conflict import DetectionStrategy, EarlyConflictSettings
    from tidemark.errors import EarlyConflictError
    from tidemark.fsview import FileSystemView
    from tidemark.markers import IOType, MarkerSpec, open_marker_writer
    from tidemark.markers.direct import DirectMarkerWriter
    from tidemark.markers.early_conflict import file_group_lock
    from tidemark.markers.listing import marked_data_files
    from tidemark.write.commit import CommitProtocol

    opts = moto_server.storage_options()
    lock = {**OCC, **zookeeper_server.lock_options("tidemark-s3-early")}
    table = _create(f"s3://{s3_bucket}/t", opts, **lock)
    table.upsert(_batch((0, 0)))
    storage = table.storage
    (group,) = FileSystemView(storage, Timeline.load(storage)).file_groups(["part=p0"])
    pendings = []
    for _ in range(2):
        protocol = CommitProtocol(storage, resolve_write_config({**NO_SERVICES, **lock}))
        pending = protocol.start("UPSERT", Action.COMMIT)
        protocol.inflight(pending)
        pendings.append((protocol, pending))
    (_, older), (_, younger) = pendings

    # the file-group lock is a lease object on S3: a second holder waits for the first
    order: list[str] = []
    with file_group_lock(storage, "part=p0", group.file_id):
        waiter = threading.Thread(target=lambda: file_group_lock(storage, "part=p0", group.file_id).__enter__()
                                  or order.append("second"))
        waiter.start()
        time.sleep(0.5)
        order.append("first released")
    waiter.join(timeout=30)
    assert order == ["first released", "second"]
    storage.delete_tree(".hoodie/.locks")  # the waiter's lease (it never exits in this check)

    DirectMarkerWriter(storage, older.instant_time).create(
        f"part=p0/{group.file_id}_0-1-0_{older.instant_time}.parquet", IOType.MERGE)
    settings = EarlyConflictSettings(DetectionStrategy.TRANSACTIONAL_DIRECT).for_write(younger.instant_time,
                                                                                       frozenset())
    writer = open_marker_writer(storage, younger.instant_time, MarkerSpec(early_conflict=settings))
    with pytest.raises(EarlyConflictError) as caught:
        writer.create(f"part=p0/{group.file_id}_0-2-0_{younger.instant_time}.parquet", IOType.MERGE)
    assert caught.value.conflicting_instant == older.instant_time
    assert marked_data_files(storage, younger.instant_time) == []
    for protocol, pending in reversed(pendings):
        protocol.abort(pending)
        protocol.close()
    _agree(table, opts, [(0, 0)])
    table.close()


def test_the_server_stopped_and_restarted_mid_write_gives_typed_errors(
    moto_server: Any, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto_server.stop() as the writer publishes, then start(port=same): the write fails with a
    StorageError within its timeouts and publishes nothing. The restarted server keeps nothing
    (moto is in memory), so opening the table then is a typed BucketNotFoundError, not a hang or a
    raw OSError. (The paused-server test above checks the table's consistency once the store is back.)"""
    import time

    from tidemark.errors import BucketNotFoundError, StorageError
    from tidemark.write.commit import CommitProtocol

    opts = {**moto_server.storage_options(), **FAST}
    table = _create(f"s3://{s3_bucket}/t", opts)
    table.upsert(_batch((1, 0)))
    port = moto_server.port
    original = CommitProtocol.complete

    def stop_then_complete(self: CommitProtocol, *args: Any, **kwargs: Any) -> Any:
        moto_server.stop()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(CommitProtocol, "complete", stop_then_complete)
    started = time.monotonic()
    try:
        with pytest.raises(StorageError):
            table.upsert(_batch((1, 9)))
        assert time.monotonic() - started < 60
    finally:
        monkeypatch.setattr(CommitProtocol, "complete", original)
        moto_server.start(port=port)
    with pytest.raises(BucketNotFoundError):
        Table.open(table.path, spark=None, storage_options=opts)


class _IgnoringProxy:
    """A real HTTP proxy in front of the moto server that drops If-None-Match / If-Match: an
    S3-compatible store that accepts conditional puts but ignores them (overwrites)."""

    def __init__(self, target_port: int) -> None:
        import http.client
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("if-none-match", "if-match")}
                conn = http.client.HTTPConnection("127.0.0.1", target_port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _forward

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_store_that_ignores_conditional_writes_is_refused(moto_server: Any, s3_bucket: str) -> None:
    from tidemark.errors import ConditionalWritesUnsupportedError

    proxy = _IgnoringProxy(moto_server.port)
    try:
        opts = {**moto_server.storage_options(), "aws_endpoint_url": proxy.endpoint}
        with pytest.raises(ConditionalWritesUnsupportedError) as info:
            _create(f"s3://{s3_bucket}/t", opts)
        assert "conditional writes" in str(info.value)
        # nothing was left behind (the probe object is deleted)
        assert "Contents" not in moto_server.boto3_client("s3").list_objects_v2(Bucket=s3_bucket)
    finally:
        proxy.close()


def test_secrets_never_appear_in_the_table_reprs_or_errors(moto_server: Any, s3_bucket: str) -> None:
    from tidemark.storage.location import location_of
    from tidemark.write.spec import WriteSpec

    opts = moto_server.storage_options()
    secret = opts["aws_secret_access_key"]
    table = _create(f"s3://{s3_bucket}/t", opts, table_type="MERGE_ON_READ")
    table.upsert(_batch((1, 0)))
    table.upsert(_batch((1, 1)))
    location = location_of(table.storage)
    spec = WriteSpec(base_path=table.path, instant_time="", schema=pa.schema([]), ordering_fields=(),
                     compression="snappy", max_file_size=1, location=location)
    for shown in (repr(table), repr(table.storage), repr(location), repr(spec), str(location.redacted_options())):
        assert secret not in shown
    assert location.options["aws_secret_access_key"] == secret  # tasks still get it
    s3 = moto_server.boto3_client("s3")
    for obj in s3.list_objects_v2(Bucket=s3_bucket)["Contents"]:  # commit metadata, properties, logs, files
        assert secret.encode() not in s3.get_object(Bucket=s3_bucket, Key=obj["Key"])["Body"].read(), obj["Key"]
