"""Which Spark task writes which file group.

A file-group write costs about the size of the file group's base file (it is read
and rewritten whole), which the rows shuffled to it do not show. Hashing the file
ids onto tasks, as ``repartition(n, partition, file id)`` does, can put three of
four file groups into one task and none into two others: a 1M-row upsert that
touched 4 file groups ran its writes as tasks of 1.7 s, 0.7 s and two empty ones.

So when the driver knows the file groups a write touches and what each costs, it
lays them out itself (:func:`balance`, largest first) and steers every row to its
task with a column whose Spark hash lands in that task's partition
(:func:`partition_keys`).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Mapping
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

_SEED = 42  # the seed of Spark's hash partitioning (Murmur3Hash in HashPartitioning)
_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def spark_hash_int(value: int) -> int:
    """Spark's ``hash()`` of an IntegerType value (Murmur3 x86 32-bit, seed 42), as a signed int.

    Spark partitions a ``repartition(n, column)`` row into ``pmod(hash, n)``.
    """
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = _SEED ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # the length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def partition_keys(partitions: int) -> list[int]:
    """For each partition ``p`` of a ``repartition(partitions, column)``, the smallest
    non-negative int whose rows Spark puts into ``p``."""
    keys: dict[int, int] = {}
    value = 0
    while len(keys) < partitions:
        keys.setdefault(spark_hash_int(value) % partitions, value)  # Python's % is Spark's pmod here
        value += 1
    return [keys[p] for p in range(partitions)]


def balance(weights: Mapping[K, int], tasks: int) -> dict[K, int]:
    """Assign every key to one of ``tasks`` tasks, balancing the summed weights.

    Heaviest first, each to the task with the least weight so far (the LPT rule); then
    the tasks are numbered by their weight, heaviest first, because Spark starts a
    stage's tasks in partition order: the longest work starts first.
    """
    tasks = max(1, min(tasks, len(weights)))
    loads = [(0, t) for t in range(tasks)]
    members: list[list[K]] = [[] for _ in range(tasks)]
    for key, weight in sorted(weights.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        load, task = heapq.heappop(loads)
        members[task].append(key)
        heapq.heappush(loads, (load + max(0, weight), task))
    totals = dict((t, load) for load, t in loads)
    order = sorted(range(tasks), key=lambda t: (-totals[t], t))
    return {key: number for number, task in enumerate(order) for key in members[task]}
