"""A clean's plan executed by two processes completes once.

A cleaner whose heartbeat is late (a loaded machine) counts as dead, and the next cleaner
adopts its plan; the first may still be running. Deleting twice is harmless; completing
twice left two completed files for one clean instant, archival then removed one, and the
other kept an old instant on the active timeline ahead of archived commits: Hudi's "before
the timeline starts" rule no longer covered them, and hudi-rs read their files as
uncommitted (an older version of their rows). Real processes: the stalled cleaner is its own
OS process, released by a file barrier once the adopter completed the clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

import tidemark
from conftest import hudi_rs_read, reader_views
from signals import wait_for_file, write_atomically
from tidemark.concurrency.heartbeat import HeartbeatPolicy
from tidemark.timeline import Action, State, Timeline

HERE = Path(__file__).parent
OPTIONS = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.client.heartbeat.interval_in_ms": "100",
    "hoodie.client.heartbeat.tolerable.misses": "2",
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "false",
    "hoodie.clean.commits.retained": "2",
    "hoodie.keep.min.commits": "3",
    "hoodie.keep.max.commits": "4",
}

# The stalled cleaner: after its plan went inflight (its heartbeat running), it stops beating,
# as a starved process would, says so, and waits; released, it finishes its clean.
CLEANER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
import tidemark
from signals import write_atomically
from tidemark.concurrency import heartbeat
from tidemark.recovery import clean

spec = json.loads(Path(sys.argv[1]).read_text())
beats = []
start = heartbeat.Heartbeat.start
def recorded(self):
    beats.append(self)
    return start(self)
heartbeat.Heartbeat.start = recorded
stalled = []
savepointed = clean.savepointed_files
def stall(storage, timeline):
    executing = any(n.endswith(".clean.inflight") for n in storage.list_names(".hoodie/timeline"))
    if executing and not stalled:  # planning (under the lock) asks for savepoints too
        stalled.append(True)
        for beat in beats:
            beat.stop(delete=False)  # the file stays, and ages
        write_atomically(spec["ready"], "stalled")
        while not Path(spec["go"]).exists():
            time.sleep(0.01)
    return savepointed(storage, timeline)
clean.savepointed_files = stall
table = tidemark.Table.open(spec["table"], spark=None, options=spec["options"])
result = table.clean()
instant = result.clean_instant
outcome = {{"instant": instant.requested_time, "completion": instant.completion_time}}
write_atomically(spec["result"], json.dumps(outcome))
"""


def _upsert(table: tidemark.Table, key: int, value: int) -> None:
    table.upsert(pa.table({"id": [key], "part": [f"p{key % 2}"], "v": [value]}))


def test_a_clean_adopted_from_a_live_cleaner_completes_once_and_archival_keeps_hudi_rs_right(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=OPTIONS)
    for i in range(6):
        _upsert(table, i % 4, i)
    script, spec_path = tmp_path / "cleaner.py", tmp_path / "spec.json"
    script.write_text(CLEANER.format(tests=str(HERE)))
    spec = {"table": path, "options": OPTIONS, "ready": str(tmp_path / "ready"), "go": str(tmp_path / "go"),
            "result": str(tmp_path / "result.json")}
    spec_path.write_text(json.dumps(spec))
    cleaner = subprocess.Popen([sys.executable, str(script), str(spec_path)])
    try:
        wait_for_file(spec["ready"], processes=[cleaner])
        [pending] = Timeline.load(table.storage).filter(actions=[Action.CLEAN], states=[State.INFLIGHT])
        policy = HeartbeatPolicy(100, 2)
        while not policy.is_expired(table.storage, pending.requested_time):  # its last beat ages out
            assert cleaner.poll() is None, "the stalled cleaner exited"
        adopted = table.clean()  # the plan of a cleaner that looks dead: adopted and completed here
        assert adopted.clean_instant is not None
        assert adopted.clean_instant.requested_time == pending.requested_time
    finally:
        write_atomically(spec["go"], "go")
        assert cleaner.wait(timeout=120) == 0
    theirs = json.loads(Path(spec["result"]).read_text())
    # the live cleaner found its clean completed and wrote nothing more
    assert theirs == {"instant": pending.requested_time, "completion": adopted.clean_instant.completion_time}
    completed = [n for n in (Path(path) / ".hoodie" / "timeline").iterdir()
                 if n.name.startswith(pending.requested_time) and n.name.endswith(".clean")]
    assert len(completed) == 1, completed
    assert not Timeline.load(table.storage).filter(actions=[Action.CLEAN], states=[State.REQUESTED, State.INFLIGHT])

    for i in range(6, 16):  # archival moves the clean and the commits after it into the history
        _upsert(table, i % 4, i)
        table.archive()
        ours = sorted((r["id"], r["v"]) for r in table.read().to_pylist())
        assert sorted((r["id"], r["v"]) for r in hudi_rs_read(path).to_pylist()) == ours, reader_views(path)
    active = Timeline.load(table.storage)
    assert pending.requested_time not in {i.requested_time for i in active}
    assert all(i.requested_time > pending.requested_time for i in active)
    expected = sorted((r["id"], r["v"]) for r in table.read().to_pylist())
    assert expected == [(0, 12), (1, 13), (2, 14), (3, 15)]
    assert sorted((r["id"], r["v"]) for r in hudi_rs_read(path).to_pylist()) == expected, reader_views(path)


def test_archival_removes_every_completed_file_of_an_instant(tmp_path: Path) -> None:
    """A table already holding two completed files for one clean (written before the fix, or by
    another writer): archiving the clean removes both, so no old instant stays active ahead of
    archived commits."""
    path = str(tmp_path / "t")
    table = tidemark.Table.create(path, spark=None, record_key="id", partition_by="part",
                                  options={k: v for k, v in OPTIONS.items() if "heartbeat" not in k})
    for i in range(6):
        _upsert(table, i % 4, i)
    clean = table.clean().clean_instant
    assert clean is not None and clean.completion_time is not None
    timeline_dir = Path(path) / ".hoodie" / "timeline"
    first = timeline_dir / clean.file_name
    later = str(int(clean.completion_time) + 3)
    copy = timeline_dir / f"{clean.requested_time}_{later}.clean"
    copy.write_bytes(first.read_bytes())
    for i in range(6, 12):
        _upsert(table, i % 4, i)
        table.archive()
        ours = sorted((r["id"], r["v"]) for r in table.read().to_pylist())
        assert sorted((r["id"], r["v"]) for r in hudi_rs_read(path).to_pylist()) == ours, reader_views(path)
    assert not first.exists() and not copy.exists()
    assert all(i.requested_time > clean.requested_time for i in Timeline.load(table.storage))
