"""Readers of the archived timeline while another process archives and merges it.

Archival moves completed instants into the history and merges its files by level, removing
the files no recent manifest lists. A reader in another process must never see a raw
``FileNotFoundError`` for that: an instant archived since its listing is read from the history,
a history merged during its read is read again; only a file its manifest lists and that is
really gone is a CorruptTableError.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from tidemark.errors import CorruptTableError
from tidemark.timeline import Timeline
from tidemark.timeline import history as history_module
from tidemark.timeline import timeline as timeline_module
from tidemark.timeline.history import HISTORY_DIR, read_manifest

WRITER = str(Path(__file__).with_name("writer_process.py"))
ARCHIVE = {
    "hoodie.clean.automatic": "false",
    "hoodie.archive.automatic": "true",
    "hoodie.keep.min.commits": "4",
    "hoodie.keep.max.commits": "6",
    "hoodie.clean.commits.retained": "2",
    "hoodie.timeline.compaction.batch.size": "3",  # history files merged every few archivals
}


def _forget_cached_reads() -> None:
    """Read the files again, as another process would (parsed files are cached per process)."""
    timeline_module._METADATA.clear()
    history_module._CONTENTS.clear()
    history_module._INDEX.clear()


def test_a_history_file_its_manifest_lists_but_is_gone_is_a_corrupt_table_error(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=ARCHIVE)
    for i in range(12):
        table.upsert(pa.table({"id": [i], "v": [i]}))
    files = read_manifest(table.storage).files
    assert files, "nothing was archived"
    os.remove(os.path.join(table.path, HISTORY_DIR, files[0]))
    _forget_cached_reads()
    with pytest.raises(CorruptTableError, match="restore") as raised:
        Timeline.load(table.storage).with_history()
    assert raised.value.path == HISTORY_DIR
    with pytest.raises(CorruptTableError):
        table.timeline(include_archived=True)
    table.close()


def test_readers_see_a_growing_history_while_another_process_archives_and_merges_it(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    tidemark.Table.create(path, spark=None, record_key="id", partition_by="part", options=ARCHIVE).close()
    spec = {"table": path, "options": ARCHIVE, "loop": True, "writer": 0, "seed": 5, "iterations": 150,
            "keys": 40, "partitions": 4, "log": str(tmp_path / "w.log")}
    (tmp_path / "w.json").write_text(json.dumps(spec))
    writer = subprocess.Popen([sys.executable, WRITER, str(tmp_path / "w.json")])
    storage = tidemark.Table.open(path, spark=None, options=ARCHIVE).storage
    seen: set[str] = set()
    reads = merged_under_us = 0
    deadline = time.monotonic() + 300
    try:
        while writer.poll() is None:
            assert time.monotonic() < deadline, "the writer did not finish"
            _forget_cached_reads()
            listed = Timeline.load(storage)
            manifest = read_manifest(storage).version
            timeline = listed.with_history()
            instants = {i.requested_time for i in timeline.completed_data_instants}
            assert seen <= instants, "an instant left both the active timeline and the history"
            for inst in listed.completed_data_instants:  # listed before the archiver's next move
                assert listed.commit_metadata(inst).write_stats
            seen = instants
            reads += 1
            merged_under_us += read_manifest(storage).version != manifest
    finally:
        writer.wait(timeout=120)
    assert writer.returncode == 0
    assert reads >= 10 and merged_under_us >= 1, (reads, merged_under_us)
    final = Timeline.load(storage).with_history()
    assert len(final.completed_data_instants) == 150  # every commit of the writer, archived or not
