"""Heartbeats as Apache Hudi writes and reads them: empty files judged by their modification time.

A live Hudi writer on a table keeps ``.hoodie/.heartbeat/<instant>`` fresh by rewriting an
empty file; Hudi decides a writer is dead when that file's modification time is older than
``interval * tolerable misses``. These tests write the file the way Hudi does (empty,
modification time set explicitly) and check that tidemark neither rolls back a live Hudi
writer nor keeps a dead one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

import tidemark
from tidemark.concurrency.heartbeat import Heartbeat, HeartbeatPolicy, heartbeat_path
from tidemark.config.resolve import resolve_write_config
from tidemark.storage import LocalStorage
from tidemark.timeline import Action, Timeline
from tidemark.write.commit import CommitProtocol

# Hudi's defaults: a beat every 60 s, two misses tolerated (expired after 120 s).
OCC = {
    "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
    "hoodie.write.lock.provider": "filesystem",
    "hoodie.client.heartbeat.interval_in_ms": "60000",
    "hoodie.client.heartbeat.tolerable.misses": "2",
}


def _table(tmp_path: Path) -> tidemark.Table:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=OCC)
    table.upsert(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    return table


def _hudi_style_pending_write(path: str, *, beat_age_s: float) -> str:
    """An inflight commit whose writer keeps a Hudi heartbeat: an empty file, last modified ``beat_age_s`` ago."""
    protocol = CommitProtocol(LocalStorage(path), resolve_write_config(OCC))
    pending = protocol.start("UPSERT", Action.COMMIT)
    protocol.inflight(pending)
    assert pending.heartbeat is not None
    pending.heartbeat.stop(delete=False)  # from here on only the file speaks for the writer
    protocol.close()
    beat = Path(path, heartbeat_path(pending.instant_time))
    beat.write_bytes(b"")  # Hudi's heartbeat file has no content
    stamp = time.time() - beat_age_s
    os.utime(beat, (stamp, stamp))
    return pending.instant_time


def _pending(path: str) -> set[str]:
    return {i.requested_time for i in Timeline.load(LocalStorage(path)) if not i.is_completed}


def test_tidemark_writes_heartbeats_as_hudi_does(tmp_path: Path) -> None:
    storage = LocalStorage(str(tmp_path))
    beat = Heartbeat(storage, "20260101000000000", HeartbeatPolicy(60_000, 2)).start()
    try:
        full = Path(storage.full_path(heartbeat_path("20260101000000000")))
        assert full.read_bytes() == b""  # empty, like Hudi's
        assert abs(full.stat().st_mtime - time.time()) < 30  # its age is its modification time
        assert beat.is_alive()
    finally:
        beat.stop()
    assert not storage.exists(heartbeat_path("20260101000000000"))


def test_a_live_hudi_writer_is_left_alone_and_a_dead_one_is_rolled_back(tmp_path: Path) -> None:
    table = _table(tmp_path)
    live = _hudi_style_pending_write(table.path, beat_age_s=5)  # beat 5 s ago: well within 120 s
    dead = _hudi_style_pending_write(table.path, beat_age_s=600)  # last beat 10 min ago: expired

    writer = tidemark.Table.open(table.path, spark=None, options=OCC)
    rolled_back = {r.rolled_back.requested_time for r in writer.rollback_failed_writes()}
    assert rolled_back == {dead}
    assert _pending(table.path) == {live}  # the live Hudi writer's instant is untouched

    # A write next to the live Hudi writer commits without touching it.
    writer.upsert(pa.table({"id": [4], "v": ["d"]}))
    assert _pending(table.path) == {live}
    assert sorted(writer.read().column("id").to_pylist()) == [1, 2, 3, 4]

    # Once the Hudi writer stops beating long enough, the next writer cleans it up.
    stale = time.time() - 600
    os.utime(Path(table.path, heartbeat_path(live)), (stale, stale))
    assert {r.rolled_back.requested_time for r in writer.rollback_failed_writes()} == {live}
    assert _pending(table.path) == set()
