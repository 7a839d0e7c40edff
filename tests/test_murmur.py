"""The compiled Murmur kernels against numpy's hashing, and when a process loads them.

The bytes of Hudi's filter are held to Hudi's own files and Hadoop's class in
``tests/test_bloom.py`` (with both implementations); here the two implementations are held to
each other on keys of every shape, and the loading policy is checked in fresh processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pytest

from tidemark.format import bloom, murmur


def _words(seed: int, n: int) -> list[str]:
    """Keys of 0-70 UTF-8 bytes (every tail length), with bytes above 0x7f (signed in Java)."""
    rng = np.random.default_rng(seed)
    alphabet = list("abcXYZ0189-_:,é€日🚀")
    return ["".join(rng.choice(alphabet, size=int(rng.integers(0, 24)))) for _ in range(n)]


@pytest.fixture(scope="module")
def compiled() -> object:
    kernels = murmur.load()
    assert kernels is not None, "the compiled Murmur kernels did not load (is numba installed?)"
    return kernels


def _numpy_filter(keys: pa.Array, **sizing: int) -> bloom.BloomFilter:
    saved = murmur.kernels
    murmur.kernels = lambda count: None  # type: ignore[assignment]
    try:
        return bloom.BloomFilter.build(keys, **sizing)
    finally:
        murmur.kernels = saved  # type: ignore[assignment]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_compiled_kernels_hash_and_place_as_numpy_does(compiled: object, seed: int) -> None:
    words = pa.array(_words(seed, 12_000), pa.string())
    for keys in (words, words.slice(101, 9_000), words.cast(pa.large_string()).slice(7), words.cast(pa.binary())):
        assert (bloom.hash_chains(keys, 33) == bloom._numpy_hash_chains(keys, 33)).all()
        # Several rows (keys past the bound go round-robin): each key's row as numpy places it.
        built = bloom.BloomFilter.build(keys, num_entries=1_000, max_entries=5_000)
        assert len(built.rows) == 5
        assert built.serialize() == _numpy_filter(keys, num_entries=1_000, max_entries=5_000).serialize()
        assert built.might_contain(keys).all()


def test_compiled_kernels_refuse_null_keys_as_numpy_does(compiled: object) -> None:
    with pytest.raises(bloom.BloomFilterError, match="null"):
        bloom.BloomFilter.build(pa.array(["a", None, "b"]))


def _run(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
        env={**os.environ, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


_PROCESS = """
    import sys
    import numpy as np, pyarrow as pa, pyarrow.compute as pc
    from tidemark.format import bloom, murmur
    small = pc.cast(pa.array(np.arange(5_000)), pa.string())
    bloom.BloomFilter.build(small)
    print("after a small filter:", "numba" in sys.modules)
    large = pc.cast(pa.array(np.arange(200_000)), pa.string())
    first = bloom.BloomFilter.build(large).serialize()
    murmur._wait_for_loader()
    print("after many keys:", murmur._kernels is not None)
    print("same filter:", bloom.BloomFilter.build(large).serialize() == first)
"""


def test_a_process_loads_the_kernels_only_once_it_hashed_many_keys() -> None:
    """A small write does not import numba (its start costs ~0.3 s); past LOAD_AT_KEYS keys the
    kernels load in the background, and the filter they build is the one numpy built."""
    out = _run(_PROCESS)
    assert out.splitlines() == ["after a small filter: False", "after many keys: True", "same filter: True"]


def test_compiled_hashing_can_be_turned_off() -> None:
    out = _run(_PROCESS, TIDEMARK_COMPILED_HASHING="0")
    assert out.splitlines() == ["after a small filter: False", "after many keys: False", "same filter: True"]
