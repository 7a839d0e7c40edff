"""Bucket index: a key's file group is a pure function of its partition and key (Arrow engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from conftest import hudi_rs_read
from tidemark import Table
from tidemark.errors import ConfigError
from tidemark.write.bucket import (
    BucketSpec,
    bucket_file_id,
    bucket_of,
    bucket_of_file_id,
    existing_buckets,
    java_list_hash,
    java_string_hash,
)

BUCKET = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "4"}


def file_group_of_each_key(table: Table) -> dict[Any, str]:
    data = table.read().select(["id", "_hoodie_file_name"]).to_pylist()
    return {r["id"]: r["_hoodie_file_name"].split("_", 1)[0] for r in data}


def test_java_compatible_hashing() -> None:
    # values of java.lang.String.hashCode / List.hashCode, as Hudi's BucketIdentifier uses them
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == 0x80000000  # Integer.MIN_VALUE
    assert java_list_hash(["abc"]) == 31 + 96354
    assert bucket_of(["abc"], 4) == (31 + 96354) % 4


def test_bucket_file_ids_carry_the_bucket_number() -> None:
    assert bucket_file_id(7) == "00000007-0000-0000-0000-000000000000-0"
    assert bucket_of_file_id(bucket_file_id(123)) == 123
    assert bucket_of_file_id("3f2a9c1e-1111-2222-3333-444455556666-0") is None
    found = existing_buckets([("p", "00000001-bbbb-0"), ("p", "00000001-aaaa-0"), ("q", "not-a-bucket")])
    assert found == {"p": {1: "00000001-aaaa-0"}}


def test_same_key_lands_in_the_same_file_group_across_writes_and_writers(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    first = Table.create(path, spark=None, record_key="id", partition_by="city", ordering_field="ts", options=BUCKET)
    first.upsert(pa.table({"id": list(range(20)), "city": ["sf"] * 10 + ["la"] * 10, "ts": [1] * 20}))
    placed = file_group_of_each_key(first)
    for key, file_id in placed.items():
        assert file_id == bucket_file_id(bucket_of([str(key)], 4))
    second = Table.open(path, spark=None)  # another writer
    result = second.upsert(pa.table({"id": [0, 15, 100], "city": ["sf", "la", "sf"], "ts": [2, 2, 2]}))
    assert result.num_updates == 2 and result.num_inserts == 1
    again = file_group_of_each_key(second)
    assert all(again[k] == placed[k] for k in placed)
    assert again[100] == bucket_file_id(bucket_of(["100"], 4))
    groups = {(f.partition_path, f.file_id) for f in second.read_plan().files}
    assert len(groups) <= 8  # at most num_buckets per partition
    assert sorted(hudi_rs_read(path).column("id").to_pylist()) == sorted([*range(20), 100])


def test_deletes_and_stale_deletes_with_the_bucket_index(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts", options=BUCKET)
    table.upsert(pa.table({"id": [1, 2, 3], "ts": [5, 5, 5]}))
    files_before = len(table.read_plan().files)
    result = table.delete(pa.table({"id": [1, 2, 99], "ts": [9, 1, 9]}))  # 2 is stale, 99 absent
    assert result.num_deletes == 1
    assert sorted(table.read().column("id").to_pylist()) == [2, 3]
    assert len(table.read_plan().files) == files_before  # no file group made for key 99


def test_insert_overwrite_replaces_buckets_with_new_file_groups(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", partition_by="city", options=BUCKET)
    table.upsert(pa.table({"id": [1, 2, 3], "city": ["sf", "sf", "la"]}))
    table.insert_overwrite(pa.table({"id": [7, 8], "city": ["sf", "sf"]}))
    rows = table.read().select(["id", "city", "_hoodie_file_name"]).to_pylist()
    assert sorted((r["id"], r["city"]) for r in rows) == [(3, "la"), (7, "sf"), (8, "sf")]
    for r in rows:
        assert bucket_of_file_id(r["_hoodie_file_name"]) == bucket_of([str(r["id"])], 4)
    # later writes find the new file groups by listing
    table.upsert(pa.table({"id": [7], "city": ["sf"]}))
    ids = {r["_hoodie_file_name"].split("_")[0] for r in table.read().to_pylist() if r["city"] == "sf"}
    assert len(ids) <= 2
    assert sorted(hudi_rs_read(str(tmp_path / "t")).column("id").to_pylist()) == [3, 7, 8]


def test_bulk_insert_goes_to_the_buckets_too(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=BUCKET)
    table.bulk_insert(pa.table({"id": list(range(10))}))
    table.bulk_insert(pa.table({"id": [0, 1]}))
    assert sorted(table.read().column("id").to_pylist()) == list(range(10))
    assert {bucket_of_file_id(f.file_id) for f in table.read_plan().files} <= {0, 1, 2, 3}


def test_hash_field_subset_of_a_composite_key(tmp_path: Path) -> None:
    options = {**BUCKET, "hoodie.bucket.index.hash.field": "tenant"}
    table = Table.create(str(tmp_path / "t"), spark=None, record_key=["tenant", "id"], options=options)
    table.upsert(pa.table({"tenant": ["x"] * 5 + ["y"] * 5, "id": list(range(10))}))
    rows = table.read().select(["tenant", "_hoodie_file_name"]).to_pylist()
    by_tenant: dict[str, set[str]] = {}
    for r in rows:
        by_tenant.setdefault(r["tenant"], set()).add(r["_hoodie_file_name"].split("_")[0])
    assert by_tenant == {t: {bucket_file_id(bucket_of([t], 4))} for t in ("x", "y")}
    assert "hoodie.bucket.index.hash.field=tenant" in (tmp_path / "t/.hoodie/hoodie.properties").read_text()


def test_insert_with_drop_policy_still_drops_existing_keys(tmp_path: Path) -> None:
    table = Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts", options=BUCKET)
    table.upsert(pa.table({"id": [1], "ts": [1], "v": ["stored"]}))
    dropping = Table.open(str(tmp_path / "t"), spark=None, options={"hoodie.datasource.insert.dup.policy": "drop"})
    dropping.insert(pa.table({"id": [1, 2], "ts": [9, 9], "v": ["dup", "new"]}))
    assert sorted(table.read().select(["id", "v"]).to_pylist(), key=str) == [
        {"id": 1, "v": "stored"},
        {"id": 2, "v": "new"},
    ]


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({**BUCKET, "hoodie.bucket.index.num.buckets": "0"}, "hoodie.bucket.index.num.buckets"),
        ({**BUCKET, "hoodie.bucket.index.num.buckets": "many"}, "hoodie.bucket.index.num.buckets"),
        ({**BUCKET, "hoodie.bucket.index.hash.field": "city"}, "hoodie.bucket.index.hash.field"),
        ({"hoodie.bucket.index.num.buckets": "4"}, "hoodie.bucket.index.num.buckets"),
        ({"hoodie.index.type": "GLOBAL_MAGIC"}, "hoodie.index.type"),
    ],
)
def test_bad_bucket_options_are_config_errors(tmp_path: Path, options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Table.create(str(tmp_path / "t"), spark=None, record_key="id", options=options)
    assert caught.value.key == key


def test_bucket_settings_are_kept_and_cannot_change(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, spark=None, record_key="id", options=BUCKET)
    props = (tmp_path / "t/.hoodie/hoodie.properties").read_text()
    assert "hoodie.index.type=BUCKET" in props and "hoodie.bucket.index.num.buckets=4" in props
    assert Table.open(path, spark=None).config.bucket_num_buckets == 4
    Table.open(path, spark=None, options=BUCKET)  # the same values are fine
    with pytest.raises(ConfigError) as caught:
        Table.open(path, spark=None, options={"hoodie.bucket.index.num.buckets": "8"})
    assert caught.value.key == "hoodie.bucket.index.num.buckets"
    with pytest.raises(ConfigError):
        Table.open(path, spark=None, options={"hoodie.index.type": "SIMPLE"})


def test_bucket_spec_validates_itself() -> None:
    with pytest.raises(ConfigError):
        BucketSpec(0, ("id",), ("id",))
    with pytest.raises(ConfigError):
        BucketSpec(4, ("x",), ("id",))


def test_writers_creating_the_same_bucket_at_once_conflict(tmp_path: Path) -> None:
    """Writer A starts, writer B writes a different key of the same new bucket and commits,
    then A commits: the bucket's fixed file id makes them collide, so A loses instead of
    leaving two file groups for one bucket."""
    from tidemark.errors import WriteConflictError

    occ = {
        "hoodie.write.concurrency.mode": "optimistic_concurrency_control",
        "hoodie.write.lock.provider": "in_process",
    }
    path = str(tmp_path / "t")
    Table.create(
        path,
        spark=None,
        record_key="id",
        options={"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "1"},
    )
    writer_a = Table.open(path, spark=None, options=occ)
    writer_b = Table.open(path, spark=None, options=occ)
    protocol = writer_a._protocol()
    complete = protocol.complete

    def b_commits_first(*args: Any, **kwargs: Any) -> Any:
        writer_b.upsert(pa.table({"id": [2]}))
        return complete(*args, **kwargs)

    protocol.complete = b_commits_first
    with pytest.raises(WriteConflictError):
        writer_a.upsert(pa.table({"id": [1]}))
    assert writer_b.read().column("id").to_pylist() == [2]
    assert {f.file_id for f in writer_b.read_plan().files} == {bucket_file_id(0)}
