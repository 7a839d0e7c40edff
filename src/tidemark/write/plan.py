"""Where inserts go: file sizing, decided on the driver from small aggregates.

Inserts of a partition first top up its *small* file groups (base file below
``hoodie.parquet.small.file.limit``) up to ``hoodie.parquet.max.file.size``,
then fill new file groups of at most that size. Small file groups the write rewrites anyway
(for its updates) come first, then the smallest: inserts routed to an untouched one would
rewrite a whole base file more on a copy-on-write table. Each bucket gets a share of the
partition's key-hash space proportional to the records it should take, so the
engine can route each insert with a pure function of its key.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from tidemark.format.names import new_file_id


@dataclass(frozen=True)
class SmallFile:
    file_id: str
    base_file: str  # table-relative path of its current base file
    size: int


@dataclass(frozen=True)
class InsertBucket:
    """A file group that takes the inserts whose key hash falls in [low, high)."""

    partition_path: str
    file_id: str
    base_file: str | None  # None: a new file group
    records: int
    low: float
    high: float


def room_for(size: int, *, max_file_size: int, record_size: int) -> int:
    """How many records of ``record_size`` bytes a base file of ``size`` bytes takes before it
    reaches ``max_file_size``."""
    return max(0, (max_file_size - size) // max(1, record_size))


@dataclass(frozen=True)
class SoleSmallFile:
    """An upsert's test for a partition whose rows need no index lookup (copy-on-write, small
    files topped up).

    When a partition has one file group and its base file is small (below ``small_file_limit``)
    with room for every row of the batch's partition as an insert, each row goes there whether
    its key exists or not: an existing key lives in that file group, a new one is topped up into
    it (:func:`plan_inserts` would choose it for all of them). An engine may then tag the rows
    with that file group without reading its keys; the rewrite finds them as it merges, and its
    write statistics count updates and inserts as a lookup would have.
    """

    small_file_limit: int
    max_file_size: int
    record_size: int

    def takes_all(self, size: int, rows: int) -> bool:
        """Whether a partition's one base file, of ``size`` bytes, takes all of its ``rows``."""
        return size < self.small_file_limit and \
            room_for(size, max_file_size=self.max_file_size, record_size=self.record_size) >= rows


def plan_inserts(
    insert_counts: Mapping[str, int],
    small_files: Mapping[str, Sequence[SmallFile]],
    *,
    record_size: int,
    max_file_size: int,
    rewritten: Collection[tuple[str, str]] = (),
) -> list[InsertBucket]:
    """Buckets for every partition with inserts, covering its whole hash range [0, 1).
    ``rewritten``: the (partition path, file id) of the file groups the write rewrites anyway."""
    buckets: list[InsertBucket] = []
    per_file = max(1, max_file_size // max(1, record_size))
    for partition, count in sorted(insert_counts.items()):
        if count <= 0:
            continue
        remaining = count
        shares: list[tuple[str, str | None, int]] = []
        for small in sorted(small_files.get(partition, ()),
                            key=lambda s: ((partition, s.file_id) not in rewritten, s.size)):
            room = room_for(small.size, max_file_size=max_file_size, record_size=record_size)
            take = min(room, remaining)
            if take > 0:
                shares.append((small.file_id, small.base_file, take))
                remaining -= take
            if remaining == 0:
                break
        if remaining > 0:
            groups = -(-remaining // per_file)  # ceil
            base, extra = divmod(remaining, groups)
            for i in range(groups):
                shares.append((new_file_id(), None, base + (1 if i < extra else 0)))
        low = 0.0
        for i, (file_id, base_file, take) in enumerate(shares):
            high = 1.0 if i == len(shares) - 1 else low + take / count
            buckets.append(InsertBucket(partition, file_id, base_file, take, low, high))
            low = high
    return buckets
