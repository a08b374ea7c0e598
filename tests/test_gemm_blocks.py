"""core::gemm, the thread-count deterministic blocked GEMM every operator uses, through the benchmark hook
tilegrad._core._onednn_matmul(blocked=True): C is split into blocks of its shape only; a block that is a
column block of a wider C (leading dimension > its columns, which oneDNN's brgemm matmul does not take)
runs into a dense per-thread buffer. Checked against float64 products of the same (exactly
representable) inputs: the values, accumulation, 16-bit outputs, views of a wider array (the columns
around them untouched), and bit-identical results for 1, 2 and 3 threads."""

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from tilegrad import _core

BF16 = np.dtype(ml_dtypes.bfloat16)


def operands(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32).astype(dtype)
    b = rng.standard_normal((k, n)).astype(np.float32).astype(dtype)
    return a, b


def reference(a, b, c0=None):
    """float64 a @ b (+ c0): exact products, summed in double."""
    r = a.astype(np.float64) @ b.astype(np.float64)
    return r if c0 is None else r + c0.astype(np.float64)


def blocked(a, b, out, threads, accumulate=False):
    before = tg.get_num_threads()
    tg.set_num_threads(threads)
    try:
        _core._onednn_matmul(a, b, out, threads, blocked=True, accumulate=accumulate)
    finally:
        tg.set_num_threads(before)
    return out


# C wide enough that the blocks split its columns: (M, N, K)
SHAPES = [(256, 3000, 512), (96, 4100, 300), (700, 900, 1100)]


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16])
@pytest.mark.parametrize("m, n, k", SHAPES)
def test_column_blocks_match_float64(m, n, k, dtype):
    a, b = operands(m, n, k, dtype)
    out = blocked(a, b, np.empty((m, n), np.float32), threads=2)
    exact = reference(a, b)
    err = np.abs(out - exact).max() / np.abs(exact).max()
    assert err < 2e-6, err  # fp32 accumulation of exact products


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16])
def test_view_of_wider_output_and_accumulate(dtype):
    m, n, k = 300, 2500, 640
    a, b = operands(m, n, k, dtype, seed=1)
    wide = np.random.default_rng(2).standard_normal((m, n + 700)).astype(np.float32)
    before = wide.copy()
    view = wide[:, 300:300 + n]  # leading dimension n + 700: every block is a column block of it
    blocked(a, b, view, threads=2, accumulate=True)
    exact = reference(a, b, before[:, 300:300 + n])
    assert np.abs(view - exact).max() / np.abs(exact).max() < 2e-6
    np.testing.assert_array_equal(wide[:, :300], before[:, :300])
    np.testing.assert_array_equal(wide[:, 300 + n:], before[:, 300 + n:])


def test_16bit_output_rounded_once():
    m, n, k = 200, 3000, 512
    a, b = operands(m, n, k, BF16, seed=3)
    out = blocked(a, b, np.empty((m, n), BF16), threads=2)
    exact = reference(a, b)
    # one rounding of an fp32-accumulated value: within a bf16 half-ulp (2^-9 relative) plus fp32 error
    rel = np.abs(out.astype(np.float64) - exact) / np.maximum(np.abs(exact), 1e-3)
    assert np.quantile(rel, 0.999) <= 2.0 ** -8 and np.median(rel) < 2.0 ** -9


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), BF16])
@pytest.mark.parametrize("accumulate", [False, True])
def test_bits_independent_of_threads(dtype, accumulate):
    m, n, k = 384, 5000, 576
    a, b = operands(m, n, k, dtype, seed=4)
    start = np.random.default_rng(5).standard_normal((m, n + 64)).astype(np.float32)
    results = []
    for threads in (1, 2, 3):
        wide = start.copy()
        blocked(a, b, wide[:, 64:], threads, accumulate)
        results.append(wide)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])
