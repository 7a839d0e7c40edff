"""A user-supplied merger, loaded by import path in the tests (``merge_plugins:GreatestValueMerger``)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.merge import OP_COLUMN, OP_DELETE, MergeProperties


class GreatestValueMerger:
    """Every column keeps its greatest value (null lowest): a join on each column, so a CRDT."""

    name = "greatest_value"
    properties = MergeProperties(commutative=True, associative=True, idempotent=True, with_deletes=False)

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        arrays = []
        for name in older.column_names:
            old, new = older.column(name), newer.column(name)
            take_new = pc.or_(pc.fill_null(pc.greater(new, old), False), pc.is_null(old))
            arrays.append(pc.if_else(take_new, new, old))
        return pa.Table.from_arrays(arrays, schema=older.schema)


class NotAMerger:
    """Lacks merge(): loading it must fail with a ConfigError."""

    name = "nothing"


class HistoryMerger:
    """Appends the newer ``history`` to the older one ("a" then "b": "a,b"); every other column
    takes the newer record's values, and a delete wins whole (a later insert starts afresh).
    Order-sensitive and it claims nothing, so a merge-on-read slice must be folded strictly in
    commit order to read as copy-on-write does."""

    name = "history"
    properties = MergeProperties()

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        old, new = older.column("history"), newer.column("history")
        # (null_handling="skip" would be shorter, but pyarrow 26 drops rows where both are null.)
        joined = pc.binary_join_element_wise(old, new, ",")
        history = pc.if_else(pc.is_null(old), new, pc.if_else(pc.is_null(new), old, joined))
        history = pc.if_else(pc.equal(newer.column(OP_COLUMN), OP_DELETE), new, history)
        arrays = [history if name == "history" else newer.column(name) for name in older.column_names]
        return pa.Table.from_arrays(arrays, schema=older.schema)


class FailingMerger:
    """Takes the newer record, but fails on a record whose ``n`` is -1 (user code raising in one
    file group's write: the write must stop and roll back, on one thread or many)."""

    name = "failing"
    properties = MergeProperties()

    def merge(self, older: pa.Table, newer: pa.Table) -> pa.Table:
        if pc.any(pc.equal(newer.column("n"), -1)).as_py():
            raise ValueError("poison record")
        return newer
