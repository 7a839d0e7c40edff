"""Merge modes through real table writes (Arrow engine), checked against plain-Python models.

Each mode's model merges dict rows the way the mode is documented to; random
sequences of upserts (batches with repeated keys) and deletes (with ordering
values) must leave the table equal to the model after every commit, and hudi-rs
must read the same rows. The column-group merge is checked as a multi-stream
join: writers each writing their own group, committed in any order, give one table.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import hudi_rs_read
from tidemark import Table
from tidemark.errors import ConfigError

Row = dict[str, Any]
COLS = ["id", "t1", "t2", "a", "b"]
SCHEMA = pa.schema([("id", pa.int64()), ("t1", pa.int64()), ("t2", pa.int64()), ("a", pa.string()), ("b", pa.int64())])


def _select(schema: pa.Schema, names: list[str]) -> pa.Schema:
    return pa.schema([schema.field(n) for n in names])


def _rank(row: Row, fields: tuple[str, ...]) -> tuple[tuple[bool, int], ...]:
    return tuple((row.get(f) is not None, row.get(f) or 0) for f in fields)


def commit_time(_fields: tuple[str, ...]) -> Callable[[Row, Row], Row]:
    return lambda old, new: new


def event_time(fields: tuple[str, ...]) -> Callable[[Row, Row], Row]:
    def merge(old: Row, new: Row) -> Row:
        if new["op"] == "D" and all(new.get(f) is None for f in fields):
            return new
        return new if _rank(new, fields) >= _rank(old, fields) else old

    return merge


def partial_update(fields: tuple[str, ...]) -> Callable[[Row, Row], Row]:
    winner_of = event_time(fields)

    def merge(old: Row, new: Row) -> Row:
        winner = winner_of(old, new) if fields else new
        loser = old if winner is new else new
        if winner["op"] == "D":
            return winner
        return {c: winner.get(c) if winner.get(c) is not None else loser.get(c) for c in (*COLS, "op")} | {
            "op": winner["op"]
        }

    return merge


class Model:
    """The table as key -> row, merged by ``merge(old, new)``; deletes are dropped after each commit."""

    def __init__(self, merge: Callable[[Row, Row], Row]) -> None:
        self.merge = merge
        self.rows: dict[int, Row] = {}

    def write(self, batch: list[Row]) -> None:
        combined: dict[int, Row] = {}
        for row in batch:  # dedup in arrival order
            combined[row["id"]] = self.merge(combined[row["id"]], row) if row["id"] in combined else row
        for key, row in combined.items():
            stored = self.rows.get(key)
            merged = row if stored is None else self.merge(stored, row)
            if merged["op"] == "D":
                self.rows.pop(key, None)
            elif stored is None and row["op"] == "D":
                continue
            else:
                self.rows[key] = merged

    def table_rows(self) -> list[tuple[Any, ...]]:
        return sorted(tuple(r.get(c) for c in COLS) for r in self.rows.values())


def table_rows(table: Table) -> list[tuple[Any, ...]]:
    data = table.read()
    return sorted(tuple(r[c] for c in COLS) for r in data.select(COLS).to_pylist()) if data.num_rows else []


MODES = {
    "commit_time": ({}, (), commit_time),
    "event_time_one_field": ({}, ("t1",), event_time),
    "event_time_two_fields": ({}, ("t1", "t2"), event_time),
    "partial_update_event_time": ({"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, ("t1",), partial_update),
    "partial_update_commit_time": ({"hoodie.table.partial.update.mode": "IGNORE_DEFAULTS"}, (), partial_update),
}


def _random_row(rng: random.Random, op: str) -> Row:
    def maybe(value: Any) -> Any:
        return None if rng.random() < 0.25 else value

    return {
        "id": rng.randint(0, 7),
        "t1": maybe(rng.randint(0, 4)),
        "t2": rng.randint(0, 2),
        "a": maybe(rng.choice("xyz")),
        "b": maybe(rng.randint(0, 9)),
        "op": op,
    }


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("seed", [1, 2])
def test_random_writes_match_the_model_of_each_merge_mode(tmp_path: Path, mode: str, seed: int) -> None:
    options, ordering, merge_of = MODES[mode]
    rng = random.Random(seed)
    table = Table.create(
        str(tmp_path / "t"),
        spark=None,
        record_key="id",
        ordering_field=ordering or None,
        options=options,
        schema=SCHEMA,
    )
    model = Model(merge_of(ordering))
    for _ in range(8):
        if rng.random() < 0.7:
            batch = [_random_row(rng, "U") for _ in range(rng.randint(1, 8))]
            table.upsert(pa.Table.from_pylist([{c: r[c] for c in COLS} for r in batch], schema=SCHEMA))
        else:
            batch = [_random_row(rng, "D") for _ in range(rng.randint(1, 4))]
            for row in batch:
                if ordering and rng.random() < 0.8:  # deletes carry ordering values (mostly)
                    row["t1"] = row["t1"] if row["t1"] is not None else rng.randint(0, 4)
                elif ordering:
                    row.update({f: None for f in ordering})
                row.update({"a": None, "b": None})
            key_cols = ["id", *ordering]
            deletes = pa.Table.from_pylist(
                [{c: r[c] for c in key_cols} for r in batch], schema=_select(SCHEMA, key_cols)
            )
            table.delete(deletes)
        model.write(batch)
        assert table_rows(table) == model.table_rows()
    rs = hudi_rs_read(str(tmp_path / "t"))
    assert sorted(tuple(r[c] for c in COLS) for r in rs.select(COLS).to_pylist()) == model.table_rows()


# -- the multi-stream join ------------------------------------------------------------------------

GROUPS = {"A": ("ta", ("a1", "a2")), "B": ("tb", ("b1",)), "C": ("tc", ("c1",))}
JOIN_SCHEMA = pa.schema(
    [("id", pa.int64())]
    + [f for o, cols in GROUPS.values() for f in [(o, pa.int64())] + [(c, pa.string()) for c in cols]]
)
JOIN_COLS = JOIN_SCHEMA.names
JOIN_OPTIONS = {
    "hoodie.record.merge.column.groups": ";".join(f"{o}:{','.join(c)}" for o, c in GROUPS.values()),
    "hoodie.write.set.null.for.missing.columns": "true",
}


def stream_batches(rng: random.Random) -> list[tuple[str, list[Row]]]:
    """Two batches per stream; each row sets only its stream's columns (late events included)."""
    batches = []
    for stream, (ordering, cols) in GROUPS.items():
        for _ in range(2):
            rows = []
            for _ in range(rng.randint(1, 5)):
                row: Row = {"id": rng.randint(0, 5), ordering: rng.randint(0, 3)}
                row.update({c: rng.choice(["p", "q", None]) for c in cols})
                rows.append(row)
            batches.append((stream, rows))
    return batches


def join_model(batches: list[tuple[str, list[Row]]]) -> list[tuple[Any, ...]]:
    """Per key and group: the values with the greatest (ordering value, values), nulls lowest."""
    best: dict[tuple[int, str], tuple[Any, ...]] = {}
    keys: set[int] = set()

    def rank(values: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
        return tuple((v is not None, v if v is not None else 0) for v in values)

    for stream, rows in batches:
        ordering, cols = GROUPS[stream]
        for row in rows:
            keys.add(row["id"])
            values = (row[ordering], *[row[c] for c in cols])
            current = best.get((row["id"], stream))
            if current is None or rank(values) > rank(current):
                best[(row["id"], stream)] = values
    out = []
    for key in keys:
        record: dict[str, Any] = {"id": key}
        for stream, (ordering, cols) in GROUPS.items():
            values = best.get((key, stream), (None,) * (1 + len(cols)))
            record.update(dict(zip((ordering, *cols), values, strict=True)))
        out.append(tuple(record[c] for c in JOIN_COLS))
    return sorted(out, key=repr)


def write_join(path: Path, batches: list[tuple[str, list[Row]]]) -> list[tuple[Any, ...]]:
    table = Table.create(str(path), spark=None, record_key="id", options=JOIN_OPTIONS, schema=JOIN_SCHEMA)
    for stream, rows in batches:
        ordering, cols = GROUPS[stream]
        names = ["id", ordering, *cols]
        table.upsert(pa.Table.from_pylist(rows, schema=_select(JOIN_SCHEMA, names)))
    data = table.read().select(JOIN_COLS).to_pylist()
    return sorted((tuple(r[c] for c in JOIN_COLS) for r in data), key=repr)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), data=st.data())
def test_column_groups_give_the_same_table_whatever_order_the_writers_commit_in(
    tmp_path_factory: pytest.TempPathFactory, seed: int, data: st.DataObject
) -> None:
    batches = stream_batches(random.Random(seed))
    order = data.draw(st.permutations(range(len(batches))))
    expected = join_model(batches)
    base = tmp_path_factory.mktemp("join")
    assert write_join(base / "in_order", batches) == expected
    assert write_join(base / "permuted", [batches[i] for i in order]) == expected


def test_column_group_table_is_readable_by_hudi_rs(tmp_path: Path) -> None:
    batches = stream_batches(random.Random(3))
    rows = write_join(tmp_path / "t", batches)
    rs = hudi_rs_read(str(tmp_path / "t")).select(JOIN_COLS).to_pylist()
    assert sorted((tuple(r[c] for c in JOIN_COLS) for r in rs), key=repr) == rows


def test_column_groups_are_kept_in_hoodie_properties_and_reopened(tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=JOIN_OPTIONS, schema=JOIN_SCHEMA)
    text = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.record.merge.column.groups=ta\\:a1,a2;tb\\:b1;tc\\:c1" in text
    assert "hoodie.table.ordering.fields=ta\n" in text  # hudi-rs takes one ordering field
    reopened = Table.open(str(tmp_path / "t"), spark=None)
    assert reopened.config.ordering_fields == ("ta", "tb", "tc")
    with pytest.raises(ConfigError) as caught:
        Table.open(str(tmp_path / "t"), spark=None, options={"hoodie.record.merge.column.groups": "ta:a1"})
    assert caught.value.key == "hoodie.record.merge.column.groups"


def test_a_column_in_no_group_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Table.create(
            str(tmp_path / "t"),
            spark=None,
            record_key="id",
            options={"hoodie.record.merge.column.groups": "ta:a1"},
            schema=JOIN_SCHEMA,
        )
    table = Table.create(
        str(tmp_path / "u"), spark=None, record_key="id", options={"hoodie.record.merge.column.groups": "ta:a1"}
    )
    with pytest.raises(ConfigError):  # the first write fixes the schema: checked then
        table.upsert(pa.table({"id": [1], "ta": [1], "a1": ["x"], "loose": ["y"]}))
    assert table.timeline() == []


# -- custom merger and properties --------------------------------------------------------------


def test_custom_merger_by_import_path(tmp_path: Path) -> None:
    options = {
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.write.record.merge.custom.implementation.classes": "merge_plugins:GreatestValueMerger",
    }
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=options)
    table.upsert(pa.table({"id": [1, 1], "x": [5, 2], "y": ["a", "c"]}))
    table.upsert(pa.table({"id": [1], "x": [3], "y": ["b"]}))
    assert table.read().select(["id", "x", "y"]).to_pylist() == [{"id": 1, "x": 5, "y": "c"}]
    props = (tmp_path / "t" / ".hoodie" / "hoodie.properties").read_text()
    assert "hoodie.record.merge.mode=CUSTOM" in props
    assert "hoodie.record.merge.strategy.id=1897ef5f-18bc-4557-939c-9d6a8afd1519" in props
    assert hudi_rs_read(str(tmp_path / "t")).num_rows == 1


def test_bad_custom_merger_fails_at_create(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        Table.create(
            str(tmp_path / "t"),
            spark=None,
            record_key="id",
            options={"hoodie.write.record.merge.custom.implementation.classes": "merge_plugins:NotAMerger"},
        )
    assert caught.value.key == "hoodie.write.record.merge.custom.implementation.classes"
    assert not (tmp_path / "t").exists()


def test_merge_mode_cannot_change_on_an_existing_table(tmp_path: Path) -> None:
    Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="t1")
    Table.open(str(tmp_path / "t"), spark=None, options={"hoodie.record.merge.mode": "event_time_ordering"})
    with pytest.raises(ConfigError) as caught:
        Table.open(str(tmp_path / "t"), spark=None, options={"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"})
    assert caught.value.key == "hoodie.record.merge.mode"


def test_two_ordering_fields_stay_readable_by_hudi_rs(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field=["t1", "t2"])
    table.upsert(pa.table({"id": [1, 1], "t1": [1, 1], "t2": [5, 3], "v": ["keep", "lose"]}))
    assert Table.open(str(tmp_path / "t"), spark=None).config.ordering_fields == ("t1", "t2")
    assert hudi_rs_read(str(tmp_path / "t")).column("v").to_pylist() == ["keep"]
