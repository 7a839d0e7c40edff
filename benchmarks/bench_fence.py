"""What the rollback fence costs a Spark write task, beside what the task pays anyway per file.

A Spark task checks the fence (``markers/fence.py``) before each marker and after its files;
each check asks whether two files exist. Measured on a local table, side by side in one run:
one check, and the creation of one direct marker (which every data file pays already).

    .venv/bin/python benchmarks/bench_fence.py --checks 10000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from tidemark.markers import IOType, MarkerSpec, open_marker_writer  # noqa: E402
from tidemark.markers.fence import WriteFence  # noqa: E402
from tidemark.storage import LocalStorage  # noqa: E402
from tidemark.timeline import Action, State, instant_file_name  # noqa: E402

INSTANT = "20260101000000000"


def _per_call_us(call: object, n: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        call(i)  # type: ignore[operator]
    return (time.perf_counter() - started) / n * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checks", type=int, default=10_000, help="calls timed per repetition")
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="tm-fence-") as base:
        storage = LocalStorage(base)
        storage.create_if_absent(f".hoodie/timeline/{instant_file_name(INSTANT, Action.COMMIT, State.REQUESTED)}")
        fence = WriteFence(INSTANT, Action.COMMIT)
        markers = open_marker_writer(storage, INSTANT, MarkerSpec())
        checks, creates = [], []
        for r in range(args.repeat):
            checks.append(_per_call_us(lambda _i: fence.fenced(storage), args.checks))
            creates.append(_per_call_us(
                lambda i, r=r: markers.create(f"p/{r}-{i}.parquet", IOType.CREATE), args.checks))
        check, create = statistics.median(checks), statistics.median(creates)
        print(json.dumps({"fence_check_us": round(check, 2), "marker_create_us": round(create, 2),
                          "check_over_create": round(check / create, 3), "checks": args.checks,
                          "repeat": args.repeat}))


if __name__ == "__main__":
    main()
