"""A write whose storage fails under it (a full disk: here the process's file-size limit, which
makes ``write`` fail as a full disk does) raises a typed StorageError that says what to do, never
a raw OSError; nothing of it becomes visible, and the same write succeeds once there is room.
Each case runs in a process of its own: the limit is the process's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_WRITE_ON_A_FULL_DISK = """
    import errno, json, os, resource, signal, sys
    import pyarrow as pa
    import tidemark
    from tidemark.errors import StorageError
    from tidemark.storage import LocalStorage
    from tidemark.timeline import Timeline

    path, operation, partitioned = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG

    def rows(start, count):
        ids = list(range(start, start + count))
        return pa.table({"id": [f"k{i:07d}" for i in ids], "region": [f"r{i % 3}" for i in ids],
                         "note": [f"note {i} " * 4 for i in ids], "ts": ids})

    table = tidemark.Table.create(path, spark=None, record_key="id", ordering_field="ts",
                                  partition_by=["region"] if partitioned else [])
    table.bulk_insert(rows(0, 3_000))
    batch = rows(1_500, 60_000)  # half of the stored keys updated, the rest new
    write = getattr(tidemark.Table.open(path, spark=None), operation)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)  # the hard limit stays: it may not be raised
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    outcome = {}
    try:
        write(batch)
        outcome["raised"] = None
    except StorageError as error:
        outcome["raised"] = "StorageError"
        outcome["message"] = str(error)
        outcome["cause_errno"] = getattr(error.__cause__, "errno", None) == errno.EFBIG
    except Exception as error:  # what a user must never get
        outcome["raised"] = type(error).__name__
        outcome["message"] = str(error)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    # Rolled back by the failed write itself: nothing of it pending, its rollback completed.
    timeline = Timeline.load(LocalStorage(path))
    outcome["pending"] = len(timeline.pending)
    outcome["rollbacks"] = sum(i.action.value == "rollback" for i in timeline.completed)
    after = tidemark.Table.open(path, spark=None)
    outcome["rows_after_failure"] = after.read().num_rows
    getattr(after, operation)(batch)  # room again: the same write succeeds
    outcome["rows_after_retry"] = tidemark.Table.open(path, spark=None).read().num_rows
    print(json.dumps(outcome))
"""


@pytest.mark.parametrize(("operation", "partitioned"), [
    ("bulk_insert", True), ("bulk_insert", False), ("upsert", True), ("upsert", False)])
def test_a_write_on_a_full_disk_raises_a_typed_error_and_leaves_the_table_as_it_was(
    tmp_path: Path, operation: str, partitioned: bool
) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WRITE_ON_A_FULL_DISK), str(tmp_path / "t"), operation,
         "1" if partitioned else "0"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["raised"] == "StorageError", outcome
    assert outcome["cause_errno"], outcome  # the file system's failure (EFBIG), kept as the cause
    message = outcome["message"].lower()
    assert "free space" in message and "write again" in message and "tidemark timeline" in message, outcome
    assert outcome["rows_after_failure"] == 3_000  # nothing of the failed write is visible
    assert outcome["pending"] == 0 and outcome["rollbacks"] == 1, outcome
    expected = 3_000 + 60_000 - 1_500 if operation == "upsert" else 3_000 + 60_000
    assert outcome["rows_after_retry"] == expected
