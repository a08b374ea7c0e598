"""aclnnCrossEntropyLoss / aclnnCrossEntropyLossGrad through the Python API: the forward and its
exact vector-Jacobian product against the float64 NumPy reference (reference/cross_entropy.py,
written from specification section 3), finite differences, shapes, strides, masking rules, determinism
over thread counts, errors, and a torch cross-check where torch is installed. The C ABI:
test_cross_entropy_c_abi.py; the tilings: test_cross_entropy_tiling.py."""

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from reference.cross_entropy import cross_entropy_loss as ref_forward
from reference.cross_entropy import cross_entropy_loss_grad as ref_grad
from tilegrad import _core

F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]
REDUCTIONS = ["none", "mean", "sum"]


def f64(a):
    return np.asarray(a, dtype=np.float64) if a is not None else None


def assert_close(got, ref, dtype):
    got, ref = f64(got), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    scale = max(np.nanmax(np.abs(ref)) if ref.size and not np.isnan(ref).all() else 0.0, 1e-30)
    rtol = {F32: 2e-6, F16: 2.0**-10, BF16: 2.0**-7}[dtype]
    atol = {F32: 2e-6, F16: 2e-4, BF16: 2e-3}[dtype] * scale
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)


def make_case(n, c, dtype, seed, ignore_index=-100, frac_ignored=0.25, weighted=True):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 3).astype(dtype)
    t = rng.integers(0, max(c, 1), n).astype(np.int64)
    if n:
        t[rng.random(n) < frac_ignored] = ignore_index
    w = rng.uniform(0.2, 2.0, c).astype(np.float32) if weighted else None
    return x, t, w


def grad_inputs(reduction, n, dtype, seed):
    rng = np.random.default_rng(seed)
    shape = (n,) if reduction == "none" else ()
    return rng.uniform(0.5, 2.0, shape).astype(dtype), rng.uniform(-1, 1, shape).astype(dtype)


# ---- forward and gradient vs the reference over the attribute grid ---------------------------

IGNORE = [("ii_pos", 3), ("ii_neg", -7), ("ii_unused", -100)]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("z", [0.0, 1e-3], ids=["z0", "z"])
@pytest.mark.parametrize("ls", [0.0, 0.1, 1.0], ids=["ls0", "ls0.1", "ls1"])
@pytest.mark.parametrize("ignore", IGNORE, ids=[i[0] for i in IGNORE])
@pytest.mark.parametrize("weighted", [False, True], ids=["noweight", "weight"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_forward_and_grad_match_reference(isa, reduction, weighted, ignore, ls, z, dtype):
    ii = ignore[1]
    x, t, w = make_case(7, 33, dtype, seed=11, ignore_index=ii if ii != -100 else 5, weighted=weighted)
    if ii == -100:
        t[t == 5] = 4  # unused ignore_index: no row masked
    loss, lp, zl, lse = tg.cross_entropy_loss(x, t, w, reduction, ii, ls, z, return_zloss=True)
    rl, rlp, rz, rlse = ref_forward(f64(x), t, w, reduction, ii, ls, z)
    assert loss.dtype == lp.dtype == zl.dtype == lse.dtype == np.dtype(dtype)
    assert loss.shape == np.shape(rl) and zl.shape == np.shape(rz) and lse.shape == (7,)
    assert_close(lp, rlp, dtype)
    assert_close(lse, rlse, dtype)
    assert_close(loss, rl, dtype)
    assert_close(zl, rz, dtype)
    g, gz = grad_inputs(reduction, 7, dtype, 3)
    dx = tg.cross_entropy_loss_grad(g, lp, t, w, gz, lse, reduction, ii, ls, z)
    assert dx.dtype == np.dtype(dtype) and dx.shape == x.shape
    assert_close(dx, ref_grad(g, lp, t, w, gz, lse, reduction, ii, ls, z), dtype)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ls,z", [(0.0, 0.0), (0.1, 0.0), (0.3, 0.05)])
def test_grad_is_the_derivative_of_the_forward(reduction, ls, z):
    """Finite differences of the float64 reference forward vs tilegrad's gradient (fp32)."""
    n, c = 3, 5
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, c))
    t = np.array([1, -100, 4])
    w = rng.uniform(0.5, 1.5, c).astype(np.float32)
    g = rng.uniform(0.5, 1.5, (n,) if reduction == "none" else ())
    gz = rng.uniform(0.5, 1.5, (n,) if reduction == "none" else ())

    def objective(xx):
        loss, _, zl, _ = ref_forward(xx, t, w, reduction, -100, ls, z)
        return float((np.asarray(loss) * g).sum() + (np.asarray(zl) * gz).sum())

    fd = np.zeros((n, c))
    h = 1e-6
    for i in range(n):
        for j in range(c):
            xp, xm = x.copy(), x.copy()
            xp[i, j] += h
            xm[i, j] -= h
            fd[i, j] = (objective(xp) - objective(xm)) / (2 * h)
    x32 = x.astype(F32)
    _, lp, _, lse = tg.cross_entropy_loss(x32, t, w, reduction, -100, ls, z, return_zloss=True)
    dx = tg.cross_entropy_loss_grad(g.astype(F32), lp, t, w, gz.astype(F32), lse, reduction, -100, ls, z)
    np.testing.assert_allclose(dx, fd, rtol=1e-4, atol=1e-5)


# ---- shapes, strides, dtypes of the target ---------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (3, 7), (17, 129), (2, 50000)],
                         ids=["1x1", "C1", "3x7", "17x129", "C50000"])
def test_shapes(isa, shape, dtype):
    n, c = shape
    x, t, w = make_case(n, c, dtype, seed=sum(shape), frac_ignored=0.2)
    loss, lp, zl, lse = tg.cross_entropy_loss(x, t, w, "mean", -100, 0.1, 1e-3, return_zloss=True)
    rl, rlp, rz, rlse = ref_forward(f64(x), t, w, "mean", -100, 0.1, 1e-3)
    assert_close(lp, rlp, dtype)
    assert_close(loss, rl, dtype)
    assert_close(lse, rlse, dtype)
    g = np.asarray(1.5, dtype)
    dx = tg.cross_entropy_loss_grad(g, lp, t, w, None, lse, "mean", -100, 0.1, 1e-3)
    assert_close(dx, ref_grad(g, lp, t, w, None, lse, "mean", -100, 0.1, 1e-3), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("layout", ["cols_step2", "transposed", "negative"])
def test_strided_inputs_and_outputs(isa, dtype, layout):
    n, c = 9, 70
    rng = np.random.default_rng(8)
    base = (rng.standard_normal((2 * n, 2 * c)) * 2).astype(dtype)
    if layout == "cols_step2":
        x = base[:n, ::2]
    elif layout == "transposed":
        x = np.asfortranarray(base[:n, :c])
    else:
        x = base[n - 1::-1, c - 1::-1]
    assert x.shape == (n, c)
    tbuf = rng.integers(0, c, 2 * n).astype(np.int64)
    tbuf[::5] = -100
    t = tbuf[::2]
    w = rng.uniform(0.5, 1.5, 3 * c).astype(np.float32)[::3]
    lp_buf = np.zeros((n, 3 * c), dtype)
    lp_out = lp_buf[:, ::3]
    loss, lp, zl, lse = tg.cross_entropy_loss(x, t, w, "none", -100, 0.2, 0.01, return_zloss=True, out=lp_out)
    assert lp is lp_out
    assert (lp_buf[:, 1::3] == 0).all()
    rl, rlp, rz, rlse = ref_forward(f64(x), t, w, "none", -100, 0.2, 0.01)
    assert_close(lp, rlp, dtype)
    assert_close(loss, rl, dtype)
    # gradient: strided log_prob, grad_loss, lse and output
    g = rng.uniform(0.5, 2, 2 * n).astype(dtype)[::-2]
    lse_s = np.repeat(lse, 2)[::2]
    out_buf = np.zeros((c, 2 * n), dtype)
    out = out_buf.T[::2]
    assert out.shape == (n, c)
    dx = tg.cross_entropy_loss_grad(g, lp, t, w, None, lse_s, "none", -100, 0.2, 0.01, out=out)
    assert dx is out
    assert (out_buf.T[1::2] == 0).all()
    assert_close(dx, ref_grad(g, lp, t, w, None, lse_s, "none", -100, 0.2, 0.01), dtype)
    # the contiguous path gives the same bits
    same = tg.cross_entropy_loss_grad(np.ascontiguousarray(g), np.ascontiguousarray(lp), t.copy(), w.copy(), None,
                                      lse_s.copy(), "none", -100, 0.2, 0.01)
    np.testing.assert_array_equal(same.view(np.uint8), np.ascontiguousarray(dx).view(np.uint8))


def test_int32_target_and_grad_loss_shape_1():
    x, t, w = make_case(6, 11, F32, seed=2)
    a = tg.cross_entropy_loss(x, t, w, "sum")
    b = tg.cross_entropy_loss(x, t.astype(np.int32), w, "sum")
    assert a[0] == b[0]
    np.testing.assert_array_equal(a[1], b[1])
    g0 = tg.cross_entropy_loss_grad(np.asarray(0.5, F32), a[1], t, w, reduction="sum")
    g1 = tg.cross_entropy_loss_grad(np.array([0.5], F32), a[1], t.astype(np.int32), w, reduction="sum")
    g2 = tg.cross_entropy_loss_grad(0.5, a[1], t, w, reduction="sum")
    g3 = tg.cross_entropy_loss_grad(np.float32(0.5), a[1], t, w, reduction="sum")
    for g in (g1, g2, g3):
        np.testing.assert_array_equal(g0, g)


def test_grad_in_place_on_log_prob():
    x, t, w = make_case(8, 40, BF16, seed=4)
    _, lp, _, _ = tg.cross_entropy_loss(x, t, w)
    expect = tg.cross_entropy_loss_grad(2.0, lp, t, w, label_smoothing=0.1)
    res = tg.cross_entropy_loss_grad(2.0, lp, t, w, label_smoothing=0.1, out=lp)
    assert res is lp
    np.testing.assert_array_equal(lp.view(np.uint16), expect.view(np.uint16))


def test_vendor_doc_example():
    lp = np.full((2, 3), -0.2, F32)
    dx = tg.cross_entropy_loss_grad(np.asarray(0.1, F32), lp, np.array([0, 0]), np.ones(3, F32))
    np.testing.assert_allclose(dx, [[-0.0091, 0.0409, 0.0409]] * 2, atol=1e-4)


# ---- masking rules, degenerate divisors, special values --------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_every_row_ignored(dtype):
    x, t, w = make_case(4, 6, dtype, seed=1)
    t[:] = -3
    loss, lp, zl, _ = tg.cross_entropy_loss(x, t, w, "mean", -3, 0.1, 0.01, return_zloss=True)
    assert np.isnan(f64(loss)) and np.isnan(f64(zl))  # 0 / 0, as PyTorch
    assert f64(tg.cross_entropy_loss(x, t, w, "sum", -3)[0]) == 0
    np.testing.assert_array_equal(f64(tg.cross_entropy_loss(x, t, w, "none", -3)[0]), 0)
    dx = tg.cross_entropy_loss_grad(1.0, lp, t, w, None, None, "mean", -3, 0.1)
    np.testing.assert_array_equal(f64(dx), 0)  # PyTorch: zeros


def test_zero_weight_sum_gives_nan_grad_and_ignored_rows_stay_zero():
    x, t, _ = make_case(4, 6, F32, seed=1)
    t[:] = [2, -100, 2, 2]
    w = np.ones(6, F32)
    w[2] = 0
    _, lp, _, _ = tg.cross_entropy_loss(x, t, w)
    dx = tg.cross_entropy_loss_grad(1.0, lp, t, w)
    assert np.isnan(dx[[0, 2, 3]]).all()
    np.testing.assert_array_equal(dx[1], 0)


def test_ignore_index_masks_any_sign_and_unused_ignore_index_is_a_valid_class():
    x, t, w = make_case(5, 6, F32, seed=9, frac_ignored=0)
    t[:] = [0, 1, 2, 3, 4]
    for ii in (3, -1):
        tt = t.copy()
        tt[3] = ii
        loss = tg.cross_entropy_loss(x, tt, w, "none", ii)[0]
        assert loss[3] == 0 and (loss[[0, 1, 2, 4]] > 0).all()
        dx = tg.cross_entropy_loss_grad(np.ones(5, F32), tg.cross_entropy_loss(x, tt, w, "none", ii)[1], tt, w,
                                        reduction="none",
                                        ignore_index=ii)
        np.testing.assert_array_equal(dx[3], 0)


def test_extreme_logits_stay_finite_and_inf_nan_propagate():
    x = np.array([[1e4, -1e4, 0.0], [-1e30, 5.0, -np.inf], [np.nan, 0, 1], [np.inf, 0, 1]], F32)
    t = np.array([0, 1, 2, 1])
    loss, lp, _, _ = tg.cross_entropy_loss(x, t, None, "none")
    assert np.isfinite(loss[:2]).all() and np.isnan(loss[2:]).all()
    assert lp[0, 0] == 0 and lp[1, 1] == 0 and lp[1, 2] == -np.inf
    dx = tg.cross_entropy_loss_grad(np.ones(4, F32), lp, t, None, reduction="none")
    np.testing.assert_array_equal(dx[1], [0, 0, 0])
    np.testing.assert_array_equal(dx[0], [0, 0, 0])
    assert np.isnan(dx[2:]).all()


def test_bf16_true_class_term_has_no_cancellation():
    # p_t close to 1: the true-class gradient p_t - 1 must keep its bf16 precision
    lp = np.zeros((4, 64), BF16)
    lp[:] = -20.0
    lp[:, 7] = np.array([-2.0**-10, -2.0**-9, -2.0**-8, -2.0**-7], np.float32).astype(BF16)
    t = np.full(4, 7)
    dx = tg.cross_entropy_loss_grad(np.ones(4, BF16), lp, t, None, reduction="none")
    exact = np.expm1(f64(lp[:, 7]))
    np.testing.assert_allclose(f64(dx[:, 7]), exact, rtol=2.0**-8)


def test_empty_batch():
    x = np.zeros((0, 5), F32)
    t = np.zeros(0, np.int64)
    assert np.isnan(tg.cross_entropy_loss(x, t)[0])
    assert tg.cross_entropy_loss(x, t, reduction="sum")[0] == 0
    assert tg.cross_entropy_loss(x, t, reduction="none")[0].shape == (0,)
    dx = tg.cross_entropy_loss_grad(1.0, x, t)
    assert dx.shape == (0, 5)


def test_zero_classes_with_all_rows_ignored():
    x = np.zeros((3, 0), F32)
    t = np.full(3, -100)
    loss, lp, zl, lse = tg.cross_entropy_loss(x, t, reduction="none", return_zloss=True)
    np.testing.assert_array_equal(loss, 0)
    np.testing.assert_array_equal(lse, -np.inf)
    assert tg.cross_entropy_loss_grad(np.ones(3, F32), x, t, reduction="none").shape == (3, 0)


# ---- determinism -----------------------------------------------------------------------------

@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(64, 3000), (1, 70001)], ids=["rows", "one_long_row"])
def test_bit_identical_for_any_thread_count(threads, dtype, shape, ls):
    x, t, w = make_case(*shape, dtype, seed=21, frac_ignored=0.1)
    results = []
    for n in (1, 2, 3):
        threads(n)
        loss, lp, zl, lse = tg.cross_entropy_loss(x, t, w, "mean", -100, ls, 1e-3, return_zloss=True)
        dx = tg.cross_entropy_loss_grad(1.0, lp, t, w, 0.5, lse, "mean", -100, ls, 1e-3)
        results.append([np.atleast_1d(a).view(np.uint8).copy() for a in (loss, lp, zl, lse, dx)])
    for r in results[1:]:
        for a, b in zip(results[0], r):
            np.testing.assert_array_equal(a, b)


# ---- errors ----------------------------------------------------------------------------------

def test_target_out_of_range_names_lowest_row(threads):
    x, t, w = make_case(200, 300, F32, seed=3, frac_ignored=0)
    t[150] = 300
    t[77] = -5
    for n in (1, 2):
        threads(n)
        with pytest.raises(IndexError, match=r"target\[77\] = -5 is out of range \[0, 300\)") as e:
            tg.cross_entropy_loss(x, t, w)
        assert e.value.code == 161002
        with pytest.raises(IndexError, match=r"aclnnCrossEntropyLossGrad: target\[77\] = -5") as e:
            tg.cross_entropy_loss_grad(1.0, x, t, w)
        assert e.value.code == 161002


FWD_ERRORS = [
    ("input_dtype", dict(x=np.zeros((2, 3), np.float64)), r"aclnnCrossEntropyLoss: input dtype must be one of \{float32, float16, bfloat16\}, got float64"),
    ("target_dtype", dict(t=np.zeros(2, np.float32)), r"target dtype must be one of \{int64, int32\}, got float32"),
    ("weight_dtype", dict(w=np.ones(3, F16)), r"weightOptional dtype must be one of \{float32\}, got float16"),
    ("input_rank", dict(x=np.zeros((2, 3, 1), F32)), r"input must have rank 2, got rank 3"),
    ("target_rank", dict(t=np.zeros((2, 1), np.int64)), r"target must have rank 1, got rank 2"),
    ("target_shape", dict(t=np.zeros(3, np.int64)), r"target shape \[3\] != input shape\[0\] \(N\) \[2\]"),
    ("weight_shape", dict(w=np.ones(4, F32)), r"weightOptional shape \[4\] != input shape\[1\] \(C\) \[3\]"),
    ("reduction", dict(reduction="avg"), "reduction must be one of none, mean, sum, got 'avg'"),
    ("ls_high", dict(ls=1.5), r"labelSmoothing must be in \[0, 1\], got 1.5"),
    ("ls_neg", dict(ls=-0.1), r"labelSmoothing must be in \[0, 1\]"),
    ("ls_nan", dict(ls=float("nan")), r"labelSmoothing must be in \[0, 1\]"),
]


@pytest.mark.parametrize("case", FWD_ERRORS, ids=[c[0] for c in FWD_ERRORS])
def test_forward_value_errors(case):
    _, kw, msg = case
    a = dict(x=np.zeros((2, 3), F32), t=np.zeros(2, np.int64), w=np.ones(3, F32), reduction="mean", ls=0.0)
    a.update(kw)
    with pytest.raises(ValueError, match=msg) as e:
        tg.cross_entropy_loss(a["x"], a["t"], a["w"], a["reduction"], -100, a["ls"])
    assert e.value.code == 161002
    assert str(e.value).startswith("aclnnCrossEntropyLoss: ")


GRAD_ERRORS = [
    ("lp_dtype", dict(lp=np.zeros((2, 3), np.float64)), r"logProb dtype must be one of \{float32, float16, bfloat16\}, got float64"),
    ("g_dtype", dict(g=np.zeros((), F16)), "gradLoss dtype float16 != logProb dtype float32"),
    ("out_dtype", dict(out=np.zeros((2, 3), BF16)), "xGradOut dtype bfloat16 != logProb dtype float32"),
    ("gz_dtype", dict(gz=np.zeros((), F16)), "gradZlossOptional dtype float16"),
    ("lse_dtype", dict(lse=np.zeros(2, F16)), "lseForZlossOptional dtype float16"),
    ("target_dtype", dict(t=np.zeros(2, np.int16)), r"target dtype must be one of \{int64, int32\}, got int16"),
    ("weight_dtype", dict(w=np.ones(3, np.float64)), r"weightOptional dtype must be one of \{float32\}, got float64"),
    ("lp_rank", dict(lp=np.zeros(6, F32)), r"logProb must have rank 2, got rank 1"),
    ("g_rank", dict(g=np.zeros((1, 1), F32)), r"gradLoss rank must be in \[0, 1\], got 2"),
    ("out_shape", dict(out=np.zeros((2, 4), F32)), r"xGradOut shape \[2,4\] != logProb shape \[2,3\]"),
    ("target_shape", dict(t=np.zeros(5, np.int64)), r"target shape \[5\] != logProb shape\[0\] \(N\) \[2\]"),
    ("weight_shape", dict(w=np.ones(2, F32)), r"weightOptional shape \[2\] != logProb shape\[1\] \(C\) \[3\]"),
    ("lse_shape", dict(lse=np.zeros(3, F32)), r"lseForZlossOptional shape \[3\] != logProb shape\[0\] \(N\) \[2\]"),
    ("g_mean_shape", dict(g=np.zeros(2, F32)), r"gradLoss shape \[2\] must be \[\] or \[1\] for reduction mean"),
    ("g_none_shape", dict(g=np.zeros((), F32), reduction="none"), r"gradLoss shape \[\] must be \[2\]"),
    ("gz_shape", dict(gz=np.zeros(2, F32)), r"gradZlossOptional shape \[2\] must be \[\] or \[1\] for reduction mean"),
    ("reduction", dict(reduction="MEAN"), "reduction must be one of none, mean, sum, got 'MEAN'"),
    ("ls", dict(ls=2.0), r"labelSmoothing must be in \[0, 1\], got 2"),
]


@pytest.mark.parametrize("case", GRAD_ERRORS, ids=[c[0] for c in GRAD_ERRORS])
def test_grad_value_errors(case):
    _, kw, msg = case
    a = dict(g=np.ones((), F32), lp=np.zeros((2, 3), F32), t=np.zeros(2, np.int64), w=np.ones(3, F32), gz=None,
             lse=None, reduction="mean", ls=0.0, out=None)
    a.update(kw)
    with pytest.raises(ValueError, match=msg) as e:
        tg.cross_entropy_loss_grad(a["g"], a["lp"], a["t"], a["w"], a["gz"], a["lse"], a["reduction"], -100, a["ls"],
                                   out=a["out"])
    assert e.value.code == 161002


def test_overlapping_outputs_rejected():
    lp = np.zeros((4, 6), F32)
    t = np.zeros(4, np.int64)
    with pytest.raises(ValueError, match="xGradOut overlaps logProb without being the same view"):
        tg.cross_entropy_loss_grad(1.0, lp[:, :5], t, out=lp[:, 1:])
    buf = np.zeros(20, F32)
    with pytest.raises(ValueError, match="xGradOut overlaps lseForZlossOptional"):
        tg.cross_entropy_loss_grad(np.ones(2, F32), np.zeros((2, 3), F32), t[:2], None, None, buf[:2], "none",
                                   out=buf[:6].reshape(2, 3))
    x = np.zeros((4, 6), F32)
    with pytest.raises(ValueError, match="logProbOut overlaps input"):
        tg.cross_entropy_loss(x, t, out=x)
    repeated = np.lib.stride_tricks.as_strided(np.zeros(6, F32), (4, 6), (0, 4), writeable=True)
    with pytest.raises(ValueError, match="xGradOut has overlapping elements"):
        tg.cross_entropy_loss_grad(1.0, lp, t, out=repeated)
    with pytest.raises(ValueError, match="logProbOut has overlapping elements"):
        tg.cross_entropy_loss(x, t, out=repeated)


def test_type_errors():
    with pytest.raises(TypeError, match="input must be a numpy.ndarray"):
        tg.cross_entropy_loss([[1.0, 2.0]], np.zeros(1, np.int64))
    with pytest.raises(TypeError, match="log_prob must be a numpy.ndarray"):
        tg.cross_entropy_loss_grad(np.ones((), F32), [[1.0]], np.zeros(1, np.int64))


def test_long_rows_chunked_match_reference():
    # rows longer than the statistics chunk (L2/2): merged chunk statistics
    x, t, w = make_case(2, 300000, F32, seed=6)
    loss, lp, _, lse = tg.cross_entropy_loss(x, t, w, "none", -100, 0.1, return_zloss=True)
    rl, rlp, _, rlse = ref_forward(f64(x), t, w, "none", -100, 0.1, 0.0)
    assert_close(lp, rlp, F32)
    assert_close(loss, rl, F32)
    assert_close(lse, rlse, F32)


# ---- torch cross-check -----------------------------------------------------------------------

@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ls", [0.0, 0.15])
@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_matches_torch_cross_entropy(reduction, ls, dtype):
    torch = pytest.importorskip("torch")
    x, t, w = make_case(16, 45, dtype, seed=31, ignore_index=-1, frac_ignored=0.2)
    tdt = torch.float32 if dtype is F32 else torch.bfloat16
    xt = torch.tensor(f64(x), dtype=tdt, requires_grad=True)
    loss_t = torch.nn.functional.cross_entropy(xt, torch.tensor(t), torch.tensor(w, dtype=tdt), ignore_index=-1,
                                               reduction=reduction, label_smoothing=ls)
    go = torch.rand(loss_t.shape, dtype=tdt) + 0.5
    loss_t.backward(go)
    loss, lp, _, _ = tg.cross_entropy_loss(x, t, w, reduction, -1, ls)
    dx = tg.cross_entropy_loss_grad(go.float().numpy().astype(dtype), lp, t, w, None, None, reduction, -1, ls)
    tol = 2e-5 if dtype is F32 else 3e-2
    scale = float(loss_t.detach().float().abs().max())
    np.testing.assert_allclose(f64(loss), loss_t.detach().double().numpy(), rtol=tol, atol=tol * scale)
    gscale = float(xt.grad.float().abs().max())
    np.testing.assert_allclose(f64(dx), xt.grad.double().numpy(), rtol=tol, atol=tol * gscale)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_streaming_stores_match_regular_stores(dtype):
    # outputs larger than the last-level cache are written with non-temporal stores (from the first
    # 64-byte boundary on); a strided output of the same values takes the regular-store path
    l3 = _core.platform()["l3_bytes"]
    c = 30000
    n = int(l3 // (c * np.dtype(dtype).itemsize)) + 8
    x, t, w = make_case(n, c, dtype, seed=13, frac_ignored=0.1)
    buf = np.empty(n * c + 1, dtype)
    lp_streamed = buf[1:].reshape(n, c)  # not 64-byte aligned: exercises the aligned-head split
    loss, lp, _, lse = tg.cross_entropy_loss(x, t, w, "mean", -100, 0.1, 1e-3, return_zloss=True, out=lp_streamed)
    plain = np.zeros((n, 2 * c), dtype)[:, ::2]
    tg.cross_entropy_loss(x, t, w, "mean", -100, 0.1, 1e-3, out=plain)
    np.testing.assert_array_equal(lp.view(np.uint8), np.ascontiguousarray(plain).view(np.uint8))
    del x, plain
    gbuf = np.empty(n * c + 3, dtype)
    dx = tg.cross_entropy_loss_grad(1.0, lp, t, w, 0.5, lse, "mean", -100, 0.1, 1e-3, out=gbuf[3:].reshape(n, c))
    ref = np.zeros((n, 2 * c), dtype)[:, ::2]
    tg.cross_entropy_loss_grad(1.0, lp, t, w, 0.5, lse, "mean", -100, 0.1, 1e-3, out=ref)
    np.testing.assert_array_equal(dx.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))


@pytest.mark.parametrize("ls", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True], ids=["noweight", "weight"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_vector_paths_give_the_bits_of_the_strided_path(isa, dtype, weighted, ls):
    # contiguous rows take the widest kernels (for bf16: vcvtneps2bf16, 32-element pairs), strided
    # ones the generic path through stack buffers; log-probabilities down to -90 make some results
    # subnormal (the exact-conversion fallback)
    rng = np.random.default_rng(17)
    n, c = 6, 1000
    lp = rng.uniform(-90, 0, (n, c)).astype(dtype)
    t = rng.integers(0, c, n)
    t[2] = -100
    w = rng.uniform(0.5, 1.5, c).astype(np.float32) if weighted else None
    g = rng.uniform(1e-3, 1, n).astype(dtype)
    fast = tg.cross_entropy_loss_grad(g, lp, t, w, None, None, "none", -100, ls)
    slow = np.zeros((n, 2 * c), dtype)[:, ::2]
    tg.cross_entropy_loss_grad(g, lp, t, w, None, None, "none", -100, ls, out=slow)
    np.testing.assert_array_equal(fast.view(np.uint8), np.ascontiguousarray(slow).view(np.uint8))
    assert_close(fast, ref_grad(g, lp, t, w, None, None, "none", -100, ls, 0.0), dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_forward_fused_rows_give_the_bits_of_the_separate_write(isa, threads, dtype):
    # contiguous rows write row i's log_prob during row i+1's exp pass; a strided output takes the
    # separate write pass; rows of -inf and NaN take the early-out of the exp pass
    x, t, w = make_case(9, 333, dtype, seed=23)
    x[3] = -np.inf
    x[5, 7] = np.nan
    t[3] = -100
    for n in (1, 2):
        threads(n)
        loss, lp, _, lse = tg.cross_entropy_loss(x, t, w, "none", return_zloss=True)
        strided = np.zeros((9, 666), dtype)[:, ::2]
        loss2, _, _, lse2 = tg.cross_entropy_loss(x, t, w, "none", return_zloss=True, out=strided)
        np.testing.assert_array_equal(lp.view(np.uint8), np.ascontiguousarray(strided).view(np.uint8))
        np.testing.assert_array_equal(loss.view(np.uint8), loss2.view(np.uint8))
        assert np.isnan(f64(lp[3])).all() and np.isnan(f64(lp[5])).all() and np.isfinite(f64(lp[4])).all()
