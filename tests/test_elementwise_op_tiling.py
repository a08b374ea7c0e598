"""The elementwise operators' one tiling (core/elementwise_op_tiling.h: SiLU backward, SwiGLU and
silu_mul, GELU, GeGLU, forward and backward; a pure function of numel, bytes per element, output layout
and a Platform) through the test hook tilegrad._core._elementwise_op_tiling, for simulated machines of
1..256 threads: every element covered exactly once, tiles balanced, tails right, the streaming-store
decision, and the ISA carried through."""

import numpy as np
import pytest

from tilegrad import _core

MiB = 1 << 20
SIZES = sorted({0, 1, 2, 63, 64, 65, 1000, 4095, 4096, 16383, 16384, 16385, 32767, 32768, 32769, 65537,
                100003, 262144, 1 << 20, (1 << 20) + 1, 3 * (1 << 20) - 7, 16 << 20, (16 << 20) + 63,
                10 ** 9 + 7, 1 << 40, (1 << 40) + 12345})
THREADS = list(range(1, 33)) + [47, 48, 63, 64, 96, 127, 128, 129, 192, 200, 255, 256]


def tiling(numel, threads, bytes_per_elem=12, out_contiguous=True, l3=32 * MiB, isa="avx512"):
    return _core._elementwise_op_tiling(numel, bytes_per_elem, out_contiguous, threads, 32 << 10, 1 << 20, l3, isa)


def tile_ranges(t):
    """[begin, end) of each tile as the launch computes them."""
    begins = np.arange(t["num_tiles"], dtype=np.int64) * t["tile_elems"]
    return begins, np.minimum(begins + t["tile_elems"], t["numel"])


@pytest.mark.parametrize("threads", THREADS)
def test_partition_invariants(threads):
    for n in SIZES:
        t = tiling(n, threads)
        assert t["numel"] == n
        if n == 0:
            assert t["num_tiles"] == 0
            continue
        k, e = t["num_tiles"], t["tile_elems"]
        # exactly-once coverage of [0, n): contiguous tiles, the last one non-empty and reaching n
        assert 1 <= k <= threads
        assert e > 0 and e % 64 == 0  # tiles start on whole cache lines
        assert (k - 1) * e < n <= k * e
        begins, ends = tile_ranges(t)
        assert begins[0] == 0 and ends[-1] == n
        assert (begins[1:] == ends[:-1]).all() and (ends > begins).all()
        # balanced: the longest tile is within one cache line of an even split over the tiles used
        ideal = -(-n // k)
        assert e <= ideal + 63
        # all tiles but the tail have the same size; the tail is never larger
        sizes = ends - begins
        assert (sizes[:-1] == e).all() and sizes[-1] <= e


@pytest.mark.parametrize("threads", [1, 2, 3, 5, 8, 13, 64, 256])
def test_every_element_exactly_once(threads):
    for n in (1, 65, 16385, 100003, 3 * 65536 + 17, 1 << 20):
        t = tiling(n, threads)
        count = np.zeros(n + 1, np.int32)
        begins, ends = tile_ranges(t)
        np.add.at(count, begins, 1)
        np.add.at(count, ends, -1)
        assert (np.cumsum(count)[:n] == 1).all()


def test_threads_used_scale_with_work():
    # tiny problems stay on one thread (waking threads would cost more than the work)
    for threads in (2, 8, 256):
        for n in (1, 100, 4096):
            assert tiling(n, threads)["num_tiles"] == 1
    # big problems use every thread
    for threads in THREADS:
        assert tiling(threads * 65536 + 1, threads)["num_tiles"] == threads
        assert tiling(1 << 40, threads)["num_tiles"] == threads
    # more threads never means more work in the longest tile
    for n in (100003, 1 << 22, 10 ** 9 + 7):
        longest = [min(tiling(n, p)["tile_elems"], n) for p in range(1, 257)]
        assert all(b <= a for a, b in zip(longest, longest[1:]))


def test_non_positive_thread_counts_are_treated_as_one():
    for threads in (0, -1):
        t = tiling(100000, threads)
        assert t["num_tiles"] == 1 and t["tile_elems"] >= 100000


def test_streaming_store_decision():
    # output bypasses the caches only when the working set exceeds half the L3 (the L3 is shared with
    # other cores and processes; measured with BCE backward at 48 MB: 1.35 -> 1.08 ms), and only when
    # the output is contiguous (non-temporal stores need whole runs)
    for threads in (1, 2, 64):
        assert not tiling(1 << 20, threads, 12, True, 32 * MiB)["streaming_stores"]  # 12 MiB < 16 MiB
        assert tiling(4 << 20, threads, 12, True, 32 * MiB)["streaming_stores"]  # 48 MiB > 16 MiB
        assert not tiling(4 << 20, threads, 12, False, 32 * MiB)["streaming_stores"]
        assert tiling(1 << 20, threads, 12, True, 8 * MiB)["streaming_stores"]
        assert not tiling(16 << 20, threads, 6, True, 256 * MiB)["streaming_stores"]  # 96 MiB < 128 MiB
        assert not tiling(0, threads, 12, True, 1)["streaming_stores"]
    # the boundary: strictly more bytes than half the L3
    assert not tiling(1 << 19, 2, 32, True, 32 * MiB)["streaming_stores"]
    assert tiling((1 << 19) + 1, 2, 32, True, 32 * MiB)["streaming_stores"]


# The bytes one output element moves, per operator (every operand of fp32): what each launch passes.
OPERATOR_BYTES = {"silu_backward": 12, "swi_glu": 12, "swi_glu_grad": 20, "gelu": 8, "gelu_backward": 12,
                  "ge_glu": 16, "ge_glu_backward": 24}


@pytest.mark.parametrize("op", sorted(OPERATOR_BYTES))
def test_streaming_follows_each_operators_bytes(op):
    # half the L3 (16 MiB) in elements of this operator: streaming strictly above it
    bytes_per_elem = OPERATOR_BYTES[op]
    limit = (16 * MiB) // bytes_per_elem
    assert not tiling(limit, 2, bytes_per_elem)["streaming_stores"]
    assert tiling(limit + 1, 2, bytes_per_elem)["streaming_stores"]


def test_decision_does_not_change_the_partition():
    for n in (100003, 1 << 22):
        a = tiling(n, 7, 12, True, 1)
        b = tiling(n, 7, 12, False, 1 << 40)
        assert a["streaming_stores"] != b["streaming_stores"]
        assert (a["num_tiles"], a["tile_elems"]) == (b["num_tiles"], b["tile_elems"])


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avx512"])
def test_isa_carried_and_partition_isa_independent(isa):
    t = tiling(1 << 22, 4, isa=isa)
    assert t["isa"] == isa
    ref = tiling(1 << 22, 4, isa="scalar")
    assert (t["num_tiles"], t["tile_elems"]) == (ref["num_tiles"], ref["tile_elems"])


def test_pure_function():
    a = [tiling(n, p) for n in SIZES for p in (1, 3, 256)]
    b = [tiling(n, p) for n in SIZES for p in (1, 3, 256)]
    assert a == b


def test_bad_isa_name():
    with pytest.raises(ValueError, match="isa must be one of {scalar, avx2, avx512}, got 'avx1024'"):
        tiling(10, 1, isa="avx1024")
