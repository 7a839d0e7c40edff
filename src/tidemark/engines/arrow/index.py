"""The Arrow engine's index lookup (Hudi's simple index with its bloom index): the base file that
holds each key of a batch, if any.

Each key lives in at most one base file of its partition. Each candidate file (the latest base
file of a partition the batch names; every file for a batch without partition paths) is judged
by its footer (key range, bloom filter) against the batch's keys of its partition; unless that
rules them all out, its stored keys are read and probed, the files side by side on the write
threads. The positions of the file's rows that the batch holds come back too, so that the
file's rewrite need not probe its keys again (:attr:`Lookup.touched`), and, for files to be
rewritten side by side (all but the large files of a large write, which are rewritten alone:
one whose probed files and batch weigh more than the side-by-side bound of
:func:`~tidemark.engines.arrow.tasks.scheduling_weights`; up to a budget in all), the keys
read, so that the rewrite need not decode its record-key column again. A key found stored in
two files (a damaged table) is tagged as a join would: one row per file.

An upsert's partition whose one file group takes all of its rows, found or not
(:class:`~tidemark.write.plan.SoleSmallFile`), is not probed: its rows are tagged with that file
group and its rewrite finds the stored keys as it merges. The probe would read the same keys
once more, before any file group could start (100 partitions of 10,000 rows: 0.1 s of a 0.7 s
upsert, on one core: a probe of a small file is mostly the interpreter's work).

(The Spark engine may locate keys by the footers alone, reading no key:
:func:`tidemark.engines.spark.bloom_index.tag_by_footers`. Here that was measured to cost as
much as it saves: the keys read are then probed by each file's rewrite instead, and with many
small files the per-partition probing of footers costs more than reading their keys.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tidemark.engines.arrow.keys import rows_by_code
from tidemark.engines.arrow.tasks import WriteTasks, gives_pages_back, runs_alone, write_threads
from tidemark.format.names import PARTITION_PATH, RECORD_KEY
from tidemark.format.parquet_file import read_data_file
from tidemark.fsview import BaseFile, FileSystemView
from tidemark.write.engine import FILE_ID_COLUMN
from tidemark.write.key_pruning import MAY_HOLD, footer_verdict, read_footer
from tidemark.write.plan import SoleSmallFile

_SEQ = "_tm_seq"

# Record keys read by the lookup kept for the rewrites, in all (bytes of the decoded keys):
# beyond it (and for a file rewritten alone in a large write) the rewrite decodes them again.
KEPT_KEY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class FileKeys:
    """What reading one base file's record keys found."""

    path: str  # the base file's (table-relative) path
    rows: np.ndarray  # the ascending positions of its rows that hold the batch's keys
    keys: pa.Array | None = None  # all of its record keys in file order, if kept for the rewrite
    footer: pq.FileMetaData | None = None  # its parquet footer, kept with the keys


@dataclass
class Lookup:
    """A batch tagged by :func:`tag`."""

    tagged: pa.Table  # the batch with each row's file id (null: a new key), and the partition path if it had none
    # What reading a file's keys found, by (partition path, file id).
    touched: dict[tuple[str, str], FileKeys] = field(default_factory=dict)


def tag(
    frame: pa.Table, view: FileSystemView, tasks: WriteTasks, threads: int, sole: SoleSmallFile | None = None,
    *, keep_keys: bool = True,
) -> Lookup:
    """``frame`` (the prepared batch) with each row's file id (see the module). Files are read
    side by side on up to ``threads`` threads, large ones too: a probe holds a file's keys, not
    its rows (the rewrites of large file groups run one at a time: engines/arrow/tasks.py).
    ``sole``: the rows of a partition whose one file group takes them all are tagged with it,
    unprobed (nothing of that file is in :attr:`Lookup.touched`). ``keep_keys``: whether the
    files' keys may be kept for their rewrites (not where no base file is rewritten)."""
    by_partition = PARTITION_PATH in frame.column_names
    n = frame.num_rows
    keys = frame.column(RECORD_KEY).combine_chunks().cast(pa.string()) if n else pa.array([], pa.string())
    rows_of: dict[str, np.ndarray] = {}
    if by_partition and n:
        encoded = pc.fill_null(frame.column(PARTITION_PATH).combine_chunks(), "").dictionary_encode()
        rows_of = _rows_by_code(encoded)
    files = view.latest_base_files(sorted(rows_of) if by_partition else None)
    owner = np.full(n, -1, dtype=np.int64)  # each row's index in ``files``; -1: no file holds it
    touched: dict[tuple[str, str], FileKeys] = {}
    probed = [(i, f, rows_of.get(f.partition_path)) for i, f in enumerate(files)]
    probed = [(i, f, rows) for i, f, rows in probed if rows is not None or not by_partition]
    settled: dict[int, BaseFile] = {}  # the files of partitions tagged unprobed, by index
    if sole is not None and by_partition:
        groups_in = Counter(f.partition_path for f in files)
        for i, f, mine in probed:
            if mine is not None and groups_in[f.partition_path] == 1 and sole.takes_all(f.size, len(mine)):
                owner[mine] = i
                settled[i] = f
        probed = [(i, f, rows) for i, f, rows in probed if i not in settled]
    # A large write (its probed files and its batch above the side-by-side bound, as its file
    # groups will weigh) gives pages back: a large file's probe as it ends (its rewrite comes
    # next, alone: the peak), and the lookup; a small write keeps them for its rewrites.
    large = gives_pages_back([*(f.size for _, f, _ in probed), frame.nbytes])
    probes = tasks.run(
        [partial(_probe_file, view, f, keys, rows, release=large and runs_alone(f.size)) for _, f, rows in probed],
        write_threads(threads, len(probed)),
    )
    # A file whose footer ruled every key out was not read (None).
    read = [(i, f, rows, found) for (i, f, rows), found in zip(probed, probes, strict=True) if found is not None]
    budget = KEPT_KEY_BYTES
    for i, f, rows, (hit, stored_rows, stored_keys, footer) in read:
        where = hit if rows is None else rows[hit]
        if (owner[where] >= 0).any():  # a key stored in two files
            return Lookup(_tag_by_join(frame, [*settled.values(), *(f for _, f, _, _ in read)], view, by_partition))
        owner[where] = i
        # Kept only for a file some of whose keys the batch holds (it will be rewritten) and
        # that is rewritten beside others: a large file rewritten alone (in a large write)
        # holds memory enough already.
        # Its footer too (the rewrite does not read it again), counted in: it holds the filter.
        size = stored_keys.nbytes + (footer.serialized_size if footer is not None else 0)
        keep = keep_keys and len(stored_rows) > 0 and not (large and runs_alone(f.size)) and size <= budget
        budget -= size if keep else 0
        touched[(f.partition_path, f.file_id)] = FileKeys(
            f.path, stored_rows, stored_keys if keep else None, footer if keep else None)
    if large:  # the files' keys and hash tables: freed pages back
        pa.default_memory_pool().release_unused()
    return Lookup(_with_owners(frame, files, owner, by_partition), touched)


def _with_owners(frame: pa.Table, files: Sequence[BaseFile], owner: np.ndarray, by_partition: bool) -> pa.Table:
    """``frame`` with the file id of ``files[owner]`` (null where ``owner`` is negative) and, for a
    batch without partition paths, the holding file's partition path."""
    missing = pa.array(owner < 0)
    at = pa.array(np.maximum(owner, 0))
    file_ids = pa.array([f.file_id for f in files] or [""], pa.string()).take(at)
    tagged = frame
    if not by_partition:
        paths = pa.array([f.partition_path for f in files] or [""], pa.string()).take(at)
        tagged = tagged.append_column(PARTITION_PATH, pc.if_else(missing, pa.scalar(None, pa.string()), paths))
    return tagged.append_column(FILE_ID_COLUMN, pc.if_else(missing, pa.scalar(None, pa.string()), file_ids))


def _tag_by_join(frame: pa.Table, files: Sequence[BaseFile], view: FileSystemView, by_partition: bool) -> pa.Table:
    """Tagging by a join of the batch with every candidate file's keys: a key stored twice
    gives a row per file, as Hudi's join-based index does."""
    pieces = []
    for f in files:
        # Two columns of the file: ranged reads of their chunks on an object store, not the file.
        source = view.storage.open_ranged(f.path)
        keys = read_data_file(source, path=f.path, columns=[RECORD_KEY, PARTITION_PATH])
        pieces.append(keys.append_column(FILE_ID_COLUMN, pa.array([f.file_id] * keys.num_rows, pa.string())))
    existing = pa.concat_tables(pieces)
    on = [PARTITION_PATH, RECORD_KEY] if by_partition else [RECORD_KEY]
    if by_partition:
        existing = existing.select([*on, FILE_ID_COLUMN])
    # Join the keys and row positions only, then take: Arrow's hash join cannot carry
    # nested columns (lists, structs, maps) and need not copy the batch's values at all.
    positions = frame.select(on).append_column(_SEQ, pa.array(np.arange(frame.num_rows, dtype=np.int64)))
    found = positions.join(existing, keys=on, join_type="left outer", use_threads=False)
    found = found.sort_by(_SEQ)
    looked_up = [c for c in existing.column_names if c not in on]
    rows = frame.take(found.column(_SEQ))  # a key held twice would appear twice, as with a join
    for name in looked_up:
        rows = rows.append_column(name, found.column(name))
    return rows


def _probe_file(
    view: FileSystemView, f: BaseFile, keys: pa.Array, rows: np.ndarray | None, *, release: bool = False
) -> tuple[np.ndarray, np.ndarray, pa.Array, pq.FileMetaData | None] | None:
    """:func:`_found_in_file` for the batch's ``keys`` at ``rows`` (None: all of them), and the
    file's footer; None when the footer rules every one of them out (the file is not read).
    ``release``: give the thread's freed pages back to the system at the end."""
    probe = keys if rows is None else keys.take(pa.array(rows))
    footer = read_footer(view.storage, f)
    if footer is not None and footer_verdict(footer, probe) != MAY_HOLD:
        return None
    found = (*_found_in_file(view, f.path, probe, footer), footer)
    if release:
        pa.default_memory_pool().release_unused()
    return found


def _rows_by_code(encoded: pa.DictionaryArray) -> dict[str, np.ndarray]:
    """The positions (ascending) of each dictionary value's rows in ``encoded``."""
    groups = rows_by_code(encoded.indices.to_numpy(zero_copy_only=False), len(encoded.dictionary))
    return dict(zip(encoded.dictionary.to_pylist(), groups, strict=True))


def _found_in_file(
    view: FileSystemView, path: str, probe: pa.Array, footer: pq.FileMetaData | None = None
) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """The positions of ``probe``'s keys that the base file at ``path`` holds, the positions
    of the file's rows that hold them (both ascending), and the file's keys.

    The hash table is built on the smaller side (inserting a million stored keys into a hash
    table costs ~4x looking them up), usually the batch's keys, which the file's keys probe.
    """
    # One column of the file: ranged reads of its chunks on an object store, not the file.
    stored = read_data_file(view.storage.open_ranged(path), path=path, columns=[RECORD_KEY], metadata=footer)
    keys = stored.column(RECORD_KEY).combine_chunks().cast(pa.string())
    if len(keys) < len(probe):  # a small file: its keys are the table, the batch's probe them
        hit = np.flatnonzero(pc.is_in(probe, value_set=keys).to_numpy(zero_copy_only=False))
        found_keys = probe.take(pa.array(hit))
        return hit, np.flatnonzero(pc.is_in(keys, value_set=found_keys).to_numpy(zero_copy_only=False)), keys
    at = pc.index_in(keys, value_set=probe)
    stored_rows = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))
    first = np.unique(at.drop_null().to_numpy())  # the first position in ``probe`` of each key found
    if len(first) == 0:
        return first.astype(np.int64), stored_rows, keys
    # Every position of those keys (a batch that was not deduplicated may hold a key twice).
    found = pc.is_in(probe, value_set=probe.take(pa.array(first)))
    return np.flatnonzero(found.to_numpy(zero_copy_only=False)), stored_rows, keys


__all__ = ["FileKeys", "Lookup", "tag"]
