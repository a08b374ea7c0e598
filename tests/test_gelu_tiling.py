"""The GELU and GeGLU tiling (one for both families, core/elementwise_op_tiling.h) through
_core._gelu_tiling for simulated machines of 1..256 threads: every element in exactly one tile,
threads scale with work, the streaming-store decision, the ISA carried."""

import pytest

from tilegrad import _core

MiB = 1 << 20
SIZES = [0, 1, 63, 64, 65, 16384, 100003, 4096 * 5632, (1 << 30) + 7]


def tiling(numel, threads, bytes_per_elem=8, contiguous=True, l3=32 * MiB, isa="avx512"):
    return _core._gelu_tiling(numel, bytes_per_elem, contiguous, threads, 32 << 10, 1 << 20, l3, isa)


@pytest.mark.parametrize("threads", [1, 2, 3, 4, 7, 16, 64, 255, 256])
def test_partition(threads):
    for n in SIZES:
        t = tiling(n, threads)
        assert t["numel"] == n
        if n == 0:
            continue
        k, e = t["num_tiles"], t["tile_elems"]
        assert 1 <= k <= threads
        assert (k - 1) * e < n <= k * e  # every element once, last tile non-empty


def test_small_work_one_thread_and_streaming():
    assert tiling(1000, 64)["num_tiles"] == 1
    assert tiling(4096 * 5632, 2, 24)["streaming_stores"] is True  # GeGLU backward: 6 operands
    assert tiling(4096, 2)["streaming_stores"] is False
    assert tiling(4096 * 5632, 2, contiguous=False)["streaming_stores"] is False


def test_isa_carried_and_pure():
    assert tiling(1 << 20, 3, isa="avx2")["isa"] == "avx2"
    assert tiling(1 << 20, 3) == tiling(1 << 20, 3)
