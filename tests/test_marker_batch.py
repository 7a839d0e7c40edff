"""Markers the Arrow engine's tasks write themselves (``markers/batch.py``): ``MARKERS<n>`` files,
the planned files' markers declared in one before any task runs.

Checked: the files are in the layout Hudi and the listing read back (``MARKERS.type`` saying
TIMELINE_SERVER_BASED, a marker name per line); a declared marker costs a task nothing; at most
``max_files`` files, none of a marker lost when threads ask at once; an Arrow write's marker
folder holds its planned files' markers in one file and no folder per partition (while the
write runs: observed right before its commit), DIRECT when asked for; the option's default by
engine and by early conflict detection; and a writer process killed while writing leaves
markers that name every file it planned, so the next writer's rollback removes what it wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from signals import wait_for_file
from tidemark.config import resolve_write_config
from tidemark.format.names import marker_dir
from tidemark.markers import IOType, Marker, marked_data_files, read_markers
from tidemark.markers.batch import MarkerBatch, open_batch
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline
from tidemark.write import commit as commit_module

INSTANT = "20261129040000000"
WRITER = str(Path(__file__).with_name("writer_process.py"))


def _folder(storage: LocalStorage, instant: str = INSTANT) -> Path:
    return Path(storage.base_path) / marker_dir(instant)


def _marker(partition: str, n: int, io: IOType = IOType.CREATE) -> Marker:
    return Marker(f"{partition}/f{n:03d}_0-0-0_{INSTANT}.parquet", io)


def test_declared_markers_are_one_markers_file_in_hudis_layout_and_cost_a_task_nothing(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    planned = [_marker(f"part=p{n % 3}", n, IOType.MERGE if n % 2 else IOType.CREATE) for n in range(7)]
    with MarkerBatch(storage, INSTANT) as batch:
        batch.declare(planned)
        folder = _folder(storage)
        assert sorted(os.listdir(folder)) == ["MARKERS.type", "MARKERS0"]  # no folder per partition
        assert (folder / "MARKERS.type").read_text() == "TIMELINE_SERVER_BASED"
        assert sorted((folder / "MARKERS0").read_text().splitlines()) == sorted(m.name for m in planned)
        before = (folder / "MARKERS0").stat().st_mtime_ns, batch.files_written
        for m in planned:  # what each task then asks: already on disk
            open_batch(batch.batch_id).create(m.data_file, m.io_type)
        assert ((folder / "MARKERS0").stat().st_mtime_ns, batch.files_written) == before
        late = _marker("part=p9", 99)
        batch.create(late.data_file, late.io_type)  # not planned (a rolled-over file): a file of its own
        assert sorted(os.listdir(folder)) == ["MARKERS.type", "MARKERS0", "MARKERS1"]
        assert read_markers(storage, INSTANT) == sorted([*planned, late], key=lambda m: m.name)
        assert marked_data_files(storage, INSTANT) == sorted(m.data_file for m in [*planned, late])
    with pytest.raises(ValueError, match="no marker batch"):  # its write has ended
        open_batch(batch.batch_id)


def test_threads_asking_at_once_lose_no_marker_and_files_stay_bounded(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    threads, each = 8, 40
    gate = threading.Barrier(threads)
    with MarkerBatch(storage, INSTANT, max_files=3) as batch:
        def ask(t: int) -> None:
            gate.wait()
            for n in range(each):
                m = _marker(f"p{t}", n)
                batch.create(m.data_file, m.io_type)

        workers = [threading.Thread(target=ask, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        names = sorted(os.listdir(_folder(storage)))
    assert names == ["MARKERS.type", "MARKERS0", "MARKERS1", "MARKERS2"]
    expected = sorted(_marker(f"p{t}", n).name for t in range(threads) for n in range(each))
    assert [m.name for m in read_markers(storage, INSTANT)] == expected
    assert batch.files_written == threads * each  # each undeclared marker written before its answer


def test_the_marker_type_defaults_by_engine_and_by_early_conflict_detection() -> None:
    assert resolve_write_config({}).markers_type is None  # the engine's default
    assert resolve_write_config({"hoodie.write.markers.type": "DIRECT"}).markers_type == "DIRECT"
    occ = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control",
           "hoodie.write.lock.provider": "filesystem",
           "hoodie.write.concurrency.early.conflict.detection.enable": "true"}
    assert resolve_write_config(occ).markers_type == "DIRECT"  # simple_direct, as before
    server = {**occ, "hoodie.write.concurrency.early.conflict.detection.strategy": "async_timeline_server"}
    assert resolve_write_config(server).markers_type == "TIMELINE_SERVER_BASED"


def _seed(n: int, parts: int, v: str) -> pa.Table:
    return pa.table({"id": pa.array(range(n), pa.int64()), "part": [f"p{i % parts}" for i in range(n)],
                     "v": [v] * n})


def _markers_at_commit(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the marker folder holds when each write reaches its commit (its files all written)."""
    seen: list[dict[str, Any]] = []
    original = commit_module.CommitProtocol.complete

    def complete(self: Any, pending: Any, stats: Any, **kwargs: Any) -> Any:
        folder = Path(self.storage.full_path(marker_dir(pending.instant_time)))
        seen.append({
            "entries": sorted(os.listdir(folder)),
            "folders": sorted(p.name for p in folder.iterdir() if p.is_dir()),
            "markers": read_markers(self.storage, pending.instant_time),
            "written": sorted(s.path for s in stats),
        })
        return original(self, pending, stats, **kwargs)

    monkeypatch.setattr(commit_module.CommitProtocol, "complete", complete)
    return seen


@pytest.mark.parametrize("threads", ["1", "2"])
def test_an_arrow_write_declares_every_planned_file_in_one_markers_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: str
) -> None:
    seen = _markers_at_commit(monkeypatch)
    options = {"hoodie.bulkinsert.shuffle.parallelism": threads, "hoodie.upsert.shuffle.parallelism": threads}
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  options=options)
    table.bulk_insert(_seed(400, 12, "seed"))
    update = pa.table({"id": pa.array([*range(0, 400, 7), *range(400, 430)], pa.int64()),
                       "part": [f"p{i % 12}" for i in [*range(0, 400, 7), *range(400, 430)]],
                       "v": ["new"] * (len(range(0, 400, 7)) + 30)})
    table.upsert(update)
    bulk, upsert = seen
    for write, io in ((bulk, IOType.CREATE), (upsert, IOType.MERGE)):
        assert write["folders"] == []  # no folder per partition, no file per marker
        assert write["entries"] == ["MARKERS.type", "MARKERS0"]
        assert sorted(m.data_file for m in write["markers"]) == write["written"]
        assert {m.io_type for m in write["markers"]} == {io}
    assert len(bulk["written"]) == 12
    assert not Path(table.storage.full_path(".hoodie/.temp")).exists() or \
        not any(Path(table.storage.full_path(".hoodie/.temp")).iterdir())  # deleted with each commit
    expected = {i: ("new" if i % 7 == 0 or i >= 400 else "seed") for i in range(430)}
    assert dict(rows_of(table.read(), ["id", "v"])) == expected
    assert dict(rows_of(hudi_rs_read(table.path), ["id", "v"])) == expected
    table.close()


def test_direct_markers_when_asked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _markers_at_commit(monkeypatch)
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  options={"hoodie.write.markers.type": "DIRECT"})
    table.bulk_insert(_seed(60, 3, "seed"))
    (write,) = seen
    assert write["folders"] == ["part=p0", "part=p1", "part=p2"]
    assert "MARKERS.type" not in write["entries"]
    assert sorted(m.data_file for m in write["markers"]) == write["written"]
    table.close()


def test_a_writer_killed_while_writing_is_rolled_back_from_its_declared_markers(tmp_path: Path) -> None:
    parts = 10
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part")
    table.bulk_insert(_seed(200, parts, "seed"))
    storage = LocalStorage(table.path)
    before = {i: "seed" for i in range(200)}
    # One file group at a time: the process dies when the first of its ten rewrites is written.
    spec = {"table": table.path, "operation": "upsert", "options": {"hoodie.upsert.shuffle.parallelism": "1"},
            "rows": [{"id": i, "part": f"p{i % parts}", "v": "doomed"} for i in range(0, 200, 3)],
            "result": str(tmp_path / "result"), "crash_signal": str(tmp_path / "crashed"),
            "crash_at": "while_writing"}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    victim = subprocess.Popen([sys.executable, WRITER, str(tmp_path / "spec.json")])
    doomed = wait_for_file(tmp_path / "crashed", processes=[victim], timeout=120)
    victim.wait(timeout=30)
    marked = marked_data_files(storage, doomed)
    assert len(marked) == parts  # every planned rewrite, written or not
    assert {m.io_type for m in read_markers(storage, doomed)} == {IOType.MERGE}
    written = [f for f in marked if (Path(table.path) / f).exists()]
    assert len(written) == 1  # the one the process finished before it died
    assert not [p for p in (Path(table.path) / marker_dir(doomed)).iterdir() if p.is_dir()]

    table.upsert(pa.table({"id": pa.array([1], pa.int64()), "part": ["p1"], "v": ["after"]}))  # rolls it back
    assert not any(i.requested_time == doomed for i in Timeline.load(storage))
    assert not (Path(table.path) / written[0]).exists()
    assert not [f for f in storage.walk_files("") if doomed in f.name]
    expected = {**before, 1: "after"}
    assert dict(rows_of(table.read(), ["id", "v"])) == expected
    assert dict(rows_of(hudi_rs_read(table.path), ["id", "v"])) == expected
    table.close()
