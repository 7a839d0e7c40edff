"""A write's tasks write Hudi's partition metafile before a partition's first data file, as
Hudi's write handles do (write/partition_meta.py): in every new partition, nested ones with
their depth, before the commit; one already there is left as it is; and the table is as
readable as when the commit wrote them (tidemark and hudi-rs read the same rows)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.names import PARTITION_METAFILE, PARTITION_PATH, RECORD_KEY
from tidemark.format.schema import with_meta_columns
from tidemark.merge import OP_COLUMN
from tidemark.write import file_group
from tidemark.write.partition_meta import ensure_partition_metafile
from tidemark.write.spec import WriteSpec

INSTANT = "20260101000000000"


def _spec(base: Path) -> WriteSpec:
    schema = with_meta_columns(pa.schema([("id", pa.int64())]))
    return WriteSpec(base_path=str(base), instant_time=INSTANT, schema=schema, ordering_fields=(),
                     compression="snappy", max_file_size=128 << 20)


def _entries(metafile: Path) -> dict[str, str]:
    lines = metafile.read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


def test_a_bulk_task_writes_each_new_partitions_metafile_with_its_depth(tmp_path: Path) -> None:
    partitions = ["p0", "p1", "year=2026/month=01"]
    rows = pa.table({"id": [0, 1, 2, 3], RECORD_KEY: ["0", "1", "2", "3"],
                     PARTITION_PATH: [*partitions, "p0"]})
    stats = list(file_group.write_new_files(_spec(tmp_path), [rows], token="0-0-0", task_partition=0))

    assert sorted({s.partition_path for s in stats}) == sorted(partitions)
    for partition in partitions:  # no commit ran: the task wrote them
        entries = _entries(tmp_path / partition / PARTITION_METAFILE)
        assert entries == {"commitTime": INSTANT, "partitionDepth": str(partition.count("/") + 1)}
    assert not list(tmp_path.rglob(".tidemark-*.tmp"))  # no temporary left behind


def test_a_new_file_group_writes_its_partitions_metafile_and_keeps_an_existing_one(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    ensure_partition_metafile(spec.storage(), "old", "20250101000000000")
    before = (tmp_path / "old" / PARTITION_METAFILE).read_bytes()
    for partition in ("old", "new"):
        rows = pa.table({"id": [7], RECORD_KEY: ["7"], PARTITION_PATH: [partition], OP_COLUMN: ["upsert"]})
        file_group.write_file_group(spec, rows, partition_path=partition, file_id=f"{partition}-group",
                                    base_file=None, token="0-0-0", task_partition=0)

    assert (tmp_path / "old" / PARTITION_METAFILE).read_bytes() == before  # not written again
    assert _entries(tmp_path / "new" / PARTITION_METAFILE) == {"commitTime": INSTANT, "partitionDepth": "1"}


@pytest.mark.parametrize("engine_threads", ["1", "2"])
def test_a_hundred_new_partitions_each_get_one_metafile_and_read_back(tmp_path: Path, engine_threads: str) -> None:
    rows = pa.table({"id": list(range(1_000)), "region": [f"r{i % 100:03d}" for i in range(1_000)],
                     "ts": list(range(1_000))})
    options = {"hoodie.bulkinsert.shuffle.parallelism": engine_threads}
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by=["region"],
                                  ordering_field="ts", options=options)
    table.bulk_insert(rows)

    metafiles = sorted(p.parent.name for p in (tmp_path / "t").rglob(PARTITION_METAFILE)
                       if ".hoodie" not in p.parts)
    assert metafiles == sorted({f"region=r{i:03d}" for i in range(100)})  # hive-style, the default
    commit_time = [i for i in table.timeline() if i.is_completed][-1].requested_time
    assert all(_entries(tmp_path / "t" / p / PARTITION_METAFILE)["commitTime"] == commit_time for p in metafiles)
    assert sorted(hudi_rs_read(str(tmp_path / "t")).column("id").to_pylist()) == list(range(1_000))
    assert table.read().num_rows == 1_000
