#!/usr/bin/env python
"""Hudi's bloom filter of a million record keys, hashed by numpy and by the C kernel side by side.

One filter of Hudi's footer sizing (60,000 keys per row, 30 chained Murmur hashes per key) per
key shape: formatted ids (``k000000123``), integers as text, UUIDs. Process CPU seconds, the
best of ``--repeat`` builds of each, both in one run; the filters are checked equal byte for byte.

    .venv/bin/python benchmarks/bench_bloom_hashing.py --repeat 5
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tidemark.format import bloom, murmur


def _keys(shape: str, n: int) -> pa.Array:
    ids = np.arange(n)
    if shape == "formatted":
        return pc.binary_join_element_wise("k", pc.utf8_lpad(pc.cast(pa.array(ids), pa.string()), 9, "0"), "")
    if shape == "integer":
        return pc.cast(pa.array(ids), pa.string())
    return pa.array([str(uuid.UUID(int=int(i) * 2654435761)) for i in ids], pa.string())


def _best_cpu(build: object, repeat: int) -> tuple[float, str]:
    best, text = float("inf"), ""
    for _ in range(repeat):
        began = time.process_time()
        text = build()  # type: ignore[operator]
        best = min(best, time.process_time() - began)
    return best, text


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args()
    compiled = murmur.kernels()
    if compiled is None:
        print("tidemark.format._murmur is not built (pip install -e . builds it)", file=sys.stderr)
        return 1
    print(f"| keys ({args.keys:,}) | numpy CPU s | C CPU s | numpy / C |")
    print("|---|---:|---:|---:|")
    for shape in ("formatted", "integer", "uuid"):
        keys = _keys(shape, args.keys)
        fast, fast_text = _best_cpu(lambda k=keys: bloom.BloomFilter.build(k).serialize(), args.repeat)
        murmur.kernels = lambda: None  # type: ignore[assignment]
        try:
            slow, slow_text = _best_cpu(lambda k=keys: bloom.BloomFilter.build(k).serialize(), args.repeat)
        finally:
            murmur.kernels = lambda: compiled  # type: ignore[assignment]
        if fast_text != slow_text:
            print(f"{shape}: the two filters differ", file=sys.stderr)
            return 1
        print(f"| {shape} | {slow:.3f} | {fast:.3f} | {slow / fast:.1f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
