"""Binary cross entropy with logits (forward) tiling, a pure function of numel, bytes per element, output
layout, reduction and thread count, through tilegrad._core._binary_cross_entropy_with_logits_tiling:
exactly-once coverage, tiles within the thread count; for mean / sum whole blocks of a size that never
depends on the thread count (what makes the result thread-count free), one workspace double per block;
the streaming-store decision of none."""

import itertools

from tilegrad import _core

BLOCK = 8192
NUMELS = [0, 1, 63, 64, 65, 8191, 8192, 8193, 16384, 100_000, 1 << 20, 33_554_433, (1 << 31) + 17]
THREADS = [1, 2, 3, 4, 7, 8, 16, 64, 255, 256]


def tiling(numel, bytes_per_elem=12, out_contiguous=True, reduction=1, threads=2, **kw):
    return _core._binary_cross_entropy_with_logits_tiling(numel, bytes_per_elem, out_contiguous, reduction, threads,
                                                          **kw)


def covers_exactly_once(t, numel, threads):
    if numel == 0:
        return t["num_tiles"] == 0
    return (1 <= t["num_tiles"] <= threads and t["tile_elems"] % 64 == 0
            and (t["num_tiles"] - 1) * t["tile_elems"] < numel <= t["num_tiles"] * t["tile_elems"])


def test_none_is_the_elementwise_split():
    for threads, numel in itertools.product(THREADS, NUMELS):
        t = tiling(numel, reduction=0, threads=threads)
        assert t["numel"] == numel and t["reduction"] == 0
        assert covers_exactly_once(t, numel, threads)
        assert (t["block_elems"], t["num_blocks"], t["workspace_bytes"]) == (0, 0, 0)
        if 0 < numel < 2 * 16384:
            assert t["num_tiles"] == 1   # too small to be worth a second thread


def test_mean_sum_blocks_do_not_depend_on_threads():
    for reduction, numel in itertools.product((1, 2), NUMELS):
        blocks = -(-numel // BLOCK)
        for threads in THREADS:
            t = tiling(numel, reduction=reduction, threads=threads)
            assert (t["block_elems"], t["num_blocks"]) == (BLOCK, blocks)
            assert t["workspace_bytes"] == 8 * blocks
            assert covers_exactly_once(t, numel, threads)
            assert t["num_tiles"] <= max(1, blocks)
            if numel:
                assert t["tile_elems"] % BLOCK == 0   # tiles are whole runs of blocks
            assert not t["streaming_stores"]          # nothing large is written
        # the shared (thread-independent) fields are identical for every thread count
        shared = {(t["block_elems"], t["num_blocks"], t["workspace_bytes"])
                  for t in (tiling(numel, reduction=reduction, threads=n) for n in THREADS)}
        assert len(shared) == 1


def test_mean_sum_use_the_threads():
    assert tiling(1 << 20, reduction=1, threads=2)["num_tiles"] == 2
    assert tiling(1 << 20, reduction=2, threads=3)["num_tiles"] == 3
    assert tiling(3 * BLOCK, reduction=1, threads=8)["num_tiles"] == 1   # 24K elements: one thread's worth
    assert tiling(100 * BLOCK, reduction=1, threads=256)["num_tiles"] == 50   # 16K elements per thread at least


def test_streaming_stores_and_isa():
    l3 = 32 << 20   # streaming from l3 / 2 on, for none with a contiguous output only
    assert not tiling(1 << 20, 12, True, 0, l3_bytes=l3)["streaming_stores"]           # 12 MB: fits
    assert tiling(8 << 20, 12, True, 0, l3_bytes=l3)["streaming_stores"]               # 96 MB: streams
    assert not tiling(8 << 20, 12, False, 0, l3_bytes=l3)["streaming_stores"]          # strided output
    assert not tiling(8 << 20, 12, True, 1, l3_bytes=l3)["streaming_stores"]           # mean: one element out
    for isa in ("scalar", "avx2", "avx512"):
        for reduction in (0, 1, 2):
            assert tiling(1000, reduction=reduction, isa=isa)["isa"] == isa
