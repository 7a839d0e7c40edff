"""The rollback fence: a task that outlives its rolled-back write (a Spark task its failed job
did not stop yet) leaves no file behind. The task runs in a real process, paused at a barrier
while the write is rolled back; the table is then checked for every file of the write."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from signals import wait_for_file, write_atomically
from test_protocol import _commit, _visible_rows
from tidemark.config import resolve_write_config
from tidemark.format.commit_metadata import write_avro
from tidemark.format.names import TIMELINE_DIR, marker_dir
from tidemark.markers import marked_data_files
from tidemark.markers.fence import fence_path, raise_fence
from tidemark.recovery.rollback import finish_pending_rollbacks
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, State, Timeline, instant_file_name, new_instant_time
from tidemark.write.commit import CommitProtocol

# A bulk_insert task of the write (Spark's write_partition, without Spark): rolling files, then
# its stats confirmed as a Spark task confirms them. ``pause`` is where it waits for the test.
TASK = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {tests!r})
    import pyarrow as pa
    from dataclasses import replace
    from signals import wait_for_file, write_atomically
    from test_protocol import _spec
    from tidemark.engines.spark.stats import task_stats_table
    from tidemark.errors import WriteRolledBackError
    from tidemark.format.names import PARTITION_PATH, RECORD_KEY
    from tidemark.markers import MarkerSpec
    from tidemark.markers.fence import WriteFence
    from tidemark.timeline import Action
    from tidemark.write.file_group import write_new_files

    def rows(ids):
        return pa.table({{"id": pa.array(ids, pa.int64()), "v": ["late"] * len(ids),
                         RECORD_KEY: [str(i) for i in ids], PARTITION_PATH: ["p"] * len(ids)}})

    def batches():
        if {pause!r} == "before_marker":
            write_atomically({started!r}); wait_for_file({go!r})
        yield rows(list(range(0, 1000)))
        if {pause!r} == "while_writing":  # its marker exists, its file is not written yet
            write_atomically({started!r}); wait_for_file({go!r})
        yield rows(list(range(1000, 2000)))

    spec = replace(_spec({base!r}, {instant!r}),
                   markers=MarkerSpec(fence=WriteFence({instant!r}, Action.COMMIT)))
    try:
        stats = list(write_new_files(spec, batches(), token="0-0-0", task_partition=0))
        task_stats_table(spec, stats)
        outcome = "written:" + ",".join(s.path for s in stats)
    except WriteRolledBackError as error:
        outcome = "fenced:" + ",".join(error.files)
    if {pause!r} == "finished":
        write_atomically({started!r}); wait_for_file({go!r})
    write_atomically({done!r}, outcome)
    """
)


def _files_of(storage: LocalStorage, instant_time: str) -> list[str]:
    return sorted(str(p.relative_to(storage.base_path)) for p in Path(storage.base_path).rglob(f"*{instant_time}*")
                  if p.is_file() and ".hoodie" not in p.parts)


@pytest.mark.parametrize("pause", ["before_marker", "while_writing", "finished"])
def test_a_task_that_outlives_its_rolled_back_write_leaves_no_file(tmp_path: Path, pause: str) -> None:
    storage = LocalStorage(str(tmp_path / "table"))
    _commit(storage, [1], "a")
    protocol = CommitProtocol(storage, resolve_write_config({}))
    pending = protocol.start("BULK_INSERT", Action.COMMIT)
    protocol.inflight(pending)
    signals = {name: str(tmp_path / name) for name in ("started", "go", "done")}
    code = TASK.format(tests=str(Path(__file__).parent), base=storage.base_path, instant=pending.instant_time,
                       pause=pause, **signals)
    task = subprocess.Popen([sys.executable, "-c", code])
    try:
        wait_for_file(signals["started"], processes=[task], what="the task at its pause")
        if pause == "finished":
            assert len(_files_of(storage, pending.instant_time)) == 1  # written before the rollback
        protocol.abort(pending)  # what the driver does once the job failed
        write_atomically(signals["go"])
        outcome = wait_for_file(signals["done"], processes=[task], what="the task's outcome")
        assert task.wait(timeout=60) == 0
    finally:
        if task.poll() is None:
            task.kill()

    if pause == "finished":  # its file was there to be listed: the rollback deleted it
        assert outcome.startswith("written:p/")
    elif pause == "while_writing":  # finished after the rollback listed markers: deleted by the task
        assert outcome.startswith("fenced:p/")
    else:  # started after the rollback: no marker, no file
        assert outcome.startswith("fenced:p/")
    assert _files_of(storage, pending.instant_time) == []
    assert not (Path(storage.base_path) / marker_dir(pending.instant_time)).exists()
    timeline = Timeline.load(storage)
    assert pending.instant_time not in {i.requested_time for i in timeline}
    assert [i.action for i in timeline.completed if i.action is Action.ROLLBACK] == [Action.ROLLBACK]
    assert _visible_rows(storage) == [(1, "a")]


def test_an_interrupted_rollback_deletes_files_marked_after_its_plan(tmp_path: Path) -> None:
    """A rollback that stopped after its fence and plan (its plan listed no file yet) is finished
    by the next writer: the files marked meanwhile go too, and the fence with the markers."""
    storage = LocalStorage(str(tmp_path / "table"))
    _commit(storage, [1], "a")
    protocol = CommitProtocol(storage, resolve_write_config({}))
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    raise_fence(storage, pending.instant_time)
    rollback_time = new_instant_time(floor=Timeline.load(storage).max_time())
    plan = {"instantToRollback": {"commitTime": pending.instant_time, "action": "commit"},
            "filesToDelete": [], "version": 1}
    requested = instant_file_name(rollback_time, Action.ROLLBACK, State.REQUESTED)
    storage.create_if_absent(f"{TIMELINE_DIR}/{requested}", write_avro("rollback_plan", plan))
    # A task marked and wrote its file after the plan was made.
    from test_protocol import _write

    stat = _write(storage, pending.instant_time, [7], "late", file_id="fg-late")
    assert marked_data_files(storage, pending.instant_time) == [stat.path]

    finish_pending_rollbacks(storage, Timeline.load(storage))

    assert not (Path(storage.base_path) / stat.path).exists()
    assert not storage.exists(fence_path(pending.instant_time))
    assert not (Path(storage.base_path) / marker_dir(pending.instant_time)).exists()
    timeline = Timeline.load(storage)
    assert pending.instant_time not in {i.requested_time for i in timeline}
    assert timeline.get(rollback_time).state is State.COMPLETED
    assert _visible_rows(storage) == [(1, "a")]


class _Conf:
    def __init__(self, value: str | None) -> None:
        self.value = value

    def get(self, key: str, default: str) -> str:
        assert key == "spark.python.task.killTimeout"
        return default if self.value is None else self.value


class _Session:
    def __init__(self, value: str | None) -> None:
        self.conf = _Conf(value)


@pytest.mark.parametrize(("value", "seconds"), [(None, 2.0), ("2s", 2.0), ("500ms", 0.5), ("1500", 1.5),
                                                ("1min", 60.0), ("0.5 s", 0.5), ("soon", 2.0)])
def test_a_failed_jobs_wait_reads_sparks_kill_timeout(value: str | None, seconds: float) -> None:
    """How long Spark lets a cancelled task's Python worker run before it kills it: what the wait
    for a failed job's tasks on Spark Connect is bounded by (Spark's own time syntax; its default
    when unset or unreadable)."""
    from tidemark.engines.spark.connect import _kill_timeout_s

    assert _kill_timeout_s(_Session(value)) == seconds
