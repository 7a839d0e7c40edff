"""The Arrow engine writes file groups side by side on threads (engines/arrow/tasks.py).

Written on one thread (Hudi's shuffle parallelism options set to 1) or on two, a table gets the
same rows, the same file groups per partition with the same write tokens and sequence numbers,
and the same write statistics in the same order in its commit metadata; a failure in one file
group's write stops the write and rolls it back, leaving the table as it was, as the serial loop
does. hudi-rs reads the parallel table as tidemark does.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.engines.arrow.tasks import WriteTasks, write_threads
from tidemark.errors import CommitError
from tidemark.format.commit_metadata import CommitMetadata

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="threads need two cores to run side by side")

SERIAL = {"hoodie.bulkinsert.shuffle.parallelism": "1", "hoodie.upsert.shuffle.parallelism": "1"}
PARALLEL = {"hoodie.bulkinsert.shuffle.parallelism": "2", "hoodie.upsert.shuffle.parallelism": "2"}
FAILING = {"hoodie.record.merge.mode": "CUSTOM",
           "hoodie.write.record.merge.custom.implementation.classes": "merge_plugins:FailingMerger"}
PARTS = 6


def rows(ids: range, n: int) -> pa.Table:
    return pa.table({
        "id": pa.array(list(ids), pa.int64()),
        "part": pa.array([f"p{i % PARTS}" for i in ids], pa.string()),
        "n": pa.array([n] * len(ids), pa.int64()),
        "text": pa.array([f"row-{i}-{n}" for i in ids], pa.string()),
    })


def create(path: Path, options: dict[str, str]) -> tidemark.Table:
    return tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part",
                                 ordering_field="n", options=options)


def commit_stats(path: Path, instant: str) -> list[tuple[Any, ...]]:
    """The commit's write statistics in order, without what differs between any two tables
    (random file ids, instant times, sizes, timings)."""
    meta = CommitMetadata.from_bytes(next((path / ".hoodie/timeline").glob(f"{instant}_*.commit")).read_bytes())
    return [(s.partition_path, s.path.rsplit("/", 1)[-1].split("_")[1], s.prev_commit is not None, s.num_writes,
             s.num_inserts, s.num_updates, s.num_deletes) for s in meta.write_stats]


def snapshot(table: tidemark.Table) -> list[tuple[Any, ...]]:
    data = table.read()
    seq = [s.split("_", 1)[1] for s in data.column("_hoodie_commit_seqno").to_pylist()]  # <task>_<n>
    data = data.select(["id", "part", "n", "text"]).append_column("seq", pa.array(seq))
    return sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def data_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*.parquet") if ".hoodie" not in p.parts)


def test_two_threads_write_the_same_table_as_one(tmp_path: Path) -> None:
    assert write_threads(2, PARTS) == 2  # the parallel table really is written on two threads
    tables = {name: create(tmp_path / name, opts) for name, opts in (("serial", SERIAL), ("parallel", PARALLEL))}
    stats: dict[str, list[Any]] = {}
    for name, table in tables.items():
        bulk = table.bulk_insert(rows(range(0, 3000), 0))
        upsert = table.upsert(rows(range(2000, 4000), 1))  # updates in every partition, and new keys
        delete = table.delete(rows(range(0, 600, 7), 2).select(["id", "part"]))
        stats[name] = [commit_stats(tmp_path / name, r.instant_time) for r in (bulk, upsert, delete)]
    assert stats["serial"] == stats["parallel"]
    assert [len(s) for s in stats["parallel"]] == [PARTS, PARTS, PARTS]  # one file group per partition, each rewritten
    assert [s[1] for s in stats["parallel"][1]] == [f"{t}-0-{t}" for t in range(PARTS)]  # task tokens, in order
    serial, parallel = snapshot(tables["serial"]), snapshot(tables["parallel"])
    assert serial == parallel
    assert len(parallel) == 4000 - len(range(0, 600, 7))
    assert [(r[0], r[2]) for r in parallel if r[0] in (1, 2500, 3999)] == [(1, 0), (2500, 1), (3999, 1)]
    rs = hudi_rs_read(str(tmp_path / "parallel")).select(["id", "n", "text"]).sort_by("id")
    assert rs.to_pylist() == [{"id": r[0], "n": r[2], "text": r[3]} for r in parallel]


@pytest.mark.parametrize("options", [SERIAL, PARALLEL], ids=["serial", "parallel"])
def test_a_failing_file_group_rolls_the_whole_write_back(tmp_path: Path, options: dict[str, str]) -> None:
    path = tmp_path / "t"
    table = create(path, {**options, **FAILING})
    table.bulk_insert(rows(range(0, 1200), 0))
    before, files = snapshot(table), data_files(path)
    commits = [i.requested_time for i in table.timeline() if i.action.value == "commit"]
    batch = rows(range(0, 1200, 3), 1)  # an update in every file group; one record fails its merge
    batch = batch.set_column(2, "n", pc.if_else(pc.equal(batch.column("id"), 3), -1, batch.column("n")))
    with pytest.raises(Exception, match="poison record") as failure:
        table.upsert(batch)
    assert not isinstance(failure.value, CommitError)  # the worker's own error, not a cancellation
    reopened = tidemark.Table.open(str(path), spark=None)
    assert snapshot(reopened) == before
    assert [i.requested_time for i in reopened.timeline() if i.action.value == "commit"] == commits  # nothing
    assert [i.action.value for i in reopened.timeline()][-1] == "rollback"  # the failed write was rolled back
    assert data_files(path) == files  # every file the failed write made is gone (the rollback's markers)
    assert hudi_rs_read(str(path)).num_rows == 1200
    reopened.upsert(rows(range(0, 1200, 3), 1))  # and the table takes the next write
    assert {r[2] for r in snapshot(reopened) if r[0] % 3 == 0} == {1}


def test_tasks_come_back_in_order_and_the_first_failure_wins() -> None:
    tasks = WriteTasks()
    assert tasks.run([lambda i=i: i * i for i in range(9)], workers=2) == [i * i for i in range(9)]
    started: list[int] = []

    def task(i: int) -> int:
        started.append(i)
        if i in (1, 2):
            raise ValueError(f"task {i}")
        return i

    with pytest.raises(ValueError, match="task 1"):
        tasks.run([lambda i=i: task(i) for i in range(50)], workers=2)
    assert len(started) < 50  # no task starts after a failure was seen
    tasks.cancel()
    with pytest.raises(CommitError, match="cancelled"):
        tasks.run([lambda: 1, lambda: 2], workers=2)


def test_a_task_pool_runs_tasks_as_submitted_and_raises_the_first_failure_from_any_result() -> None:
    tasks = WriteTasks()
    with tasks.pool(2) as pool:
        squares = [pool.submit(lambda i=i: i * i) for i in range(9)]
        assert [pool.result(f) for f in reversed(squares)] == [i * i for i in reversed(range(9))]
        assert pool._futures == []  # a result taken is not held by the pool
    started: list[int] = []
    gate = threading.Event()

    def task(i: int) -> int:
        started.append(i)
        if i == 0:
            gate.wait(10)  # fails after task 1 did: the first in submission order still wins
            raise ValueError("task 0")
        if i == 1:
            gate.set()
            raise ValueError("task 1")
        return i

    with tasks.pool(2) as pool:
        futures = [pool.submit(lambda i=i: task(i)) for i in range(40)]
        with pytest.raises(ValueError, match="task 0"):
            pool.result(futures[-1])  # a later task's result: it did not start
    assert len(started) < 40
    main = threading.current_thread()
    with tasks.pool(1) as pool:  # one worker: each task runs as it is submitted, in this thread
        ran_on = pool.submit(threading.current_thread)
        assert ran_on.done() and pool.result(ran_on) is main
        pool.submit(lambda: task(1))
        after = pool.submit(lambda: 7)
        with pytest.raises(ValueError, match="task 1"):
            pool.result(after)  # it did not start: the failure before it is raised
    tasks.cancel()
    for workers in (1, 2):
        with tasks.pool(workers) as pool, pytest.raises(CommitError, match="cancelled"):
            pool.result(pool.submit(lambda: 1))


def test_chunked_rows_take_what_a_take_of_the_whole_table_would() -> None:
    from tidemark.engines.arrow.take import ChunkedRows

    whole = rows(range(0, 500), 0)
    chunked = pa.Table.from_batches(whole.to_batches(max_chunksize=70))
    part = whole.column("part").combine_chunks()  # chunked where the other columns are not: to_batches slices
    chunked = chunked.set_column(1, "part", pa.chunked_array([part.slice(0, 130), part.slice(130)]))
    source = ChunkedRows(chunked)
    for positions in ([], [7], [3, 499, 0, 71, 70, 69, 250, 3], list(range(60, 200)), list(range(499, -1, -2))):
        got = source.take(np.array(positions, dtype=np.int64))
        assert got.to_pylist() == whole.take(pa.array(positions, pa.int64())).to_pylist()


def large_rows(n: int) -> Any:
    """``wide(ids, version)``: rows of two partitions, each row 2 KiB of random text, so that a
    bulk_insert of ``2 * n`` rows (n = 13,000) makes two files of ~26 MiB: above the size whose
    rewrites run one at a time in a large write."""
    noise = np.frombuffer(os.urandom(n * 1024), dtype=np.uint8).reshape(n, 1024)
    text = pa.array([row.tobytes().hex() for row in noise], pa.string())

    def wide(ids: range, version: int) -> pa.Table:
        picked = pa.array(np.asarray(ids) % n)
        return pa.table({"id": pa.array(list(ids), pa.int64()), "part": [f"p{i % 2}" for i in ids],
                         "n": pa.array([version] * len(ids), pa.int64()), "text": text.take(picked)})

    return wide


def test_large_file_groups_are_written_alone_small_ones_side_by_side() -> None:
    import threading

    lock = threading.Lock()
    running: list[int] = []
    seen: list[tuple[int, tuple[int, ...], bool]] = []  # (task, tasks running with it, in the caller's thread)
    both = threading.Barrier(2, timeout=10)

    def task(i: int) -> int:
        with lock:
            running.append(i)
            seen.append((i, tuple(running), threading.current_thread() is threading.main_thread()))
        if i in (0, 1):
            both.wait()  # the two small tasks really run at once (else this times out)
        with lock:
            running.remove(i)
        return i

    weights = [10, 10, 40, 10]  # budget 64: a task of 40 cannot share (two would not fit)
    got = WriteTasks().run([lambda i=i: task(i) for i in range(4)], workers=2, weights=weights, budget=64)
    assert got == [0, 1, 2, 3]
    assert [(i, alone, inline) for i, alone, inline in seen if i == 2] == [(2, (2,), True)]
    assert not any(inline for i, _, inline in seen if i != 2)


def upsert_two_large_files_both_ways(
    tmp_path: Path, monkeypatch: Any, module: Any, function: str, upsert: range, timeout: float,
    options: dict[str, str] | None = None,
) -> tuple[pa.Table, set[str]]:
    """Two tables of two ~26 MiB file groups (:func:`large_rows`), one written on one thread, one
    on two (both with ``options`` too); the same upsert of ``upsert`` ids to each, where in the
    parallel one the two calls of ``module.function`` must run at once (a barrier: else it
    times out and the upsert fails). Checks that the tables are equal; returns the parallel
    table's rows and the threads the calls ran on."""
    import threading

    from tidemark.engines.arrow.tasks import runs_alone

    n = 13_000
    wide = large_rows(n)
    both = threading.Barrier(2, timeout=timeout)
    ran_on: set[str] = set()
    real = getattr(module, function)

    def at_once(*args: Any, **kwargs: Any) -> Any:
        ran_on.add(threading.current_thread().name)
        both.wait()
        return real(*args, **kwargs)

    tables = {}
    for name, threads in (("serial", SERIAL), ("parallel", PARALLEL)):
        table = create(tmp_path / name, {**threads, **(options or {})})
        table.bulk_insert(wide(range(0, 2 * n), 0))
        if name == "parallel":
            sizes = [(tmp_path / name / f).stat().st_size for f in data_files(tmp_path / name)]
            assert len(sizes) == 2 and all(runs_alone(size) for size in sizes)
            monkeypatch.setattr(module, function, at_once)
        table.upsert(wide(upsert, 1))
        tables[name] = table
    serial, parallel = (tables[t].read().sort_by("id").select(["id", "part", "n", "text"]) for t in tables)
    assert parallel.equals(serial)
    return parallel, ran_on


def test_the_lookup_reads_large_files_keys_side_by_side_and_tags_as_one_thread_does(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A lookup holds a file's keys, not its rows: two files above the size whose rewrites run
    one at a time (engines/arrow/tasks.py) are probed side by side; the upsert's result is the
    serial one's, and hudi-rs reads what tidemark reads. (No file is small: each partition's
    keys are looked up, as they are where small files are not topped up.)"""
    import threading

    from tidemark.engines.arrow import index

    n = 13_000
    parallel, probed_on = upsert_two_large_files_both_ways(
        tmp_path, monkeypatch, index, "_found_in_file", range(n, 3 * n), timeout=20,
        options={"hoodie.parquet.small.file.limit": "0"})
    assert len(probed_on) == 2 and threading.main_thread().name not in probed_on
    assert parallel.num_rows == 3 * n and pc.sum(parallel.column("n")).as_py() == 2 * n
    assert sorted(hudi_rs_read(str(tmp_path / "parallel")).column("id").to_pylist()) == list(range(3 * n))


def test_a_small_writes_large_file_groups_are_scheduled_side_by_side_a_large_ones_by_weight() -> None:
    from tidemark.engines.arrow.tasks import SIDE_BY_SIDE_WRITE_BYTES, scheduling_weights

    mib = 1024 * 1024
    assert scheduling_weights(None) is None
    assert scheduling_weights([27 * mib, 27 * mib]) is None  # 54 MiB in all: side by side
    assert scheduling_weights([SIDE_BY_SIDE_WRITE_BYTES // 2] * 2) is None
    ten = [27 * mib] * 10  # a 5M-row upsert's ten file groups: one at a time, for memory
    assert scheduling_weights(ten) == ten
    assert scheduling_weights([SIDE_BY_SIDE_WRITE_BYTES // 2 + 1] * 2) is not None


def test_an_upsert_rewriting_two_large_files_in_all_rewrites_them_side_by_side(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """Two file groups above the size whose rewrites run one at a time in a large write (a
    write of many) are rewritten at once when they are the whole write; the table equals the
    serial write's, and hudi-rs reads what tidemark reads."""
    import threading

    from tidemark.engines.arrow import file_groups

    n = 13_000  # a few updates and inserts in each file group
    parallel, written_on = upsert_two_large_files_both_ways(
        tmp_path, monkeypatch, file_groups, "write_file_group", range(2 * n - 200, 2 * n + 200), timeout=30)
    assert len(written_on) == 2 and threading.main_thread().name not in written_on
    assert parallel.num_rows == 2 * n + 200 and pc.sum(parallel.column("n")).as_py() == 400
    assert sorted(hudi_rs_read(str(tmp_path / "parallel")).column("id").to_pylist()) == list(range(2 * n + 200))


def test_a_small_writes_large_files_are_rewritten_with_the_keys_their_lookup_read(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A write small enough to rewrite its large file groups side by side keeps the keys its
    lookup read of them, so their rewrites do not decode the key column again; the files are
    those of rewrites that decode it (nothing kept): the same rows in the same order, the same
    footers' key ranges and filters, the same commit statistics; hudi-rs reads the same rows."""
    import pyarrow.parquet as pq

    from tidemark.engines.arrow import file_groups, index
    from tidemark.engines.arrow.tasks import runs_alone
    from tidemark.write import file_group

    n = 13_000
    wide = large_rows(n)
    given: list[tuple[bool, bool]] = []  # per file group written: (rewritten, keys given)
    decoded: list[bool] = []  # per base file streamed through a rewrite: its key column decoded
    real, real_iter = file_groups.write_file_group, file_group.iter_data_file

    def recording(*args: Any, **kwargs: Any) -> Any:
        given.append((kwargs["base_file"] is not None, kwargs.get("stored_keys") is not None))
        return real(*args, **kwargs)

    def streaming(*args: Any, **kwargs: Any) -> Any:
        decoded.append("_hoodie_record_key" in kwargs["schema"].names)
        return real_iter(*args, **kwargs)

    monkeypatch.setattr(file_groups, "write_file_group", recording)
    monkeypatch.setattr(file_group, "iter_data_file", streaming)
    found = {}
    for name, budget in (("kept", index.KEPT_KEY_BYTES), ("decoded", 0)):
        monkeypatch.setattr(index, "KEPT_KEY_BYTES", budget)
        # No small files: each partition's keys are looked up (a partition's sole small file
        # would take all of its rows unprobed), the new keys go to new file groups.
        table = create(tmp_path / name, {**PARALLEL, "hoodie.parquet.small.file.limit": "0"})
        table.bulk_insert(wide(range(0, 2 * n), 0))
        sizes = [(tmp_path / name / f).stat().st_size for f in data_files(tmp_path / name)]
        assert len(sizes) == 2 and all(runs_alone(size) for size in sizes)  # each large; a small write in all
        given.clear()
        decoded.clear()
        upsert = table.upsert(wide(range(1, 2 * n + 400, 7), 1))
        # The two large file groups, rewritten side by side, and the two new ones; only the
        # rewrites without the lookup's keys decode the base file's key column.
        assert sorted(given) == [(False, False)] * 2 + [(True, name == "kept")] * 2
        assert decoded == [name == "decoded"] * 2
        newest = [f for f in data_files(tmp_path / name) if upsert.instant_time in f]
        assert len(newest) == 4
        contents = []
        for file in newest:
            data = pq.read_table(tmp_path / name / file)
            meta = pq.read_metadata(tmp_path / name / file).metadata
            contents.append((data.select(["_hoodie_record_key", "id", "n", "text"]).to_pylist(),
                             [s.rsplit("_", 1)[1] for s in data.column("_hoodie_commit_seqno").to_pylist()],
                             meta[b"hoodie_min_record_key"], meta[b"hoodie_max_record_key"],
                             meta[b"org.apache.hudi.bloomfilter"]))
        stats = sorted((s[0], *s[2:]) for s in commit_stats(tmp_path / name, upsert.instant_time))  # no tokens
        found[name] = (sorted(contents, key=lambda c: c[2]), stats,
                       sorted(hudi_rs_read(str(tmp_path / name)).select(["id", "n"]).to_pylist(),
                              key=lambda r: r["id"]))
        table.close()
    assert found["kept"] == found["decoded"]
    updated = set(range(1, 2 * n + 400, 7))
    assert found["kept"][2] == [{"id": i, "n": int(i in updated)} for i in sorted(updated | set(range(2 * n)))]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_the_lookup_keeps_keys_only_for_base_files_it_rewrites(
    tmp_path: Path, monkeypatch: Any, table_type: str
) -> None:
    """The keys a lookup read are kept for the rewrites of copy-on-write file groups; a
    merge-on-read table's file groups get log files, so none is kept. Both tables read the model,
    in tidemark and in hudi-rs."""
    from tidemark.engines.arrow import writer

    lookups: list[Any] = []
    real = writer.tag_keys

    def recording(*args: Any, **kwargs: Any) -> Any:
        lookups.append(real(*args, **kwargs))
        return lookups[-1]

    monkeypatch.setattr(writer, "tag_keys", recording)
    # No small files: every partition's keys are looked up.
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  ordering_field="n", table_type=table_type,
                                  options={"hoodie.parquet.small.file.limit": "0"})
    table.bulk_insert(rows(range(0, 600), 0))
    table.upsert(rows(range(0, 900, 5), 1))
    (lookup,) = lookups
    assert len(lookup.touched) == PARTS  # every partition's file holds some of the batch's keys
    kept = [found.keys is not None for found in lookup.touched.values()]
    assert kept == [table_type == "COPY_ON_WRITE"] * PARTS
    expected = {i: 0 for i in range(600)} | {i: 1 for i in range(0, 900, 5)}
    assert dict(zip(*(table.read().column(c).to_pylist() for c in ("id", "n")), strict=True)) == expected
    read = hudi_rs_read(str(tmp_path / "t"))
    assert dict(zip(*(read.column(c).to_pylist() for c in ("id", "n")), strict=True)) == expected
    table.close()
