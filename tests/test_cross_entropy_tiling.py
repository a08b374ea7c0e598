"""Cross entropy tilings (pure functions of the shape and a thread count) through the test hooks
tilegrad._core._cross_entropy_loss_tiling and _cross_entropy_loss_grad_tiling: every element in exactly
one tile, tiles within the thread count, chunks within half of L2, the streaming-store decision."""

import numpy as np
import pytest

from tilegrad import _core


@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 100000), (3, 50000), (8192, 32000), (100, 7), (0, 5), (5, 0),
                                       (257, 1000)])
def test_grad_tiling_invariants(rows, cols):
    for threads in list(range(1, 17)) + [31, 64, 128, 256]:
        t = _core._cross_entropy_loss_grad_tiling(rows, cols, 8, True, threads)
        assert t["rows"] == rows and t["cols"] == cols
        if rows * cols == 0:
            assert t["num_tiles"] == 0
            continue
        assert 1 <= t["num_tiles"] <= threads
        covered = np.zeros((rows, cols), np.int32) if rows * cols <= 1_000_000 else None
        row_blocks = -(-rows // t["rows_per_tile"])
        assert t["num_tiles"] == row_blocks * t["col_chunks"]
        assert t["chunk_cols"] == cols or t["chunk_cols"] % 64 == 0
        assert (t["col_chunks"] - 1) * t["chunk_cols"] < cols <= t["col_chunks"] * t["chunk_cols"]
        if covered is not None:
            for tile in range(t["num_tiles"]):
                rb, cc = divmod(tile, t["col_chunks"])
                covered[rb * t["rows_per_tile"]:(rb + 1) * t["rows_per_tile"],
                        cc * t["chunk_cols"]:(cc + 1) * t["chunk_cols"]] += 1
            assert (covered == 1).all()
    big = _core._cross_entropy_loss_grad_tiling(8192, 32000, 8, True, 2)
    assert big["streaming_stores"] and big["num_tiles"] == 2
    assert not _core._cross_entropy_loss_grad_tiling(8192, 32000, 8, False, 2)["streaming_stores"]
    assert not _core._cross_entropy_loss_grad_tiling(16, 100, 8, True, 2)["streaming_stores"]


@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 1000000), (3, 50000), (8192, 32000), (100, 7), (0, 5), (5, 0)])
def test_forward_tiling_invariants(rows, cols):
    for threads in list(range(1, 17)) + [31, 64, 128, 256]:
        for l2 in (256 << 10, 1 << 20):
            t = _core._cross_entropy_loss_tiling(rows, cols, 4, 4, True, threads, l2_bytes=l2)
            if rows == 0:
                assert t["num_tiles"] == 0
                continue
            assert 1 <= t["num_tiles"] <= min(threads, rows)
            assert (t["num_tiles"] - 1) * t["rows_per_tile"] < rows <= t["num_tiles"] * t["rows_per_tile"]
            if cols == 0:
                assert t["num_chunks"] == 0
                continue
            # a chunk stays within half of L2; chunks cover the row exactly
            assert t["chunk_cols"] * 4 <= l2 // 2 or t["chunk_cols"] == 64
            assert t["chunk_cols"] == cols or t["chunk_cols"] % 64 == 0
            assert (t["num_chunks"] - 1) * t["chunk_cols"] < cols <= t["num_chunks"] * t["chunk_cols"]
    long_row = _core._cross_entropy_loss_tiling(4, 1000000, 4, 4, True, 2)
    assert long_row["num_chunks"] > 1
    assert _core._cross_entropy_loss_tiling(8192, 32000, 4, 4, True, 2)["num_chunks"] == 1
