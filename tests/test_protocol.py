"""The commit protocol without Spark: visibility, partial files, crashes, rollback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from signals import wait_for_file
from tidemark import CommitError, Table
from tidemark.config import resolve_write_config
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import META_COLUMNS, PARTITION_PATH, RECORD_KEY
from tidemark.fsview import FileSystemView
from tidemark.markers import IOType, MarkerSpec, marked_data_files, open_marker_writer
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline
from tidemark.write.commit import CommitProtocol
from tidemark.write.file_group import OP_COLUMN, WriteSpec, write_file_group

USER = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _spec(base: str, instant: str) -> WriteSpec:
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(USER))
    return WriteSpec(base, instant, schema, (), "snappy", 120 * 1024 * 1024)


def _batch(ids: list[int], v: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": [v] * len(ids),
            RECORD_KEY: [str(i) for i in ids],
            PARTITION_PATH: [""] * len(ids),
            OP_COLUMN: ["U"] * len(ids),
        }
    )


def _visible_rows(storage: LocalStorage) -> list[tuple[int, str]]:
    view = FileSystemView(storage, Timeline.load(storage))
    rows = []
    for base in view.latest_base_files():
        rows += [(r["id"], r["v"]) for r in pq.read_table(storage.full_path(base.path)).to_pylist()]
    return sorted(rows)


def _write(
    storage: LocalStorage, instant_time: str, ids: list[int], v: str, *, file_id: str = "fg-0",
    base: str | None = None, token: str = "0-0-0",
) -> WriteStat:
    """Write one file group for a pending write, as one task attempt would."""
    return write_file_group(
        _spec(storage.base_path, instant_time), _batch(ids, v),
        partition_path="", file_id=file_id, base_file=base, token=token, task_partition=0,
    )


def _commit(storage: LocalStorage, ids: list[int], v: str, file_id: str = "fg-0", base: str | None = None):
    protocol = CommitProtocol(storage, resolve_write_config({}))
    protocol.prepare_for_write()
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    stat = _write(storage, pending.instant_time, ids, v, file_id=file_id, base=base)
    return protocol.complete(pending, [stat], schema_json=None), stat


@pytest.fixture
def storage(tmp_path: Path) -> LocalStorage:
    Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    return LocalStorage(str(tmp_path / "t"))


def test_completed_write_is_visible_and_untouched_rows_keep_their_commit_time(storage: LocalStorage) -> None:
    first, stat = _commit(storage, [1, 2, 3], "a")
    second, _ = _commit(storage, [2], "b", base=stat.path)
    assert _visible_rows(storage) == [(1, "a"), (2, "b"), (3, "a")]
    view = FileSystemView(storage, Timeline.load(storage))
    [latest] = view.latest_base_files()
    times = {r["id"]: r["_hoodie_commit_time"] for r in pq.read_table(storage.full_path(latest.path)).to_pylist()}
    assert times == {1: first.requested_time, 2: second.requested_time, 3: first.requested_time}
    assert second.completion_time > second.requested_time > first.completion_time


def test_files_of_a_pending_write_are_invisible(storage: LocalStorage) -> None:
    _commit(storage, [1], "a")
    protocol = CommitProtocol(storage, resolve_write_config({}))
    pending = protocol.start("UPSERT", Action.COMMIT)
    _write(storage, pending.instant_time, [9], "pending", file_id="other-0")
    assert _visible_rows(storage) == [(1, "a")]


def test_commit_deletes_partial_files_of_failed_task_attempts(storage: LocalStorage) -> None:
    protocol = CommitProtocol(storage, resolve_write_config({}))
    pending = protocol.start("UPSERT", Action.COMMIT)
    # attempt 0 dies after writing; attempt 1 of the same task succeeds with another token
    failed = _write(storage, pending.instant_time, [1], "a", token="0-0-0")
    good = _write(storage, pending.instant_time, [1], "a", token="0-0-1")
    protocol.complete(pending, [good], schema_json=None)
    assert not storage.exists(failed.path)
    assert storage.exists(good.path)
    assert marked_data_files(storage, pending.instant_time) == []
    assert _visible_rows(storage) == [(1, "a")]


def test_a_failing_commit_rolls_back_and_leaves_nothing(storage: LocalStorage) -> None:
    protocol = CommitProtocol(storage, resolve_write_config({}))
    pending = protocol.start("UPSERT", Action.COMMIT)
    open_marker_writer(storage, pending.instant_time, MarkerSpec()).create("ghost.parquet", IOType.CREATE)
    ghost = _write(storage, pending.instant_time, [5], "x", file_id="g-0")
    storage.delete(ghost.path)  # a reported file that vanished: the commit must refuse
    with pytest.raises(CommitError):
        protocol.complete(pending, [ghost], schema_json=None)
    timeline = Timeline.load(storage)
    assert not timeline.completed_data_instants
    assert [i.action for i in timeline.completed] == [Action.ROLLBACK]
    assert _visible_rows(storage) == []


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_protocol import _spec, _batch
    from tidemark.config import resolve_write_config
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Action
    from tidemark.write.commit import CommitProtocol
    from tidemark.write.file_group import write_file_group
    from signals import write_atomically
    storage = LocalStorage({base!r})
    protocol = CommitProtocol(storage, resolve_write_config({{}}))
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    write_file_group(_spec(storage.base_path, pending.instant_time), _batch([1, 2], "doomed"),
                     partition_path="", file_id="fg-0", base_file={base_file!r}, token="0-0-0",
                     task_partition=0)
    write_atomically({barrier!r}, pending.instant_time)  # never seen empty
    time.sleep(600)
    """
)


def test_a_killed_writer_stays_invisible_and_the_next_write_rolls_it_back(
    storage: LocalStorage, tmp_path: Path
) -> None:
    _, stat = _commit(storage, [1], "a")
    barrier = tmp_path / "written"
    code = CHILD.format(
        tests=str(Path(__file__).parent), base=storage.base_path, base_file=stat.path, barrier=str(barrier)
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        doomed = wait_for_file(barrier, processes=[child], timeout=60, what="the writer's barrier")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    timeline = Timeline.load(storage)
    assert timeline.get(doomed).state is State.INFLIGHT
    assert _visible_rows(storage) == [(1, "a")]  # the dead write's file is there but invisible
    assert marked_data_files(storage, doomed)

    _commit(storage, [3], "c", base=stat.path)  # EAGER policy: the next write rolls it back

    timeline = Timeline.load(storage)
    assert all(i.requested_time != doomed for i in timeline)
    rollbacks = timeline.filter(actions=[Action.ROLLBACK], states=[State.COMPLETED])
    assert len(rollbacks) == 1
    assert not any(doomed in info.name for info in storage.walk_files(""))
    assert _visible_rows(storage) == [(1, "a"), (3, "c")]


def test_dictionaries_only_for_columns_whose_values_repeat(tmp_path: Path) -> None:
    """Mostly distinct columns are written plain (no dictionary tried and dropped); repeating ones
    keep their dictionary; the file reads back the same."""
    from tidemark.write.column_encoding import parquet_options

    n = 20_000
    user = pa.table({
        "id": pa.array(range(n), pa.int64()),
        "city": pa.array([["sf", "nyc", "la"][i % 3] for i in range(n)]),
        "note": pa.array([f"note {i}" for i in range(n)]),
    })
    schema = pa.schema([pa.field(c, pa.string()) for c in META_COLUMNS] + list(user.schema))
    spec = WriteSpec(base_path=str(tmp_path), instant_time="20260101000000000", schema=schema,
                     ordering_fields=(), compression="snappy", max_file_size=1 << 30)
    options = parquet_options(spec, user)
    assert set(options["use_dictionary"]) >= {"city", "_hoodie_commit_time", "_hoodie_file_name"}  # type: ignore[arg-type]
    assert not {"id", "note", RECORD_KEY} & set(options["use_dictionary"])  # type: ignore[arg-type]
    meta = pa.table({c: pa.array(["x"] * n) for c in META_COLUMNS})
    rows = pa.Table.from_arrays([*meta.columns, *user.columns], schema=schema)
    path = tmp_path / "f.parquet"
    pq.write_table(rows, path, **options)  # type: ignore[arg-type]
    chunks = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {chunks.column(i).path_in_schema: chunks.column(i).encodings for i in range(chunks.num_columns)}
    assert any("DICTIONARY" in e for e in encodings["city"])
    assert not any("DICTIONARY" in e for e in encodings["note"])
    assert pq.read_table(path).equals(rows)
    unique = (RECORD_KEY, "_hoodie_commit_seqno")
    assert parquet_options(spec)["use_dictionary"] == [c for c in schema.names if c not in unique]
