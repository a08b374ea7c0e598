"""Binary cross entropy with logits backward tiling (a pure function of numel, bytes per element, output
layout, reduction and thread count) through tilegrad._core._binary_cross_entropy_with_logits_backward_tiling:
exactly-once coverage, tiles within the thread count, the mean scale, the streaming-store decision."""

import itertools

import numpy as np

from tilegrad import _core


def tiling(numel, bytes_per_elem=12, out_contiguous=True, reduction=1, threads=2, **kw):
    return _core._binary_cross_entropy_with_logits_backward_tiling(numel, bytes_per_elem, out_contiguous, reduction,
                                                                   threads, **kw)


def test_tiling_invariants():
    numels = [0, 1, 63, 64, 65, 16383, 16384, 100_000, 1 << 20, 33_554_432, 33_554_433, (1 << 31) + 17]
    for threads, numel in itertools.product([1, 2, 3, 4, 7, 8, 16, 64, 255, 256], numels):
        t = tiling(numel, threads=threads)
        assert t["numel"] == numel
        if numel == 0:
            assert t["num_tiles"] == 0
            continue
        assert 1 <= t["num_tiles"] <= threads
        assert t["tile_elems"] % 64 == 0
        assert (t["num_tiles"] - 1) * t["tile_elems"] < numel <= t["num_tiles"] * t["tile_elems"]
        if numel < 2 * 16384:
            assert t["num_tiles"] == 1   # too small to be worth a second thread


def test_tiling_scale_and_streaming():
    for numel in [0, 1, 3, 4096 * 1024, 32768 * 1024, 10**9 + 7]:
        expected = np.float32(1.0 / max(1, numel))
        assert np.float32(tiling(numel, reduction=1)["scale"]) == expected
        assert tiling(numel, reduction=0)["scale"] == 1.0
        assert tiling(numel, reduction=2)["scale"] == 1.0
    l3 = 32 << 20   # streaming from l3 / 2 on
    assert not tiling(1 << 20, 12, True, l3_bytes=l3)["streaming_stores"]          # 12 MB: fits
    assert not tiling(1 << 20, 16, True, l3_bytes=l3)["streaming_stores"]          # 16 MB: fits
    assert tiling((1 << 20) + 64, 16, True, l3_bytes=l3)["streaming_stores"]       # just over 16 MB
    assert tiling(8 << 20, 12, True, l3_bytes=l3)["streaming_stores"]              # 96 MB: streams
    assert not tiling(8 << 20, 12, False, l3_bytes=l3)["streaming_stores"]         # strided output
    assert not tiling(0, 12, True, l3_bytes=0)["streaming_stores"]
    for isa in ("scalar", "avx2", "avx512"):
        assert tiling(1000, isa=isa)["isa"] == isa
