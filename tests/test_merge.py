"""Record mergers, engine-free: behaviour of each merger and the algebra each one claims.

Property tests (hypothesis) hold every merger to its declared MergeProperties over
random record sets: merge(a, a) == a when idempotent, merge(a, b) == merge(b, a)
when commutative, merge(merge(a, b), c) == merge(a, merge(b, c)) when associative;
with deletes (carrying ordering values) only where the merger claims it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidemark.errors import ConfigError
from tidemark.merge import (
    ColumnGroup,
    ColumnGroupMerger,
    CommitTimeMerger,
    EventTimeMerger,
    MergeConfig,
    PartialUpdateMerger,
    RecordMerger,
    dedup_records,
    greatest_per_key,
    live_records,
    load_custom_merger,
    merge_records,
    parse_column_groups,
)

KEY = "_hoodie_record_key"
OP = "_tm_op"
SCHEMA = pa.schema(
    [
        (KEY, pa.string()),
        ("t1", pa.int64()),
        ("t2", pa.int64()),
        ("a", pa.string()),
        ("b", pa.int64()),
        (OP, pa.string()),
    ]
)

MERGERS: dict[str, RecordMerger] = {
    "commit_time": CommitTimeMerger(),
    "event_time_one_field": EventTimeMerger(("t1",)),
    "event_time_two_fields": EventTimeMerger(("t1", "t2")),
    "partial_update_event_time": PartialUpdateMerger(("t1",)),
    "partial_update_commit_time": PartialUpdateMerger(),
    "column_groups": ColumnGroupMerger((ColumnGroup("t1", ("a",)), ColumnGroup("t2", ("b",)))),
    "custom_greatest_value": load_custom_merger("merge_plugins:GreatestValueMerger"),
}


def table(rows: list[dict[str, Any]]) -> pa.Table:
    full = [{"t1": None, "t2": None, "a": None, "b": None, OP: "U", **r} for r in rows]
    return pa.Table.from_pylist(full, schema=SCHEMA)


def as_set(records: pa.Table) -> list[tuple[Any, ...]]:
    cols = [f.name for f in SCHEMA]
    return sorted(tuple(r[c] for c in cols) for r in records.select(cols).to_pylist())


def record_sets(with_deletes: bool, ordering: tuple[str, ...]) -> st.SearchStrategy[pa.Table]:
    """Sets of records with unique keys; deletes (when asked) carry ordering values."""
    small = st.one_of(st.none(), st.integers(0, 3))

    def row(key: str) -> st.SearchStrategy[dict[str, Any]]:
        base = st.fixed_dictionaries(
            {KEY: st.just(key), "t1": small, "t2": small, "a": st.one_of(st.none(), st.sampled_from("xyz")), "b": small}
        )
        if not with_deletes:
            return base
        delete = st.fixed_dictionaries(
            {KEY: st.just(key), OP: st.just("D"), **{f: st.integers(0, 3) for f in ordering or ("t1",)}}
        )
        return st.one_of(base, delete)

    keys = st.lists(st.sampled_from(["k1", "k2", "k3"]), unique=True, max_size=3)
    return keys.flatmap(lambda ks: st.tuples(*[row(k) for k in ks])).map(lambda rows: table(list(rows)))


def _ordering_of(merger: RecordMerger) -> tuple[str, ...]:
    return tuple(getattr(merger, "ordering_fields", ()))


def _check(merger: RecordMerger, a: pa.Table, b: pa.Table, c: pa.Table) -> None:
    props = merger.properties
    if props.idempotent:
        assert as_set(merge_records(merger, a, a)) == as_set(a)
    if props.commutative:
        assert as_set(merge_records(merger, a, b)) == as_set(merge_records(merger, b, a))
    if props.associative:
        left = merge_records(merger, merge_records(merger, a, b), c)
        right = merge_records(merger, a, merge_records(merger, b, c))
        assert as_set(left) == as_set(right)


@pytest.mark.parametrize("name", sorted(MERGERS))
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_every_merger_has_the_properties_it_claims_for_updates(name: str, data: st.DataObject) -> None:
    merger = MERGERS[name]
    sets = record_sets(False, _ordering_of(merger))
    _check(merger, data.draw(sets), data.draw(sets), data.draw(sets))


@pytest.mark.parametrize("name", sorted(n for n, m in MERGERS.items() if m.properties.with_deletes))
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_mergers_that_claim_it_keep_their_properties_with_deletes(name: str, data: st.DataObject) -> None:
    merger = MERGERS[name]
    sets = record_sets(True, _ordering_of(merger))
    _check(merger, data.draw(sets), data.draw(sets), data.draw(sets))


def test_claims_are_the_documented_ones() -> None:
    assert MERGERS["column_groups"].properties.commutative
    assert not MERGERS["event_time_one_field"].properties.commutative  # ties go to the later write
    assert MERGERS["event_time_two_fields"].properties.with_deletes
    assert not MERGERS["partial_update_event_time"].properties.with_deletes
    assert not MERGERS["partial_update_event_time"].properties.associative
    assert MERGERS["partial_update_commit_time"].properties.associative


def test_the_property_check_finds_a_false_claim() -> None:
    """The checker is not vacuous: partial update on event time is not associative."""
    merger = PartialUpdateMerger(("t1",))
    a = table([{KEY: "k", "t1": 1, "a": "first"}])
    b = table([{KEY: "k", "t1": 3}])
    c = table([{KEY: "k", "t1": 2, "a": "late"}])
    left = merge_records(merger, merge_records(merger, a, b), c)
    right = merge_records(merger, a, merge_records(merger, b, c))
    assert as_set(left) != as_set(right)


# -- behaviour ----------------------------------------------------------------------------


def test_event_time_compares_several_ordering_fields_lexicographically() -> None:
    older = table([{KEY: "k", "t1": 2, "t2": 9, "a": "old"}])
    newer = table([{KEY: "k", "t1": 2, "t2": 3, "a": "new"}])
    merged = merge_records(EventTimeMerger(("t1", "t2")), older, newer)
    assert merged.column("a").to_pylist() == ["old"]
    newer = table([{KEY: "k", "t1": 3, "t2": 0, "a": "new"}])
    assert merge_records(EventTimeMerger(("t1", "t2")), older, newer).column("a").to_pylist() == ["new"]


def test_event_time_ties_and_null_ordering_values() -> None:
    merger = EventTimeMerger(("t1",))
    tie = merge_records(merger, table([{KEY: "k", "t1": 1, "a": "old"}]), table([{KEY: "k", "t1": 1, "a": "new"}]))
    assert tie.column("a").to_pylist() == ["new"]
    null_loses = merge_records(merger, table([{KEY: "k", "t1": 1, "a": "old"}]), table([{KEY: "k", "a": "new"}]))
    assert null_loses.column("a").to_pylist() == ["old"]


def test_a_stale_delete_never_removes_a_newer_record() -> None:
    merger = EventTimeMerger(("t1",))
    stored = table([{KEY: "k1", "t1": 5, "a": "x"}, {KEY: "k2", "t1": 5, "a": "y"}, {KEY: "k3", "t1": 5, "a": "z"}])
    deletes = table([{KEY: "k1", "t1": 4, OP: "D"}, {KEY: "k2", "t1": 5, OP: "D"}, {KEY: "k3", OP: "D"}])
    live = live_records(merge_records(merger, stored, deletes))
    # k1: older delete loses; k2: same ordering value, the later write wins; k3: no ordering value deletes
    assert live.column(KEY).to_pylist() == ["k1"]


def test_partial_update_changes_only_the_non_null_columns_of_the_winner() -> None:
    merger = PartialUpdateMerger(("t1",))
    stored = table([{KEY: "k", "t1": 1, "a": "a1", "b": 1}])
    update = table([{KEY: "k", "t1": 2, "b": 2}])
    assert as_set(merge_records(merger, stored, update)) == [("k", 2, None, "a1", 2, "U")]
    stale = table([{KEY: "k", "t1": 0, "a": "stale", "b": 0, "t2": 7}])
    # a stale update loses, but fills what the winner lacks
    assert as_set(merge_records(merger, stored, stale)) == [("k", 1, 7, "a1", 1, "U")]


def test_column_groups_take_per_group_the_values_with_the_greatest_ordering_value() -> None:
    merger = ColumnGroupMerger((ColumnGroup("t1", ("a",)), ColumnGroup("t2", ("b",))))
    stream_a = table([{KEY: "k", "t1": 5, "a": "a5"}])
    stream_b = table([{KEY: "k", "t2": 7, "b": 70}])
    late_a = table([{KEY: "k", "t1": 3, "a": "a3"}])
    for order in ([stream_a, stream_b, late_a], [late_a, stream_b, stream_a], [stream_b, late_a, stream_a]):
        merged = order[0]
        for records in order[1:]:
            merged = merge_records(merger, merged, records)
        assert as_set(merged) == [("k", 5, 7, "a5", 70, "U")]


def test_column_group_delete_wins_a_group_only_with_a_newer_ordering_value() -> None:
    merger = ColumnGroupMerger((ColumnGroup("t1", ("a",)), ColumnGroup("t2", ("b",))))
    stored = table([{KEY: "k", "t1": 5, "a": "a5", "t2": 5, "b": 5}])
    stale = table([{KEY: "k", "t1": 4, "t2": 4, OP: "D"}])
    assert as_set(merge_records(merger, stored, stale)) == as_set(stored)
    newer = table([{KEY: "k", "t1": 6, "t2": 6, OP: "D"}])
    assert live_records(merge_records(merger, stored, newer)).num_rows == 0
    one_group = table([{KEY: "k", "t1": 6, OP: "D"}])
    assert as_set(merge_records(merger, stored, one_group)) == [("k", 6, 5, None, 5, "U")]


def test_dedup_folds_repeated_keys_in_arrival_order() -> None:
    batch = table(
        [
            {KEY: "k", "t1": 1, "a": "first", "b": 1},
            {KEY: "j", "t1": 1},
            {KEY: "k", "t1": 3, "b": 3},
            {KEY: "k", "t1": 2, "a": "late"},
        ]
    )
    assert as_set(dedup_records(CommitTimeMerger(), batch))[1] == ("k", 2, None, "late", None, "U")
    assert as_set(dedup_records(EventTimeMerger(("t1",)), batch))[1] == ("k", 3, None, None, 3, "U")
    # in arrival order: "first" fills the t1=3 winner's null a; the later t1=2 record loses to it
    assert as_set(dedup_records(PartialUpdateMerger(("t1",)), batch))[1] == ("k", 3, None, "first", 3, "U")
    assert as_set(dedup_records(PartialUpdateMerger(), batch))[1] == ("k", 2, None, "late", 3, "U")
    assert (
        dedup_records(CommitTimeMerger(), batch.drop_columns([OP])).column_names
        == batch.drop_columns([OP]).column_names
    )


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["p0", "p1"]), st.sampled_from("abcd"),
                          st.one_of(st.none(), st.integers(0, 3)), st.one_of(st.none(), st.integers(0, 2))),
                min_size=1, max_size=40))
def test_greatest_per_key_keeps_what_the_event_time_fold_keeps(rows: list[Any]) -> None:
    """The engines' one-sort dedup of whole records equals folding each key's rows in arrival
    order with the event-time merger (nulls lose, ties go to the later row), on two ordering fields."""
    batch = pa.table({
        "_hoodie_partition_path": [p for p, _, _, _ in rows], KEY: [k for _, k, _, _ in rows],
        "t1": pa.array([t for _, _, t, _ in rows], pa.int64()), "t2": pa.array([u for _, _, _, u in rows], pa.int64()),
        "row": list(range(len(rows))),
    })
    keys = ["_hoodie_partition_path", KEY]
    positions = greatest_per_key([batch.column(k) for k in keys], [batch.column("t1"), batch.column("t2")],
                                 batch.column("row"))
    kept = batch.take(positions).to_pylist()
    assert [(r["_hoodie_partition_path"], r[KEY]) for r in kept] == sorted({(p, k) for p, k, _, _ in rows})
    folded = dedup_records(EventTimeMerger(("t1", "t2")), batch, keys=keys).to_pylist()
    assert sorted(r["row"] for r in kept) == sorted(r["row"] for r in folded)


def test_merge_records_keeps_keys_of_both_sides() -> None:
    merged = merge_records(
        CommitTimeMerger(), table([{KEY: "a"}, {KEY: "b", "b": 1}]), table([{KEY: "b", "b": 2}, {KEY: "c"}])
    )
    assert sorted(merged.column(KEY).to_pylist()) == ["a", "b", "c"]


def test_records_with_partition_paths_merge_per_partition() -> None:
    older = pa.table({"_hoodie_partition_path": ["p1", "p2"], KEY: ["k", "k"], "v": [1, 2]})
    newer = pa.table({"_hoodie_partition_path": ["p2"], KEY: ["k"], "v": [20]})
    merged = merge_records(CommitTimeMerger(), older, newer)
    assert sorted(merged.select(["_hoodie_partition_path", "v"]).to_pylist(), key=str) == [
        {"_hoodie_partition_path": "p1", "v": 1},
        {"_hoodie_partition_path": "p2", "v": 20},
    ]


# -- configuration --------------------------------------------------------------------------


def test_merge_config_builds_the_merger_of_each_mode() -> None:
    assert isinstance(MergeConfig.build(mode=None).merger(), CommitTimeMerger)
    assert isinstance(MergeConfig.build(mode=None, ordering_fields=("t1",)).merger(), EventTimeMerger)
    partial = MergeConfig.build(mode=None, ordering_fields=("t1",), partial_update_mode="ignore_defaults")
    assert partial.merger() == PartialUpdateMerger(("t1",))
    groups = MergeConfig.build(mode=None, column_groups="t1:a;t2:b")
    assert groups.ordering_fields == ("t1", "t2") and isinstance(groups.merger(), ColumnGroupMerger)
    custom = MergeConfig.build(mode=None, custom_class="merge_plugins:GreatestValueMerger")
    assert custom.mode == "CUSTOM" and custom.merger().name == "greatest_value"


@pytest.mark.parametrize(
    ("settings_", "key"),
    [
        ({"mode": "EVENT_TIME_ORDERING"}, "hoodie.record.merge.mode"),
        ({"mode": "SOMETIMES"}, "hoodie.record.merge.mode"),
        ({"mode": "CUSTOM"}, "hoodie.write.record.merge.custom.implementation.classes"),
        ({"mode": None, "custom_class": "no_such_module:X"}, "hoodie.write.record.merge.custom.implementation.classes"),
        ({"mode": None, "custom_class": "merge_plugins"}, "hoodie.write.record.merge.custom.implementation.classes"),
        (
            {"mode": None, "custom_class": "merge_plugins:Missing"},
            "hoodie.write.record.merge.custom.implementation.classes",
        ),
        (
            {"mode": None, "custom_class": "merge_plugins:NotAMerger"},
            "hoodie.write.record.merge.custom.implementation.classes",
        ),
        (
            {"mode": "COMMIT_TIME_ORDERING", "custom_class": "merge_plugins:GreatestValueMerger"},
            "hoodie.write.record.merge.custom.implementation.classes",
        ),
        ({"mode": None, "column_groups": "t1:a;t1:b"}, "hoodie.record.merge.column.groups"),
        ({"mode": None, "column_groups": "t1"}, "hoodie.record.merge.column.groups"),
        ({"mode": None, "column_groups": ";"}, "hoodie.record.merge.column.groups"),
        ({"mode": "COMMIT_TIME_ORDERING", "column_groups": "t1:a"}, "hoodie.record.merge.column.groups"),
        ({"mode": None, "column_groups": "t1:a", "ordering_fields": ("t9",)}, "hoodie.record.merge.column.groups"),
        (
            {"mode": None, "column_groups": "t1:a", "partial_update_mode": "IGNORE_DEFAULTS"},
            "hoodie.table.partial.update.mode",
        ),
        ({"mode": None, "partial_update_mode": "FILL_UNAVAILABLE"}, "hoodie.table.partial.update.mode"),
    ],
)
def test_bad_merge_settings_raise_config_errors_naming_the_key(settings_: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        MergeConfig.build(**settings_)
    assert caught.value.key == key


def test_column_groups_must_cover_every_non_key_column() -> None:
    config = MergeConfig.build(mode=None, column_groups="t1:a")
    schema = pa.schema([("id", pa.int64()), ("t1", pa.int64()), ("a", pa.string()), ("loose", pa.string())])
    with pytest.raises(ConfigError):
        config.check_schema(schema, key_fields=("id",), partition_fields=())
    config.check_schema(schema.remove(3), key_fields=("id",), partition_fields=())
    with pytest.raises(ConfigError):
        MergeConfig.build(mode=None, column_groups="t1:nope").check_schema(
            schema, key_fields=("id",), partition_fields=()
        )


def test_parse_column_groups() -> None:
    assert parse_column_groups(" t1 : a , b ; t2:c") == (ColumnGroup("t1", ("a", "b")), ColumnGroup("t2", ("c",)))
