"""tilegrad.binary_cross_entropy_with_logits (the forward loss) through Python: accuracy vs the float64
NumPy reference (reference/bce.py, the vendor document's formula), reductions, broadcasting, dtype
mixes, strides, extremes, errors, thread determinism (1, 2, 3 threads bit-identical), the
TILEGRAD_VERBOSE line, and a torch cross-check. The C ABI: test_binary_cross_entropy_with_logits_c_abi.py;
the tiling: ..._tiling.py."""

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import ACLNN_ERR_PARAM_INVALID
from bce_cases import (BROADCAST_SHAPES, DTYPES, SELF_SHAPE, TORCH_CASES, extreme_logits, rand, raises,
                       streaming_operands)
from bce_cases import make_forward as make
from reference.bce import BF16, F16, F32, REDUCTIONS
from reference.bce import assert_bce_forward_close as check
from reference.bce import bce_forward_ref
from tilegrad import _core

OP = "aclnnBinaryCrossEntropyWithLogits"
bce = tg.binary_cross_entropy_with_logits
BLOCK = 8192  # kBceForwardBlockElems: elements per partial sum of mean / sum


# ---- accuracy ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", 0, 1, 2])
@pytest.mark.parametrize("weights", ["plain", "weight", "pos_weight", "both", "scalars"])
def test_matches_reference(isa, dtype, reduction, weights):
    shape = (7, 131)
    w_shape = {"weight": shape, "both": shape, "scalars": ()}.get(weights)
    pw_shape = {"pos_weight": (131,), "both": (131,), "scalars": (1,)}.get(weights)
    x, t, w, pw = make(shape, (dtype,) * 4, w_shape, pw_shape, seed=REDUCTIONS.get(reduction, reduction))
    check(bce(x, t, w, pw, reduction), x, t, w, pw, reduction)


def test_default_reduction_is_mean():
    x, t, w, pw = make((5, 9), w_shape=(9,), pw_shape=(9,))
    np.testing.assert_array_equal(bce(x, t, w, pw), bce(x, t, w, pw, "mean"))
    np.testing.assert_array_equal(bce(x, t), bce(x, t, reduction=1))


# Lengths around the vector widths, the pack size, the 64-element flush group (1024 at AVX-512) and
# the 8192-element blocks of mean / sum.
LENGTHS = [0, 1, 2, 15, 16, 17, 63, 64, 65, 255, 513, 1023, 1024, 1025, 4099, BLOCK - 1, BLOCK, BLOCK + 1,
           2 * BLOCK + 17, 5 * BLOCK + 333]


@pytest.mark.parametrize("n", LENGTHS)
def test_lengths(isa, n):
    for dtype in DTYPES:
        x, t, w, pw = make((n,), (dtype,) * 4, (n,), (1,), seed=n)
        for red in ("none", "mean", "sum"):
            check(bce(x, t, w, pw, red), x, t, w, pw, red)


def test_zero_dim(isa):
    for dtype in DTYPES:
        x, t, w, pw = make((), (dtype,) * 4, (), ())
        for red in ("none", "mean", "sum"):
            r = bce(x, t, w, pw, red)
            assert r.shape == ()
            check(r, x, t, w, pw, red)
        check(bce(x, t), x, t)


@pytest.mark.parametrize("shape", [(2, 0), (0,), (0, 3, 4)])
def test_empty(shape):
    # none: an empty result; mean: NaN (0 / 0); sum: 0 - as PyTorch and the vendor
    x, t, w, pw = make(shape, w_shape=shape[-1:], pw_shape=(1,))
    r = bce(x, t, w, pw, "none")
    assert r.shape == shape and r.dtype == np.float32
    assert np.isnan(bce(x, t, w, pw, "mean")) and bce(x, t, w, pw, "mean").shape == ()
    assert bce(x, t, w, pw, "sum") == 0.0
    for dtype in (F16, BF16):
        out = np.full((1,), 7.0, dtype)
        assert bce(x, t.astype(dtype), out=out) is out and np.isnan(out.astype(np.float64)).all()
        assert bce(x, t.astype(dtype), reduction="sum", out=out) is out and out[0] == 0


def test_mean_and_sum_out_shapes():
    x, t, w, pw = make((3, 50), w_shape=(50,), pw_shape=(3, 1))
    for red in ("mean", "sum"):
        want = bce(x, t, w, pw, red)
        for out in (np.empty((), F32), np.empty((1,), F32), np.empty(3, F32)[1:2]):
            assert bce(x, t, w, pw, red, out=out) is out
            np.testing.assert_array_equal(out.reshape(()), want)
        for shape in [(2,), (1, 1), (3, 50)]:
            with pytest.raises(ValueError, match=rf"out shape must be \[\] or \[1\] for reduction {red}"):
                bce(x, t, w, pw, red, out=np.empty(shape, F32))


@pytest.mark.parametrize("operand", ["weight", "pos_weight"])
@pytest.mark.parametrize("bshape", BROADCAST_SHAPES, ids=str)
def test_broadcast_positions(isa, operand, bshape):
    shapes = {"weight": (5,), "pos_weight": (4, 1)}
    shapes[operand] = bshape
    x, t, w, pw = make(SELF_SHAPE, w_shape=shapes["weight"], pw_shape=shapes["pos_weight"], seed=len(bshape))
    for red in ("none", "mean", "sum"):
        check(bce(x, t, w, pw, red), x, t, w, pw, red)


def test_broadcast_large_rows(isa):
    # Per-row weight (inner stride 0, packed) and per-class pos_weight over rows longer than a pack.
    x, t, w, pw = make((9, 1500), w_shape=(9, 1), pw_shape=(1500,), seed=3)
    for red in ("none", "mean"):
        check(bce(x, t, w, pw, red), x, t, w, pw, red)


MIXES = [
    # (x, t, w, pw)
    (F16, F32, F16, F16),     # the vendor's promotion case: out follows target
    (F32, F16, F32, F32),
    (BF16, F16, BF16, BF16),
    (BF16, BF16, F16, F32),
    (F32, BF16, BF16, BF16),
    (F16, F16, F16, BF16),
    (BF16, F32, F32, F32),
]


@pytest.mark.parametrize("dtypes", MIXES, ids=lambda d: "-".join(np.dtype(x).name for x in d))
def test_dtype_mixes(isa, dtypes):
    for red, w_shape, pw_shape in [("none", (6, 300), None), ("mean", None, (300,)), ("sum", (300,), (6, 300))]:
        x, t, w, pw = make((6, 300), dtypes, w_shape, pw_shape, seed=7)
        check(bce(x, t, w, pw, red), x, t, w, pw, red)


def test_random_dtype_mixes():
    rng = np.random.default_rng(11)
    for trial in range(40):
        dtypes = [DTYPES[i] for i in rng.integers(0, 3, size=4)]
        w_shape = [None, (70,), (5, 1), (5, 70)][(trial // 4) % 4]
        pw_shape = [None, (), (70,), (5, 70)][(trial // 2) % 4]
        x, t, w, pw = make((5, 70), dtypes, w_shape, pw_shape, seed=trial)
        red = ["none", "mean", "sum"][trial % 3]
        check(bce(x, t, w, pw, red), x, t, w, pw, red)


def test_strided_inputs_and_output(isa):
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        x = rand((40, 90), dtype, rng, -6, 6)[::2, ::3]           # (20, 30) strided
        t = rand((90, 40), dtype, rng, 0, 1).T[::2, ::3]          # transposed then strided
        w = rand((20, 60), dtype, rng, 0, 2)[:, ::-2]             # negative stride
        pw = np.broadcast_to(rand((30,), dtype, rng, 0.5, 3), (20, 30))   # zero strides
        out_base = np.zeros((20, 60), dtype)
        out = out_base[:, 1::2]
        assert bce(x, t, w, pw, "none", out=out) is out
        check(out, x, t, w, pw, "none")
        assert not out_base[:, 0::2].any()   # untouched gaps
        out_t = np.zeros((30, 20), dtype).T  # transposed output
        bce(x, t, w, pw, "none", out=out_t)
        check(out_t, x, t, w, pw, "none")
        for red in ("mean", "sum"):
            check(bce(x, t, w, pw, red), x, t, w, pw, red)


def test_transposed_self_mean_walks_memory_order():
    # mean / sum walk self in its memory order: a column-major self gives the same bits as its
    # row-major transpose (the same elements in the same order), and matches the reference.
    x, t, w, pw = make((300, 700), w_shape=(300, 700), pw_shape=(700,), seed=8)
    xc, tc, wc = (np.ascontiguousarray(a.T) for a in (x, t, w))   # (700, 300) row-major
    for red in ("mean", "sum"):
        r = bce(xc.T, tc.T, wc.T, pw, red)   # (300, 700) column-major views
        check(r, x, t, w, pw, red)
        assert r.view(np.uint32) == bce(xc, tc, wc, pw[:, None], red).view(np.uint32)


def test_misaligned_and_in_place(isa):
    rng = np.random.default_rng(9)
    for dtype in DTYPES:
        buf = np.zeros(5001, dtype)
        x = rand((5000,), dtype, rng)
        t = rand((5000,), dtype, rng, 0, 1)
        out = buf[1:]
        bce(x, t, None, None, "none", out=out)
        check(out, x, t, None, None, "none")
        check(bce(x[1:], t[:-1], None, None, "mean"), x[1:], t[:-1], None, None, "mean")   # misaligned inputs
        x2, t2 = x.copy(), t.copy()
        bce(x2, t2, None, None, "none", out=x2)   # in place over self
        check(x2, x, t, None, None, "none")
        x3, t3 = x.copy(), t.copy()
        w = rand((5000,), dtype, rng, 0, 2)
        bce(x3, t3, w, None, "none", out=t3)      # in place over target
        check(t3, x, t, w, None, "none")


def test_streaming_store_sizes():
    # Large enough that the output bypasses the caches (numel * bytes > L3 / 2 of this machine).
    x, t, w, pw = streaming_operands(_core.platform()["l3_bytes"])
    out = np.empty(x.size + 1, F32)[1:]   # misaligned start
    bce(x, t, w, pw, "none", out=out)
    check(out, x, t, w, pw, "none")
    check(bce(x, t, w, pw, "sum"), x, t, w, pw, "sum")


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_extreme_logits(isa, dtype):
    # Finite logits of any size give finite losses with full relative precision: no term cancels
    # (t = 0 at x = -30 is exp(-30), where (1 - t) * x + softplus(-x) would give 0).
    x, t = extreme_logits(dtype)
    for pw in (None, np.array([3.0], dtype)):
        r = bce(x, t, None, pw, "none")
        value, _ = bce_forward_ref(x, t, None, pw, "none")
        fits = np.abs(value) < float(np.finfo(np.float32).max) / 2   # 3 * 3.4e38 does not
        assert np.isfinite(r.astype(np.float64)[fits]).all()
        check(r, x, t, None, pw, "none")
        small = (t == 0) & (x.astype(np.float64) < -10) & (value > 2.0 ** -126)   # normal fp32 results
        rtol = 32 * 2.0 ** -24 + (2.0 ** -8 if dtype == BF16 else 0.0)   # + one bf16 rounding
        np.testing.assert_allclose(r[small].astype(np.float64), value[small], rtol=rtol)
        moderate = np.abs(x.astype(np.float64)) < 1e30   # sums that stay finite
        check(bce(x[moderate], t[moderate], None, pw, "sum"), x[moderate], t[moderate], None, pw, "sum")


def test_nan_and_inf_logits(isa):
    # NaN propagates; at +-inf the terms that do not vanish give inf, and 0 * inf gives NaN (where
    # PyTorch gives NaN too, except x = -inf, t = 1: PyTorch NaN, here the limit +inf).
    x = np.array([np.nan, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf], F32)
    t = np.array([0.5, 0.0, 1.0, 0.0, 1.0, 0.5, 0.5], F32)
    for pw in (None, np.array(2.0, F32)):
        r = bce(x, t, None, pw, "none")
        np.testing.assert_array_equal(np.isnan(r), [True, False, True, True, False, False, False])
        np.testing.assert_array_equal(r[[1, 4, 5, 6]], [np.inf] * 4)
        check(r, x, t, None, pw, "none")
        assert np.isnan(bce(x, t, None, pw, "mean"))
        assert bce(x[[1, 4]], t[[1, 4]], None, pw, "sum") == np.inf


def test_thread_count_determinism(threads):
    # 1, 2 and 3 threads give the same bits: none is elementwise; mean / sum add fixed blocks in order.
    cases = [
        (make((300, 1111), (F32, F32, F16, F32), (300, 1), (1111,), seed=4), "mean"),
        (make((300, 1111), (F32, F32, F16, F32), (300, 1), (1111,), seed=4), "sum"),
        (make((7 * BLOCK + 5,), (BF16,) * 4, (7 * BLOCK + 5,), (), seed=5), "mean"),
        (make((257, 513), (F16, F16, F16, F16), None, (513,), seed=6), "none"),
        (make((520, 400), (F32,) * 4, (400,), (520, 400), seed=7), "sum"),
    ]
    for (x, t, w, pw), red in cases:
        results = []
        for n in (1, 2, 3):
            threads(n)
            results.append(bce(x, t, w, pw, red))
        bits = np.uint32 if results[0].dtype == F32 else np.uint16
        for r in results[1:]:
            np.testing.assert_array_equal(r.view(bits), results[0].view(bits))
        check(results[0], x, t, w, pw, red)
    # transposed (column-major walk) and strided inputs too
    x, t, _, pw = make((600, 300), pw_shape=(300,), seed=9)
    xs, ts = x.T[:, ::2], t.T[:, ::2]   # (300, 300), strided both ways
    results = []
    for n in (1, 2, 3):
        threads(n)
        results.append(bce(xs, ts, None, pw, "mean"))
    for r in results[1:]:
        assert r.view(np.uint32) == results[0].view(np.uint32)
    check(results[0], xs, ts, None, pw, "mean")


def test_isas_agree():
    # Every ISA level computes the same algorithm; results agree to a few ulp (sums: different lane
    # counts, so a different order of the fp32 additions).
    x, t, w, pw = make((50, 333), w_shape=(333,), pw_shape=(50, 333), seed=2)
    levels = ["scalar", "avx2", "avx512"][: ["scalar", "avx2", "avx512"].index(tg.detected_isa()) + 1]
    previous = tg.max_isa()
    try:
        for red in ("none", "mean"):
            results = {}
            for level in levels:
                tg.set_max_isa(level)
                results[level] = bce(x, t, w, pw, red).astype(np.float64)
            for r in results.values():
                np.testing.assert_allclose(r, results["scalar"], rtol=2e-6, atol=0)
    finally:
        tg.set_max_isa(previous)


# ---- Python errors ----------------------------------------------------------------------------

def test_python_errors():
    x, t, w, pw = make((4, 6), w_shape=(6,), pw_shape=(6,))
    e = raises(ValueError, "self dtype must be one of {float32, float16, bfloat16}, got float64", bce,
               x.astype(np.float64), t)
    assert e.code == ACLNN_ERR_PARAM_INVALID
    assert str(e).startswith(OP + ": ")
    raises(ValueError, "target dtype must be one of .*got int32", bce, x, t.astype(np.int32))
    raises(ValueError, "weightOptional dtype must be one of .*got float64", bce, x, t, w.astype(np.float64))
    raises(ValueError, "posWeightOptional dtype must be one of .*got int64", bce, x, t, None, pw.astype(np.int64))
    e = raises(ValueError, r"out dtype float16 != target dtype float32", bce, x, t, out=np.empty((), F16))
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(ValueError, r"target shape \[4,5\] != self shape \[4,6\]", bce, x, t[:, :5])
    raises(ValueError, r"out shape \[6,4\] != self shape \[4,6\]", bce, x, t, None, None, "none",
           out=np.empty((6, 4), F32))
    raises(ValueError, r"out shape must be \[\] or \[1\] for reduction sum, got \[4,6\]", bce, x, t, None, None,
           "sum", out=np.empty((4, 6), F32))
    raises(ValueError, r"weightOptional shape \[4\] does not broadcast to self shape \[4,6\]", bce, x, t,
           np.ones(4, F32))
    raises(ValueError, r"weightOptional shape \[2,4,6\] does not broadcast", bce, x, t, np.ones((2, 4, 6), F32))
    raises(ValueError, r"posWeightOptional shape \[3,1\] does not broadcast", bce, x, t, None, np.ones((3, 1), F32))
    big = np.ones((1,) * 9, F32)
    raises(ValueError, "self rank must be at most 8, got 9", bce, big, big)
    e = raises(ValueError, r"reduction must be 0 \(none\), 1 \(mean\) or 2 \(sum\), got 3", bce, x, t, None, None, 3)
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(ValueError, "got -1", bce, x, t, None, None, -1)
    e = raises(ValueError, "reduction must be one of none, mean, sum, got 'avg'", bce, x, t, None, None, "avg")
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(ValueError, "NUL", bce, x, t, None, None, "mean\0")
    raises(TypeError, "reduction must be a str or an int, got float", bce, x, t, None, None, 1.0)
    raises(TypeError, "reduction must be a str or an int, got bool", bce, x, t, None, None, True)
    raises(TypeError, "reduction must be a str or an int, got NoneType", bce, x, t, None, None, None)
    raises(ValueError, "got 100000000000000000000", bce, x, t, None, None, 10**20)
    check(bce(x, t, w, None, np.int64(2)), x, t, w, None, "sum")   # NumPy integers are ints
    raises(TypeError, "input must be a numpy.ndarray, got list", bce, [[1.0]], t)
    raises(TypeError, "weight must be a numpy.ndarray, got str", bce, x, t, "1.0")
    raises(TypeError, "out must be a numpy.ndarray, got list", bce, x, t, out=[0.0])
    # Python/NumPy scalars are accepted wherever a 0-d array is
    check(bce(x, t, 0.5, 2.0), x, t, np.array(0.5, F32), np.array(2.0, F32), "mean")
    check(bce(np.float32(0.5), np.float32(1.0)), np.array(0.5, F32), np.array(1.0, F32))
    # validation order: dtype before shape (the C ABI test checks the reduction comes after both)
    raises(ValueError, "self dtype", bce, x.astype(np.float64), t[:3])
    # overlaps: a partial overlap with an input, and an output whose elements overlap each other
    buf = np.zeros(30, F32)
    xx = buf[:24].reshape(4, 6)
    xx[...] = x
    raises(ValueError, "out overlaps self without being the same view", bce, xx, t, None, None, "none",
           out=buf[6:].reshape(4, 6))
    zero_stride = np.lib.stride_tricks.as_strided(np.zeros(6, F32), (4, 6), (0, 4), writeable=True)
    raises(ValueError, "out has overlapping elements", bce, x, t, None, None, "none", out=zero_stride)
    ro = np.empty((), F32)
    ro.setflags(write=False)
    raises(ValueError, "out is not writeable", bce, x, t, out=ro)
    o = np.zeros((4, 6), F32)
    raises(ValueError, "out overlaps weightOptional", bce, x, t, o[1], None, "none", out=o)
    e = raises(ValueError, "out overlaps self", bce, xx, t, None, None, "mean", out=xx[0, 1:2])
    assert e.code == ACLNN_ERR_PARAM_INVALID


# ---- TILEGRAD_VERBOSE --------------------------------------------------------------------------

def test_verbose_trace_lines():
    # One line per launch with the tensors and the tiling hook's fields (test_verbose_trace's checker).
    from test_verbose_trace import run_and_check
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    t = rng.random((33, 70)).astype(np.float32)
    w = rng.random((70,)).astype(np.float32)  # broadcast along rows
    loss = tg.binary_cross_entropy_with_logits(x, t, w, reduction="mean")
    expect("aclnnBinaryCrossEntropyWithLogits", {"self": x, "target": t, "weightOptional": w, "out": loss},
           _core._binary_cross_entropy_with_logits_tiling(x.size, 12, True, 1, 2, **CACHES))
    pw = rng.random((70,)).astype(BF16)
    tb = t.astype(BF16)
    loss = tg.binary_cross_entropy_with_logits(x, tb, None, pw, reduction="none")
    expect("aclnnBinaryCrossEntropyWithLogits", {"self": x, "target": tb, "posWeightOptional": pw, "out": loss},
           _core._binary_cross_entropy_with_logits_tiling(x.size, 10, True, 0, 2, **CACHES))
    """)


# ---- torch cross-check (the backward test's cases: shape, reduction, weight shape, pos_weight shape) --

@pytest.mark.parametrize("case", TORCH_CASES, ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
def test_torch_cross_check(case, dtype):
    """Same value as torch's float64 F.binary_cross_entropy_with_logits, within the output's rounding."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    shape, red, w_shape, pw_shape = case
    x, t, w, pw = make(shape, (dtype,) * 4, w_shape, pw_shape, seed=1, x_range=5.0)
    as64 = lambda a: None if a is None else torch.from_numpy(a.astype(np.float64))  # noqa: E731
    want = F.binary_cross_entropy_with_logits(as64(x), as64(t), as64(w), reduction=red, pos_weight=as64(pw)).numpy()
    got = bce(x, t, w, pw, red).astype(np.float64)
    eps = {F32: 2.0 ** -22, F16: 2.0 ** -10, BF16: 2.0 ** -7}[dtype]
    np.testing.assert_allclose(got, want, rtol=eps, atol=1e-6)
