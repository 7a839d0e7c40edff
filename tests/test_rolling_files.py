"""A bulk_insert's rolling files (``write_new_files``) encode each row group on a thread while the
next one's meta columns are made: the files still roll at their target size, hold every row
once in order, and a disk failing under an encoding raises, with no encoding left running."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tidemark.format.names import COMMIT_SEQNO, PARTITION_PATH, RECORD_KEY
from tidemark.format.schema import with_meta_columns
from tidemark.write import file_group
from tidemark.write.spec import WriteSpec

ROWS = 60_000
BATCH = 2_000


def _batches(partitions: int) -> list[pa.Table]:
    ids = np.arange(ROWS)
    rng = np.random.default_rng(3)
    text = pc.cast(pa.array(ids), pa.string())
    # Incompressible text: the files' sizes follow the rows, so they roll many times.
    noise = pa.array([rng.bytes(24).hex() for _ in range(ROWS)])
    table = pa.table({"id": ids, "v": noise, RECORD_KEY: text,
                      PARTITION_PATH: pa.array([f"p{i % partitions}" for i in ids])})
    return [table.slice(start, BATCH) for start in range(0, ROWS, BATCH)]


@pytest.mark.parametrize("partitions", [1, 3])
@pytest.mark.parametrize("row_group_bytes", [32 << 10, 64 << 20])
def test_rolling_files_roll_at_their_size_and_hold_every_row_once(
    tmp_path: Path, monkeypatch: Any, partitions: int, row_group_bytes: int
) -> None:
    # Row groups far below the file size (several in flight over a file's life, their size not
    # yet counted when the size is checked) and as large as the file (each one waited for).
    monkeypatch.setattr(file_group, "ROW_GROUP_BYTES", row_group_bytes)
    max_file_size = 400_000
    schema = with_meta_columns(pa.schema([("id", pa.int64()), ("v", pa.string())]))
    spec = WriteSpec(base_path=str(tmp_path), instant_time="20260101000000000", schema=schema,
                     ordering_fields=(), compression="snappy", max_file_size=max_file_size)
    stats = list(file_group.write_new_files(spec, _batches(partitions), token="0-0-0", task_partition=0))

    assert sum(s.num_writes for s in stats) == ROWS
    seen: list[int] = []
    for partition in (f"p{i}" for i in range(partitions)):
        mine = [s for s in stats if s.partition_path == partition]
        assert len(mine) >= 2  # the data is several times the file size: it rolled
        for stat in mine:
            path = tmp_path / stat.path
            size = path.stat().st_size
            assert size == stat.file_size and stat.num_writes == pq.ParquetFile(path).metadata.num_rows
            rows = pq.read_table(path)
            # Sequence numbers count the file's own rows from 0, in the order written.
            assert rows.column(COMMIT_SEQNO).to_pylist() == [
                f"{spec.instant_time}_0_{n}" for n in range(rows.num_rows)]
            assert set(rows.column(PARTITION_PATH).to_pylist()) == {partition}
            seen += rows.column("id").to_pylist()
        # Every file but the partition's last reached the size before it was closed, and
        # overshot it by less than a row group and a batch (what is in memory when it rolls).
        for stat in mine[:-1]:
            assert max_file_size <= stat.file_size < max_file_size + min(row_group_bytes, max_file_size) + 200_000
    assert sorted(seen) == list(range(ROWS))
    for partition in (f"p{i}" for i in range(partitions)):
        ids = [i for s in stats if s.partition_path == partition
               for i in pq.read_table(tmp_path / s.path, columns=["id"]).column(0).to_pylist()]
        assert ids == sorted(ids)  # the files of a partition follow one another in the batch's order


_DISK_FULL = """
    import gc, os, resource, signal, sys, threading
    import numpy as np, pyarrow as pa, pyarrow.compute as pc
    from tidemark.format.schema import with_meta_columns
    from tidemark.write import file_group
    from tidemark.write.spec import WriteSpec

    file_group.ROW_GROUP_BYTES = 16 << 10  # many row groups: the failure comes under the thread
    limit, rows, failing = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    if failing == "footer":  # a file's close fails before its writer is closed
        def footer(self, schema):
            raise RuntimeError("the footer failed")
        file_group.FooterKeys.footer = footer
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG
    schema = with_meta_columns(pa.schema([("id", pa.int64()), ("v", pa.string())]))
    spec = WriteSpec(base_path=sys.argv[1], instant_time="1", schema=schema, ordering_fields=(),
                     compression="none", max_file_size=1 << 30)

    def batches(failing=False):
        for start in range(0, rows, 1_000):
            if failing and start == rows * 3 // 4:  # the caller's rows fail: three files are open
                raise RuntimeError("the batches failed")
            ids = np.arange(start, start + 1_000)
            text = pc.cast(pa.array(ids), pa.string())
            yield pa.table({"id": ids, "v": text, "_hoodie_record_key": text,
                            "_hoodie_partition_path": pa.array([f"p{start // 1_000 % 3}"] * len(ids))})

    first = next(batches())  # the markers' folder exists before the limit applies
    fds = len(os.listdir("/proc/self/fd"))
    if limit:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        list(file_group.write_new_files(spec, batches(failing == "rows"), token="0-0-0", task_partition=0))
        print("no error")
    except (OSError, RuntimeError) as error:
        print("raised:", error)
        # Counted while the failure's traceback still holds the write's frames (its open files
        # would otherwise be closed by their collection, not by the write).
        print("open files left:", len(os.listdir("/proc/self/fd")) - fds)
    print("encoders left:", [t.name for t in threading.enumerate() if t.name.startswith("tidemark-encode")])
    gc.collect()
"""


@pytest.mark.parametrize(("limit", "rows", "failing"), [
    (30_000, 200_000, "disk"), (600_000, 200_000, "disk"),  # each file ~2 MB: under an encoding
    (100_000, 30_000, "disk"),  # each file ~0.3 MB, all of it in its write buffer: at its close
    (0, 200_000, "rows"),  # the caller's rows fail, three files open
    (0, 30_000, "footer"),  # a file's close fails before its writer is closed
])
def test_a_rolling_file_whose_disk_fails_raises_and_leaves_no_encoder_running(
    tmp_path: Path, limit: int, rows: int, failing: str
) -> None:
    """The disk's failure (the process's file-size limit, as a full disk fails: under the
    encoding thread, or at a file's close, where its write buffer goes out), the caller's rows
    failing, or a file's close failing, is raised by the write, not lost with the thread; no
    row group is being encoded once it returns, every file it opened is closed, and nothing
    fails when what is left is collected. (In a process of its own: the limit is the process's.)"""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(_DISK_FULL), str(tmp_path), str(limit), str(rows),
                             failing], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    failure = {"disk": "too large", "rows": "the batches failed", "footer": "the footer failed"}[failing]
    assert lines[0].startswith("raised:") and failure in lines[0].lower(), lines
    assert lines[1:] == ["open files left: 0", "encoders left: []"]
    assert "Exception ignored" not in result.stderr, result.stderr
