"""Taking rows of a chunked Arrow table without concatenating it on every take.

``Table.take`` on a table of several chunks concatenates every column's chunks first (~7 ms
per million rows on each call, whatever the number of rows taken): a write taking each file
group's (or partition's) rows in turn would pay it once per group. :class:`ChunkedRows` takes
from each chunk (a record batch) only the rows it holds, then puts them in the order asked for.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa


def even_slices(rows: int, pieces: int) -> list[tuple[int, int]]:
    """(offset, length) of ``pieces`` consecutive runs covering ``rows`` rows in order, their
    lengths within one of each other."""
    bounds = np.linspace(0, rows, pieces + 1).astype(np.int64).tolist()
    return [(a, b - a) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


class ChunkedRows:
    """``table``'s rows by position, each take costing only the rows it takes."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.schema = table.schema
        self._batches = table.to_batches()  # zero-copy slices where the columns' chunks differ
        self._starts = np.cumsum([0, *(b.num_rows for b in self._batches)])
        self._one_chunk = len(self._batches) <= 1

    def take(self, positions: np.ndarray) -> pa.Table:
        """The rows at ``positions`` (any order, as int64 numpy positions), in that order."""
        positions = np.asarray(positions, dtype=np.int64)
        if self._one_chunk:
            return self.table.take(pa.array(positions))
        ascending = bool(len(positions) < 2 or (np.diff(positions) >= 0).all())
        order = None if ascending else np.argsort(positions, kind="stable")
        wanted = positions if order is None else positions[order]
        bounds = np.searchsorted(wanted, self._starts)
        pieces = [
            self._batches[b].take(pa.array(wanted[bounds[b]:bounds[b + 1]] - self._starts[b]))
            for b in range(len(self._batches)) if bounds[b + 1] > bounds[b]
        ]
        rows = pa.Table.from_batches(pieces, schema=self.schema) if pieces else self.schema.empty_table()
        if order is None:
            return rows
        back = np.empty(len(order), dtype=np.int64)
        back[order] = np.arange(len(order))
        return rows.combine_chunks().take(pa.array(back))  # the group's own rows only: one chunk


def take_columns(table: pa.Table, indices: pa.Array, threads: int) -> pa.Table:
    """``table.take(indices)``, its columns split between ``threads`` threads (pyarrow's take
    releases the GIL but runs one column after another): the same table in about 1/threads
    of the time, for the same memory. Columns that are one array (a string record key is its
    key field's column) are taken once and stay one."""
    names = table.column_names
    if threads <= 1 or len(names) <= 1:
        return table.take(indices)
    # The first column of each set of columns made of the same buffers.
    first_of: dict[tuple[object, ...], int] = {}
    source = [first_of.setdefault(buffer_identity(table.column(i)), i) for i in range(len(names))]
    distinct = sorted(set(source))
    # Columns dealt out largest first to the thread with the fewest bytes so far.
    groups: list[list[int]] = [[] for _ in range(min(threads, len(distinct)))]
    load = [0] * len(groups)
    for i in sorted(distinct, key=lambda i: -table.column(i).nbytes):
        lightest = load.index(min(load))
        groups[lightest].append(i)
        load[lightest] += table.column(i).nbytes
    with ThreadPoolExecutor(max_workers=len(groups), thread_name_prefix="tidemark-take") as pool:
        parts = list(pool.map(lambda group: table.select(group).take(indices), groups))
    columns: dict[int, pa.ChunkedArray] = {}
    for group, part in zip(groups, parts, strict=True):
        columns.update(zip(group, part.columns, strict=True))
    return pa.Table.from_arrays([columns[source[i]] for i in range(len(names))], schema=table.schema)


def buffer_identity(column: pa.ChunkedArray | pa.Array) -> tuple[object, ...]:
    """What makes ``column`` the values it is: its type, its chunks' offsets and lengths and
    the addresses of their buffers (two columns alike in these are views of the same memory,
    hence hold the same values: Arrow arrays do not change)."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts: list[object] = [column.type, len(chunks)]
    for chunk in chunks:
        parts += [chunk.offset, len(chunk)]
        parts += [b.address if b is not None else 0 for b in chunk.buffers()]
    return tuple(parts)
