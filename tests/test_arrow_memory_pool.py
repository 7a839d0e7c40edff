"""The system allocator for the Arrow engine's rewrites that run alone (engines/arrow/memory.py).

Checked: inside the switch pyarrow's default pool is the system allocator and the pool before
comes back after, however the block ends; nested and concurrent users share one switch (the
last to leave restores); buffers made inside outlive it and are freed by their own pool. And
in a write: the file groups that run alone (to bound the write's memory) are rewritten with the
system pool as the default, the others with the process's own, which is the default again once
the write is done; the table is the same as without the switch, hudi-rs agreeing.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of
from tidemark.engines.arrow import file_groups, tasks
from tidemark.engines.arrow.memory import system_allocator


def _backend() -> str:
    return pa.default_memory_pool().backend_name


def test_the_system_pool_is_the_default_inside_and_the_previous_one_after() -> None:
    before = _backend()
    assert before != "system"  # pyarrow's default here (mimalloc or jemalloc)
    with system_allocator():
        assert _backend() == "system"
        made = pa.array(np.arange(1_000_000))  # allocated by the system pool
    assert _backend() == before
    assert pc.sum(made).as_py() == sum(range(1_000_000))  # outlives the switch
    del made
    with pytest.raises(RuntimeError, match="boom"), system_allocator():
        raise RuntimeError("boom")
    assert _backend() == before


def test_concurrent_users_share_one_switch_and_the_last_restores() -> None:
    before = _backend()
    entered, leave_first, first_left = threading.Barrier(3), threading.Event(), threading.Event()
    seen: dict[str, str] = {}

    def first() -> None:
        with system_allocator():
            entered.wait()
            leave_first.wait()
        first_left.set()

    def second() -> None:
        with system_allocator():
            entered.wait()
            first_left.wait()
            seen["second, after the first left"] = _backend()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    entered.wait()
    seen["both inside"] = _backend()
    leave_first.set()
    for t in threads:
        t.join()
    assert seen == {"both inside": "system", "second, after the first left": "system"}
    assert _backend() == before


def _rows(ids: np.ndarray, v: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "part": pa.array([f"p{i % 4}" for i in ids]),
                     "v": pa.array([v] * len(ids))})


def test_groups_that_run_alone_are_rewritten_on_the_system_pool(tmp_path: Path, monkeypatch: Any) -> None:
    # Small file groups made "large": every group of this upsert runs alone, as the groups of a
    # many-file write above the side-by-side bound do.
    monkeypatch.setattr(tasks, "SIDE_BY_SIDE_WRITE_BYTES", 0)
    monkeypatch.setattr(file_groups, "runs_alone", lambda weight, budget=0: weight > 0)
    before = _backend()
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part")
    table.bulk_insert(_rows(np.arange(4000), "seed"))
    pools: list[str] = []
    original = file_groups.write_file_group

    def recording(*args: Any, **kwargs: Any) -> Any:
        pools.append(_backend())
        return original(*args, **kwargs)

    monkeypatch.setattr(file_groups, "write_file_group", recording)
    table.upsert(_rows(np.concatenate([np.arange(0, 4000, 5), np.arange(4000, 4100)]), "new"))
    assert pools == ["system"] * 4  # one rewrite per partition, each alone
    assert _backend() == before

    monkeypatch.undo()  # the real rule: four small groups, side by side on the process's pool
    pools.clear()
    rewritten: list[str] = []
    merged_writer = file_groups.write_merged

    def recording_merged(*args: Any, **kwargs: Any) -> Any:
        rewritten.append(_backend())
        return merged_writer(*args, **kwargs)

    monkeypatch.setattr(file_groups, "write_file_group", recording)
    monkeypatch.setattr(file_groups, "write_merged", recording_merged)
    table.upsert(_rows(np.arange(1, 4000, 7), "again"))
    assert pools == []  # four small groups: rewritten with one merge (write/small_rewrites.py)
    assert rewritten == [before] * 4
    expected = {i: "seed" for i in range(4000)}
    expected.update({i: "new" for i in [*range(0, 4000, 5), *range(4000, 4100)]})
    expected.update({i: "again" for i in range(1, 4000, 7)})
    assert dict(rows_of(table.read(), ["id", "v"])) == expected
    assert dict(rows_of(hudi_rs_read(table.path), ["id", "v"])) == expected
    table.close()


class _CountingPyarrow:
    """pyarrow as a module sees it, but for the default pool's ``release_unused``, counted."""

    def __init__(self) -> None:
        self.released = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(pa, name)

    def default_memory_pool(self) -> Any:
        counter, pool = self, pa.default_memory_pool()

        class _Pool:
            def release_unused(self) -> None:
                counter.released += 1
                pool.release_unused()

        return _Pool()


def test_a_small_write_keeps_its_freed_pages_a_large_one_gives_them_back(tmp_path: Path, monkeypatch: Any) -> None:
    """Pages given back to the system are faulted in and zeroed again by the next allocations:
    only a write large enough to rewrite its file groups one at a time gives them back between
    its steps (its peak is the largest group's rewrite); a small write keeps them."""
    from tidemark.engines.arrow import index

    counting = _CountingPyarrow()
    monkeypatch.setattr(index, "pa", counting)
    monkeypatch.setattr(file_groups, "pa", counting)
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part",
                                  options={"hoodie.parquet.small.file.limit": "0"})
    table.bulk_insert(_rows(np.arange(4000), "seed"))
    table.upsert(_rows(np.arange(0, 4000, 3), "small"))
    assert counting.released == 0

    # The same upsert made "large": its lookup gives pages back as it ends, its writes before
    # they start and after the small file groups' one-merge rewrites (none runs alone, so no
    # probe and no group gives them back on its own).
    monkeypatch.setattr(tasks, "SIDE_BY_SIDE_WRITE_BYTES", 0)
    table.upsert(_rows(np.arange(1, 4000, 3), "large"))
    assert counting.released == 3
    expected = {i: "seed" for i in range(4000)}
    expected.update({i: "small" for i in range(0, 4000, 3)})
    expected.update({i: "large" for i in range(1, 4000, 3)})
    assert dict(rows_of(table.read(), ["id", "v"])) == expected
    assert dict(rows_of(hudi_rs_read(table.path), ["id", "v"])) == expected
    table.close()
