"""core/ordered_reduce.h: the fixed-order reductions shared by RMSNorm's dgamma, RoPE's dcos / dsin and
the optimizer's gradient norm. Through the test hooks _core._row_blocks, _ordered_column_sum and
_sum_squares: the plan is a pure function of the shape, results are bit-identical for every thread
count and close to float64 sums."""

import ml_dtypes
import numpy as np
import pytest

from tilegrad import _core

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("rows,cols", [(1, 1), (7, 3), (4096, 2048), (64, 131072), (100000, 16), (3, 5000000)])
def test_row_blocks_partition(rows, cols):
    rb = _core._row_blocks(rows, cols)
    br, nb = rb["block_rows"], rb["num_blocks"]
    assert 1 <= br <= rows
    assert nb == -(-rows // br)
    assert (nb - 1) * br < rows <= nb * br  # every row in exactly one block
    assert nb <= 64
    assert rb["partial_stride"] % 16 == 0 and rb["partial_stride"] >= cols
    assert rb["workspace_bytes"] == nb * rb["partial_stride"] * 4
    # the workspace cap holds unless one block's partial alone exceeds it
    assert rb["workspace_bytes"] <= max(8 << 20, rb["partial_stride"] * 4)


def test_row_blocks_empty():
    for rows, cols in [(0, 5), (5, 0), (0, 0)]:
        rb = _core._row_blocks(rows, cols)
        assert rb["num_blocks"] == 0 and rb["workspace_bytes"] == 0


def _blocked_reference(a):
    """The documented order: fp32 row-order partial per block, then a double sum over blocks."""
    rb = _core._row_blocks(*a.shape)
    parts = []
    for b in range(rb["num_blocks"]):
        p = np.zeros(a.shape[1], np.float32)
        for r in range(b * rb["block_rows"], min((b + 1) * rb["block_rows"], a.shape[0])):
            p += a[r]
        parts.append(p.astype(np.float64))
    total = np.zeros(a.shape[1], np.float64)
    for p in parts:
        total += p
    return total.astype(np.float32)


@pytest.mark.parametrize("rows,cols", [(1, 1), (3, 700), (513, 33), (2000, 300)])
def test_column_sum_exact_order_and_threads(rows, cols):
    rng = np.random.default_rng(rows * 7 + cols)
    a = rng.standard_normal((rows, cols)).astype(np.float32)
    got = [_core._ordered_column_sum(a, t) for t in (1, 2, 3, 8)]
    for g in got[1:]:
        np.testing.assert_array_equal(g.view(np.uint32), got[0].view(np.uint32))
    np.testing.assert_array_equal(got[0], _blocked_reference(a))
    exact = a.astype(np.float64).sum(axis=0)
    np.testing.assert_allclose(got[0], exact, rtol=1e-5, atol=1e-5 * np.abs(a).sum(axis=0).max())


def test_column_sum_empty_rows_gives_zeros():
    out = _core._ordered_column_sum(np.zeros((0, 5), np.float32), 2)
    np.testing.assert_array_equal(out, np.zeros(5, np.float32))


def test_sum_squares_matches_float64_and_threads():
    rng = np.random.default_rng(0)
    arrays = [
        rng.standard_normal(100003).astype(np.float32),
        rng.standard_normal(5).astype(np.float16),
        rng.standard_normal(40000).astype(BF16),
        np.zeros(0, np.float32),
        rng.standard_normal(70000).astype(np.float32)[::-3],  # negative stride
        rng.standard_normal(50000).astype(np.float32)[::2],
    ]
    got = [_core._sum_squares(arrays, t) for t in (1, 2, 3, 7)]
    assert len(set(got)) == 1
    exact = sum(float(np.sum(a.astype(np.float64) ** 2)) for a in arrays)
    assert abs(got[0] - exact) <= 1e-12 * exact


def test_sum_squares_nonfinite_and_empty():
    assert _core._sum_squares([], 2) == 0.0
    assert _core._sum_squares([np.zeros(0, np.float16)], 2) == 0.0
    assert np.isinf(_core._sum_squares([np.array([1, np.inf], np.float32)], 1))
    assert np.isnan(_core._sum_squares([np.array([np.nan], BF16), np.ones(3, np.float32)], 2))
