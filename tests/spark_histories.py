"""The multi-operation histories that tests/spark_history.py runs through a Spark session of its
own (Spark Connect, a standalone cluster), and the model of what each leaves in the table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HISTORY = str(Path(__file__).with_name("spark_history.py"))
PARTS = 4


def rows(ids: list[int], v: str, ts: int) -> list[dict[str, Any]]:
    return [{"id": i, "part": f"p{i % PARTS}", "v": v, "ts": ts} for i in ids]


def copy_on_write_ops() -> list[dict[str, Any]]:
    return [
        {"op": "bulk_insert", "rows": rows(list(range(24)), "a", 1), "datasource": True},
        {"op": "insert", "rows": rows(list(range(24, 32)), "b", 2)},
        {"op": "upsert", "rows": rows([0, 1, 2, 3, 4, 5, 32, 33, 34, 35], "c", 3)},
        {"op": "delete", "rows": rows([6, 7, 24], "d", 4)},
        {"op": "insert_overwrite", "rows": rows([1, 5, 9, 101], "e", 5)},  # partition p1 only
        {"op": "cluster", "datasource": True},
        {"op": "upsert", "rows": rows([2, 3], "f", 7)},
        {"op": "clean", "datasource": True},
    ]


def merge_on_read_ops() -> list[dict[str, Any]]:
    return [
        {"op": "bulk_insert", "rows": rows(list(range(16)), "a", 1)},
        {"op": "upsert", "rows": rows([0, 1, 2, 3], "b", 2), "datasource": True},
        {"op": "delete", "rows": rows([4, 5], "c", 3)},
        {"op": "compact"},
        {"op": "upsert", "rows": rows([8, 9, 40], "d", 5), "datasource": True},
    ]


def model_states(ops: list[dict[str, Any]]) -> list[list[list[Any]]]:
    """The table's rows (sorted [id, part, v, ts]) after each operation. Every batch has distinct
    keys and a newer ordering value than the table's rows, and inserts only new keys."""
    state: dict[int, list[Any]] = {}
    out = []
    for op in ops:
        batch = {r["id"]: [r["id"], r["part"], r["v"], r["ts"]] for r in op.get("rows", [])}
        if op["op"] in ("bulk_insert", "insert", "upsert"):
            state.update(batch)
        elif op["op"] == "delete":
            for key in batch:
                state.pop(key, None)
        elif op["op"] == "insert_overwrite":
            parts = {r[1] for r in batch.values()}
            state = {k: r for k, r in state.items() if r[1] not in parts}
            state.update(batch)
        out.append(sorted(state.values()))
    return out


def tables(tmp: Path, **options: str) -> list[dict[str, Any]]:
    """The two histories, on tables under ``tmp`` with writer ``options``."""
    return [
        {"path": str(tmp / "cow"), "table_type": "COPY_ON_WRITE", "ops": copy_on_write_ops(),
         "options": {"hoodie.clean.commits.retained": "1", **options}},
        {"path": str(tmp / "mor"), "table_type": "MERGE_ON_READ", "ops": merge_on_read_ops(), "options": options},
    ]


def run_history(tmp: Path, session: dict[str, Any], specs: list[dict[str, Any]], *, timeout: float = 900,
                extra: dict[str, Any] | None = None) -> Any:
    """Run the histories in a process of their own; the report (see spark_history.py)."""
    report = tmp / "report.json"
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({"session": session, "tables": specs, "report": str(report), **(extra or {})}))
    done = subprocess.run([sys.executable, HISTORY, str(spec)], timeout=timeout, capture_output=True, text=True)
    assert report.exists(), f"the history process wrote no report (exit {done.returncode}):\n{done.stderr[-5000:]}"
    out = json.loads(report.read_text())
    assert "error" not in out, out["error"]
    assert done.returncode == 0, done.stderr[-5000:]
    return out


def check_history(specs: list[dict[str, Any]], report: dict[str, Any]) -> None:
    """Every reader saw the model's rows after every operation; the services did their work."""
    assert len(report["tables"]) == len(specs)
    for spec, table in zip(specs, report["tables"], strict=True):
        expected = model_states(spec["ops"])
        steps = table["steps"]
        assert [s["op"] for s in steps] == [o["op"] for o in spec["ops"]]
        for number, (step, want) in enumerate(zip(steps, expected, strict=True)):
            where = f"{spec['table_type']} step {number} ({step['op']})"
            assert step["tidemark"] == want, where
            assert step["hudi_rs"] == want, f"hudi-rs, {where}"
            if "datasource" in step:
                assert step["datasource"] == want, f"data source, {where}"
            if step["op"] in ("compact", "cluster"):
                assert step["instant"], f"{where} did nothing"
            if step["op"] == "cluster":
                assert step["groups"] > 0 and step["progress"][-1] == [step["groups"], step["groups"]], where
