"""The Arrow engine's writes of file groups by their routed rows (an upsert's, insert's or
delete's): each file group's rows in key order, the file groups side by side on threads
(:mod:`tidemark.engines.arrow.tasks`), large ones alone for memory; many small ones rewritten
with one merge (:mod:`tidemark.write.small_rewrites`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import replace
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.engines.arrow.index import FileKeys
from tidemark.engines.arrow.keys import stable_order
from tidemark.engines.arrow.memory import system_allocator
from tidemark.engines.arrow.take import ChunkedRows
from tidemark.engines.arrow.tasks import WriteTasks, gives_pages_back, runs_alone, scheduling_weights, write_threads
from tidemark.format.commit_metadata import WriteStat
from tidemark.format.names import PARTITION_PATH, RECORD_KEY, write_token
from tidemark.markers.batch import declare_markers
from tidemark.write.column_encoding import with_encoding_choice
from tidemark.write.engine import FILE_ID_COLUMN
from tidemark.write.file_group import WriteSpec, base_file_marker, conform_incoming, write_file_group
from tidemark.write.small_rewrites import GroupRewrite, StoredGroup, merge_stored, read_stored, write_merged


class FileGroupWrites:
    """One write's file groups (:meth:`write`): ``tasks`` runs them on up to ``threads``
    threads (0: one per core); ``touched``: what the index lookup learnt of the base files
    whose keys it read (engines/arrow/index.py), so that their rewrites need not again."""

    def __init__(self, tasks: WriteTasks, threads: int, touched: Mapping[tuple[str, str], FileKeys]) -> None:
        self._tasks = tasks
        self.threads = threads
        self._touched = touched

    def write(
        self,
        spec: WriteSpec,
        rows: pa.Table,
        base_files: Mapping[tuple[str, str], str],
        weights: Mapping[tuple[str, str], int] | None = None,
    ) -> list[WriteStat]:
        if rows.num_rows == 0:
            return []
        spec = with_encoding_choice(spec, rows)
        # The batch is ordered by index, not copied: each file group's rows are taken in turn
        # (one group's copy at a time), put in key order by the group's own task.
        runs, positions = file_group_order(rows.select([PARTITION_PATH, FILE_ID_COLUMN]))
        keys = rows.column(RECORD_KEY).combine_chunks()
        # File groups side by side on threads (engines/arrow/tasks.py), statistics in run order;
        # large file groups one at a time (their expected bytes: memory).
        expected = None if weights is None else [weights.get((p, f), 0) for p, f, _, _ in runs]
        release = gives_pages_back(expected)  # between the steps: only a large write's pages
        if release:
            pa.default_memory_pool().release_unused()
        source = ChunkedRows(rows)
        spec.storage()  # opened (and cached) here, not by the threads at once
        # Declared before any task, the batched small rewrites' too (markers/batch.py).
        declare_markers(spec.markers.batch_id, [
            marker for task, (partition, file_id, _, _) in enumerate(runs)
            if (marker := base_file_marker(spec, partition_path=partition, file_id=file_id, token=task_token(task),
                                           base_file=base_files.get((partition, file_id)))) is not None
        ])
        chunks = small_rewrite_chunks(spec, runs, base_files, expected)
        stats = self._rewrite_small(spec, source, keys, positions, runs, chunks, base_files,
                                    release=release) if chunks else {}
        if stats:  # the other file groups are written as before, in run order with these
            rest = [task for task in range(len(runs)) if task not in stats]
            stats.update(zip(rest, self._write_groups(
                spec, source, keys, positions, runs, rest, base_files, expected), strict=True))
            return [stats[task] for task in range(len(runs))]
        return self._write_groups(spec, source, keys, positions, runs, list(range(len(runs))), base_files, expected)

    def _write_groups(
        self, spec: WriteSpec, source: ChunkedRows, keys: pa.Array, positions: np.ndarray,
        runs: Sequence[tuple[str, str, int, int]], chosen: Sequence[int], base_files: Mapping[tuple[str, str], str],
        all_expected: Sequence[int] | None,
    ) -> list[WriteStat]:
        """The file groups ``chosen`` (indices of ``runs``), each by its own task, side by side."""
        if not chosen:
            return []
        expected = None if all_expected is None else [all_expected[task] for task in chosen]
        scheduled = scheduling_weights(expected)  # a small write's groups all side by side
        alone = len(chosen) == 1 or (scheduled is not None and all(map(runs_alone, scheduled)))
        if alone and write_threads(self.threads, 2) > 1:  # one file at a time: a core for its hashing
            spec = replace(spec, hash_threads=2)
        tasks: list[Callable[[], WriteStat]] = []
        for at, task in enumerate(chosen):
            partition, file_id, start, count = runs[task]
            on_its_own = scheduled is not None and runs_alone(scheduled[at])  # a large write's large group
            tasks.append(partial(self._write_group, spec, source, keys, positions[start:start + count], partition,
                                 file_id, base_files.get((partition, file_id)), task,
                                 release=expected is None or on_its_own, system_pool=on_its_own))
        return self._tasks.run(tasks, write_threads(self.threads, len(tasks)), scheduled)

    def _rewrite_small(
        self, spec: WriteSpec, source: ChunkedRows, keys: pa.Array, positions: np.ndarray,
        runs: Sequence[tuple[str, str, int, int]], chunks: Sequence[Sequence[int]],
        base_files: Mapping[tuple[str, str], str], *, release: bool,
    ) -> dict[int, WriteStat]:
        """The small file groups of ``chunks`` (indices of ``runs``) rewritten with one merge per
        chunk (write/small_rewrites.py), by task: a chunk's base files are read side by side (its
        batch rows taken beside), merged on this thread, its new files written side by side. The
        chunks are pipelined: the next chunk's files are read while this thread merges, and at most
        three chunks are held at once. A group the merge cannot take (a key twice in its base file)
        is written by its own task, as the others are. ``release``: pyarrow's freed pages go back
        to the system at the end (a large write's, :func:`~tidemark.engines.arrow.tasks.gives_pages_back`)."""
        threads = write_threads(self.threads, sum(map(len, chunks)))
        written: list[tuple[int, Future[WriteStat]]] = []
        with self._tasks.pool(threads) as pool:

            def read(chunk: Sequence[int]) -> tuple[Future[pa.Table], list[Future[StoredGroup]]]:
                rewrites, order = self._small_rewrites(keys, positions, runs, chunk, base_files)
                incoming = pool.submit(partial(_conformed_rows, source, order, spec))
                return incoming, [pool.submit(partial(read_stored, spec, r)) for r in rewrites]

            pending = {k: read(chunks[k]) for k in range(min(2, len(chunks)))}
            for k in range(len(chunks)):
                incoming, reading = pending.pop(k)
                stored = [pool.result(f) for f in reading]
                for merged in merge_stored(spec, stored, pool.result(incoming)):
                    task = merged.stored.rewrite.task_partition
                    written.append((task, pool.submit(partial(write_merged, spec, merged))))
                for rewrite in (s.rewrite for s in stored if not s.mergeable):
                    task = rewrite.task_partition
                    partition, file_id, start, count = runs[task]
                    written.append((task, pool.submit(partial(
                        self._write_group, spec, source, keys, positions[start:start + count], partition, file_id,
                        rewrite.base_file, task, release=False))))
                del incoming, reading, stored
                if k + 2 < len(chunks):
                    pending[k + 2] = read(chunks[k + 2])
            stats = {task: pool.result(future) for task, future in written}
        if release:  # a large write's other file groups come next, some alone: its peak
            pa.default_memory_pool().release_unused()
        return stats

    def _small_rewrites(
        self, keys: pa.Array, positions: np.ndarray, runs: Sequence[tuple[str, str, int, int]],
        chunk: Sequence[int], base_files: Mapping[tuple[str, str], str],
    ) -> tuple[list[GroupRewrite], np.ndarray]:
        """The rewrites of the file groups ``chunk`` and the positions of their batch rows: the
        groups' rows one group after another, each group's in key order (rows of one key in
        batch order)."""
        counts = [runs[task][3] for task in chunk]
        order = np.concatenate([positions[runs[task][2]:runs[task][2] + runs[task][3]] for task in chunk])
        group = np.repeat(np.arange(len(chunk), dtype=np.int32), counts)
        order = order[pc.sort_indices(pa.table({"g": group, "k": keys.take(pa.array(order))}),
                                      sort_keys=[("g", "ascending"), ("k", "ascending")]).to_numpy()]
        ordered_keys = keys.take(pa.array(order))
        starts = np.cumsum([0, *counts]).tolist()
        rewrites = []
        for at, task in enumerate(chunk):
            partition, file_id = runs[task][:2]
            known = self._known_keys(partition, file_id, base_files[(partition, file_id)])
            rewrites.append(GroupRewrite(
                partition, file_id, base_files[(partition, file_id)], task_token(task), task,
                ordered_keys.slice(starts[at], counts[at]),
                stored_keys=known.keys if known is not None else None,
                footer=known.footer if known is not None else None))
        return rewrites, order

    def _write_group(
        self, spec: WriteSpec, rows: ChunkedRows, keys: pa.Array, positions: np.ndarray, partition: str,
        file_id: str, base_file: str | None, task: int, *, release: bool = True, system_pool: bool = False,
    ) -> WriteStat:
        """``system_pool``: the group is rewritten alone to bound the write's peak memory, on the
        system allocator (engines/arrow/memory.py)."""
        with system_allocator() if system_pool else contextlib.nullcontext():
            # Taken when the task starts (one group in memory per thread), in key order.
            group = rows.take(in_key_order(keys, positions))
            known = self._known_keys(partition, file_id, base_file)
            stat = write_file_group(
                spec, group, partition_path=partition, file_id=file_id, base_file=base_file,
                token=task_token(task), task_partition=task,
                touched_rows=known.rows if known is not None else None,
                stored_keys=known.keys if known is not None else None,
                base_footer=known.footer if known is not None else None,
            )
            del group
        if release:  # a large write's large group's pages back to the system; else they serve the next group
            pa.default_memory_pool().release_unused()
        return stat

    def _known_keys(self, partition: str, file_id: str, base_file: str | None) -> FileKeys | None:
        """What the index lookup found reading the keys of the base file (if it read this very
        file): the rows that hold the batch's keys, maybe all of its keys; the rewrite then need
        not probe each slice of it again, nor decode its keys."""
        known = self._touched.get((partition, file_id))
        return known if known is not None and base_file is not None and known.path == base_file else None


# A copy-on-write write's file groups expected to write this many bytes or fewer are small:
# four or more of them in one write are rewritten with one merge (write/small_rewrites.py), in
# chunks of at most SMALL_REWRITE_CHUNK_BYTES (every base file of a chunk is held decoded at once).
SMALL_REWRITE_BYTES = 4 * 1024 * 1024
SMALL_REWRITE_CHUNK_BYTES = 32 * 1024 * 1024
SMALL_REWRITE_MIN_GROUPS = 4


def small_rewrite_chunks(
    spec: WriteSpec, runs: Sequence[tuple[str, str, int, int]], base_files: Mapping[tuple[str, str], str],
    expected: Sequence[int] | None,
) -> list[list[int]]:
    """The small file groups of ``runs`` to rewrite with one merge per chunk (indices of ``runs``,
    in run order); none if fewer than SMALL_REWRITE_MIN_GROUPS, for a merge-on-read write (its
    file groups get log files) or without the groups' expected sizes."""
    if spec.log_schema is not None or expected is None:
        return []
    small = [task for task, (partition, file_id, _, _) in enumerate(runs)
             if (partition, file_id) in base_files and expected[task] <= SMALL_REWRITE_BYTES
             and not runs_alone(expected[task])]
    if len(small) < SMALL_REWRITE_MIN_GROUPS:
        return []
    chunks: list[list[int]] = [[]]
    size = 0
    for task in small:
        if chunks[-1] and size + expected[task] > SMALL_REWRITE_CHUNK_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(task)
        size += expected[task]
    return chunks


def _conformed_rows(source: ChunkedRows, positions: np.ndarray, spec: WriteSpec) -> pa.Table:
    """The batch's rows at ``positions``, conformed to the write's base files (conform_incoming)."""
    return conform_incoming(source.take(positions), spec.schema)


def task_token(task: int) -> str:
    """The write token of the Arrow engine's task ``task`` (one attempt: a failed write fails)."""
    return write_token(task, 0, task)


def file_group_order(rows: pa.Table) -> tuple[list[tuple[str, str, int, int]], np.ndarray]:
    """The file groups of ``rows`` (its partition path and file id columns) in (partition path,
    file id) order, as (partition path, file id, first, count) into the returned positions of
    the rows, where each group's rows are one run in batch order. Each value is hashed once and
    the rows are ordered by the pair's code in linear time; each group's task puts its own rows
    in key order (:func:`in_key_order`): a sort of the batch by the three columns cost the
    calling thread 28 ms per 100,000 rows before any group could start. A null sorts last, as
    in a sort of the columns."""
    if rows.num_rows == 0:
        return [], np.empty(0, dtype=np.int64)
    codes, names = [], []
    for column in (PARTITION_PATH, FILE_ID_COLUMN):
        values = rows.column(column).combine_chunks()
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        encoded = values.dictionary_encode()
        by_text = pc.sort_indices(encoded.dictionary).to_numpy()
        rank = np.empty(len(by_text) + 1, dtype=np.int64)  # each value's place in text order; null last
        rank[by_text] = np.arange(len(by_text))
        rank[len(by_text)] = len(by_text)
        codes.append(rank[pc.fill_null(encoded.indices, len(by_text)).to_numpy(zero_copy_only=False)])
        names.append([*encoded.dictionary.take(pa.array(by_text)).to_pylist(), None])
    width = len(names[1])
    pairs = codes[0] * width + codes[1]
    positions = stable_order(pairs, len(names[0]) * width).astype(np.int64)
    ordered = pairs[positions]
    starts = np.concatenate([[0], np.flatnonzero(np.diff(ordered)) + 1])
    counts = np.diff(np.concatenate([starts, [len(ordered)]]))
    runs = [(names[0][pair // width], names[1][pair % width], start, count)
            for pair, start, count in zip(ordered[starts].tolist(), starts.tolist(), counts.tolist(), strict=True)]
    return runs, positions


def in_key_order(keys: pa.Array, positions: np.ndarray) -> np.ndarray:
    """``positions`` (one file group's rows, in batch order) ordered by their record keys
    (``keys``: the batch's), rows of one key in batch order: the order a group is written in."""
    if len(positions) < 2:
        return positions
    return positions[pc.sort_indices(keys.take(pa.array(positions))).to_numpy()]


__all__ = ["FileGroupWrites", "file_group_order", "in_key_order", "small_rewrite_chunks", "task_token"]
