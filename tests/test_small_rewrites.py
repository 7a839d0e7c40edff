"""Many small file groups of one write are rewritten with one merge (write/small_rewrites.py,
the Arrow engine's ``_rewrite_small``); the files are those one rewrite per file group writes.

Each test runs the same writes on two tables: ``merged`` as tidemark writes, ``per_group`` with
the one-merge path turned off. The commits' statistics, every row with its meta columns' parts
that do not depend on the instant, the order of the rows in each file and the files' footers
(key range, bloom filter) must be the same; the model and hudi-rs agree with both.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.engines.arrow import file_groups as writer
from tidemark.errors import CorruptDataFileError
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.write import file_group

PARTS = 8


def rows(ids: list[int], n: int | list[int | None], *, text: str | None = "t", extra: str | None = "e") -> pa.Table:
    versions = n if isinstance(n, list) else [n] * len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "part": pa.array([f"p{i % PARTS}" for i in ids], pa.string()),
        "n": pa.array(versions, pa.int64()),
        "text": pa.array([None if text is None else f"{text}-{i}-{v}" for i, v in zip(ids, versions, strict=True)],
                         pa.string()),
        "extra": pa.array([extra] * len(ids), pa.string()),
    })


def keys(ids: list[int], n: int | None) -> pa.Table:
    return rows(ids, [n] * len(ids)).select(["id", "part", "n"])


def commit_stats(path: Path, instant: str) -> list[tuple[Any, ...]]:
    meta = CommitMetadata.from_bytes(next((path / ".hoodie/timeline").glob(f"{instant}_*.commit")).read_bytes())
    return sorted((s.partition_path, s.prev_commit is not None, s.num_writes, s.num_inserts, s.num_updates,
                   s.num_deletes) for s in meta.write_stats)


def files(path: Path, instants: dict[str, int]) -> dict[str, list[Any]]:
    """Per partition, each latest base file's keys in file order, with each row's commit (by the
    write's number) and sequence number's last part, and its footer's key range and bloom filter."""
    found: dict[str, list[str]] = {}
    for file in sorted(glob.glob(str(path / "part=*" / "*.parquet"))):
        found.setdefault(os.path.basename(os.path.dirname(file)), []).append(file)
    result: dict[str, list[Any]] = {}
    for partition, paths in found.items():
        newest = max(paths, key=lambda p: p.rsplit("_", 1)[1])  # the partition's last write (one group each)
        data = pq.read_table(newest)
        meta = pq.read_metadata(newest).metadata
        result[partition] = [
            [(k, instants[c], s.rsplit("_", 1)[1]) for k, c, s in zip(
                data.column("_hoodie_record_key").to_pylist(), data.column("_hoodie_commit_time").to_pylist(),
                data.column("_hoodie_commit_seqno").to_pylist(), strict=True)],
            data.select(["id", "n", "text", "extra"]).to_pylist(),
            meta[b"hoodie_min_record_key"], meta[b"hoodie_max_record_key"], meta[b"org.apache.hudi.bloomfilter"],
        ]
    return result


def write_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, str], steps: list[tuple[str, pa.Table]],
    **create: Any,
) -> tuple[dict[str, Path], dict[str, list[Any]], dict[str, int]]:
    """The writes on both tables; returns their paths, their commits' statistics, and how many
    file groups the one-merge path wrote in each."""
    calls = {"merged": 0, "per_group": 0}
    real = writer.write_merged
    current = ["merged"]

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[current[0]] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(writer, "write_merged", counting)
    paths, stats = {}, {}
    for name in ("merged", "per_group"):
        current[0] = name
        if name == "per_group":
            monkeypatch.setattr(writer, "SMALL_REWRITE_MIN_GROUPS", 10**9)
        table = tidemark.Table.create(str(tmp_path / name), spark=None, record_key="id", partition_by="part",
                                      options=options, **create)
        instants: dict[str, int] = {}
        stats[name] = []
        for step, (operation, batch) in enumerate(steps):
            outcome = getattr(table, operation)(batch)
            instants[outcome.instant_time] = step
            stats[name].append(commit_stats(tmp_path / name, outcome.instant_time))
        stats[name].append(files(tmp_path / name, instants))
        paths[name] = tmp_path / name
        table.close()
    return paths, stats, calls


def visible(table: pa.Table) -> dict[int, tuple[Any, ...]]:
    got = table.select(["id", "n", "text", "extra"]).to_pylist()
    by_id = {r["id"]: (r["n"], r["text"], r["extra"]) for r in got}
    assert len(by_id) == len(got)  # no key twice
    return by_id


def test_an_upsert_and_a_delete_of_many_small_file_groups_write_what_one_rewrite_per_group_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed = list(range(4000))
    updates = list(range(0, 4000, 3))
    stale = list(range(1, 4000, 37))  # older ordering values: the stored rows stay, commit time too
    same = list(range(2, 4000, 101))  # the stored values again: counted as updates
    new = list(range(9000, 9400))
    batch = pa.concat_tables([
        rows(updates, 2), rows([i for i in stale if i not in updates], 0),
        rows([i for i in same if i not in updates and i not in stale], 1), rows(new, 2)])
    # No ordering value: whatever is stored goes. Two of the keys the table does not hold.
    deleted = list(range(5, 4000, 11)) + [20001, 20002]
    stale_delete = keys(list(range(7, 4000, 13)), 0)  # older than every stored record: nothing deleted
    steps = [("bulk_insert", rows(seed, 1)), ("upsert", batch), ("delete", keys(deleted, None)),
             ("delete", stale_delete), ("upsert", rows(list(range(0, 10000, 7)), 3))]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["per_group"] == 0 and calls["merged"] >= 3 * PARTS  # three rewrites of every partition
    assert stats["merged"] == stats["per_group"]
    upsert = stats["merged"][1]
    assert sum(s[4] for s in upsert) == len(updates) + len([i for i in same if i not in updates and i not in stale])
    assert sum(s[3] for s in upsert) == len(new)
    assert sum(s[5] for s in stats["merged"][2]) == len(deleted) - 2

    model: dict[int, tuple[Any, ...]] = {i: (1, f"t-{i}-1", "e") for i in seed}
    model.update({i: (2, f"t-{i}-2", "e") for i in updates + new})
    for i in deleted:
        model.pop(i, None)
    # A delete with an older ordering value than the stored record's loses: nothing is deleted.
    model.update({i: (3, f"t-{i}-3", "e") for i in range(0, 10000, 7)})
    for name in ("merged", "per_group"):
        assert visible(tidemark.Table.open(str(paths[name]), spark=None).read()) == model
        assert visible(hudi_rs_read(str(paths[name]))) == model


@pytest.mark.parametrize("create", [
    pytest.param({}, id="commit-time"),
    pytest.param({"ordering_field": "n", "options": {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}},
                 id="partial-updates"),
])
def test_other_mergers_merge_the_same_in_one_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, create: dict[str, Any]
) -> None:
    options = create.pop("options", {})
    steps = [("bulk_insert", rows(list(range(3000)), 1)),
             ("upsert", rows(list(range(0, 3000, 4)) + list(range(5000, 5100)), 2, text=None, extra="x")),
             ("upsert", rows(list(range(0, 3000, 6)), 0, extra=None))]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, options, steps, **create)
    assert calls["merged"] == PARTS + PARTS // 2 and calls["per_group"] == 0  # multiples of 6: even partitions
    assert stats["merged"] == stats["per_group"]
    assert visible(hudi_rs_read(str(paths["merged"]))) == visible(hudi_rs_read(str(paths["per_group"])))
    got = visible(tidemark.Table.open(str(paths["merged"]), spark=None).read())
    if create:  # partial updates: a null keeps the stored value; the greater ordering value wins
        assert got[4] == (2, "t-4-1", "x") and got[6] == (1, "t-6-1", "e") and got[12] == (2, "t-12-1", "x")
    else:  # the later write wins, nulls included
        assert got[4] == (2, None, "x") and got[6] == (0, "t-6-0", None) and got[12] == (0, "t-12-0", None)
    assert got[5000] == (2, None, "x") and len(got) == 3100


def test_few_or_large_file_groups_are_rewritten_one_by_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = [("bulk_insert", rows(list(range(3000)), 1)), ("upsert", rows([0, 1, 2], 2))]  # three groups touched
    _, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 0 and stats["merged"] == stats["per_group"]
    monkeypatch.setattr(writer, "SMALL_REWRITE_BYTES", 0)  # every group "large"
    monkeypatch.setattr(writer, "SMALL_REWRITE_MIN_GROUPS", 4)
    table = tidemark.Table.open(str(tmp_path / "merged"), spark=None)
    table.upsert(rows(list(range(0, 3000, 2)), 5))
    assert calls["merged"] == 0
    assert sum(1 for v in visible(table.read()).values() if v[0] == 5) == 1500


def test_a_chunk_bound_splits_the_merge_and_keeps_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer, "SMALL_REWRITE_CHUNK_BYTES", 1)  # every group a chunk of its own
    steps = [("bulk_insert", rows(list(range(3000)), 1)), ("upsert", rows(list(range(0, 3000, 5)) + [7777], 2))]
    chunks: list[list[int]] = []
    real = writer.small_rewrite_chunks

    def recording(*args: Any) -> list[list[int]]:
        chunks.extend(real(*args))
        return real(*args)

    monkeypatch.setattr(writer, "small_rewrite_chunks", recording)
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert [len(c) for c in chunks] == [1] * PARTS  # (asked by the per-group table too: it gets none)
    assert calls["merged"] == PARTS and stats["merged"] == stats["per_group"]
    assert visible(hudi_rs_read(str(paths["merged"]))) == visible(hudi_rs_read(str(paths["per_group"])))


def test_a_corrupt_base_file_fails_the_write_with_a_typed_error_and_leaves_the_table_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    table = tidemark.Table.create(str(path), spark=None, record_key="id", partition_by="part", ordering_field="n")
    table.bulk_insert(rows(list(range(3000)), 1))
    damaged = sorted(glob.glob(str(path / "part=p5" / "*.parquet")))[0]
    with open(damaged, "r+b") as fh:  # the footer's length and magic gone
        fh.truncate(os.path.getsize(damaged) - 8)
    files = sorted(glob.glob(str(path / "part=*" / "*.parquet")))
    commits = [i.requested_time for i in table.timeline() if i.action.value == "commit"]
    calls: list[int] = []
    real = writer.merge_stored
    monkeypatch.setattr(writer, "merge_stored", lambda *a: calls.append(1) or real(*a))
    with pytest.raises(CorruptDataFileError, match="part=p5"):
        table.upsert(rows(list(range(0, 3000, 3)) + [7000], 2))  # every partition's small file group
    assert calls == []  # the merge never ran: the reads failed first
    reopened = tidemark.Table.open(str(path), spark=None)
    assert [i.requested_time for i in reopened.timeline() if i.action.value == "commit"] == commits
    assert [i.action.value for i in reopened.timeline()][-1] == "rollback"
    assert sorted(glob.glob(str(path / "part=*" / "*.parquet"))) == files  # nothing of the failed write is left
    good = rows([i for i in range(0, 3000, 3) if i % PARTS != 5], 2)  # the other partitions still take writes
    reopened.upsert(good)
    for part in (p for p in range(PARTS) if p != 5):
        newest = max(glob.glob(str(path / f"part=p{part}" / "*.parquet")), key=lambda p: p.rsplit("_", 1)[1])
        stored = dict(zip(*pq.read_table(newest, columns=["id", "n"]).columns, strict=True))
        assert {i.as_py(): n.as_py() for i, n in stored.items() if n.as_py() == 2} == {
            i: 2 for i in range(part, 3000, PARTS) if i % 3 == 0}


def test_a_group_the_merge_cannot_take_is_rewritten_alone_and_the_files_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if p3's base file held a key twice (a damaged table): its group falls back to
    # write_file_group, after read_stored created its marker (created again there: a no-op).
    real_read = writer.read_stored

    def read(spec: Any, rewrite: Any) -> Any:
        stored = real_read(spec, rewrite)
        return dataclasses.replace(stored, keys_once=False) if rewrite.partition_path == "part=p3" else stored

    alone: list[str] = []
    real_write = writer.write_file_group

    def write_group(spec: Any, incoming: Any, **kwargs: Any) -> Any:
        alone.append(kwargs["partition_path"])
        return real_write(spec, incoming, **kwargs)

    monkeypatch.setattr(writer, "read_stored", read)
    monkeypatch.setattr(writer, "write_file_group", write_group)
    steps = [("bulk_insert", rows(list(range(3000)), 1)),
             ("upsert", rows(list(range(0, 3000, 5)) + list(range(8000, 8080)), 2)),
             ("delete", keys(list(range(1, 3000, 9)), None))]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 2 * (PARTS - 1) and calls["per_group"] == 0
    assert alone[:2] == ["part=p3", "part=p3"]  # the merged table's two writes: p3 alone; then every group
    assert stats["merged"] == stats["per_group"]
    assert visible(hudi_rs_read(str(paths["merged"]))) == visible(hudi_rs_read(str(paths["per_group"])))


def test_each_files_key_range_is_its_keys_whether_the_rewrite_keeps_widens_or_drops_its_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite that writes every stored key again takes their range from the stored footer
    and finds only the new keys' (write/footer.py, ``stored_range``); one that deletes keys finds
    the range of what it writes. Record keys compare as strings: "1000" < "200" < "99"."""
    seed = list(range(100, 1000))
    steps = [
        ("bulk_insert", rows(seed, 1)),
        # updates only (p0, p1: the range stays), keys below and above every stored one in others.
        ("upsert", rows([i for i in range(100, 1000, 7) if i % PARTS in (0, 1)]
                        + [i for i in [1000, 1001, 1002, 1003, 2005, 2006, 9, 10, 11, 12, 13, 14, 15]
                           if i % PARTS not in (0, 1)], 2)),
        # the smallest and largest keys (as strings) of every partition deleted: the ranges shrink.
        ("delete", keys([1000, 1001, 1002, 1003, 2005, 2006, 9, 10, 11, 12, 13, 14, 15]
                        + [i for i in range(100, 1000) if str(i) in {"100", "101", "102", "103", "104", "105", "106",
                                                                     "107", "992", "993", "994", "995", "996", "997",
                                                                     "998", "999"}], None)),
        ("upsert", rows([i for i in range(100, 1000, 11)], 3)),
    ]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 3 * PARTS and calls["per_group"] == 0
    assert stats["merged"] == stats["per_group"]
    for name in ("merged", "per_group"):
        for file in glob.glob(str(paths[name] / "part=*" / "*.parquet")):
            stored = [str(k) for k in pq.read_table(file, columns=["_hoodie_record_key"]).column(0).to_pylist()]
            meta = pq.read_metadata(file).metadata
            assert (meta[b"hoodie_min_record_key"].decode(), meta[b"hoodie_max_record_key"].decode()) == \
                (min(stored), max(stored)), file
    model = {i: 1 for i in seed}
    model.update({i: 2 for i in steps[1][1].column("id").to_pylist()})
    for i in steps[2][1].column("id").to_pylist():
        model.pop(i, None)
    model.update({i: 3 for i in range(100, 1000, 11)})
    for name in ("merged", "per_group"):
        assert {k: v[0] for k, v in visible(hudi_rs_read(str(paths[name]))).items()} == model


def test_a_rewritten_files_commit_times_stay_one_dictionary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored rows' commit time and the new rows' come as pieces with dictionaries of their
    own; the writer keeps a column chunk's dictionary encoding only while every piece brings the
    dictionary it began with, so the pieces are given one dictionary (else the new rows' times
    are written plain: ~20 bytes a row). Both rewrite paths; the times read back per row."""
    steps = [("bulk_insert", rows(list(range(4000)), 1)), ("upsert", rows(list(range(0, 4000, 3)) + [9001], 2)),
             ("upsert", rows(list(range(1, 4000, 5)), 3))]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 2 * PARTS and stats["merged"] == stats["per_group"]
    for name in ("merged", "per_group"):
        instants = sorted({c for f in glob.glob(str(paths[name] / "part=*" / "*.parquet"))
                           for c in pq.read_table(f, columns=["_hoodie_commit_time"]).column(0).to_pylist()})
        assert len(instants) == 3
        newest = stats[name][-1]
        for partition, _ in newest.items():
            files_of = sorted(glob.glob(str(paths[name] / partition / "*.parquet")), key=lambda p: p.rsplit("_", 1)[1])
            latest = files_of[-1]
            chunk = pq.read_metadata(latest).row_group(0).column(0)
            assert chunk.path_in_schema == "_hoodie_commit_time"
            assert chunk.total_uncompressed_size < 1024, (latest, chunk.total_uncompressed_size)  # 500 rows, 3 times
            data = pq.read_table(latest, columns=["id", "_hoodie_commit_time"]).to_pylist()
            for row in data:
                third, second = row["id"] < 4000 and row["id"] % 5 == 1, row["id"] % 3 == 0 or row["id"] == 9001
                step = 2 if third else 1 if second else 0
                assert row["_hoodie_commit_time"] == instants[step], row


def test_low_cardinality_strings_are_rewritten_as_dictionaries_and_read_back_as_strings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite reads the string columns the write dictionary-encodes as the stored file's
    dictionary pages and writes them as dictionaries (write/column_encoding.py,
    ``stored_dictionaries``): new values, nulls and a column the stored file lacks (added by
    the upsert) included. Every file keeps one dictionary per column chunk (no value written
    plain), and every reader sees strings with the model's values."""
    colors = ["red", "green", "blue"]

    def colored(ids: list[int], n: int, with_tag: bool) -> pa.Table:
        table = rows(ids, n).set_column(4, "extra", pa.array([colors[i % 3] if i % 7 else None for i in ids]))
        return table.append_column("tag", pa.array([f"t{(i + n) % 4}" for i in ids])) if with_tag else table

    steps = [("bulk_insert", colored(list(range(4000)), 1, False)),
             ("upsert", colored(list(range(0, 4000, 3)) + list(range(9000, 9040)), 2, True)),
             ("upsert", colored(list(range(1, 4000, 5)), 3, True))]
    asked: list[dict[str, pa.DataType]] = []  # the types each rewrite reads the stored columns as
    real_iter = file_group.iter_data_file

    def iter_spy(*args: Any, **kwargs: Any) -> Any:
        asked.append({f.name: f.type for f in kwargs["schema"]})
        return real_iter(*args, **kwargs)

    monkeypatch.setattr(file_group, "iter_data_file", iter_spy)
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 2 * PARTS and stats["merged"] == stats["per_group"]
    assert len(asked) == 4 * PARTS  # two rewrites of every file group, on each table
    assert all(pa.types.is_dictionary(types["extra"]) and types["id"] == pa.int64() for types in asked)
    # "tag": the first upsert's stored files lack it (nulls, as strings), the second's store it.
    assert [pa.types.is_dictionary(types["tag"]) for types in asked] == [False] * PARTS + [True] * PARTS + \
        [False] * PARTS + [True] * PARTS
    model: dict[int, tuple[Any, Any]] = {}
    for _, batch in steps:
        tags = batch.column("tag").to_pylist() if "tag" in batch.column_names else [None] * batch.num_rows
        for i, extra, tag in zip(batch.column("id").to_pylist(), batch.column("extra").to_pylist(), tags, strict=True):
            model[i] = (extra, tag)
    for name in ("merged", "per_group"):
        for partition in {os.path.basename(os.path.dirname(f)) for f in glob.glob(str(paths[name] / "part=*" / "*"))}:
            latest = max(glob.glob(str(paths[name] / partition / "*.parquet")), key=lambda p: p.rsplit("_", 1)[1])
            meta = pq.read_metadata(latest)
            group = meta.row_group(0)
            for column in ("extra", "tag"):
                chunk = group.column(meta.schema.to_arrow_schema().get_field_index(column))
                assert chunk.total_uncompressed_size < meta.num_rows, (latest, column)  # indices, not strings
            assert pq.read_schema(latest).field("extra").type == pa.string()
        for table in (tidemark.Table.open(str(paths[name]), spark=None).read(), hudi_rs_read(str(paths[name]))):
            assert table.schema.field("extra").type == pa.string() and table.schema.field("tag").type == pa.string()
            got = {i: (e, t) for i, e, t in zip(table.column("id").to_pylist(), table.column("extra").to_pylist(),
                                                 table.column("tag").to_pylist(), strict=True)}
            assert got == model


def test_a_column_the_stored_file_keeps_plain_is_read_as_strings_though_the_write_picks_a_dictionary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write picks a dictionary for a column whose batch repeats a value; a stored file that
    keeps the column plain (its values distinct) is read as strings, not hashed into a
    dictionary of every stored value (which the new file would then carry, values of replaced
    rows included): the column is written as the writer encodes any strings."""
    seed = list(range(4000))
    distinct = rows(seed, 1).set_column(4, "extra", pa.array([f"distinct-{i:06d}-" + "x" * 40 for i in seed]))
    repeated = rows(list(range(0, 4000, 3)), 2, extra="same")
    asked: list[pa.DataType] = []
    real_iter = file_group.iter_data_file

    def iter_spy(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs["schema"].field("extra").type)
        return real_iter(*args, **kwargs)

    monkeypatch.setattr(file_group, "iter_data_file", iter_spy)
    steps = [("bulk_insert", distinct), ("upsert", repeated),
             ("upsert", rows(list(range(0, 4000, 5)), 3, extra="other"))]
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert calls["merged"] == 2 * PARTS and stats["merged"] == stats["per_group"]
    # The first upsert's stored files keep "extra" plain; the second's, rewritten by the first, as a dictionary.
    assert [pa.types.is_dictionary(t) for t in asked] == ([False] * PARTS + [True] * PARTS) * 2
    model = {i: f"distinct-{i:06d}-" + "x" * 40 for i in seed}
    model.update({i: "same" for i in range(0, 4000, 3)})
    model.update({i: "other" for i in range(0, 4000, 5)})
    for name in ("merged", "per_group"):
        for table in (tidemark.Table.open(str(paths[name]), spark=None).read(), hudi_rs_read(str(paths[name]))):
            assert dict(zip(table.column("id").to_pylist(), table.column("extra").to_pylist(), strict=True)) == model


def _dictionary_values(file: str, column: str) -> set[Any]:
    """The values of ``column``'s dictionary pages in ``file``: what the file holds, whether or
    not a row uses it."""
    read = pq.ParquetFile(file, read_dictionary=[column]).read(columns=[column]).column(0)
    return {v for chunk in read.chunks for v in chunk.dictionary.to_pylist()}


def test_a_value_no_row_holds_leaves_the_rewritten_file_and_dictionaries_do_not_grow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite carries the stored file's dictionary pages; a value whose rows were replaced or
    deleted must not stay in the new file's pages (a deleted value leaves the table's latest
    files), and a column whose values change with every write must not pile them up. Nor do
    the commit times of replaced rows stay in the commit-time column's dictionary."""
    ids = list(range(2000))
    secret = 13  # p5's row with a value that must go: updated away, its neighbour deleted
    base = rows(ids, 1).set_column(4, "extra", pa.array(["SECRET-123" if i == secret else ["a", "b"][i % 2]
                                                         for i in ids]))
    steps: list[tuple[str, pa.Table]] = [("bulk_insert", base), ("upsert", rows([secret], 2, extra="a")),
                                         ("delete", keys([21], None))]
    for write in range(8):  # every row of every partition gets write n's tag, write after write
        steps.append(("upsert", rows(ids, 3 + write, extra=f"tag-{write}")))
    steps.append(("upsert", rows([i for i in ids if i % 3 == 0], 20, extra=None)))
    steps.append(("delete", keys([i for i in ids if i % 8 == 5 and i % 3 != 0], None)))  # p5: only nulls left
    paths, stats, calls = write_both_ways(tmp_path, monkeypatch, {}, steps, ordering_field="n")
    assert stats["merged"] == stats["per_group"] and calls["merged"] >= 9 * PARTS
    for name in ("merged", "per_group"):
        table = tidemark.Table.open(str(paths[name]), spark=None).read()
        assert table.num_rows == 2000 - len([i for i in ids if i % 8 == 5 and i % 3 != 0])  # 21 came back
        for partition in sorted({os.path.basename(os.path.dirname(f))
                                 for f in glob.glob(str(paths[name] / "part=*" / "*.parquet"))}):
            latest = max(glob.glob(str(paths[name] / partition / "*.parquet")), key=lambda p: p.rsplit("_", 1)[1])
            held = pq.read_table(latest, columns=["extra", "_hoodie_commit_time"])
            live = {v for v in held.column("extra").to_pylist() if v is not None}
            assert _dictionary_values(latest, "extra") == live, (name, partition)
            assert _dictionary_values(latest, "_hoodie_commit_time") == set(held.column(1).to_pylist())
            with open(latest, "rb") as data:
                assert b"SECRET" not in data.read()
            if partition == "part=p5":
                assert live == set() and held.column("extra").null_count == held.num_rows


def test_a_stored_key_range_is_carried_only_when_both_orders_agree_on_it(tmp_path: Path) -> None:
    """A Java writer orders keys by UTF-16 code units, tidemark by code points; the two agree on
    ASCII keys, so only an ASCII range is carried (else the rewrite finds the range itself)."""
    from tidemark.write.footer import stored_key_range

    def footer(**kv: str) -> pq.FileMetaData:
        path = tmp_path / f"f{len(list(tmp_path.iterdir()))}.parquet"
        table = pa.table({"k": ["a"]}).replace_schema_metadata(kv or None)
        pq.write_table(table, path)
        return pq.read_metadata(path)

    assert stored_key_range(footer(hoodie_min_record_key="k001", hoodie_max_record_key="k999")) == ("k001", "k999")
    assert stored_key_range(footer(hoodie_min_record_key="k001")) is None
    assert stored_key_range(footer()) is None
    assert stored_key_range(footer(hoodie_min_record_key="a", hoodie_max_record_key="\U0001f680")) is None
    assert stored_key_range(footer(hoodie_min_record_key="\ue000", hoodie_max_record_key="z")) is None


def test_touched_rows_are_cast_as_table_cast_casts_them_only_where_a_type_differs() -> None:
    plain = pa.schema([("k", pa.string()), ("n", pa.int64()), ("c", pa.string())], metadata={b"m": b"1"})
    rows = pa.table({"k": ["a", "b", None], "n": pa.array([1, None, 3], pa.int32()),
                     "c": pa.array(["x", None, "x"]).dictionary_encode()})
    cast = file_group.as_schema(rows, plain)
    assert cast.equals(rows.cast(plain), check_metadata=True)
    # A column of the right type is the same memory, not a copy.
    assert cast.column("k").chunk(0).buffers()[2].address == rows.column("k").chunk(0).buffers()[2].address
    with pytest.raises(ValueError):
        file_group.as_schema(rows.drop_columns(["c"]), plain)
    with pytest.raises(ValueError):  # other names, as Table.cast refuses them
        file_group.as_schema(rows.rename_columns(["k", "m", "c"]), plain)
    strict = plain.set(1, plain.field("n").with_nullable(False))
    with pytest.raises(ValueError):  # a null where the field allows none
        file_group.as_schema(rows, strict)


@pytest.mark.parametrize("dictionary", [True, False])
def test_a_file_groups_known_partition_path_is_every_new_rows(dictionary: bool) -> None:
    from tidemark.write.meta_columns import stored_schema, with_meta_columns

    schema = pa.schema([("_hoodie_commit_time", pa.string()), ("_hoodie_commit_seqno", pa.string()),
                        ("_hoodie_record_key", pa.string()), ("_hoodie_partition_path", pa.string()),
                        ("_hoodie_file_name", pa.string()), ("v", pa.int64())])
    schema = stored_schema(schema) if dictionary else schema
    rows = pa.table({"_hoodie_record_key": ["k1", "k2", "k3"], "_hoodie_partition_path": ["p=ü/x"] * 3,
                     "v": [1, 2, 3]})
    known = with_meta_columns(rows, schema, "20261129000000000", "f.parquet", "20261129000000000_0", 0, "p=ü/x")
    looked_at = with_meta_columns(rows, schema, "20261129000000000", "f.parquet", "20261129000000000_0", 0)
    assert known.equals(looked_at)
    assert known.schema == schema
    assert known.column("_hoodie_partition_path").cast(pa.string()).to_pylist() == ["p=ü/x"] * 3
