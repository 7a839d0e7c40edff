"""The compiled Murmur hashing (``format/_murmur.c``) against numpy's, on keys of every shape.

The bytes of Hudi's filter are held to Hudi's own files and Hadoop's class in
``tests/test_bloom.py`` (with both implementations); here the two implementations are held to
each other, and the compiled one to the threads it runs on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tidemark.format import bloom, murmur


def _words(seed: int, n: int) -> list[str]:
    """Keys of 0-23 characters (every tail length), with bytes above 0x7f (signed in Java)."""
    rng = np.random.default_rng(seed)
    alphabet = list("abcXYZ0189-_:,é€日🚀")
    return ["".join(rng.choice(alphabet, size=int(rng.integers(0, 24)))) for _ in range(n)]


@pytest.fixture(scope="module")
def compiled() -> murmur.Kernels:
    kernels = murmur.kernels()
    if kernels is None:
        pytest.fail("tidemark.format._murmur was not built (pip install -e . builds it; a C compiler is needed)")
    return kernels


def _numpy_filter(keys: pa.Array, **sizing: int) -> bloom.BloomFilter:
    saved = murmur.kernels
    murmur.kernels = lambda: None  # type: ignore[assignment]
    try:
        return bloom.BloomFilter.build(keys, **sizing)
    finally:
        murmur.kernels = saved  # type: ignore[assignment]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_compiled_hashing_hashes_and_places_as_numpy_does(compiled: murmur.Kernels, seed: int) -> None:
    words = pa.array(_words(seed, 12_000), pa.string())
    for keys in (words, words.slice(101, 9_000), words.cast(pa.large_string()).slice(7), words.cast(pa.binary()),
                 words.slice(0, 0), words.slice(5, 1)):
        binary = keys if pa.types.is_binary(keys.type) else keys.cast(pa.binary())
        assert (bloom.hash_chains(keys, 33) == murmur.numpy_hash_chains(binary, 33)).all()
        # Several rows (keys past the bound go round-robin): each key's row as numpy places it.
        built = bloom.BloomFilter.build(keys, num_entries=1_000, max_entries=5_000)
        assert built.serialize() == _numpy_filter(keys, num_entries=1_000, max_entries=5_000).serialize()
        assert built.might_contain(keys).all()
    assert len(bloom.BloomFilter.build(words, num_entries=1_000, max_entries=5_000).rows) == 5


def test_the_compiled_hashing_refuses_null_keys_as_numpy_does(compiled: murmur.Kernels) -> None:
    with pytest.raises(bloom.BloomFilterError, match="null"):
        bloom.BloomFilter.build(pa.array(["a", None, "b"]))


def test_filters_hashed_on_many_threads_at_once_are_each_their_own(compiled: murmur.Kernels) -> None:
    """The compiled calls run without the GIL: eight filters built side by side, each equal to
    the one numpy builds alone."""
    keysets = [pc.cast(pa.array(np.random.default_rng(i).permutation(400_000)[:150_000]), pa.string())
               for i in range(8)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        built = list(pool.map(lambda keys: bloom.BloomFilter.build(keys).serialize(), keysets))
    assert built == [_numpy_filter(keys).serialize() for keys in keysets]


def test_compiled_hashing_can_be_turned_off() -> None:
    code = "from tidemark.format import murmur; print(murmur.kernels() is None)"
    for setting, off in (("0", "True"), ("1", "False")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "TIDEMARK_COMPILED_HASHING": setting})
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == off


@pytest.mark.parametrize("hashing", ["compiled", "numpy"])
@pytest.mark.parametrize("start", ["anew", "resuming"])
def test_placements_run_side_by_side_into_one_filter_lose_no_bit(
    compiled: murmur.Kernels, hashing: str, start: str
) -> None:
    """A builder's placements may run on several threads at once (the footer's hashing threads).
    A filter built anew sets a byte per bit (stores of ones); one resuming a stored filter
    keeps its bits packed, set by a read, an or and a store, into rows of each placement's own
    that are or-ed in turn. A hundred pieces over a hundred small filter rows (a thousand keys
    each; past 100,000 keys every piece reaches every row: placements meet in the same bytes),
    placed on eight threads, give the filter one placement after another gives (the packed
    bits, byte for byte)."""
    keys = pa.array(_words(7, 150_000), pa.string())
    stored = bloom.BloomFilter.build(keys.slice(0, 12_000), num_entries=1_000)
    rest = keys.slice(12_000) if start == "resuming" else keys
    pieces = [rest.slice(at, 1_500) for at in range(0, len(rest), 1_500)]

    def builder() -> bloom.BloomBuilder:
        if start == "resuming":
            return bloom.BloomBuilder.resuming(stored, 12_000)
        return bloom.BloomBuilder(num_entries=1_000)

    saved = murmur.kernels
    if hashing == "numpy":
        murmur.kernels = lambda: None  # type: ignore[assignment]
    try:
        side_by_side = builder()
        placements = [place for piece in pieces for place in side_by_side.reserve(piece)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(lambda place: place(), placements))
        one_by_one = builder()
        for piece in pieces:
            one_by_one.add(piece)
        built, expected = side_by_side.build(), one_by_one.build()
    finally:
        murmur.kernels = saved  # type: ignore[assignment]
    assert len(built.rows) == 100 and built.serialize() == expected.serialize()
    assert built.serialize() == bloom.BloomFilter.build(keys, num_entries=1_000).serialize()
    assert all(row.dtype == np.uint8 and len(row) == (built.vector_size + 7) // 8 for row in built.rows)
    assert built.might_contain(keys).all()


def test_the_compiled_placement_refuses_rows_outside_the_filter(compiled: murmur.Kernels) -> None:
    binary = pa.array(["a", "b"], pa.binary())
    offsets, data = murmur.key_buffers(binary)
    bits = np.zeros((1, 2), dtype=np.uint8)
    with pytest.raises(ValueError, match="row"):
        compiled.place(offsets, data, None, np.array([0, 1], dtype=np.int64), bits, 16, 3)
    with pytest.raises(ValueError, match="bytes per row"):
        compiled.place(offsets, data, None, np.array([0, 0], dtype=np.int64), np.zeros((1, 3), dtype=bool), 16, 3)
    compiled.place(offsets, data, None, np.array([0, 0], dtype=np.int64), bits, 16, 3)
    spread = np.zeros((1, 16), dtype=bool)  # the same bits, a byte each
    compiled.place(offsets, data, None, np.array([0, 0], dtype=np.int64), spread, 16, 3)
    assert bits.any() and (np.packbits(spread, axis=1, bitorder="little") == bits).all()


def test_a_built_filter_is_its_own_whatever_its_builder_does_next(compiled: murmur.Kernels) -> None:
    keys = pa.array(_words(3, 5_000), pa.string())
    stored = bloom.BloomFilter.build(keys.slice(0, 2_000), num_entries=1_000)
    builder = bloom.BloomBuilder.resuming(stored, 2_000)
    builder.add(keys.slice(2_000, 1_000))
    built = builder.build()
    text = built.serialize()
    builder.add(keys.slice(3_000, 500))  # the builder's rows change; the filter's must not
    builder._bits[:] = 0xFF  # noqa: SLF001 - the builder's matrix itself, as a later placement could set it
    assert built.serialize() == text and stored.serialize() == bloom.BloomFilter.build(
        keys.slice(0, 2_000), num_entries=1_000).serialize()


@pytest.mark.parametrize("length", [*range(0, 13), 62_715, 62_716, 62_717, 323_495])
def test_the_compiled_base64_writes_and_reads_as_binascii_does(compiled: murmur.Kernels, length: int) -> None:
    import binascii

    data = np.random.default_rng(length).integers(0, 256, size=length, dtype=np.uint8).tobytes()
    text = compiled.base64_encode(data)
    assert text == binascii.b2a_base64(data, newline=False).decode("ascii")
    decoded = compiled.base64_decode(text.encode("ascii"))
    assert decoded is not None and decoded.tobytes() == data


@pytest.mark.parametrize("text", [b"A", b"AB=C", b"A===", b"====", b"AB\nC", b"AB C", b"AAA=AAAA", b"=AAA",
                                  b"AA==AA==", b"QUJD\n", b"QU\xc3\xa9D"])
def test_text_that_is_not_padded_base64_is_refused_as_binascii_refuses_it(
        compiled: murmur.Kernels, text: bytes) -> None:
    import binascii

    assert compiled.base64_decode(text) is None
    with pytest.raises(binascii.Error):
        binascii.a2b_base64(text, strict_mode=True)
    with pytest.raises(bloom.BloomFilterError):
        bloom.BloomFilter.parse(text)


def test_a_filter_reads_and_writes_the_same_through_the_compiled_base64_and_binascii(compiled: murmur.Kernels) -> None:
    keys = pa.array(_words(7, 70_000))  # two rows
    text = bloom.BloomFilter.build(keys).serialize()
    parsed = bloom.BloomFilter.parse(text)
    saved = murmur.kernels
    murmur.kernels = lambda: None  # type: ignore[assignment]
    try:
        plain = bloom.BloomFilter.parse(text)
        assert plain.serialize() == text
    finally:
        murmur.kernels = saved  # type: ignore[assignment]
    assert parsed.serialize() == text
    assert len(parsed.rows) == len(plain.rows) == 2
    assert all(np.array_equal(a, b) for a, b in zip(parsed.rows, plain.rows, strict=True))
    assert parsed.might_contain(keys).all()
