"""Deletes on merge-on-read tables whose ordering values do not fit 32 bits (epoch milliseconds).

hudi-rs 0.5 decodes a delete record's ordering value with a 32-bit varint: a larger one makes
the whole table unreadable to it. tidemark writes such values as "no ordering value" (the
delete wins by commit time), so both readers read the table, and agree.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tidemark
from conftest import hudi_rs_read
from tidemark.format.log_file import DeleteRecord, decode_delete_records, encode_delete_records


@pytest.mark.parametrize("ts", [2**31 - 5, 2**31 + 5, 1_700_000_000_000])
def test_both_readers_read_deletes_with_large_ordering_values(tmp_path: Path, ts: int) -> None:
    table = tidemark.Table.create(str(tmp_path / "t"), spark=None, record_key="id", ordering_field="ts",
                                  table_type="MERGE_ON_READ")
    table.upsert(pa.table({"id": [1, 2, 3], "ts": pa.array([ts] * 3, pa.int64()), "v": ["a", "b", "c"]}))
    table.delete(pa.table({"id": [1, 3], "ts": pa.array([ts + 1, ts + 2], pa.int64())}))
    mine = sorted(table.read().column("id").to_pylist())
    assert mine == [2]
    assert sorted(hudi_rs_read(table.path).column("id").to_pylist()) == mine


def test_an_ordering_value_over_32_bits_is_written_as_none() -> None:
    records = [DeleteRecord("a", "", 7), DeleteRecord("b", "", 2**40), DeleteRecord("c", "", -(2**33))]
    values = [r.ordering_value for r in decode_delete_records(encode_delete_records(records)[:])]
    assert values == [7, 0, 0]
