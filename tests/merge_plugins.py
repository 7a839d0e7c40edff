"""A user-supplied merger, loaded by import path in the tests (``merge_plugins:GreatestValueMerger``)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from tidemark.merge import MergeProperties


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
