"""The Arrow engine and the Spark engine run the same plans: same tables, readable by each other."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read, rows_of

COLS = ["id", "city", "ts", "v"]
BATCHES = [
    ("upsert", [(1, "sf", 1, "a"), (2, "nyc", 1, "b"), (2, "nyc", 0, "older"), (3, "la", 1, "c")]),
    ("upsert", [(1, "sf", 2, "a2"), (4, "sf", 1, "d"), (3, "la", 0, "stale")]),
    ("delete", [(2, "nyc")]),
    ("insert_overwrite", [(5, "la", 1, "e")]),
]


def test_public_names_are_exported() -> None:
    for name in ["Table", "CommitResult", "Instant", "TidemarkError", "InvalidInputError", "ConfigError",
                 "TableNotFoundError", "TableExistsError", "WriteConflictError", "LockTimeoutError", "register"]:
        assert hasattr(tidemark, name), name
        assert name in tidemark.__all__


def _apply(table: tidemark.Table, make: Any) -> list[tidemark.CommitResult]:
    results = []
    for op, rows in BATCHES:
        results.append(getattr(table, op)(make(op, rows)))
    return results


def test_both_engines_produce_the_same_table(spark: Any, tmp_path: Path) -> None:
    def spark_batch(op: str, rows: list[tuple[Any, ...]]) -> Any:
        if op == "delete":
            return spark.createDataFrame([r[:2] for r in rows], "id long, city string")
        return spark.createDataFrame(rows, "id long, city string, ts long, v string")

    def arrow_batch(op: str, rows: list[tuple[Any, ...]]) -> pa.Table:
        names = COLS[:2] if op == "delete" else COLS
        return pa.Table.from_pylist([dict(zip(names, r, strict=False)) for r in rows])

    kwargs = {"record_key": "id", "partition_by": "city", "ordering_field": "ts"}
    with_spark = tidemark.Table.create(str(tmp_path / "spark"), spark=spark, **kwargs)
    with_arrow = tidemark.Table.create(str(tmp_path / "arrow"), spark=None, **kwargs)
    spark_results = _apply(with_spark, spark_batch)
    arrow_results = _apply(with_arrow, arrow_batch)
    counts = [(r.operation, r.num_inserts, r.num_updates, r.num_deletes) for r in spark_results]
    assert counts == [(r.operation, r.num_inserts, r.num_updates, r.num_deletes) for r in arrow_results]

    expected = [(1, "sf", 2, "a2"), (4, "sf", 1, "d"), (5, "la", 1, "e")]
    assert rows_of(with_spark.read(), COLS) == expected
    assert rows_of(with_arrow.read(), COLS) == expected
    # each engine reads the other's table, and hudi-rs reads both
    assert rows_of(tidemark.Table.open(with_spark.path, spark=None).read(), COLS) == expected
    assert rows_of(tidemark.Table.open(with_arrow.path, spark=spark).read(), COLS) == expected
    assert rows_of(hudi_rs_read(with_arrow.path), COLS) == expected
    assert with_arrow.schema == with_spark.schema


def test_arrow_engine_rejects_spark_dataframes_clearly(spark: Any, tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id")
    with pytest.raises(tidemark.InvalidInputError, match="pyarrow"):
        table.upsert(spark.createDataFrame([(1,)], "id long"))


def test_arrow_engine_bad_input_changes_nothing(tmp_path: Path) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="city")
    table.upsert(pa.table({"id": [1], "city": ["sf"], "v": ["a"]}))
    before = sorted(p.name for p in Path(table.path).rglob("*"))
    with pytest.raises(tidemark.NullRecordKeyError):
        table.upsert(pa.table({"id": [None, 2], "city": ["sf", "sf"], "v": ["x", "y"]}))
    with pytest.raises(tidemark.SchemaMismatchError):
        table.upsert(pa.table({"id": [3], "city": ["sf"], "v": [1.5]}))
    with pytest.raises(tidemark.MissingColumnError):
        table.upsert(pa.table({"city": ["sf"], "v": ["x"]}))
    assert sorted(p.name for p in Path(table.path).rglob("*")) == before
    assert table.read().to_pylist()[0]["v"] == "a"


KEY_ROWS = [
    (-7, 0, "sf", "ü-ß", None),
    (9_223_372_036_854_775_807, 12, "", "a,b:c", 3),
    (0, -128, None, "", -2_147_483_648),
    (42, 127, "nyc", "x=y/z", 7),
]
KEY_SCHEMA = "big long, small byte, city string, name string, n int"


@pytest.mark.parametrize("encode", [False, True])
@pytest.mark.parametrize(
    ("keys", "partitions", "hive"),
    [
        (["big"], [], False),
        (["big", "small", "name"], ["city"], True),
        (["name"], ["city", "n", "small"], False),
        (["big"], ["name", "city"], True),
    ],
)
def test_arrow_key_columns_equal_sparks_for_the_types_computed_in_tasks(
    spark: Any, keys: list[str], partitions: list[str], hive: bool, encode: bool
) -> None:
    """bulk_insert computes keys in the tasks with Arrow for these types: the text must be Spark's,
    url-encoded partition values (hoodie.datasource.write.partitionpath.urlencode) included."""
    from tidemark.engines.arrow.keys import text_matches_spark, with_key_columns
    from tidemark.engines.spark.keys import partition_path_column, record_key_column

    df = spark.createDataFrame(KEY_ROWS, KEY_SCHEMA)
    assert all(text_matches_spark(f.type) for f in df.toArrow().schema)
    by_spark = df.select(
        record_key_column(keys).alias("k"),
        partition_path_column(partitions, hive_style=hive, url_encode=encode).alias("p"),
    ).toArrow()
    by_arrow = with_key_columns(
        df.toArrow().combine_chunks().to_batches()[0], keys, partitions, hive_style=hive, url_encode=encode
    )
    assert by_arrow.column("_hoodie_record_key").to_pylist() == by_spark.column("k").to_pylist()
    assert by_arrow.column("_hoodie_partition_path").to_pylist() == by_spark.column("p").to_pylist()
    assert not text_matches_spark(pa.float64()) and not text_matches_spark(pa.timestamp("us", "UTC"))


def test_bulk_insert_keys_from_tasks_match_keys_from_spark(spark: Any, tmp_path: Path) -> None:
    """The same rows by bulk_insert (keys computed in tasks) and insert (keys from Spark) get the same
    record keys and partition paths."""
    # (a ',' in a value of a multi-field key is refused: see test_input_safety.py)
    df = spark.createDataFrame(KEY_ROWS, KEY_SCHEMA).filter("city is not null or n < 0")
    df = df.selectExpr("big", "small", "city", "translate(name, ',', ';') as name", "n")
    cols = ["_hoodie_record_key", "_hoodie_partition_path"]
    bulk = tidemark.Table.create(str(tmp_path / "bulk"), spark=spark, record_key=["big", "name"], partition_by="city")
    bulk.bulk_insert(df)
    ins = tidemark.Table.create(str(tmp_path / "ins"), spark=spark, record_key=["big", "name"], partition_by="city")
    ins.insert(df)
    assert sorted(rows_of(bulk.read().toArrow(), cols)) == sorted(rows_of(ins.read().toArrow(), cols))
    assert sorted(rows_of(hudi_rs_read(str(tmp_path / "bulk")), cols)) == sorted(rows_of(ins.read().toArrow(), cols))

    # A double key is refused: Java's text of it (Spark's, Hudi's) is not Arrow's (format/record_key.py).
    dbl = spark.createDataFrame([(1.0e10, "a"), (0.5, "b")], "d double, v string")
    t = tidemark.Table.create(str(tmp_path / "dbl"), spark=spark, record_key="d")
    with pytest.raises(tidemark.errors.InvalidRecordKeyError, match="floating point"):
        t.bulk_insert(dbl)


def test_a_write_leaves_no_cached_blocks_behind(spark: Any, tmp_path: Path) -> None:
    """The tagged batch (and the batch keys of the lookup) are kept only for the write: their
    blocks are released at the end, also when the write fails."""
    import pandas as pd

    jsc = spark.sparkContext._jsc.sc()
    before = jsc.getPersistentRDDs().size()
    t = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts")
    t.insert(spark.createDataFrame([(1, 1, "a"), (2, 1, "b")], "id long, ts long, v string"))
    t.upsert(spark.createDataFrame([(1, 2, "a2"), (3, 1, "c")], "id long, ts long, v string"))
    t.delete(spark.createDataFrame([(2,)], "id long"))
    with pytest.raises(tidemark.NullRecordKeyError):  # found with the tagged batch's count
        t.upsert(spark.createDataFrame(pd.DataFrame({"id": [None, 4.0], "ts": [1, 1], "v": ["x", "y"]}),
                                       "id long, ts long, v string"))
    p = tidemark.Table.create(str(tmp_path / "p"), spark=spark, record_key="id", partition_by="city")
    p.upsert(spark.createDataFrame([(1, "sf", "a")], "id long, city string, v string"))
    p.upsert(spark.createDataFrame([(1, "sf", "b"), (2, "la", "c")], "id long, city string, v string"))
    assert jsc.getPersistentRDDs().size() == before
    assert sorted(rows_of(t.read().toArrow(), ["id", "v"])) == [(1, "a2"), (3, "c")]
    assert sorted(rows_of(p.read().toArrow(), ["id", "v"])) == [(1, "b"), (2, "c")]


def test_inserts_are_routed_the_same_by_expression_and_by_join(spark: Any, monkeypatch: Any) -> None:
    """A few insert buckets are routed by a CASE expression, many by a broadcast join: same result."""
    from tidemark.engines.spark import routing
    from tidemark.engines.spark.writer import SparkWritePipeline
    from tidemark.write.engine import FILE_ID_COLUMN, TableLayout
    from tidemark.write.plan import InsertBucket

    layout = TableLayout(("id",), ("city",), (), False)
    pipeline = SparkWritePipeline(spark, layout, pa.schema([]), parallelism=0)
    rows = [(str(i), ["sf", "la", "nyc"][i % 3], None) for i in range(3000)]
    ddl = f"_hoodie_record_key string, _hoodie_partition_path string, {FILE_ID_COLUMN} string"
    inserts = spark.createDataFrame(rows, ddl)
    buckets = [
        InsertBucket("sf", "f-sf-0", None, 0, 0.0, 0.3),
        InsertBucket("sf", "f-sf-1", "sf/base.parquet", 0, 0.3, 1.0),
        InsertBucket("la", "f-la-0", None, 0, 0.0, 1.0),  # no bucket for nyc: its rows are dropped
    ]

    # The whole tagged batch as route() gets it: 300 existing keys that keep their file ids.
    updates = [(f"u{i}", "nyc", "f-nyc-old") for i in range(300)]
    tagged = spark.createDataFrame(rows + updates, ddl)
    columns = ["_hoodie_record_key", "_hoodie_partition_path", FILE_ID_COLUMN]

    def routed() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str, str]]]:
        out = routing.route_inserts(spark, inserts, buckets)
        both = pipeline.route(tagged, buckets)
        return (sorted((r[0], r[1], r[2]) for r in out.select(*columns).collect()),
                sorted((r[0], r[1], r[2], r[3]) for r in both.select(*columns, "_tm_op").collect()))

    by_expression, all_by_expression = routed()
    monkeypatch.setattr(routing, "ROUTE_BY_EXPRESSION", 0)
    by_join, all_by_join = routed()
    assert by_expression == by_join
    assert {fid for _, _, fid in by_join} == {"f-sf-0", "f-sf-1", "f-la-0"}
    assert len(by_join) == 2000
    assert all_by_expression == all_by_join
    assert sorted(r[:3] for r in all_by_join) == sorted(by_join + updates)
    assert {r[3] for r in all_by_join} == {"U"}


@pytest.mark.parametrize("partitioned", [False, True])
def test_index_lookup_gives_the_same_tags_broadcast_or_shuffled(
    spark: Any, tmp_path: Path, monkeypatch: Any, partitioned: bool
) -> None:
    """A small batch is looked up with broadcasts only (its keys, then the table's matching keys);
    a larger one has the matching keys shuffled to it, a large one is joined with all of them.
    Batches with a size Spark's plan tells (pandas) and without (a Python list) take the first
    way; every way gives the same table, and hudi-rs agrees."""
    import pandas as pd

    from tidemark.engines.spark import writer as spark_writer

    rows = [(i, ["sf", "la"][i % 2], 1, f"v{i}") for i in range(40)]
    update = [(i, ["sf", "la"][i % 2], 2, f"u{i}") for i in range(30, 50)] + [(31, "la", 3, "dup")]
    schema = "id long, city string, ts long, v string"
    kwargs: dict[str, Any] = {"record_key": "id", "ordering_field": "ts"}
    if partitioned:
        kwargs["partition_by"] = "city"

    def run(name: str, batch: Any) -> list[tuple[Any, ...]]:
        t = tidemark.Table.create(str(tmp_path / name), spark=spark, **kwargs)
        t.bulk_insert(spark.createDataFrame(rows, schema))
        result = t.upsert(batch)
        assert (result.num_inserts, result.num_updates) == (10, 10)
        got = sorted(rows_of(t.read().toArrow(), ["id", "city", "ts", "v"]))
        assert sorted(rows_of(hudi_rs_read(t.path), ["id", "city", "ts", "v"])) == got
        return got

    listed = run("listed", spark.createDataFrame(update, schema))
    sized = run("sized", spark.createDataFrame(pd.DataFrame(update, columns=COLS), schema))
    monkeypatch.setattr(spark_writer, "BROADCAST_MATCHED_KEYS", 0)
    half = run("half", spark.createDataFrame(update, schema))  # the matched keys are shuffled
    monkeypatch.setattr(spark_writer, "BROADCAST_BATCH_KEYS", 0)
    monkeypatch.setattr(spark_writer, "BROADCAST_BATCH_KEY_BYTES", 0)
    shuffled = run("shuffled", spark.createDataFrame(update, schema))
    expected = sorted([r for r in rows if r[0] < 30] + [r for r in update if r[0] != 31] + [(31, "la", 3, "dup")])
    assert listed == sized == half == shuffled == expected


def test_writes_lift_sparks_per_row_arrow_byte_check_and_then_put_it_back(
    spark: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """While a write runs, Arrow batches to Python are capped by rows only (Spark checks a byte
    cap after every row, which cost more than the hand-off itself); after it, the session is as
    it was, also after a failed write. A value the user set is never changed."""
    from tidemark.engines.spark.session import MAX_BYTES_PER_BATCH, NO_BYTE_CAP
    from tidemark.engines.spark.writer import SparkWritePipeline

    seen: list[str] = []
    for name in ["write_bulk", "write_file_groups"]:
        original = getattr(SparkWritePipeline, name)

        def spy(self: Any, *args: Any, _original: Any = original) -> Any:
            seen.append(spark.conf.get(MAX_BYTES_PER_BATCH))
            return _original(self, *args)

        monkeypatch.setattr(SparkWritePipeline, name, spy)

    schema = "id long, ts long, v string"
    t = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts")
    t.bulk_insert(spark.createDataFrame([(1, 1, "a"), (2, 1, "b")], schema))
    t.upsert(spark.createDataFrame([(1, 2, "a2"), (3, 1, "c")], schema))
    assert seen == [NO_BYTE_CAP, NO_BYTE_CAP]
    assert MAX_BYTES_PER_BATCH not in spark.conf.getAll
    with pytest.raises(tidemark.InvalidInputError):
        t.upsert(spark.createDataFrame([(4, "x", "d")], "id long, ts string, v string"))
    assert MAX_BYTES_PER_BATCH not in spark.conf.getAll

    spark.conf.set(MAX_BYTES_PER_BATCH, "32m")
    try:
        t.upsert(spark.createDataFrame([(2, 3, "b2")], schema))
        assert seen[-1] == spark.conf.get(MAX_BYTES_PER_BATCH)
        assert spark.conf.get(MAX_BYTES_PER_BATCH) != NO_BYTE_CAP
    finally:
        spark.conf.unset(MAX_BYTES_PER_BATCH)
    assert sorted(rows_of(t.read().toArrow(), ["id", "ts", "v"])) == [(1, 2, "a2"), (2, 3, "b2"), (3, 1, "c")]


def test_write_session_holds_until_the_last_concurrent_write_of_a_session_ends(spark: Any) -> None:
    """Two threads writing through one session: the first one in lifts the check, the check stays
    lifted while either runs, and the last one out puts the session back."""
    import threading

    from tidemark.engines.spark.session import MAX_BYTES_PER_BATCH, NO_BYTE_CAP, write_session

    inside, first_left = threading.Barrier(2), threading.Event()
    seen: dict[str, str] = {}

    def first() -> None:
        with write_session(spark):
            inside.wait(timeout=30)
        first_left.set()

    def second() -> None:
        with write_session(spark):
            inside.wait(timeout=30)
            assert first_left.wait(timeout=30)
            seen["after the first left"] = spark.conf.get(MAX_BYTES_PER_BATCH)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert seen == {"after the first left": NO_BYTE_CAP}
    assert MAX_BYTES_PER_BATCH not in spark.conf.getAll


def test_spark_hash_and_partition_keys_agree_with_spark(spark: Any) -> None:
    """The driver steers rows to tasks with values whose Spark hash lands in a chosen partition;
    that only works if our hash is Spark's, and repartition really puts them there."""
    from pyspark.sql import functions as F

    from tidemark.engines.spark.tasks import partition_keys, spark_hash_int

    values = [*range(-300, 3000), 2**31 - 1, -(2**31)]
    rows = spark.createDataFrame([(v,) for v in values], "v int").select("v", F.hash("v").alias("h")).collect()
    assert {r.v: r.h for r in rows} == {v: spark_hash_int(v) for v in values}
    for partitions in [1, 2, 3, 5, 8, 13, 32]:
        keys = partition_keys(partitions)
        assert len(set(keys)) == partitions
        placed = spark.createDataFrame([(k,) for k in keys], "v int").repartition(partitions, "v")
        where = {r.v: r.p for r in placed.select("v", F.spark_partition_id().alias("p")).collect()}
        assert [where[k] for k in keys] == list(range(partitions))


def test_balance_spreads_weight_and_numbers_the_heaviest_task_first() -> None:
    from tidemark.engines.spark.tasks import balance

    weights = {"a": 10, "b": 9, "c": 6, "d": 5, "e": 4, "f": 1}
    placed = balance(weights, 2)
    loads = [sum(w for k, w in weights.items() if placed[k] == t) for t in range(2)]
    assert set(placed) == set(weights)
    assert loads == sorted(loads, reverse=True)  # heaviest task first: Spark starts it first
    # Largest first, each to the lighter task: 19 and 16 here, within LPT's bound of 4/3 of the
    # best split (18 and 17); hashing could put 30 of the 35 in one task.
    assert loads == [19, 16]
    assert balance(weights, 10) == {k: i for i, k in enumerate("abcdef")}  # a task each, heaviest first
    assert balance({"x": 3}, 4) == {"x": 0}
    assert balance({}, 4) == {}


def test_an_upsert_writes_each_touched_file_group_in_a_task_of_its_own(spark: Any, tmp_path: Path) -> None:
    """Four file groups touched on a machine that runs 2 tasks at once: the driver gives each
    its own task (hashing file ids onto 4 tasks would often pair two and leave one idle). The
    task that wrote a file is the first part of the write token in its name."""
    import pandas as pd

    schema = "id long, ts long, v string"
    t = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="id", ordering_field="ts",
                              options={"hoodie.parquet.small.file.limit": "0"})
    loaded = spark.createDataFrame(pd.DataFrame({"id": range(400), "ts": 1, "v": "a"}), schema).repartition(4, "id")
    assert len(t.bulk_insert(loaded).file_groups) == 4
    result = t.upsert(spark.createDataFrame([(i, 2, "b") for i in range(0, 400, 7)], schema))
    assert (len(result.file_groups), result.num_updates) == (4, 58)
    latest = t.timeline()[-1]
    tokens = {name.split("_")[1] for name in os.listdir(t.path) if name.endswith(f"_{latest.requested_time}.parquet")}
    assert len(tokens) == 4
    assert sorted(int(token.split("-")[0]) for token in tokens) == [0, 1, 2, 3]
    assert sorted(rows_of(t.read().toArrow(), ["id", "v"])) == [(i, "b" if i % 7 == 0 else "a") for i in range(400)]


@pytest.mark.parametrize("escaped", ["false", "true"])
def test_sql_text_literals_survive_quotes_backslashes_and_parser_settings(spark: Any, escaped: str) -> None:
    """Partition paths are user data: the routing and task expressions quote them as SQL text."""
    from pyspark.sql import functions as F

    from tidemark.engines.spark.expressions import sql_text as _sql_text

    values = ["", "sf", "it's", "back\\slash", "city=São Paulo/x", 'quote"d', "new\nline", "☃😀", "X'41'"]
    spark.conf.set("spark.sql.parser.escapedStringLiterals", escaped)
    try:
        row = spark.range(1).select(*[F.expr(_sql_text(v)).alias(f"c{i}") for i, v in enumerate(values)]).first()
    finally:
        spark.conf.unset("spark.sql.parser.escapedStringLiterals")
    assert list(row) == values


@pytest.mark.parametrize("key_type", ["int", "smallint", "string"])
def test_a_broadcast_lookup_by_the_key_value_finds_the_same_records(
    spark: Any, tmp_path: Path, key_type: str
) -> None:
    """A small batch whose record key is one integer field is looked up by that field's value
    (its text is the record key, one to one); other keys by the record key. Updates are found,
    new keys inserted, and hudi-rs reads the same table."""
    from tidemark.engines.spark.writer import SparkWritePipeline
    from tidemark.write.engine import TableLayout

    schema = f"k {key_type}, ts long, v string"
    key = (lambda i: str(i)) if key_type == "string" else (lambda i: i)
    t = tidemark.Table.create(str(tmp_path / "t"), spark=spark, record_key="k", ordering_field="ts")
    t.bulk_insert(spark.createDataFrame([(key(i), 1, "a") for i in range(-20, 20)], schema))
    result = t.upsert(spark.createDataFrame([(key(i), 2, "b") for i in range(10, 30)], schema))
    assert (result.num_updates, result.num_inserts) == (10, 10)
    expected = sorted([(key(i), "a") for i in range(-20, 10)] + [(key(i), "b") for i in range(10, 30)])
    assert sorted(rows_of(t.read().toArrow(), ["k", "v"])) == expected
    assert sorted(rows_of(hudi_rs_read(t.path), ["k", "v"])) == expected

    user = t.schema
    assert user is not None
    pipeline = SparkWritePipeline(spark, TableLayout(("k",), (), ("ts",), False), user, parallelism=0)
    assert pipeline._integer_key() == (None if key_type == "string" else "k")
