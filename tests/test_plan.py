"""File sizing: inserts top up small files first, then fill new file groups."""

from __future__ import annotations

from tidemark.write.plan import SmallFile, plan_inserts

MB = 1024 * 1024


def test_inserts_fill_small_files_before_new_groups() -> None:
    small = {"p": [SmallFile("small-0", "p/small.parquet", 10 * MB)]}
    buckets = plan_inserts({"p": 150_000}, small, record_size=1024, max_file_size=120 * MB)
    assert buckets[0].file_id == "small-0"
    assert buckets[0].records == (110 * MB) // 1024
    assert sum(b.records for b in buckets) == 150_000
    assert all(b.base_file is None for b in buckets[1:])


def test_buckets_cover_the_hash_space_in_order() -> None:
    buckets = plan_inserts({"a": 1000, "b": 10}, {}, record_size=100, max_file_size=30_000)
    for partition in ("a", "b"):
        mine = [b for b in buckets if b.partition_path == partition]
        assert mine[0].low == 0.0
        assert mine[-1].high == 1.0
        for left, right in zip(mine, mine[1:], strict=False):
            assert left.high == right.low
    a = [b for b in buckets if b.partition_path == "a"]
    assert len(a) == 4  # 300 records per file of 30 kB
    assert max(b.records for b in a) - min(b.records for b in a) <= 1


def test_full_small_files_take_nothing() -> None:
    small = {"p": [SmallFile("full-0", "p/full.parquet", 120 * MB)]}
    buckets = plan_inserts({"p": 5}, small, record_size=1024, max_file_size=120 * MB)
    assert [b.base_file for b in buckets] == [None]


def test_no_inserts_no_buckets() -> None:
    assert plan_inserts({"p": 0}, {}, record_size=1, max_file_size=10) == []


def test_small_files_the_write_rewrites_anyway_are_topped_up_first() -> None:
    small = {"p": [SmallFile("tiny", "p/tiny.parquet", 5 * MB), SmallFile("updated", "p/updated.parquet", 60 * MB),
                   SmallFile("other", "p/other.parquet", 30 * MB)],
             "q": [SmallFile("updated", "q/updated.parquet", 50 * MB), SmallFile("q-tiny", "q/tiny.parquet", MB)]}
    rewritten = {("p", "updated")}  # "updated" of q is another file group: not rewritten
    buckets = plan_inserts({"p": 1_000, "q": 1_000}, small, record_size=1024, max_file_size=120 * MB,
                           rewritten=rewritten)
    assert [(b.partition_path, b.file_id) for b in buckets] == [("p", "updated"), ("q", "q-tiny")]
    # More than the rewritten file can take: the rest goes to the others, smallest first.
    over = plan_inserts({"p": (60 + 115 + 10) * MB // 1024}, small, record_size=1024, max_file_size=120 * MB,
                        rewritten=rewritten)
    assert [(b.file_id, b.records) for b in over] == [("updated", 60 * MB // 1024), ("tiny", 115 * MB // 1024),
                                                      ("other", 10 * MB // 1024)]


def test_a_sole_small_file_takes_all_rows_exactly_where_the_plan_would_top_it_up_with_all() -> None:
    """SoleSmallFile (an upsert's partitions left unprobed) agrees with plan_inserts: a partition's
    one file group takes all of its rows as inserts iff the plan would give them all to it."""
    import random

    from tidemark.write.plan import SoleSmallFile, room_for

    rng = random.Random(7)
    for _ in range(2000):
        limit, most, record = rng.choice([0, 50, 100 * MB]), rng.choice([1000, 120 * MB]), rng.randint(1, 5000)
        size, rows = rng.randint(0, 130 * MB if most > 1000 else 1500), rng.randint(1, 200_000)
        small = {"p": [SmallFile("f", "p/f.parquet", size)]} if size < limit else {}
        buckets = plan_inserts({"p": rows}, small, record_size=record, max_file_size=most)
        sole = SoleSmallFile(small_file_limit=limit, max_file_size=most, record_size=record)
        assert sole.takes_all(size, rows) == ([b.file_id for b in buckets] == ["f"]), (limit, most, record, size, rows)
    assert room_for(100, max_file_size=1000, record_size=300) == 3
    assert room_for(1200, max_file_size=1000, record_size=300) == 0
    edge = SoleSmallFile(small_file_limit=500, max_file_size=1000, record_size=300)
    assert edge.takes_all(100, 3) and not edge.takes_all(100, 4) and not edge.takes_all(500, 1)
