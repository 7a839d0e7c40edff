"""A Spark upsert's batch dedup done in the write tasks (engines/spark/dedup.py): repeated keys,
merged in arrival order, give the table the Arrow engine and a model give."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table
from tidemark.engines.spark.dedup import SEQ_COLUMN, batch_dedup, dedup_in_arrival_order
from tidemark.format.commit_metadata import CommitMetadata
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.merge import EventTimeMerger, MergeConfig, dedup_records
from tidemark.write.bucket import BucketSpec
from tidemark.write.engine import TableLayout
from tidemark.write.operation import WriteOperation

SCHEMA = "id string, city string, ts long, a string, b long"
COLS = ["id", "city", "ts", "a", "b"]
CITIES = ("sf", "la", "ny")

Row = tuple[str, str, Any, Any, Any]

BASE: list[Row] = [(f"k{i:03d}", CITIES[i % 3], 10, f"base{i}", i) for i in range(30)]

# Each key's rows in arrival order (the batch interleaves the keys, below).
REPEATED: list[list[Row]] = [
    # existing keys
    [("k000", "sf", 5, "stale", 1), ("k000", "sf", 20, "x1", 2), ("k000", "sf", 20, "x2", 3),
     ("k000", "sf", None, "n", 4)],  # the ts tie goes to the later row; a null ts loses
    [("k001", "la", None, "n1", 5), ("k001", "la", None, "n2", None)],  # nulls only: the stored ts=10 wins
    [("k002", "ny", 12, "a", 6), ("k002", "ny", 11, "b", 7)],
    [("k003", "sf", 10, "tie-with-stored", 8)],  # a tie with the stored record: the batch wins
    [("k004", "la", 9, "stale", 9)],  # older than the stored record: kept as stored
    [("k005", "ny", 30, "y1", 10), ("k005", "ny", 30, "y2", None)],
    # new keys (k005 in sf is a new record: keys are per partition path)
    [("k005", "sf", 1, "other-partition", 11), ("k005", "sf", 1, "other-partition-2", 12)],
    [("k100", "sf", 1, "p", 13), ("k100", "sf", 3, "q", 14), ("k100", "sf", 2, "r", 15)],
    [("k101", "la", None, "m1", 16), ("k101", "la", 4, "m2", 17), ("k101", "la", None, "m3", 18)],
    [("k102", "ny", 7, "t1", 19), ("k102", "ny", 7, "t2", None), ("k102", "ny", 7, "t3", 20)],
    [("k103", "la", None, "u1", 21), ("k103", "la", None, "u2", 22)],
    [("k104", "ny", 1, "single", 23)],
]


def interleaved(groups: Sequence[Sequence[Row]]) -> list[Row]:
    """Round robin over the groups: a key's rows arrive far apart (in different input partitions)."""
    out: list[Row] = []
    for i in range(max(len(g) for g in groups)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


BATCH = interleaved(REPEATED)
EVENT_TIME = MergeConfig.build(mode=None, ordering_fields=("ts",))


def _rank(ts: Any) -> tuple[int, int]:
    return (0, 0) if ts is None else (1, ts)  # a null is below every value


def event_time_model(base: Sequence[Row], batch: Sequence[Row]) -> tuple[dict[tuple[str, str], Row], int, int]:
    """The table after upserting ``batch`` into ``base`` with event-time ordering on ts: a left
    fold in arrival order, ties to the later write; and the inserts and updates it counts."""
    merged: dict[tuple[str, str], Row] = {}
    for row in batch:
        key = (row[1], row[0])
        old = merged.get(key)
        if old is None or _rank(row[2]) >= _rank(old[2]):
            merged[key] = row
    table = {(r[1], r[0]): r for r in base}
    inserts = updates = 0
    for key, row in merged.items():
        stored = table.get(key)
        if stored is None:
            inserts += 1
            table[key] = row
        elif _rank(row[2]) >= _rank(stored[2]):
            updates += 1
            table[key] = row
    return table, inserts, updates


def _arrow(rows: Sequence[Row]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(COLS, r, strict=True)) for r in rows],
                                schema=pa.schema([("id", pa.string()), ("city", pa.string()), ("ts", pa.int64()),
                                                  ("a", pa.string()), ("b", pa.int64())]))


def _stats_by_partition(path: Path, instant: str) -> dict[str, tuple[int, int, int, int]]:
    """The commit's counts summed per partition path (file ids and sizes differ between tables)."""
    done = next(p for p in (path / ".hoodie/timeline").iterdir() if p.name.startswith(f"{instant}_"))
    sums: dict[str, tuple[int, int, int, int]] = {}
    for s in CommitMetadata.from_bytes(done.read_bytes()).write_stats:
        w, i, u, d = sums.get(s.partition_path, (0, 0, 0, 0))
        sums[s.partition_path] = (w + s.num_writes, i + s.num_inserts, u + s.num_updates, d + s.num_deletes)
    return sums


def _written_in(table: Table, first: str, second: str) -> list[tuple[str, str, int]]:
    """(city, id, 1 or 2): which of the two commits each row was last written by."""
    data = table.read()
    rows = data.collect() if not isinstance(data, pa.Table) else data.to_pylist()
    return sorted((r["city"], r["id"], {first: 1, second: 2}[r["_hoodie_commit_time"]]) for r in rows)


CASES = {
    "event-time": ({}, "COPY_ON_WRITE"),
    "partial-update": ({"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, "COPY_ON_WRITE"),
    "merge-on-read": ({}, "MERGE_ON_READ"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_repeated_keys_in_a_spark_upsert_give_the_arrow_engines_table(spark: Any, tmp_path: Path, case: str) -> None:
    options, table_type = CASES[case]
    results: dict[str, Any] = {}
    for engine in ("spark", "arrow"):
        path = tmp_path / engine
        table = Table.create(str(path), spark=spark if engine == "spark" else None, record_key="id",
                             partition_by="city", ordering_field="ts", table_type=table_type, options=options or None)
        if engine == "spark":
            first = table.upsert(spark.createDataFrame(BASE, SCHEMA))
            # Four input partitions: a key's rows arrive in different ones, the order spans them.
            frame = spark.createDataFrame(spark.sparkContext.parallelize(BATCH, 4), SCHEMA)
            second = table.upsert(frame)
        else:
            first = table.upsert(_arrow(BASE))
            second = table.upsert(_arrow(BATCH))
        results[engine] = {
            "rows": rows_of(table.read(), COLS),
            "hudi-rs": rows_of(hudi_rs_read(str(path)), COLS),
            "counts": (second.num_inserts, second.num_updates, second.num_deletes),
            "stats": _stats_by_partition(path, second.instant_time),
            "written in": _written_in(table, first.instant_time, second.instant_time),
        }
    assert results["spark"] == results["arrow"]
    spark_result = results["spark"]
    assert spark_result["hudi-rs"] == spark_result["rows"]
    if case != "partial-update":
        model, inserts, updates = event_time_model(BASE, BATCH)
        assert spark_result["rows"] == sorted(model.values())
        stored = {(r[1], r[0]) for r in BASE}
        if table_type == "MERGE_ON_READ":  # the log holds one record per existing key, stale or not
            updates = len({(r[1], r[0]) for r in BATCH} & stored)
        assert spark_result["counts"] == (inserts, updates, 0)
        if table_type == "COPY_ON_WRITE":  # a stale record keeps its stored row, commit time included
            assert spark_result["written in"] == sorted(
                (c, k, 1 if (c, k) in stored and model[(c, k)] in BASE else 2) for (c, k) in model)
    else:  # partial update: k101's winner (ts 4, m2) keeps it; k000's winner x2 (ts 20) has b=3
        found = {(r[1], r[0]): r for r in spark_result["rows"]}
        assert found[("la", "k101")] == ("k101", "la", 4, "m2", 17)
        assert found[("ny", "k005")] == ("k005", "ny", 30, "y2", 10)  # y2's null b keeps y1's


def test_the_dedup_is_left_to_the_write_tasks_only_for_a_simple_index_upsert(spark: Any) -> None:
    df = spark.createDataFrame(BATCH, SCHEMA).selectExpr("*", f"id AS {RECORD_KEY}", f"city AS {PARTITION_PATH}")
    user = _arrow(BASE).schema
    simple = TableLayout(("id",), ("city",), ("ts",), hive_style=False)
    bucketed = TableLayout(("id",), ("city",), ("ts",), hive_style=False,
                           bucket=BucketSpec(num_buckets=2, hash_fields=("id",), record_key_fields=("id",)))
    upsert = batch_dedup(df, simple, user, WriteOperation.UPSERT)
    assert upsert.columns == [*df.columns, SEQ_COLUMN]
    assert "Aggregate" not in upsert._jdf.queryExecution().optimizedPlan().toString()
    for layout, operation in ((simple, WriteOperation.INSERT), (bucketed, WriteOperation.UPSERT)):
        assert batch_dedup(df, layout, user, operation).columns == df.columns  # deduplicated by Spark


def test_dedup_in_arrival_order_folds_repeated_keys_by_their_sequence() -> None:
    rows = _arrow(BATCH).append_column(RECORD_KEY, _arrow(BATCH).column("id"))
    # The rows reach the task out of order: their sequence numbers put them back.
    order = list(range(rows.num_rows))[::-1]
    shuffled = rows.take(order).append_column(SEQ_COLUMN, pa.array([10 * i for i in order], pa.int64()))
    per_partition = {}
    for city in CITIES:
        mine = shuffled.filter(pc.equal(shuffled.column("city"), city))
        per_partition[city] = dedup_in_arrival_order(mine, EVENT_TIME, ("ts",), mine.schema)
        assert SEQ_COLUMN not in per_partition[city].column_names
    model, _, _ = event_time_model([], BATCH)
    assert sorted(r for t in per_partition.values() for r in rows_of(t, COLS)) == sorted(model.values())


def test_dedup_in_arrival_order_returns_rows_without_repeats_as_they_are() -> None:
    unique = _arrow(BASE).append_column(RECORD_KEY, _arrow(BASE).column("id"))
    numbered = unique.append_column(SEQ_COLUMN, pa.array(range(unique.num_rows)[::-1], pa.int64()))
    # no key repeats: the rows as they came, in their order
    assert dedup_in_arrival_order(numbered, EVENT_TIME, ("ts",), numbered.schema).equals(unique)


def test_dedup_in_arrival_order_merges_nested_columns() -> None:
    rows = pa.table({
        RECORD_KEY: ["a", "b", "a", "a"],
        "ts": pa.array([1, 1, None, 1], pa.int64()),
        "s": [{"x": 1, "y": [1]}, {"x": 2, "y": []}, {"x": 3, "y": None}, {"x": 4, "y": [4, 4]}],
        "l": [[1], [2], [3], None],
        "m": pa.array([[("k", 1)], [("k", 2)], [("k", 3)], [("k", 4)]], pa.map_(pa.string(), pa.int64())),
        SEQ_COLUMN: pa.array([0, 5, 7, 9], pa.int64()),
    })
    got = dedup_in_arrival_order(rows, EVENT_TIME, ("ts",), rows.schema).to_pylist()
    # "a": the ts=1 tie goes to the last row (seq 9); the null ts (seq 7) loses
    assert sorted(got, key=lambda r: r[RECORD_KEY]) == [
        {RECORD_KEY: "a", "ts": 1, "s": {"x": 4, "y": [4, 4]}, "l": None, "m": [("k", 4)]},
        {RECORD_KEY: "b", "ts": 1, "s": {"x": 2, "y": []}, "l": [2], "m": [("k", 2)]},
    ]


def _numbered(keys: Sequence[str], ts: Sequence[Any], seq: Sequence[int]) -> pa.Table:
    return pa.table({RECORD_KEY: pa.array(keys, pa.string()), "ts": pa.array(ts, pa.int64()),
                     "v": pa.array(range(len(keys)), pa.int64()), SEQ_COLUMN: pa.array(seq, pa.int64())})


def test_the_greatest_ordering_value_per_key_is_the_mergers_fold_in_arrival_order() -> None:
    import random

    rnd = random.Random(18)
    n = 3000
    keys = [f"k{rnd.randrange(400)}" for _ in range(n)]
    ts = [None if rnd.random() < 0.2 else rnd.randrange(5) for _ in range(n)]  # many ties and nulls
    seq = rnd.sample(range(10 * n), n)  # arrival order, not the rows' order
    rows = _numbered(keys, ts, seq)
    picked = dedup_in_arrival_order(rows, EVENT_TIME, ("ts",), rows.schema)
    folded = dedup_records(EventTimeMerger(("ts",)), rows.take(pc.sort_indices(rows.column(SEQ_COLUMN))),
                           keys=[RECORD_KEY]).drop_columns([SEQ_COLUMN])
    assert picked.num_rows == len(set(keys))
    assert rows_of(picked, [RECORD_KEY, "ts", "v"]) == rows_of(folded, [RECORD_KEY, "ts", "v"])


def test_a_key_repeated_many_times_is_one_sort_not_a_fold_per_repeat() -> None:
    n = 50_000  # a fold per repeat took ~2 s per thousand repeats
    rows = _numbered(["hot"] * n, [i % 7 for i in range(n)], range(n))
    picked = dedup_in_arrival_order(rows, EVENT_TIME, ("ts",), rows.schema)
    assert picked.to_pylist() == [{RECORD_KEY: "hot", "ts": 6, "v": n - 1 - (n - 1 - 6) % 7}]


def test_commit_time_ordering_with_an_ordering_field_keeps_the_greatest_value_as_the_spark_dedup_did() -> None:
    commit_time = MergeConfig.build(mode="COMMIT_TIME_ORDERING", ordering_fields=("ts",))
    rows = _numbered(["a", "a", "a", "b", "b"], [3, 1, None, None, None], [0, 1, 2, 3, 4])
    picked = dedup_in_arrival_order(rows, commit_time, ("ts",), rows.schema)
    assert rows_of(picked, [RECORD_KEY, "ts", "v"]) == [("a", 3, 0), ("b", None, 4)]
    last = dedup_in_arrival_order(rows, MergeConfig.build(mode="COMMIT_TIME_ORDERING"), (), rows.schema)
    assert rows_of(last, [RECORD_KEY, "ts", "v"]) == [("a", None, 2), ("b", None, 4)]
