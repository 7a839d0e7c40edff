"""Merge-on-read reads and compaction fold file slices with the table's record merger.

Copy-on-write already merges with the merger at write time, so it is the reference:
the same writes on a MERGE_ON_READ table (simple and bucket index) must read back
the same records, with ``_hoodie_commit_time`` naming the same write, before and
after compaction. Arrow engine throughout, except one Spark scenario (the merger is
shipped to tasks); hudi-rs must agree on event-time tables with deletes.

Known differences, pinned here: a delete that wins on merge-on-read keeps its
ordering value until compaction (a later upsert ranked below it stays deleted, as
in Hudi), while copy-on-write forgets the key; and hudi-rs compares a delete
without ordering value with the slice's greatest record instead of folding in
commit order. The random sequences below avoid both.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import hudi_rs_read
from tidemark import Table
from tidemark.format.log_file import BlockType, decode_delete_records, read_log_file
from tidemark.format.names import COMMIT_TIME

Row = dict[str, Any]
SCHEMA = pa.schema([("id", pa.int64()), ("t1", pa.int64()), ("t2", pa.int64()), ("a", pa.string()), ("b", pa.int64())])
COLS = SCHEMA.names
LONG = pa.int64()
BUCKET = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
PARTIAL = {"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}

# name: (options, ordering fields)
MODES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "commit_time": ({}, ()),
    "event_time": ({}, ("t1",)),
    "event_time_two_fields": ({}, ("t1", "t2")),
    "partial_update_event_time": (PARTIAL, ("t1",)),
    "partial_update_commit_time": (PARTIAL, ()),
}

GROUPS = {"A": ("ta", ("a1", "a2")), "B": ("tb", ("b1",))}
JOIN_SCHEMA = pa.schema(
    [("id", pa.int64())]
    + [f for o, cols in GROUPS.values() for f in [(o, pa.int64())] + [(c, pa.string()) for c in cols]]
)
JOIN_COLS = JOIN_SCHEMA.names
JOIN_OPTIONS = {
    "hoodie.record.merge.column.groups": ";".join(f"{o}:{','.join(c)}" for o, c in GROUPS.values()),
    "hoodie.write.set.null.for.missing.columns": "true",
}


def _select(schema: pa.Schema, names: list[str]) -> pa.Schema:
    return pa.schema([schema.field(n) for n in names])


class Twins:
    """A copy-on-write and a merge-on-read table with the same settings, written alike."""

    def __init__(self, root: Path, schema: pa.Schema, ordering: tuple[str, ...], options: dict[str, str],
                 *, bucket: bool) -> None:
        opts = {**options, **(BUCKET if bucket else {})}
        self.schema = schema
        self.tables = {
            kind: Table.create(str(root / kind), spark=None, record_key="id", ordering_field=list(ordering) or None,
                               table_type=kind, options=opts, schema=schema)
            for kind in ("COPY_ON_WRITE", "MERGE_ON_READ")
        }
        self.writes: dict[str, dict[str, int]] = {kind: {} for kind in self.tables}  # commit time -> write number

    @property
    def cow(self) -> Table:
        return self.tables["COPY_ON_WRITE"]

    @property
    def mor(self) -> Table:
        return self.tables["MERGE_ON_READ"]

    def write(self, op: str, rows: list[Row], columns: list[str]) -> None:
        rows = [{c: r.get(c) for c in columns} for r in rows]
        data = pa.Table.from_pylist(rows, schema=_select(self.schema, columns))
        for kind, table in self.tables.items():
            result = table.upsert(data) if op == "U" else table.delete(data)
            self.writes[kind][result.instant_time] = len(self.writes[kind])

    def snapshot(self, kind: str) -> list[tuple[Any, ...]]:
        """User columns and the number of the write that last changed each record."""
        data = self.tables[kind].read()
        names = self.schema.names
        rows = data.select([*names, COMMIT_TIME]).to_pylist() if data.num_rows else []
        return sorted((tuple(r[c] for c in names) + (self.writes[kind][r[COMMIT_TIME]],) for r in rows), key=repr)

    def check(self) -> None:
        assert self.snapshot("MERGE_ON_READ") == self.snapshot("COPY_ON_WRITE")


def random_writes(rng: random.Random, ordering: tuple[str, ...], count: int) -> list[tuple[str, list[Row]]]:
    """Upserts (repeated keys, nulls) and deletes; deletes carry ordering values when the table
    has one ordering field (merge-on-read logs hold one), and a key's later upserts never rank
    below an earlier delete of it (merge-on-read keeps such a delete until compaction)."""
    floor: dict[int, int] = {}
    ordered_deletes = len(ordering) == 1
    writes = []
    for _ in range(count):
        if rng.random() < 0.7:
            rows = []
            for _ in range(rng.randint(1, 6)):
                key = rng.randint(0, 7)
                t1 = None if rng.random() < 0.2 and key not in floor else rng.randint(1, 6)
                if key in floor:
                    t1 = max(t1 or 0, floor[key])
                rows.append({"id": key, "t1": t1, "t2": rng.randint(0, 2),
                             "a": rng.choice(["x", "y", None]), "b": rng.choice([1, 2, 3, None])})
            writes.append(("U", rows))
        else:
            rows = []
            for _ in range(rng.randint(1, 3)):
                key = rng.randint(0, 7)
                row: Row = {"id": key}
                if ordered_deletes and rng.random() < 0.8:
                    row["t1"] = rng.randint(1, 6)
                    floor[key] = max(floor.get(key, 0), row["t1"])
                rows.append(row)
            writes.append(("D", rows))
    return writes


@pytest.mark.parametrize("bucket", [False, True], ids=["simple", "bucket"])
@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("seed", [1, 2])
def test_merge_on_read_reads_what_copy_on_write_stores(tmp_path: Path, mode: str, bucket: bool, seed: int) -> None:
    options, ordering = MODES[mode]
    twins = Twins(tmp_path, SCHEMA, ordering, options, bucket=bucket)
    rng = random.Random(seed)
    for i, (op, rows) in enumerate(random_writes(rng, ordering, 10)):
        columns = COLS if op == "U" else ["id", *(["t1"] if len(ordering) == 1 else [])]
        twins.write(op, rows, columns)
        twins.check()
        if i == 5:
            assert twins.mor.compact() is not None
            twins.check()
    twins.mor.compact()
    twins.check()


def test_partial_update_with_ordering_is_folded_in_commit_order(tmp_path: Path) -> None:
    """Not associative: base A (t1 1, a set), then B (t1 3, a null), then C (t1 2, a set). In commit
    order B wins and keeps A's a, and C loses; merging B with C first would take C's a."""
    twins = Twins(tmp_path, SCHEMA, ("t1",), PARTIAL, bucket=False)
    twins.write("U", [{"id": 1, "t1": 1, "t2": 0, "a": "A", "b": 1}], COLS)
    twins.write("U", [{"id": 1, "t1": 3, "t2": 1, "a": None, "b": 3}], COLS)
    twins.write("U", [{"id": 1, "t1": 2, "t2": 2, "a": "C", "b": None}], COLS)
    twins.check()
    assert twins.snapshot("MERGE_ON_READ") == [(1, 3, 1, "A", 3, 1)]


def column_group_writes(rng: random.Random, count: int) -> list[tuple[str, list[Row]]]:
    """Each write is one stream's: its group's columns only, late events included; a few
    deletes (without ordering values: delete whatever is stored)."""
    writes = []
    for _ in range(count):
        if rng.random() < 0.15:
            writes.append(("D", [{"id": rng.randint(0, 5)}]))
            continue
        stream = rng.choice(sorted(GROUPS))
        ordering, cols = GROUPS[stream]
        rows = []
        for _ in range(rng.randint(1, 4)):
            row: Row = {"id": rng.randint(0, 5), ordering: rng.randint(1, 4)}
            row.update({c: rng.choice(["p", "q", None]) for c in cols})
            rows.append(row)
        writes.append((stream, rows))
    return writes


@pytest.mark.parametrize("bucket", [False, True], ids=["simple", "bucket"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_column_group_merge_on_read_reads_what_copy_on_write_stores(tmp_path: Path, bucket: bool, seed: int) -> None:
    twins = Twins(tmp_path, JOIN_SCHEMA, (), JOIN_OPTIONS, bucket=bucket)
    for i, (stream, rows) in enumerate(column_group_writes(random.Random(seed), 10)):
        if stream == "D":
            twins.write("D", rows, ["id"])
        else:
            ordering, cols = GROUPS[stream]
            twins.write("U", rows, ["id", ordering, *cols])
        twins.check()
        if i == 4:
            twins.mor.compact()
            twins.check()


# -- deletes carry ordering values -------------------------------------------------------------


def mor_table(path: Path, ordering_type: pa.DataType = LONG, **options: str) -> Table:
    schema = pa.schema([("id", pa.int64()), ("ts", ordering_type), ("v", pa.string())])
    return Table.create(str(path), spark=None, record_key="id", ordering_field="ts", table_type="MERGE_ON_READ",
                        schema=schema, options=options or None)


def upserts(rows: list[tuple[int, Any, str]], ordering_type: pa.DataType = LONG) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "ts": pa.array([r[1] for r in rows], ordering_type), "v": [r[2] for r in rows]})


def deletes(rows: list[tuple[int, Any]], ordering_type: pa.DataType = LONG) -> pa.Table:
    return pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                     "ts": pa.array([r[1] for r in rows], ordering_type)})


def records(table: Any) -> list[tuple[Any, ...]]:
    if table.num_rows == 0:
        return []
    return sorted(tuple(r.values()) for r in table.select(["id", "v"]).to_pylist())


def delete_ordering_values(path: Path) -> list[Any]:
    found = []
    for log in sorted(path.rglob(".*.log.*")):
        for block in read_log_file(str(log)):
            if block.block_type == BlockType.DELETE:
                found += [(d.record_key, d.ordering_value) for d in decode_delete_records(block.content)]
    return sorted(found)


@pytest.mark.parametrize("ordering_type", [pa.int64(), pa.int32()], ids=["long", "int"])
def test_a_stale_delete_does_not_remove_a_newer_record(tmp_path: Path, ordering_type: pa.DataType) -> None:
    t = mor_table(tmp_path / "t", ordering_type)
    t.upsert(upserts([(1, 5, "a"), (2, 5, "b"), (3, 5, "c")], ordering_type))
    t.upsert(upserts([(1, 8, "a8")], ordering_type))
    t.delete(deletes([(1, 6), (2, 3), (3, 7)], ordering_type))  # 1 and 2: stale; 3: newer
    assert delete_ordering_values(tmp_path / "t") == [("1", 6), ("2", 3), ("3", 7)]
    expected = [(1, "a8"), (2, "b")]
    assert records(t.read()) == expected == records(hudi_rs_read(t.path))
    assert t.compact() is not None
    assert records(t.read()) == expected == records(hudi_rs_read(t.path))
    t.delete(deletes([(1, 7), (2, 4)], ordering_type))  # stale against the compacted base too
    t.delete(deletes([(2, 5)], ordering_type))  # a tie: the later write wins
    assert records(t.read()) == [(1, "a8")] == records(hudi_rs_read(t.path))
    assert t.compact() is not None
    assert records(t.read(query_type="read_optimized")) == [(1, "a8")]


def test_a_delete_without_ordering_value_deletes_whatever_is_stored(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(upserts([(1, 5, "a"), (2, 5, "b"), (3, 5, "c")]))
    t.delete(pa.table({"id": pa.array([1], pa.int64())}))  # no ordering column: 0 in the log
    t.delete(deletes([(2, None), (3, 0)]))  # null, and 0: Hudi's "no ordering value"
    assert delete_ordering_values(tmp_path / "t") == [("1", 0), ("2", 0), ("3", 0)]
    assert records(t.read()) == [] == records(hudi_rs_read(t.path))


def test_deletes_of_a_string_ordering_field_carry_no_ordering_value(tmp_path: Path) -> None:
    """The log's delete records hold an integer: other ordering types delete whatever is stored."""
    t = mor_table(tmp_path / "t", pa.string())
    t.upsert(upserts([(1, "5", "a")], pa.string()))
    t.delete(deletes([(1, "3")], pa.string()))
    assert delete_ordering_values(tmp_path / "t") == [("1", 0)]
    assert records(t.read()) == [] == records(hudi_rs_read(t.path))


def test_an_upsert_ranked_below_a_newer_delete_stays_deleted_until_compaction(tmp_path: Path) -> None:
    """The delete record keeps its ordering value in the slice (Hudi's merge-on-read reads the same)."""
    t = mor_table(tmp_path / "t")
    t.upsert(upserts([(1, 5, "a"), (2, 5, "b")]))
    t.delete(deletes([(1, 7), (2, 7)]))
    t.upsert(upserts([(1, 6, "late"), (2, 8, "newer")]))
    assert records(t.read()) == [(2, "newer")] == records(hudi_rs_read(t.path))
    assert t.compact() is not None
    assert records(t.read()) == [(2, "newer")]
    t.upsert(upserts([(1, 6, "late")]))  # compaction left no delete behind: a fresh insert
    assert records(t.read()) == [(1, "late"), (2, "newer")]


def test_hudi_rs_reads_an_event_time_table_with_deletes_like_us(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t")
    t.upsert(upserts([(i, 5, f"v{i}") for i in range(1, 9)]))
    t.upsert(upserts([(1, 9, "v1-9"), (2, 4, "v2-stale"), (3, 5, "v3-tie")]))
    t.delete(deletes([(1, 8), (4, 6), (5, 5), (6, 2)]))  # stale, newer, tie, stale
    t.delete(pa.table({"id": pa.array([7], pa.int64())}))  # no ordering value
    t.upsert(upserts([(4, 9, "v4-again"), (7, 6, "v7-again"), (8, 6, "v8-6")]))
    t.delete(deletes([(8, 5)]))  # stale against the log's record
    expected = [(1, "v1-9"), (2, "v2"), (3, "v3-tie"), (4, "v4-again"), (6, "v6"), (7, "v7-again"), (8, "v8-6")]
    ours = t.read()
    assert records(ours) == expected == records(hudi_rs_read(t.path))
    with_times = ["id", "_hoodie_commit_time"]
    assert sorted(ours.select(with_times).to_pylist(), key=repr) == sorted(
        hudi_rs_read(t.path).select(with_times).to_pylist(), key=repr)
    assert t.compact() is not None
    assert records(t.read()) == expected == records(hudi_rs_read(t.path))


# -- the multi-stream join on merge-on-read --------------------------------------------------------


def join_model(writes: list[tuple[str, list[Row]]]) -> list[tuple[Any, ...]]:
    """Per key and group: the values with the greatest (ordering value, values), nulls lowest."""
    best: dict[tuple[int, str], tuple[Any, ...]] = {}
    keys: set[int] = set()

    def rank(values: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
        return tuple((v is not None, v if v is not None else "") for v in values)

    for stream, rows in writes:
        ordering, cols = GROUPS[stream]
        for row in rows:
            keys.add(row["id"])
            values = (row[ordering], *[row.get(c) for c in cols])
            current = best.get((row["id"], stream))
            if current is None or rank(values) > rank(current):
                best[(row["id"], stream)] = values
    out = []
    for key in keys:
        record: dict[str, Any] = {"id": key}
        for stream, (ordering, cols) in GROUPS.items():
            record.update(dict(zip((ordering, *cols), best.get((key, stream), (None,) * (1 + len(cols))), strict=True)))
        out.append(tuple(record[c] for c in JOIN_COLS))
    return sorted(out, key=repr)


def join_rows(table: Table) -> list[tuple[Any, ...]]:
    data = table.read()
    return sorted((tuple(r[c] for c in JOIN_COLS) for r in data.select(JOIN_COLS).to_pylist()), key=repr)


def join_table(path: Path, *, bucket: bool = False) -> Table:
    return Table.create(str(path), spark=None, record_key="id", table_type="MERGE_ON_READ", schema=JOIN_SCHEMA,
                        options={**JOIN_OPTIONS, **(BUCKET if bucket else {})})


def write_stream(table: Table, stream: str, rows: list[Row]) -> None:
    ordering, cols = GROUPS[stream]
    names = ["id", ordering, *cols]
    table.upsert(pa.Table.from_pylist([{c: r.get(c) for c in names} for r in rows], schema=_select(JOIN_SCHEMA, names)))


def test_two_streams_with_late_events_join_per_group(tmp_path: Path) -> None:
    writes = [
        ("A", [{"id": 1, "ta": 5, "a1": "a@5", "a2": "x"}, {"id": 2, "ta": 1, "a1": "a@1"}]),
        ("B", [{"id": 1, "tb": 9, "b1": "b@9"}]),
        ("A", [{"id": 1, "ta": 3, "a1": "a@3-late", "a2": "late"}, {"id": 2, "ta": 4, "a1": "a@4"}]),
        ("B", [{"id": 1, "tb": 2, "b1": "b@2-late"}, {"id": 2, "tb": 7, "b1": "b@7"}]),
        ("A", [{"id": 1, "ta": 6, "a1": "a@6"}]),  # a2 null: the group's values come together
    ]
    t = join_table(tmp_path / "t")
    for stream, rows in writes:
        write_stream(t, stream, rows)
    expected = [(1, 6, "a@6", None, 9, "b@9"), (2, 4, "a@4", None, 7, "b@7")]
    assert join_rows(t) == expected == join_model(writes)
    times = {r["id"]: r[COMMIT_TIME] for r in t.read().to_pylist()}
    instants = [i.requested_time for i in t.timeline()]
    assert times == {1: instants[4], 2: instants[3]}  # the latest write that changed each record
    assert t.compact() is not None
    assert join_rows(t) == expected
    write_stream(t, "B", [{"id": 2, "tb": 3, "b1": "b@3-late"}])
    assert join_rows(t) == expected


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), bucket=st.booleans(), data=st.data())
def test_column_group_table_reads_the_same_whatever_the_commit_order(
    tmp_path_factory: pytest.TempPathFactory, seed: int, bucket: bool, data: st.DataObject
) -> None:
    rng = random.Random(seed)
    writes = [(s, rows) for s, rows in column_group_writes(rng, 6) if s != "D"]
    order = data.draw(st.permutations(range(len(writes))))
    compact_after = data.draw(st.none() | st.integers(0, max(0, len(writes) - 1)))
    expected = join_model(writes)
    base = tmp_path_factory.mktemp("join")
    for name, sequence in (("in_order", writes), ("permuted", [writes[i] for i in order])):
        t = join_table(base / name, bucket=bucket)
        for i, (stream, rows) in enumerate(sequence):
            write_stream(t, stream, rows)
            if i == compact_after:
                t.compact()
        assert join_rows(t) == expected, name


# -- custom mergers ------------------------------------------------------------------------------

HISTORY = {
    "hoodie.record.merge.mode": "CUSTOM",
    "hoodie.write.record.merge.custom.implementation.classes": "merge_plugins:HistoryMerger",
}
GREATEST = {
    "hoodie.record.merge.mode": "CUSTOM",
    "hoodie.write.record.merge.custom.implementation.classes": "merge_plugins:GreatestValueMerger",
}


def test_a_custom_merger_that_claims_nothing_is_folded_in_commit_order(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("history", pa.string()), ("n", pa.int64())])
    twins = Twins(tmp_path, schema, (), HISTORY, bucket=False)
    twins.write("U", [{"id": 1, "history": "a", "n": 1}, {"id": 2, "history": "p", "n": 1}], schema.names)
    twins.write("U", [{"id": 1, "history": "b", "n": 2}, {"id": 1, "history": "c", "n": 3}], schema.names)
    twins.write("D", [{"id": 2}], ["id"])
    twins.write("U", [{"id": 1, "history": "d", "n": 4}, {"id": 2, "history": "q", "n": 2}], schema.names)
    twins.check()
    assert [r[:3] for r in twins.snapshot("MERGE_ON_READ")] == [(1, "a,b,c,d", 4), (2, "q", 2)]
    assert twins.mor.compact() is not None
    twins.write("U", [{"id": 1, "history": "e", "n": 5}], schema.names)
    twins.check()
    assert [r[:3] for r in twins.snapshot("MERGE_ON_READ")] == [(1, "a,b,c,d,e", 5), (2, "q", 2)]


def test_a_custom_join_merger_on_merge_on_read(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("y", pa.string())])
    twins = Twins(tmp_path, schema, (), GREATEST, bucket=True)
    twins.write("U", [{"id": 1, "x": 5, "y": "a"}, {"id": 2, "x": 1, "y": "z"}], schema.names)
    twins.write("U", [{"id": 1, "x": 2, "y": "c"}, {"id": 3, "x": 7, "y": None}], schema.names)
    twins.write("U", [{"id": 1, "x": 3, "y": "b"}, {"id": 2, "x": 4, "y": "a"}], schema.names)
    twins.check()
    assert [r[:3] for r in twins.snapshot("MERGE_ON_READ")] == [(1, 5, "c"), (2, 4, "z"), (3, 7, None)]
    assert twins.mor.compact() is not None
    twins.check()


# -- Spark: the merger travels to the tasks -----------------------------------------------------------


def test_spark_reads_and_compacts_a_column_group_table_like_arrow(spark: Any, tmp_path: Path) -> None:
    writes = column_group_writes(random.Random(7), 8)
    t = join_table(tmp_path / "t")
    for stream, rows in writes:
        if stream == "D":
            t.delete(pa.Table.from_pylist(rows, schema=_select(JOIN_SCHEMA, ["id"])))
        else:
            write_stream(t, stream, rows)
    expected = join_rows(t)
    on_spark = Table.open(t.path, spark=spark)

    def spark_rows(df: Any) -> list[tuple[Any, ...]]:
        return sorted((tuple(r[c] for c in JOIN_COLS) for r in df.select(*JOIN_COLS).collect()), key=repr)

    assert spark_rows(on_spark.read()) == expected
    assert spark_rows(spark.read.format("tidemark").load(t.path)) == expected
    assert on_spark.compact() is not None
    assert join_rows(Table.open(t.path, spark=None)) == expected
