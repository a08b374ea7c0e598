"""LayerNorm forward and backward tilings (pure functions of the shape, layouts and a Platform) through
_core._layer_norm_tiling / _layer_norm_backward_tiling, for simulated machines of 1..256 threads: every
row in exactly one tile, balanced tiles, the workspace layout, the streaming-store decision; the
backward's row blocks (the dweight / dbias summation order) independent of the thread count."""

import pytest

from tilegrad import _core

MiB = 1 << 20
SHAPES = [(0, 8), (1, 1), (3, 7), (16, 2048), (4096, 2048), (100003, 64), (5, 1 << 20), (1 << 20, 4096)]
THREADS = [1, 2, 3, 4, 7, 8, 16, 31, 64, 128, 256]


def fwd(rows, cols, threads, elem=4, pack=False, out_dense=True, l3=32 * MiB):
    return _core._layer_norm_tiling(rows, cols, elem, pack, out_dense, threads, 32 << 10, 1 << 20, l3, "avx512")


def bwd(rows, cols, threads, elem=4, pack=False, dx_dense=True, l3=32 * MiB):
    return _core._layer_norm_backward_tiling(rows, cols, elem, pack, dx_dense, threads, 32 << 10, 1 << 20, l3, "avx2")


@pytest.mark.parametrize("threads", THREADS)
def test_forward_rows_partitioned(threads):
    for rows, cols in SHAPES:
        t = fwd(rows, cols, threads)
        if rows == 0:
            assert t["num_tiles"] == 0 and t["workspace_bytes"] == 0
            continue
        n, rpt = t["num_tiles"], t["rows_per_tile"]
        assert 1 <= n <= min(threads, rows)
        assert (n - 1) * rpt < rows <= n * rpt  # every row in exactly one tile, last tile non-empty
        assert t["workspace_bytes"] >= 2 * cols * 4  # fp32 weight and bias


def test_forward_small_work_wakes_one_thread():
    assert fwd(4, 100, 64)["num_tiles"] == 1
    assert fwd(4096, 2048, 64)["num_tiles"] == 64


def test_forward_streaming_and_scratch():
    assert fwd(4096, 2048, 2)["streaming_stores"] is True  # 64 MiB moved > half the L3
    assert fwd(64, 2048, 2)["streaming_stores"] is False
    assert fwd(4096, 2048, 2, out_dense=False)["streaming_stores"] is False
    a, b = fwd(100, 256, 3), fwd(100, 256, 3, pack=True)
    assert b["pack_rows"] and b["workspace_bytes"] >= a["workspace_bytes"] + b["num_tiles"] * 2 * 256 * 4


@pytest.mark.parametrize("rows,cols", SHAPES)
def test_backward_blocks_independent_of_threads(rows, cols):
    base = bwd(rows, cols, 1)
    for threads in THREADS:
        t = bwd(rows, cols, threads)
        assert (t["num_tiles"], t["block_rows"], t["workspace_bytes"]) == (
            base["num_tiles"], base["block_rows"], base["workspace_bytes"])
        assert 1 <= t["tile_threads"] <= max(1, min(threads, t["num_tiles"]))
    rb = _core._row_blocks(rows, cols)
    assert (base["num_tiles"], base["block_rows"]) == (rb["num_blocks"], rb["block_rows"])
    if rows:
        # weight, dweight and dbias sums, and two sets of block partials
        assert base["workspace_bytes"] >= 2 * rb["workspace_bytes"] + 3 * cols * 4


def test_backward_streaming_and_scratch():
    assert bwd(4096, 2048, 2)["streaming_stores"] is True
    assert bwd(4096, 2048, 2, dx_dense=False)["streaming_stores"] is False
    a, b = bwd(100, 256, 3), bwd(100, 256, 3, pack=True)
    assert b["pack_rows"] and b["workspace_bytes"] >= a["workspace_bytes"] + b["num_tiles"] * 3 * 256 * 4
