"""Model-based test: random operation sequences against a plain Python model of the table.

After every step the table (read through Spark) equals the model; hudi-rs is
checked against it at the end of each sequence and after overwrites.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from conftest import hudi_rs_read, rows_of
from tidemark import Table

SCHEMA = "id int, city string, ts long, v string"
COLS = ["id", "city", "ts", "v"]
CITIES = ["sf", "nyc", "la"]


def city_of(key: int) -> str:
    return CITIES[key % len(CITIES)]


class Model:
    """The table as a dict: key -> (id, city, ts, v), with event-time merging on ts."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[int, str, int, str]] = {}

    @staticmethod
    def dedup(batch: list[tuple[int, str, int, str]]) -> dict[int, tuple[int, str, int, str]]:
        out: dict[int, tuple[int, str, int, str]] = {}
        for row in batch:  # greatest ts wins; among equal ts the last occurrence
            if row[0] not in out or row[2] >= out[row[0]][2]:
                out[row[0]] = row
        return out

    def upsert(self, batch: list[tuple[int, str, int, str]]) -> None:
        for key, row in self.dedup(batch).items():
            stored = self.rows.get(key)
            if stored is None or stored[2] <= row[2]:
                self.rows[key] = row

    def delete(self, keys: list[int]) -> None:
        for key in keys:
            self.rows.pop(key, None)

    def insert_overwrite(self, batch: list[tuple[int, str, int, str]]) -> None:
        incoming = self.dedup(batch)
        cities = {row[1] for row in incoming.values()}
        self.rows = {k: r for k, r in self.rows.items() if r[1] not in cities}
        self.rows.update(incoming)

    def sorted_rows(self) -> list[tuple[int, str, int, str]]:
        return sorted(self.rows.values())


def random_batch(rng: random.Random, keys: range, size: int, step: int) -> list[tuple[int, str, int, str]]:
    batch = []
    for _ in range(size):
        key = rng.choice(keys)
        batch.append((key, city_of(key), rng.randint(0, 5), f"s{step}-{rng.randint(0, 999)}"))
    return batch


@pytest.mark.parametrize("seed", [7, 2026])
def test_random_operation_sequences_match_the_model(spark: Any, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    table = Table.create(
        str(tmp_path / "t"),
        spark=spark,
        record_key="id",
        partition_by="city",
        ordering_field="ts",
        options={"hoodie.parquet.max.file.size": "20000", "hoodie.parquet.small.file.limit": "8000"},
    )
    model = Model()
    next_new_key = 1000
    for step in range(12):
        op = rng.choice(["upsert", "upsert", "insert", "delete", "bulk_insert", "insert_overwrite"])
        if op in ("upsert", "insert"):
            batch = random_batch(rng, range(0, 60), rng.randint(1, 40), step)
            getattr(table, op)(spark.createDataFrame(batch, SCHEMA))
            model.upsert(batch)
        elif op == "delete":
            keys = rng.sample(range(0, 60), rng.randint(1, 15))
            table.delete(spark.createDataFrame([(k, city_of(k)) for k in keys], "id int, city string"))
            model.delete(keys)
        elif op == "bulk_insert":  # bulk_insert takes new keys only: it does no index lookup
            batch = [(k, city_of(k), 0, f"bulk{step}") for k in range(next_new_key, next_new_key + rng.randint(1, 30))]
            next_new_key += len(batch)
            table.bulk_insert(spark.createDataFrame(batch, SCHEMA))
            model.upsert(batch)
        else:
            city = rng.choice(CITIES)
            batch = [r for r in random_batch(rng, range(0, 60), 20, step) if r[1] == city]
            if not batch:
                continue
            table.insert_overwrite(spark.createDataFrame(batch, SCHEMA))
            model.insert_overwrite(batch)
        assert rows_of(table.read(), COLS) == model.sorted_rows(), f"step {step}: {op}"
        if op == "insert_overwrite":
            assert rows_of(hudi_rs_read(table.path), COLS) == model.sorted_rows()
    assert rows_of(hudi_rs_read(table.path), COLS) == model.sorted_rows()
    keys = [r["_hoodie_record_key"] for r in table.read().select("_hoodie_record_key").collect()]
    assert len(keys) == len(set(keys))
