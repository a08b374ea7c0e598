"""tilegrad.binary_cross_entropy_with_logits_backward through Python: accuracy vs the float64 NumPy
reference (reference/bce.py, written from specification section 2), broadcasting, dtype mixes, strides,
extremes, errors, thread determinism, and a torch cross-check where torch is installed. The C ABI:
test_binary_cross_entropy_with_logits_backward_c_abi.py; the tiling: ..._tiling.py."""

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import ACLNN_ERR_PARAM_INVALID
from bce_cases import (BROADCAST_SHAPES, DTYPES, SELF_SHAPE, TORCH_CASES, extreme_logits, rand, raises,
                       streaming_operands)
from bce_cases import make_backward as make
from reference.bce import BF16, F16, F32, REDUCTIONS
from reference.bce import assert_bce_close as check
from tilegrad import _core

OP = "aclnnBinaryCrossEntropyWithLogitsBackward"
bce = tg.binary_cross_entropy_with_logits_backward


# ---- accuracy ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", 0, 1, 2])
@pytest.mark.parametrize("weights", ["plain", "weight", "pos_weight", "both"])
def test_matches_reference(isa, dtype, reduction, weights):
    shape = (7, 131)
    red = REDUCTIONS.get(reduction, reduction)
    dy_shape = shape if red == 0 else ()
    w_shape = shape if weights in ("weight", "both") else None
    pw_shape = (131,) if weights in ("pos_weight", "both") else None
    dy, x, t, w, pw = make(shape, (dtype,) * 5, dy_shape, w_shape, pw_shape, seed=red)
    check(bce(dy, x, t, w, pw, reduction), dy, x, t, w, pw, reduction)


@pytest.mark.parametrize("n", [0, 1, 2, 15, 16, 17, 31, 33, 63, 64, 65, 255, 513, 1000, 4099])
def test_lengths(isa, n):
    for dtype in DTYPES:
        dy, x, t, w, pw = make((n,), (dtype,) * 5, (n,), (n,), (1,), seed=n)
        check(bce(dy, x, t, w, pw, "sum"), dy, x, t, w, pw, "sum")


def test_zero_dim(isa):
    for dtype in DTYPES:
        dy, x, t, w, pw = make((), (dtype,) * 5, (), (), ())
        for red in ("none", "mean", "sum"):
            r = bce(dy, x, t, w, pw, red)
            assert r.shape == ()
            check(r, dy, x, t, w, pw, red)
        # 0-d everything but without the optional tensors
        check(bce(dy, x, t), dy, x, t)


@pytest.mark.parametrize("shape", [(2, 0), (0,), (0, 3, 4)])
def test_empty(shape):
    dy, x, t, w, pw = make(shape, dy_shape=(), w_shape=shape[-1:], pw_shape=(1,))
    r = bce(dy, x, t, w, pw, "mean")
    assert r.shape == shape and r.dtype == np.float32
    out = np.empty(shape, np.float16)
    assert bce(dy, x, t.astype(np.float16), out=out) is out


@pytest.mark.parametrize("operand", ["grad_output", "weight", "pos_weight"])
@pytest.mark.parametrize("bshape", BROADCAST_SHAPES, ids=str)
def test_broadcast_positions(isa, operand, bshape):
    shapes = {"grad_output": (), "weight": (5,), "pos_weight": (4, 1)}
    shapes[operand] = bshape
    dy, x, t, w, pw = make(SELF_SHAPE, dy_shape=shapes["grad_output"], w_shape=shapes["weight"],
                           pw_shape=shapes["pos_weight"], seed=len(bshape))
    for red in ("none", "mean"):
        check(bce(dy, x, t, w, pw, red), dy, x, t, w, pw, red)


def test_broadcast_large_rows(isa):
    # Per-row weight (inner stride 0, packed) and per-class pos_weight over rows longer than a pack.
    dy, x, t, w, pw = make((9, 1500), dy_shape=(9, 1), w_shape=(9, 1), pw_shape=(1500,), seed=3)
    check(bce(dy, x, t, w, pw, "none"), dy, x, t, w, pw, "none")


MIXES = [
    # (dy, x, t, w, pw)
    (F16, F16, F32, F16, F16),   # the vendor UT case_dtype_promotion
    (F32, F16, F32, F32, F32),
    (BF16, BF16, F16, BF16, BF16),
    (F16, BF16, BF16, F16, F32),
    (F32, BF16, BF16, BF16, BF16),  # fp32 scalar grad_output, bf16 elsewhere
    (F32, F32, F16, F32, F32),
    (BF16, F32, BF16, F16, F16),
    (F16, F16, F16, F16, BF16),
]


@pytest.mark.parametrize("dtypes", MIXES, ids=lambda d: "-".join(np.dtype(x).name for x in d))
def test_dtype_mixes(isa, dtypes):
    for red, w_shape, pw_shape in [("none", (6, 300), None), ("mean", None, (300,)), ("sum", (300,), (6, 300))]:
        dy_shape = (6, 300) if red == "none" else ()
        dy, x, t, w, pw = make((6, 300), dtypes, dy_shape, w_shape, pw_shape, seed=7)
        check(bce(dy, x, t, w, pw, red), dy, x, t, w, pw, red)


def test_random_dtype_mixes():
    rng = np.random.default_rng(11)
    for trial in range(40):
        dtypes = [DTYPES[i] for i in rng.integers(0, 3, size=5)]
        dy_shape = [(), (1,), (70,), (5, 70)][trial % 4]
        w_shape = [None, (70,), (5, 1), (5, 70)][(trial // 4) % 4]
        pw_shape = [None, (), (70,), (5, 70)][(trial // 2) % 4]
        dy, x, t, w, pw = make((5, 70), dtypes, dy_shape, w_shape, pw_shape, seed=trial)
        red = ["none", "mean", "sum"][trial % 3]
        check(bce(dy, x, t, w, pw, red), dy, x, t, w, pw, red)


def test_strided_inputs_and_output(isa):
    rng = np.random.default_rng(5)
    for dtype in DTYPES:
        base_x = rand((40, 90), dtype, rng, -6, 6)
        base_t = rand((90, 40), dtype, rng, 0, 1)
        x = base_x[::2, ::3]                 # (20, 30) strided
        t = base_t.T[::2, ::3]               # transposed then strided
        w = rand((20, 60), dtype, rng, 0, 2)[:, ::-2]   # negative stride
        pw = np.broadcast_to(rand((30,), dtype, rng, 0.5, 3), (20, 30))   # zero strides
        dy = rand((20, 30), dtype, rng, 0.5, 1.5)[::-1]
        out_base = np.zeros((20, 60), dtype)
        out = out_base[:, 1::2]
        r = bce(dy, x, t, w, pw, "none", out=out)
        assert r is out
        check(out, dy, x, t, w, pw, "none")
        assert not out_base[:, 0::2].any()   # untouched gaps
        out_t = np.zeros((30, 20), dtype).T  # transposed output
        bce(dy, x, t, w, pw, "sum", out=out_t)
        check(out_t, dy, x, t, w, pw, "sum")


def test_misaligned_and_in_place(isa):
    rng = np.random.default_rng(9)
    for dtype in DTYPES:
        buf = np.zeros(5001, dtype)
        x = rand((5000,), dtype, rng)
        t = rand((5000,), dtype, rng, 0, 1)
        dy = np.array(0.7, dtype)
        out = buf[1:]
        bce(dy, x, t, None, None, "mean", out=out)
        check(out, dy, x, t)
        # in place over self and over target
        x2, t2 = x.copy(), t.copy()
        bce(dy, x2, t2, None, None, "mean", out=x2)
        check(x2, dy, x, t)
        x3, t3 = x.copy(), t.copy()
        w = rand((5000,), dtype, rng, 0, 2)
        bce(dy, x3, t3, w, None, "sum", out=t3)
        check(t3, dy, x, t, w, None, "sum")


def test_streaming_store_sizes():
    # Large enough that the output bypasses the caches (numel * bytes > L3 of this machine).
    x, t, w, pw = streaming_operands(_core.platform()["l3_bytes"])
    dy = np.array(1.0, F32)
    out = np.empty(x.size + 1, F32)[1:]   # misaligned start
    bce(dy, x, t, w, pw, "sum", out=out)
    check(out, dy, x, t, w, pw, "sum")


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_extreme_logits(isa, dtype):
    x, t = extreme_logits(dtype)
    dy = np.array(1.0, dtype)
    for pw in (None, np.array([3.0], dtype)):
        for red in ("none", "sum"):
            r = bce(dy, x, t, None, pw, red)
            assert np.isfinite(r.astype(np.float64)).all()
            check(r, dy, x, t, None, pw, red)
    # the limits: s -> 1 or 0 (to within the reciprocal's last bit)
    r = bce(np.array(1.0, F32), np.array([1e4, -1e4, 1e4, -1e4], F32), np.array([0, 0, 1, 1], F32), None,
            np.array(2.0, F32), "none")
    np.testing.assert_allclose(r, np.array([1.0, 0.0, -0.0, -2.0], F32), rtol=2.4e-7, atol=0)


def test_nan_and_inf_logits(isa):
    x = np.array([np.nan, np.inf, -np.inf, np.inf, -np.inf], F32)
    t = np.array([0.5, 0.25, 0.25, 1.0, 1.0], F32)
    r = bce(np.array(1.0, F32), x, t, None, np.array(2.0, F32), "none")
    # NaN propagates; s(+inf) = 1, s(-inf) = 0 as in PyTorch: g = 1 - t and -pw * t
    assert np.isnan(r[0])
    np.testing.assert_allclose(r[1:], np.array([0.75, -0.5, 0.0, -2.0], F32), rtol=2.4e-7, atol=0)


def test_thread_count_determinism(threads):
    dy, x, t, w, pw = make((300, 1111), (BF16, F32, F32, F16, F32), (300, 1), (1111,), (300, 1111), seed=4)
    results = []
    for n in (1, 2):
        threads(n)
        results.append(bce(dy, x, t, w, pw, "mean"))
    np.testing.assert_array_equal(results[0].view(np.uint32), results[1].view(np.uint32))
    results = []
    for n in (1, 2):
        threads(n)
        results.append(bce(dy.astype(BF16), x.astype(BF16), t.astype(BF16), None, None, "mean"))
    np.testing.assert_array_equal(results[0].view(np.uint16), results[1].view(np.uint16))


def test_isas_agree():
    # Every ISA level computes the same algorithm; results agree to a few ulp.
    dy, x, t, w, pw = make((50, 333), dy_shape=(), w_shape=(333,), pw_shape=(50, 333), seed=2)
    previous = tg.max_isa()
    try:
        results = {}
        for level in ["scalar", "avx2", "avx512"][: ["scalar", "avx2", "avx512"].index(tg.detected_isa()) + 1]:
            tg.set_max_isa(level)
            results[level] = bce(dy, x, t, w, pw, "mean").astype(np.float64)
    finally:
        tg.set_max_isa(previous)
    ref = results["scalar"]
    for r in results.values():
        np.testing.assert_allclose(r, ref, rtol=1e-6, atol=1e-12)


# ---- Python errors ----------------------------------------------------------------------------

def test_python_errors():
    dy, x, t, w, pw = make((4, 6), w_shape=(6,), pw_shape=(6,))
    e = raises(ValueError, "self dtype must be one of {float32, float16, bfloat16}, got float64", bce, dy,
               x.astype(np.float64), t)
    assert e.code == ACLNN_ERR_PARAM_INVALID
    assert str(e).startswith(OP + ": ")
    raises(ValueError, "target dtype must be one of .*got int32", bce, dy, x, t.astype(np.int32))
    raises(ValueError, "weightOptional dtype must be one of .*got float64", bce, dy, x, t, w.astype(np.float64))
    raises(ValueError, "posWeightOptional dtype must be one of .*got int64", bce, dy, x, t, None,
           pw.astype(np.int64))
    raises(ValueError, "gradOutput dtype must be one of .*got float64", bce, dy.astype(np.float64), x, t)
    e = raises(ValueError, r"out dtype float16 != target dtype float32", bce, dy, x, t, out=np.empty((4, 6), F16))
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(ValueError, r"target shape \[4,5\] != self shape \[4,6\]", bce, dy, x, t[:, :5])
    raises(ValueError, r"out shape \[6,4\] != self shape \[4,6\]", bce, dy, x, t, out=np.empty((6, 4), F32))
    raises(ValueError, r"gradOutput shape \[4,2\] does not broadcast to self shape \[4,6\]", bce,
           np.ones((4, 2), F32), x, t)
    raises(ValueError, r"gradOutput shape \[2,4,6\] does not broadcast", bce, np.ones((2, 4, 6), F32), x, t)
    raises(ValueError, r"weightOptional shape \[4\] does not broadcast to self shape \[4,6\]", bce, dy, x, t,
           np.ones(4, F32))
    raises(ValueError, r"posWeightOptional shape \[3,1\] does not broadcast", bce, dy, x, t, None,
           np.ones((3, 1), F32))
    big = np.ones((1,) * 9, F32)
    raises(ValueError, "self rank must be at most 8, got 9", bce, dy, big, big)
    e = raises(ValueError, r"reduction must be 0 \(none\), 1 \(mean\) or 2 \(sum\), got 3", bce, dy, x, t, None, None,
               3)
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(ValueError, "got -1", bce, dy, x, t, None, None, -1)
    e = raises(ValueError, "reduction must be one of none, mean, sum, got 'avg'", bce, dy, x, t, None, None, "avg")
    assert e.code == ACLNN_ERR_PARAM_INVALID
    raises(TypeError, "reduction must be a str or an int, got float", bce, dy, x, t, None, None, 1.0)
    raises(TypeError, "reduction must be a str or an int, got bool", bce, dy, x, t, None, None, True)
    raises(TypeError, "reduction must be a str or an int, got bool", bce, dy, x, t, None, None, np.bool_(True))
    raises(ValueError, "got 100000000000000000000", bce, dy, x, t, None, None, 10**20)
    check(bce(dy, x, t, w, None, np.int64(2)), dy, x, t, w, None, "sum")   # NumPy integers are ints
    raises(TypeError, "input must be a numpy.ndarray, got list", bce, dy, [[1.0]], t)
    raises(TypeError, "weight must be a numpy.ndarray, got str", bce, dy, x, t, "1.0")
    raises(TypeError, "grad_output must be a numpy.ndarray, got list", bce, [1.0], x, t)
    # Python/NumPy scalars are accepted wherever a 0-d array is (issue 14, defect 7)
    check(bce(dy, x, t, 0.5), dy, x, t, np.array(0.5, F32), None, "mean")
    # overlaps: a partial overlap with an input, and an output whose elements overlap each other
    buf = np.zeros(30, F32)
    xx = buf[:24].reshape(4, 6)
    xx[...] = x
    raises(ValueError, "out overlaps self without being the same view", bce, dy, xx, t, out=buf[6:].reshape(4, 6))
    zero_stride = np.lib.stride_tricks.as_strided(np.zeros(6, F32), (4, 6), (0, 4), writeable=True)
    raises(ValueError, "out has overlapping elements", bce, dy, x, t, out=zero_stride)
    ro = np.empty((4, 6), F32)
    ro.setflags(write=False)
    raises(ValueError, "out is not writeable", bce, dy, x, t, out=ro)
    # out aliasing a broadcast input is a partial overlap too
    o = np.zeros((4, 6), F32)
    raises(ValueError, "out overlaps weightOptional", bce, dy, x, t, o[1], out=o)
    e = raises(ValueError, "out overlaps gradOutput", bce, xx[0, 0:1], x, t, out=xx)
    assert e.code == ACLNN_ERR_PARAM_INVALID


# ---- torch cross-check --------------------------------------------------------------------------

@pytest.mark.parametrize("case", TORCH_CASES, ids=str)
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
def test_torch_cross_check(case, dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    shape, red, w_shape, pw_shape = case
    dy, x, t, w, pw = make(shape, (dtype,) * 5, shape if red == "none" else (), w_shape, pw_shape, seed=17)
    x[...] = np.clip(x.astype(np.float32), -30, 30).astype(dtype)   # keep torch's s - t form comparable

    def tt(a):
        return None if a is None else torch.from_numpy(np.asarray(a, np.float32)).to(
            {F32: torch.float32, BF16: torch.bfloat16, F16: torch.float16}[dtype])

    X = tt(x).requires_grad_(True)
    loss = F.binary_cross_entropy_with_logits(X, tt(t), tt(w), reduction=red, pos_weight=tt(pw))
    (g,) = torch.autograd.grad(loss, X, tt(dy))
    expected = g.float().numpy().astype(np.float64)
    got = bce(dy, x, t, w, pw, red).astype(np.float64)
    # torch rounds every intermediate to the tensor dtype; allow a few of its roundings
    tol = {F32: 1e-5, BF16: 3e-2, F16: 4e-3}[dtype] * (np.abs(expected).max() + 1e-30)
    np.testing.assert_allclose(got, expected, rtol=0, atol=tol)


def test_torch_extremes():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = np.array([-1e4, -100, -20, 0, 20, 100, 1e4, np.inf, -np.inf] * 2, np.float32)
    t = np.array([0.0] * 9 + [1.0] * 9, np.float32)
    pw = np.array(2.5, np.float32)
    X = torch.from_numpy(x).requires_grad_(True)
    loss = F.binary_cross_entropy_with_logits(X, torch.from_numpy(t), pos_weight=torch.from_numpy(pw),
                                              reduction="sum")
    (g,) = torch.autograd.grad(loss, X)
    got = bce(np.array(1.0, np.float32), x, t, None, pw, "sum")
    np.testing.assert_allclose(got, g.numpy(), rtol=1e-6, atol=1e-7)
