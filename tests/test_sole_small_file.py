"""An upsert reads no key beforehand in a partition whose one small file group takes all of its
rows (write/plan.py ``SoleSmallFile``; engines/arrow/index.py): the rewrite finds the stored keys
as it merges. The table, its write statistics and its sequence numbers are those of an upsert
that looked every key up first; partitions of several file groups, or whose one file lacks room
for the rows, are still looked up. hudi-rs reads the same rows.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.write.plan import SoleSmallFile

PARTS = 4


def rows(ids: list[int], n: int | list[int]) -> pa.Table:
    versions = n if isinstance(n, list) else [n] * len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "part": pa.array([f"p{i % PARTS}" for i in ids], pa.string()),
        "n": pa.array(versions, pa.int64()),
        "text": pa.array([f"row-{i}-{v}" for i, v in zip(ids, versions, strict=True)], pa.string()),
    })


def commit_stats(path: Path, instant: str) -> list[tuple[Any, ...]]:
    """The commit's write statistics, without what differs between two tables (file ids, times, sizes)."""
    meta = CommitMetadata.from_bytes(next((path / ".hoodie/timeline").glob(f"{instant}_*.commit")).read_bytes())
    return sorted((s.partition_path, s.prev_commit is not None, s.num_writes, s.num_inserts, s.num_updates,
                   s.num_deletes) for s in meta.write_stats)


def snapshot(table: tidemark.Table) -> list[tuple[Any, ...]]:
    """Every row with its place in the file its commit wrote (the sequence number's last part:
    its task number follows the random file ids' order)."""
    data = table.read()
    seq = [s.rsplit("_", 1)[1] for s in data.column("_hoodie_commit_seqno").to_pylist()]  # <time>_<task>_<n>
    data = data.select(["id", "part", "n", "text"]).append_column("seq", pa.array(seq))
    return sorted(zip(*(c.to_pylist() for c in data.columns), strict=True))


def probes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The partition paths of the files the index lookup reads keys of, as it reads them."""
    from tidemark.engines.arrow import index

    seen: list[str] = []
    real = index._probe_file

    def probe(view: Any, f: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(f.partition_path)
        return real(view, f, *args, **kwargs)

    monkeypatch.setattr(index, "_probe_file", probe)
    return seen


def write_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], steps: list[tuple[str, pa.Table]]
) -> tuple[tidemark.Table, dict[str, list[Any]], list[str], dict[str, list[Any]]]:
    """The same writes two ways: ``free`` as tidemark writes them; ``looked``, for each upsert, a
    copy of ``free`` as it was before it, taking the same upsert with every key looked up first
    (SoleSmallFile never applies). Both upserts start from the same bytes: the room a file has
    left, which its size decides (and its size the instant times in it), is the same for both.
    Returns ``free``; per upsert, each way's write statistics and the rows after it (sorted,
    with their sequence numbers' last part); and per write of ``free``: the partitions whose
    files it probed (sorted, joined by commas)."""
    stats: dict[str, list[Any]] = {"free": [], "looked": []}
    snapshots: dict[str, list[Any]] = {"free": [], "looked": []}
    seen = probes(monkeypatch)
    probed: list[str] = []
    free_path, looked_path = tmp_path / "free", tmp_path / "looked"
    free = tidemark.Table.create(str(free_path), spark=None, record_key="id", partition_by="part",
                                 ordering_field="n", options=options)
    for operation, batch in steps:
        if operation == "upsert":
            shutil.rmtree(looked_path, ignore_errors=True)
            shutil.copytree(free_path, looked_path)
            with monkeypatch.context() as patched:
                patched.setattr(SoleSmallFile, "takes_all", lambda self, size, rows: False)
                looked = tidemark.Table.open(str(looked_path), spark=None, options=options)
                outcome = looked.upsert(batch)
            stats["looked"].append(commit_stats(looked_path, outcome.instant_time))
            snapshots["looked"].append(snapshot(looked))
        seen.clear()
        outcome = getattr(free, operation)(batch)
        probed.append(",".join(sorted(seen)))
        if operation == "upsert":
            stats["free"].append(commit_stats(free_path, outcome.instant_time))
            snapshots["free"].append(snapshot(free))
    return free, stats, probed, snapshots


def test_an_upsert_into_sole_small_files_reads_no_key_first_and_writes_what_a_lookup_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # p3 gets a second file group (a second bulk_insert): its keys must be looked up.
    updates = list(range(0, 2000, 3))
    stale = list(range(1, 2000, 50))  # older ordering values: the stored records stay
    new = list(range(5000, 5400))
    batch = rows(updates + stale + new, [2] * len(updates) + [-1] * len(stale) + [2] * len(new))
    steps = [("bulk_insert", rows(list(range(2000)), 1)), ("bulk_insert", rows(list(range(3003, 3403, 4)), 1)),
             ("upsert", batch), ("upsert", rows(list(range(0, 6000, 7)), 3))]
    free, stats, probed, snapshots = write_both_ways(tmp_path, monkeypatch, {}, steps)
    assert probed == ["", "", "part=p3,part=p3", "part=p3,part=p3"]  # only p3, of two file groups, is looked up
    assert stats["free"] == stats["looked"] and snapshots["free"] == snapshots["looked"]
    upsert = stats["free"][0]
    assert sum(s[4] for s in upsert) == len(updates) and sum(s[3] for s in upsert) == len(new)
    model = {i: (1, f"row-{i}-1") for i in [*range(2000), *range(3003, 3403, 4)]}
    model.update({i: (2, f"row-{i}-2") for i in updates + new})
    model.update({i: (3, f"row-{i}-3") for i in range(0, 6000, 7)})
    got = free.read().select(["id", "n", "text"]).to_pylist()
    assert {r["id"]: (r["n"], r["text"]) for r in got} == model and len(got) == len(model)
    rs = hudi_rs_read(str(tmp_path / "free")).select(["id", "n", "text"]).to_pylist()
    assert {r["id"]: (r["n"], r["text"]) for r in rs} == model and len(rs) == len(model)


def test_a_sole_file_without_room_for_the_rows_is_looked_up_and_the_rest_start_new_file_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Files of ~500 rows may grow to ~1.5x: an upsert of 1,000 rows per partition does not fit.
    probe_table = tidemark.Table.create(str(tmp_path / "probe"), spark=None, record_key="id", partition_by="part",
                                        ordering_field="n")
    probe_table.bulk_insert(rows(list(range(2000)), 1))
    size = max(f.stat().st_size for f in (tmp_path / "probe").rglob("*.parquet"))
    options = {"hoodie.parquet.max.file.size": str(int(size * 1.5)),
               "hoodie.parquet.small.file.limit": str(int(size * 1.2))}
    batch = rows(list(range(0, 2000, 2)) + list(range(4000, 8000)), 2)
    _, stats, probed, snapshots = write_both_ways(
        tmp_path, monkeypatch, options, [("bulk_insert", rows(list(range(2000)), 1)), ("upsert", batch)])
    assert probed == ["", ",".join(f"part=p{i}" for i in range(PARTS))]
    assert stats["free"] == stats["looked"] and snapshots["free"] == snapshots["looked"]
    assert sum(1 for s in stats["free"][0] if not s[1]) >= PARTS  # inserts beyond the room: new file groups
    model = {i: 1 for i in range(2000)} | {i: 2 for i in [*range(0, 2000, 2), *range(4000, 8000)]}
    rs = hudi_rs_read(str(tmp_path / "free")).select(["id", "n"]).to_pylist()
    assert {r["id"]: r["n"] for r in rs} == model and len(rs) == len(model)
