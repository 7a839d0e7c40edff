"""A non-blocking writer in its own OS process, for the NBCC scenario tests.

Run as ``python nbcc_writer.py SPEC.json``. The writer opens the table with the
spec's options and runs ``iterations`` upserts of keys drawn from ``keys``
(shared by every writer, so they hit the same file groups). Every row carries an
ordering value unique across writers (``ts``; or the spec's ``group`` ordering
field, with only that group's columns: one stream of a multi-stream join).

Before each write it logs the rows as an ``intent``, after it the outcome, one
JSON line each in ``log``. Barriers (a ``ready`` file created, then wait for
``go``):

* ``start``: before the first write, so every writer starts together;
* ``first_commit``: after the first write's files are written, before it
  commits, so the first writes of all writers overlap for certain;
* ``hang_before_commit``: after the *last* write's files are written it creates
  ``ready`` and hangs (the test SIGKILLs it there).
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

import tidemark
from signals import write_atomically
from tidemark.write import commit as commit_module


def _barrier(pause: dict[str, str], label: str) -> None:
    write_atomically(pause["ready"], label)
    if "go" not in pause:
        while True:  # wait to be killed
            time.sleep(1)
    deadline = time.monotonic() + 180
    while not Path(pause["go"]).exists():
        if time.monotonic() > deadline:
            raise SystemExit("never released from the barrier")
        time.sleep(0.01)


def _install_commit_barrier(spec: dict[str, Any]) -> None:
    original = commit_module.CommitProtocol.complete
    calls = {"n": 0}

    def complete(self: Any, pending: Any, stats: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1 and spec.get("first_commit"):
            _barrier(spec["first_commit"], pending.instant_time)
        if calls["n"] == spec["iterations"] and spec.get("hang_before_commit"):
            _barrier(spec["hang_before_commit"], pending.instant_time)
        return original(self, pending, stats, **kwargs)

    commit_module.CommitProtocol.complete = complete  # type: ignore[method-assign]


def _rows(spec: dict[str, Any], rng: random.Random, writer: int, batch: str) -> list[dict[str, Any]]:
    keys = rng.sample(range(spec["keys"]), spec.get("batch_size", 5))
    group = spec.get("group")  # {"ordering": field, "columns": [...]}: one stream of a multi-stream join
    out = []
    for key in keys:
        # Unique across writers and out of order: a later write may carry an older event.
        ordering = rng.randrange(1_000_000) * 16 + writer
        row: dict[str, Any] = {"id": key, "part": f"p{key % spec.get('partitions', 2)}"}
        if group is None:
            row.update({"ts": ordering, "batch": batch, "v": rng.random()})
        else:
            row[group["ordering"]] = ordering
            row.update({c: f"{batch}:{c}" for c in group["columns"]})
        out.append(row)
    return out


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    _install_commit_barrier(spec)
    writer = spec["writer"]
    rng = random.Random(spec["seed"])
    table = tidemark.Table.open(spec["table"], spark=None, options=spec["options"])
    if spec.get("start"):
        _barrier(spec["start"], str(writer))
    with open(spec["log"], "a") as log:
        for i in range(spec["iterations"]):
            batch = f"w{writer}-{i}"
            rows = _rows(spec, rng, writer, batch)
            log.write(json.dumps({"batch": batch, "rows": rows, "state": "intent"}) + "\n")
            log.flush()
            try:
                result = table.upsert(pa.Table.from_pylist(rows))
            except tidemark.TidemarkError as error:
                log.write(json.dumps({"batch": batch, "state": "failed", "error": type(error).__name__,
                                      "message": str(error)}) + "\n")
            else:
                log.write(json.dumps({"batch": batch, "state": "committed", "instant": result.instant_time,
                                      "completion": result.completion_time, "attempts": result.attempts,
                                      "file_groups": list(result.file_groups)}) + "\n")
            log.flush()
    table.close()


if __name__ == "__main__":
    main()
