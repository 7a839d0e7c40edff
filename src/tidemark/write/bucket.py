"""Bucket index: a key's file group is a pure function of its partition and its key.

    bucket(key)  = (javaHash([hash field values]) & 0x7fffffff) % num_buckets
    file id      = "<bucket, 8 digits>-0000-0000-0000-000000000000-0"   (new bucket)

The hash is Hudi's (``BucketIdentifier``: Java ``List<String>.hashCode`` of the
hash-field values, as it reads them back from the record key: a null or empty part adds
nothing), so real Hudi writers put a
key in the same bucket. A bucket's file group is found by listing the
partition's latest file groups (file ids start with the 8-digit bucket number);
a bucket seen for the first time gets the fixed-suffix id above, so two writers
creating it at once write the *same* file group and optimistic concurrency
control sees the conflict, instead of leaving two file groups for one bucket.
No index lookup is needed to route a record.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.errors import ConfigError
from tidemark.format.record_key import value_text

_BUCKET_ID = re.compile(r"^(\d{8})-")
_FIXED_SUFFIX = "-0000-0000-0000-000000000000-0"


@dataclass(frozen=True)
class BucketSpec:
    """The bucket index of a table: kept in hoodie.properties, fixed at create time."""

    num_buckets: int
    hash_fields: tuple[str, ...]  # record-key fields hashed (in key order)
    record_key_fields: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.num_buckets <= 0:
            raise ConfigError(
                f"hoodie.bucket.index.num.buckets must be positive, got {self.num_buckets}",
                key="hoodie.bucket.index.num.buckets",
            )
        unknown = [f for f in self.hash_fields if f not in self.record_key_fields]
        if unknown or not self.hash_fields:
            raise ConfigError(
                f"hoodie.bucket.index.hash.field {list(self.hash_fields)} must be record-key fields "
                f"(the record key is {list(self.record_key_fields)})",
                key="hoodie.bucket.index.hash.field",
            )


def java_string_hash(text: str) -> int:
    """``java.lang.String.hashCode`` (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def java_list_hash(values: Sequence[str]) -> int:
    """``java.util.List<String>.hashCode`` as an unsigned 32-bit value."""
    h = 1
    for value in values:
        h = (31 * h + java_string_hash(value)) & 0xFFFFFFFF
    return h


def bucket_of(values: Sequence[str], num_buckets: int) -> int:
    return (java_list_hash(values) & 0x7FFFFFFF) % num_buckets


def bucket_ids(hash_values: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int) -> np.ndarray:
    """Bucket of every row, from the text of each hash field (one array per field)."""
    columns = [c.to_pylist() for c in hash_values]
    if not columns:
        return np.zeros(0, dtype=np.int64)
    return np.fromiter(
        (bucket_of(row, num_buckets) for row in zip(*columns, strict=True)), dtype=np.int64, count=len(columns[0])
    )


def bucket_file_id(bucket: int) -> str:
    """The file id of a bucket's first file group (deterministic, see the module docstring)."""
    return f"{bucket:08d}{_FIXED_SUFFIX}"


def new_bucket_salt() -> str:
    """A per-write suffix for fresh bucket file ids (see :func:`new_bucket_file_id`)."""
    return str(uuid.uuid4())[8:]


def new_bucket_file_id(bucket: int, salt: str) -> str:
    """A fresh file id for a bucket (insert_overwrite replaces the bucket's old file group)."""
    return f"{bucket:08d}{salt}-0"


def bucket_of_file_id(file_id: str) -> int | None:
    m = _BUCKET_ID.match(file_id)
    return int(m.group(1)) if m else None


def existing_buckets(file_groups: Iterable[tuple[str, str]]) -> dict[str, dict[int, str]]:
    """partition -> bucket -> file id, from the (partition, file id) of the latest file groups.

    Should a bucket have two file groups (written by a tool that ignored the fixed ids),
    the smallest id is chosen, so every writer chooses the same one.
    """
    out: dict[str, dict[int, str]] = {}
    for partition, file_id in file_groups:
        bucket = bucket_of_file_id(file_id)
        if bucket is None:
            continue
        current = out.setdefault(partition, {}).get(bucket)
        if current is None or file_id < current:
            out[partition][bucket] = file_id
    return out


@dataclass(frozen=True)
class BucketAssignment:
    """How one write maps (partition, bucket) to file ids; picklable, shipped to engine tasks.

    ``existing``: the buckets' current file groups (from listing). ``salt``: set for
    insert_overwrite, every bucket gets a fresh file group. ``only_existing``: rows of a
    bucket with no file group get no file id (a delete has nothing to delete there).
    """

    spec: BucketSpec
    existing: Mapping[str, Mapping[int, str]]
    salt: str | None = None
    only_existing: bool = False

    def file_ids(self, rows: pa.Table, partition_column: str) -> pa.Array:
        buckets = bucket_ids(hash_field_texts(rows, self.spec), self.spec.num_buckets)
        if partition_column in rows.column_names:
            partitions = rows.column(partition_column).to_pylist()
        else:
            partitions = [""] * rows.num_rows
        out: list[str | None] = []
        for partition, bucket in zip(partitions, buckets.tolist(), strict=True):
            part = partition or ""
            if self.salt is not None:
                out.append(new_bucket_file_id(bucket, self.salt))
                continue
            found = self.existing.get(part, {}).get(bucket)
            out.append(found if found or self.only_existing else bucket_file_id(bucket))
        return pa.array(out, pa.string())


def hash_field_texts(table: pa.Table, spec: BucketSpec) -> list[pa.Array | pa.ChunkedArray]:
    """The text of each hash field, as Hudi's ``BucketIdentifier`` reads it back from the record
    key: a part written ``__null__`` or ``__empty__`` is read as null or empty, and either adds
    nothing to the hash (format/record_key.py); so both are hashed as empty text here."""
    texts = []
    for name in spec.hash_fields:
        column = table.column(name)
        special = value_text(column)  # timestamps, floating point: as in the key (format/record_key.py)
        text = pc.if_else(column, "true", "false") if pa.types.is_boolean(column.type) else \
            special if special is not None else pc.cast(column, pa.string())
        texts.append(pc.fill_null(text, "") if len(spec.record_key_fields) > 1 else text)
    return texts
