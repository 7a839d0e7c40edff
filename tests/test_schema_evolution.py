"""Schema evolution on write (issue 17, item 4), as Hudi 1.x does it.

Each evolution kind per engine (Arrow and Spark), copy-on-write and merge-on-read (with a
compaction after the evolution): the commit records the evolved schema; rows written before
read through it (null for new columns, promoted types cast) in tidemark's readers and in
hudi-rs. Incompatible changes are refused before anything is written; two writer processes
that change the schema concurrently both land when compatible (the table's schema is the
union), and the later one fails with SchemaConflictError when not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read
from signals import wait_for_file, write_atomically
from tidemark import SchemaEvolutionError, SchemaMismatchError, Table
from tidemark.format.schema import arrow_schema_from_avro
from tidemark.storage import LocalStorage
from tidemark.timeline import Timeline

ENGINES = ["arrow", "spark"]
TYPES = ["COPY_ON_WRITE", "MERGE_ON_READ"]
WRITER = str(Path(__file__).with_name("writer_process.py"))

V1 = pa.schema([
    ("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64()),
    ("n", pa.int32()), ("l", pa.int64()), ("f", pa.float32()), ("b", pa.binary()),
    ("s", pa.struct([("x", pa.int32())])),
])
V1_ROWS = [
    {"id": 1, "part": "p1", "ts": 1, "n": 1, "l": 10, "f": 1.5, "b": b"one", "s": {"x": 1}},
    {"id": 2, "part": "p2", "ts": 1, "n": 2, "l": 20, "f": 2.5, "b": b"two", "s": {"x": 2}},
]
# Every kind at once: n int->long, l long->double, f float->double, b bytes->string, a nested
# field s.y, and a new column c.
V2 = pa.schema([
    ("id", pa.int64()), ("part", pa.string()), ("ts", pa.int64()),
    ("n", pa.int64()), ("l", pa.float64()), ("f", pa.float64()), ("b", pa.string()),
    ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])), ("c", pa.string()),
])
V2_ROWS = [  # updates id 1 (p1) and inserts id 3 (p1); p2's file is not touched
    {"id": 1, "part": "p1", "ts": 2, "n": 2**40, "l": 0.25, "f": 0.1, "b": "uno", "s": {"x": 3, "y": "q"}, "c": "c1"},
    {"id": 3, "part": "p1", "ts": 2, "n": 3, "l": 30.5, "f": 3.5, "b": "tres", "s": {"x": 4, "y": None}, "c": "c3"},
]
EXPECTED = [
    {"id": 1, "n": 2**40, "l": 0.25, "f": 0.1, "b": b"uno", "s": {"x": 3, "y": "q"}, "c": "c1"},
    {"id": 2, "n": 2, "l": 20.0, "f": 2.5, "b": b"two", "s": {"x": 2, "y": None}, "c": None},
    {"id": 3, "n": 3, "l": 30.5, "f": 3.5, "b": b"tres", "s": {"x": 4, "y": None}, "c": "c3"},
]
COLUMNS = ["id", "n", "l", "f", "b", "s", "c"]


def _create(engine: str, spark: Any, path: Path, table_type: str = "COPY_ON_WRITE", **options: str) -> Table:
    return Table.create(str(path), spark=spark if engine == "spark" else None, record_key="id",
                        partition_by="part", ordering_field="ts", table_type=table_type, options=options or None)


def _batch(engine: str, spark: Any, rows: list[dict[str, Any]], schema: pa.Schema) -> Any:
    data = pa.Table.from_pylist(rows, schema=schema)
    if engine == "arrow":
        return data
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame([tuple(r[c] for c in schema.names) for r in data.to_pylist()],
                                 from_arrow_schema(schema))


def _arrow(result: Any) -> pa.Table:
    return result if isinstance(result, pa.Table) else result.toArrow()


def _rows(table: Any, columns: list[str] = COLUMNS) -> list[dict[str, Any]]:
    data = _arrow(table)
    return sorted(data.select(columns).to_pylist(), key=lambda r: r["id"])


def _close(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """float32 -> double casts keep float32's digits: compare floats rounded."""
    return [{k: round(v, 5) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def _files_of(table: Table, partition: str) -> list[str]:
    return sorted(str(p) for p in Path(table.path).rglob("*") if p.is_file() and partition in p.parent.name)


def _recorded(table: Table) -> pa.Schema:
    timeline = Timeline.load(LocalStorage(table.path))
    latest = timeline.last_completed_data_instant()
    assert latest is not None
    schema_json = timeline.commit_metadata(latest).schema_json
    assert schema_json
    return arrow_schema_from_avro(schema_json)


# -- each evolution kind, per engine and table type --------------------------------------------


@pytest.mark.parametrize("table_type", TYPES)
@pytest.mark.parametrize("engine", ENGINES)
def test_evolution_kinds_read_back_everywhere(spark: Any, tmp_path: Path, engine: str, table_type: str) -> None:
    t = _create(engine, spark, tmp_path / "t", table_type)
    t.upsert(_batch(engine, spark, V1_ROWS, V1))
    p2_files = _files_of(t, "p2")
    t.upsert(_batch(engine, spark, V2_ROWS, V2))
    assert _files_of(t, "p2") == p2_files  # p2's file predates V2
    recorded = _recorded(t)
    assert recorded.names == V2.names
    assert {f.name: f.type for f in recorded}["n"] == pa.int64()
    assert {f.name: f.type for f in recorded}["l"] == pa.float64()
    assert {f.name: f.type for f in recorded}["b"] == pa.binary()  # string/bytes: the table's type stays
    assert recorded.field("s").type == pa.struct([("x", pa.int32()), ("y", pa.string())])
    assert Table.open(t.path, spark=None).schema == t.schema == recorded
    assert _close(_rows(t.read())) == _close(EXPECTED)
    assert _close(_rows(Table.open(t.path, spark=None).read())) == _close(EXPECTED)
    assert _close(_rows(hudi_rs_read(t.path))) == _close(EXPECTED)
    if engine == "spark":  # the Python data source reads through the evolved schema too
        assert _close(_rows(spark.read.format("tidemark").load(t.path))) == _close(EXPECTED)
    if table_type == "MERGE_ON_READ":
        assert t.compact() is not None
        assert [f.name for f in _recorded(t)] == V2.names  # the compaction records the evolved schema
        assert _close(_rows(t.read())) == _close(EXPECTED)
        assert _close(_rows(hudi_rs_read(t.path))) == _close(EXPECTED)
    # A later write in the old schema is cast up (narrower types) and, with the option, gets nulls.
    t2 = Table.open(t.path, spark=spark if engine == "spark" else None,
                    options={"hoodie.write.set.null.for.missing.columns": "true"})
    t2.upsert(_batch(engine, spark, [{**V1_ROWS[1], "id": 4, "n": 7}], V1))
    got = {r["id"]: r for r in _rows(t2.read())}
    assert got[4]["n"] == 7 and got[4]["c"] is None and got[4]["s"] == {"x": 2, "y": None}
    assert [f.name for f in _recorded(t2)] == V2.names  # never shrinks


@pytest.mark.parametrize("engine", ENGINES)
def test_spark_reads_long_promoted_to_double_in_untouched_files(spark: Any, tmp_path: Path, engine: str) -> None:
    """Spark's parquet reader refuses long->double; tidemark's Spark reader reads those files with Arrow."""
    t = _create("arrow", spark, tmp_path / "t")
    t.upsert(_batch("arrow", spark, V1_ROWS, V1))
    t.upsert(_batch("arrow", spark, V2_ROWS[1:], V2))
    reader = Table.open(t.path, spark=spark if engine == "spark" else None)
    got = {r["id"]: r["l"] for r in _rows(reader.read(), ["id", "l"])}
    assert got == {1: 10.0, 2: 20.0, 3: 30.5}


@pytest.mark.parametrize("engine", ENGINES)
def test_missing_columns_need_the_option(spark: Any, tmp_path: Path, engine: str) -> None:
    t = _create(engine, spark, tmp_path / "t")
    t.upsert(_batch(engine, spark, V1_ROWS, V1))
    before = len(t.timeline())
    no_l = pa.schema([f for f in V1 if f.name != "l"])
    with pytest.raises(SchemaMismatchError, match=r"\['l'\].*set.null.for.missing.columns=true"):
        t.upsert(_batch(engine, spark, [{**V1_ROWS[0], "ts": 5}], no_l))
    nested = pa.schema([*[f for f in V2 if f.name != "s"], ("s", pa.struct([("y", pa.string())]))])
    t.upsert(_batch(engine, spark, [{**V2_ROWS[1], "s": {"y": "q"}}], V2))  # adds s.y
    with pytest.raises(SchemaMismatchError, match=r"s\.x"):
        t.upsert(_batch(engine, spark, [{**V2_ROWS[1], "s": {"y": "q"}}], nested))
    assert len(t.timeline()) == before + 1
    filled = Table.open(t.path, spark=spark if engine == "spark" else None,
                        options={"hoodie.write.set.null.for.missing.columns": "true"})
    filled.upsert(_batch(engine, spark, [{**V1_ROWS[0], "ts": 5}], no_l))
    filled.upsert(_batch(engine, spark, [{**V2_ROWS[1], "id": 9, "s": {"y": "z"}}], nested))
    got = {r["id"]: r for r in _rows(filled.read())}
    assert got[1]["l"] is None and got[9]["s"] == {"x": None, "y": "z"}
    assert {r["id"]: r["l"] for r in _rows(hudi_rs_read(t.path), ["id", "l"])}[1] is None


INCOMPATIBLE = {
    "text to number": ("b", pa.int64(), 5),
    "number to text": ("n", pa.string(), "5"),
    "struct to scalar": ("s", pa.int64(), 5),
    "key type": ("id", pa.string(), "1"),
    "ordering type": ("ts", pa.float64(), 1.0),
    "partition type": ("part", pa.int64(), 1),
}


@pytest.mark.parametrize("case", sorted(INCOMPATIBLE))
@pytest.mark.parametrize("engine", ENGINES)
def test_incompatible_changes_are_refused_before_writing(spark: Any, tmp_path: Path, engine: str, case: str) -> None:
    t = _create(engine, spark, tmp_path / "t")
    t.upsert(_batch(engine, spark, V1_ROWS, V1))
    files = sorted(p.name for p in Path(t.path).rglob("*"))
    column, dtype, value = INCOMPATIBLE[case]
    schema = pa.schema([(f.name, dtype) if f.name == column else f for f in V1])
    with pytest.raises(SchemaEvolutionError, match="allowed: adding nullable columns") as info:
        t.upsert(_batch(engine, spark, [{**V1_ROWS[0], column: value}], schema))
    assert any(p.startswith(column) for p in info.value.problems)
    assert sorted(p.name for p in Path(t.path).rglob("*")) == files
    assert _rows(t.read(), ["id", "n"]) == [{"id": 1, "n": 1}, {"id": 2, "n": 2}]


def test_narrower_batch_is_cast_up_and_schema_kept(spark: Any, tmp_path: Path) -> None:
    t = _create("arrow", spark, tmp_path / "t", **{"hoodie.write.set.null.for.missing.columns": "true"})
    t.upsert(_batch("arrow", spark, V2_ROWS, V2))
    recorded = _recorded(t)
    t.upsert(_batch("arrow", spark, [{**V1_ROWS[1], "id": 7}], V1))  # int, long, float, bytes into wider
    assert _recorded(t) == recorded
    assert {r["id"]: r["l"] for r in _rows(hudi_rs_read(t.path), ["id", "l"])}[7] == 20.0


# -- concurrency: writer processes ----------------------------------------------------------------


OCC = {"hoodie.write.concurrency.mode": "optimistic_concurrency_control", "hoodie.write.lock.provider": "filesystem",
       "hoodie.write.lock.wait_time_ms": "2000", "hoodie.write.lock.num_retries": "10",
       "hoodie.write.num.retries.on.conflict.failures": "3"}


class _Writer:
    """writer_process.py paused before its commit until ``go`` exists."""

    def __init__(self, tmp: Path, table: Table, rows: list[dict[str, Any]], go: Path, ddl: str | None = None) -> None:
        name = uuid.uuid4().hex[:8]
        self.result, self.ready = tmp / f"{name}.result", tmp / f"{name}.ready"
        spec: dict[str, Any] = {
            "table": table.path, "options": OCC, "operation": "upsert", "rows": rows,
            "result": str(self.result), "pause_before_commit": {"ready": str(self.ready), "go": str(go)},
        }
        if ddl is not None:  # a Spark application of its own
            spec.update(engine="spark", schema=ddl, rows=[list(r.values()) for r in rows])
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(spec))
        self.process = subprocess.Popen([sys.executable, WRITER, str(path)])

    def outcome(self) -> dict[str, Any]:
        self.process.wait(timeout=120)
        return json.loads(self.result.read_text())


def _race(tmp: Path, table: Table, first: list[dict[str, Any]], second: list[dict[str, Any]],
          first_ddl: str | None = None) -> list[dict[str, Any]]:
    """Both plan against the same table; ``first`` commits, then ``second``."""
    a = _Writer(tmp, table, first, tmp / "go-a", first_ddl)
    # b starts once a waits (a Spark writer starts slowly; writers wait at most 120 s at the barrier).
    wait_for_file(a.ready, processes=[a.process], timeout=300)
    b = _Writer(tmp, table, second, tmp / "go-b")
    wait_for_file(b.ready, processes=[b.process], timeout=300)
    write_atomically(tmp / "go-a", "go")
    done = a.outcome()
    write_atomically(tmp / "go-b", "go")
    return [done, b.outcome()]


@pytest.fixture
def shared(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="part", options=OCC)
    t.upsert(pa.Table.from_pylist([{"id": i, "part": f"p{i}", "v": "seed"} for i in range(3)]))
    return t


def test_concurrent_compatible_changes_both_land(tmp_path: Path, shared: Table) -> None:
    a, b = _race(tmp_path, shared,
                 [{"id": 10, "part": "p0", "v": "a", "from_a": "x"}],
                 [{"id": 11, "part": "p1", "v": "b", "from_b": 7}])
    assert a["status"] == "committed" and b["status"] == "committed", (a, b)
    assert b["attempts"] == 1  # reconciled at commit, not rerun
    assert _recorded(shared).names == ["id", "part", "v", "from_a", "from_b"]
    want = {0: (None, None), 1: (None, None), 2: (None, None), 10: ("x", None), 11: (None, 7)}
    for reader in (shared.read(), hudi_rs_read(shared.path)):
        got = {r["id"]: (r["from_a"], r["from_b"]) for r in _rows(reader, ["id", "from_a", "from_b"])}
        assert got == want


@pytest.mark.parametrize("first_engine", ["arrow", "spark"])
def test_concurrent_incompatible_changes_later_one_fails(tmp_path: Path, shared: Table, first_engine: str) -> None:
    a, b = _race(tmp_path, shared,
                 [{"id": 10, "part": "p0", "v": "a", "extra": "text"}],
                 [{"id": 11, "part": "p1", "v": "b", "extra": 7}],
                 first_ddl="id long, part string, v string, extra string" if first_engine == "spark" else None)
    assert a["status"] == "committed", a
    assert b["status"] == "error" and b["error"] == "SchemaConflictError", b
    assert b["conflicting_instant"] == a["instant_time"] and "extra" in b["message"]
    assert _recorded(shared).field("extra").type == pa.string()
    ids = [r["id"] for r in _rows(shared.read(), ["id"])]
    assert ids == [0, 1, 2, 10]  # the loser's rows were rolled back
    assert [r["id"] for r in _rows(hudi_rs_read(shared.path), ["id"])] == ids
    # Writing it again is refused before anything is written, saying what is allowed.
    with pytest.raises(SchemaEvolutionError, match="extra"):
        Table.open(shared.path, spark=None, options=OCC).upsert(
            pa.Table.from_pylist([{"id": 11, "part": "p1", "v": "b", "extra": 7}]))


def test_concurrent_plain_write_keeps_the_new_column(tmp_path: Path, shared: Table) -> None:
    """A writer that changes nothing must not record the schema it started from over a column
    another writer added meanwhile (the table's schema is the latest commit's)."""
    a, b = _race(tmp_path, shared,
                 [{"id": 10, "part": "p0", "v": "a", "added": 1.5}],
                 [{"id": 11, "part": "p1", "v": "b"}])
    assert a["status"] == "committed" and b["status"] == "committed", (a, b)
    assert _recorded(shared).names == ["id", "part", "v", "added"]
    got = {r["id"]: r["added"] for r in _rows(shared.read(), ["id", "added"])}
    assert got[10] == 1.5 and got[11] is None
    assert {r["id"]: r["added"] for r in _rows(hudi_rs_read(shared.path), ["id", "added"])} == got


# -- the rules, engine-free -------------------------------------------------------------------------


def test_evolution_rules() -> None:
    from tidemark.format.schema_evolution import evolve, union

    table = pa.schema([("k", pa.int64()), ("n", pa.int32()), ("s", pa.struct([("x", pa.int32())]))])
    grown = evolve(table, pa.schema([("k", pa.int32()), ("n", pa.float64()), ("s", pa.struct([("y", pa.string())])),
                                     ("c", pa.list_(pa.int64()))]), fixed_fields=["k"])
    assert grown.schema == pa.schema([("k", pa.int64()), ("n", pa.float64()),
                                      ("s", pa.struct([("x", pa.int32()), ("y", pa.string())])),
                                      ("c", pa.list_(pa.int64()))])
    assert grown.added == ("s.y", "c") and grown.promoted == ("n",)
    assert not evolve(table, pa.schema([("n", pa.int8())])).changed  # narrower: cast up, nothing changes
    with pytest.raises(SchemaEvolutionError) as info:
        evolve(table, pa.schema([("k", pa.float64()), ("n", pa.string()), ("s", pa.int64())]), fixed_fields=["k"])
    assert [p.split(":")[0] for p in info.value.problems] == ["k", "n", "s"]
    both, problems = union(pa.schema([("a", pa.int64()), ("b", pa.string())]),
                           pa.schema([("a", pa.int32()), ("c", pa.float32())]))
    assert problems == [] and both == pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float32())])
    none, problems = union(pa.schema([("a", pa.string())]), pa.schema([("a", pa.int64())]))
    assert none is None and problems and problems[0].startswith("a:")
