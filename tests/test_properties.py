"""Property-based tests (hypothesis) of every operator: random shapes (0-8 dims), dtypes, layouts
(stepped, reversed, transposed, zero-stride inputs), optional arguments and thread counts. Every
call either matches the float64 reference or raises one of the documented exceptions (ValueError,
TypeError, IndexError); it never crashes, never modifies an input, and never writes outside its
output (outputs live inside guard-padded buffers whose every other byte is checked afterwards).

Profiles (env TILEGRAD_HYPOTHESIS_PROFILE): "ci" (default: few examples, no deadline, no example
database; the whole file takes well under a minute) and "thorough" (many examples)."""

import os

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tilegrad as tg
from reference.bce import assert_bce_close as bce_check
from reference.cross_entropy import cross_entropy_loss as ref_forward
from reference.cross_entropy import cross_entropy_loss_grad as ref_grad
from reference.embedding import assert_embedding_close as emb_check
from reference.fused_linear_cross_entropy import f64, linear_cross_entropy, loss_grad, online_max_sum
from reference import add_rms_norm as add_rms_ref
from reference import layer_norm as ln_ref
from reference import rms_norm as rms_ref
from reference import gelu as gelu_ref
from reference import swi_glu as swiglu_ref
from reference.silu import assert_silu_close
from registry import FLOAT_DTYPES, OPERATORS, python_call

settings.register_profile("ci", max_examples=25, deadline=None, database=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("TILEGRAD_HYPOTHESIS_PROFILE", "ci"))

F32, F16, BF16 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)
FLOATS = [F32, F16, BF16]
DOCUMENTED = (ValueError, TypeError, IndexError)
# Guard value of every byte around (and, before the call, inside) an output: a NaN payload.
GUARD = {4: 0x7FC0DEAD, 2: 0x7E5A}
UINT = {4: np.uint32, 2: np.uint16, 8: np.uint64, 1: np.uint8}


# ---- layouts ------------------------------------------------------------------------------------

@st.composite
def layout(draw, shape, allow_zero_stride=True):
    """How to lay out an array of `shape`: axis order, per-axis step (negative = reversed), and for
    inputs optionally one axis broadcast with stride 0."""
    nd = len(shape)
    perm = draw(st.permutations(range(nd))) if nd > 1 and draw(st.booleans()) else list(range(nd))
    steps = [draw(st.sampled_from([1, 1, 2, -1, -2])) for _ in range(nd)]
    zero_axis = None
    if allow_zero_stride and nd and draw(st.integers(0, 3)) == 0:
        zero_axis = draw(st.integers(0, nd - 1))
    return perm, steps, zero_axis


def guarded(shape, dtype, lay, pad=16):
    """(view, buffer): a view of `shape` laid out as `lay` inside a buffer of guard values."""
    perm, steps, zero_axis = lay
    dtype = np.dtype(dtype)
    base_shape = [max(shape[p], 1) * abs(s) for p, s in zip(perm, steps)]
    total = int(np.prod(base_shape, dtype=np.int64)) if base_shape else 1
    buf = np.full(total + 2 * pad, GUARD.get(dtype.itemsize, 0x5A), UINT[dtype.itemsize])
    base = buf[pad:pad + total].view(dtype).reshape(base_shape)
    if not shape:
        return base, buf  # 0-d: indexing with () would give a scalar, not a view
    view = base[tuple(slice(None, None, s) for s in steps)]
    view = view[tuple(slice(0, shape[p]) for p in perm)]
    view = view.transpose(np.argsort(perm))
    assert view.shape == tuple(shape)
    return view, buf


def make_input(data, shape, dtype, lay, lo=-4.0, hi=4.0):
    """An input array of shape/dtype/layout with random values (stride 0 along lay's zero axis)."""
    perm, steps, zero_axis = lay
    shape = list(shape)
    src_shape = list(shape)
    if zero_axis is not None:
        src_shape[zero_axis] = 1
    view, _ = guarded(src_shape, dtype, (perm, steps, None))
    # Values from a drawn seed (drawing each float through hypothesis is ~100x slower).
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    view[...] = rng.uniform(lo, hi, size=src_shape).astype(dtype)
    return np.broadcast_to(view, shape) if zero_axis is not None else view


def snapshot(arrays):
    return [None if a is None else np.array(a, copy=True) for a in arrays]


def assert_unchanged(before, arrays):
    for b, a in zip(before, arrays):
        if a is not None:
            assert np.array_equal(b.view(UINT[b.itemsize]) if b.dtype.kind == "f" else b,
                                  a.view(UINT[a.itemsize]) if a.dtype.kind == "f" else a), "an input was modified"


def assert_guard_intact(view, buf):
    """Every byte of buf outside view's elements still holds the guard value."""
    marked = buf.copy()
    inner = view.view(UINT[view.itemsize]) if view.size else None
    if inner is not None:
        # overwrite the view's elements with the guard in a copy laid out the same way
        offset = (view.__array_interface__["data"][0] - buf.__array_interface__["data"][0])
        as_view = np.lib.stride_tricks.as_strided(marked[offset // buf.itemsize:], view.shape,
                                                  view.strides) if view.ndim else None
        if as_view is not None:
            as_view[...] = GUARD.get(view.itemsize, 0x5A)
        else:
            marked[offset // buf.itemsize] = GUARD.get(view.itemsize, 0x5A)
    assert np.all(marked == GUARD.get(buf.itemsize, 0x5A)), "a write landed outside the output"


def shapes(min_dims=0, max_dims=8, max_side=4, max_size=96):
    return st.lists(st.integers(0, max_side), min_size=min_dims, max_size=max_dims).filter(
        lambda s: int(np.prod(s, dtype=np.int64)) <= max_size)


def run_documented(fn):
    """fn() or the documented exception it raised (anything else propagates and fails the test)."""
    try:
        return fn(), None
    except DOCUMENTED as e:
        assert str(e), "an exception without a message"
        return None, e


thread_counts = st.sampled_from([1, 2, 3, 5])


@pytest.fixture(autouse=True)
def restore_threads():
    previous = tg.get_num_threads()
    yield
    tg.set_num_threads(previous)


# ---- silu_backward ------------------------------------------------------------------------------

def broadcast_source(data, shape):
    """A shape that broadcasts to `shape` (trailing dims kept or set to 1, leading dims dropped)."""
    keep = data.draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - keep:]
    return [1 if data.draw(st.booleans()) else d for d in tail]


@given(data=st.data(), shape=shapes(), nthreads=thread_counts)
def test_silu_backward(data, shape, nthreads):
    tg.set_num_threads(nthreads)
    dt_dy, dt_x = data.draw(st.sampled_from(FLOATS)), data.draw(st.sampled_from(FLOATS))
    dy_shape, x_shape = broadcast_source(data, shape), broadcast_source(data, shape)
    dy = make_input(data, dy_shape, dt_dy, data.draw(layout(dy_shape)))
    x = make_input(data, x_shape, dt_x, data.draw(layout(x_shape)), -12, 12)
    full = list(np.broadcast_shapes(tuple(dy_shape), tuple(x_shape)))
    out_dtype = dt_dy if dt_dy == dt_x else F32
    wrong = data.draw(st.integers(0, 5)) == 0  # an output of the wrong shape must be refused
    out_shape = full + [2] if wrong else full
    out, buf = guarded(out_shape, out_dtype, data.draw(layout(out_shape, allow_zero_stride=False)))
    before = snapshot([dy, x])
    result, err = run_documented(lambda: tg.silu_backward(dy, x, out=out))
    assert_unchanged(before, [dy, x])
    assert_guard_intact(out, buf) if err is not None else None
    if wrong:
        assert isinstance(err, ValueError)
        return
    assert err is None, err
    assert result is out
    assert_silu_close(out, dy, x, out_dtype)
    assert_guard_intact(out, buf)


# ---- binary_cross_entropy_with_logits_backward --------------------------------------------------

@given(data=st.data(), shape=shapes(), nthreads=thread_counts,
       reduction=st.sampled_from(["none", "mean", "sum", 0, 1, 2, "avg", 3]))
def test_binary_cross_entropy_with_logits_backward(data, shape, nthreads, reduction):
    tg.set_num_threads(nthreads)
    dts = [data.draw(st.sampled_from(FLOATS)) for _ in range(5)]
    x = make_input(data, shape, dts[1], data.draw(layout(shape)), -8, 8)
    t = make_input(data, shape, dts[2], data.draw(layout(shape)), 0, 1)
    red = {"none": 0, "mean": 1, "sum": 2}.get(reduction, reduction)
    dy_shape = shape if red == 0 else broadcast_source(data, shape)
    dy = make_input(data, dy_shape, dts[0], data.draw(layout(dy_shape)), 0.5, 2)
    w = pw = None
    if data.draw(st.booleans()):
        ws = broadcast_source(data, shape)
        w = make_input(data, ws, dts[3], data.draw(layout(ws)), 0, 2)
    if data.draw(st.booleans()):
        ps = broadcast_source(data, shape)
        pw = make_input(data, ps, dts[4], data.draw(layout(ps)), 0.2, 4)
    out, buf = guarded(shape, dts[2], data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([dy, x, t, w, pw])
    result, err = run_documented(
        lambda: tg.binary_cross_entropy_with_logits_backward(dy, x, t, w, pw, reduction, out=out))
    assert_unchanged(before, [dy, x, t, w, pw])
    assert_guard_intact(out, buf) if err is not None else None
    if red not in (0, 1, 2):
        assert isinstance(err, ValueError) and "reduction" in str(err)
        return
    assert err is None, err
    bce_check(result, dy, x, t, w, pw, red)
    assert_guard_intact(out, buf)


# ---- embedding_dense_backward -------------------------------------------------------------------

@given(data=st.data(), idx_shape=shapes(1, 7, 4, 48), d=st.integers(0, 20), nthreads=thread_counts)
def test_embedding_dense_backward(data, idx_shape, d, nthreads):
    tg.set_num_threads(nthreads)
    # num_weights from tiny (every index out of range) to far more rows than indices (sparse path)
    v = data.draw(st.sampled_from([0, 1, 3, 7, 64, 2000]))
    n = int(np.prod(idx_shape, dtype=np.int64))
    bad = v == 0 or data.draw(st.integers(0, 6)) == 0  # an index out of range somewhere
    rows = [data.draw(st.integers(0, max(v - 1, 0))) for _ in range(n)]
    if bad and n:
        rows[data.draw(st.integers(0, n - 1))] = data.draw(st.sampled_from([-1, v, v + 5]))
    idt = data.draw(st.sampled_from([np.int64, np.int32, np.int16]))
    if np.dtype(idt).itemsize <= 2:
        assume(max([abs(r) for r in rows] + [0]) < 2**15)
    idx_src, _ = guarded(idx_shape, idt, data.draw(layout(idx_shape, allow_zero_stride=False)))
    idx_src[...] = np.asarray(rows, np.int64).reshape(idx_shape).astype(idt)
    g_shape = list(idx_shape) + [d]
    gdt, odt = data.draw(st.sampled_from(FLOATS)), data.draw(st.sampled_from(FLOATS))
    grad = make_input(data, g_shape, gdt, data.draw(layout(g_shape)))
    padding = data.draw(st.sampled_from([-1, None, 0, 2, v + 3]))
    scale = data.draw(st.booleans())
    out, buf = guarded([v, d], odt, data.draw(layout([v, d], allow_zero_stride=False)))
    before = snapshot([grad, idx_src])
    result, err = run_documented(lambda: tg.embedding_dense_backward(grad, idx_src, v, padding, scale, out=out))
    assert_unchanged(before, [grad, idx_src])
    if bad and n:
        assert isinstance(err, IndexError) and "numWeights" in str(err)
        return
    assert err is None, err
    pad = -1 if padding is None or not 0 <= padding < v else padding
    emb_check(result, grad, idx_src, v, pad, scale)
    assert_guard_intact(out, buf)


# ---- cross_entropy_loss and cross_entropy_loss_grad ---------------------------------------------

def ce_close(got, ref, dtype, what):
    got = np.asarray(got, np.float64)
    ref = np.asarray(ref, np.float64)
    assert got.shape == ref.shape, what
    scale = np.nanmax(np.abs(ref)) if ref.size and not np.isnan(ref).all() else 1.0
    tol = {F32: 1e-5, F16: 4e-3, BF16: 3e-2}[np.dtype(dtype)]
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(scale, 1.0), equal_nan=True, err_msg=what)


@given(data=st.data(), n=st.integers(0, 9), c=st.integers(0, 33), nthreads=thread_counts,
       reduction=st.sampled_from(["none", "mean", "sum"]), ls=st.sampled_from([0.0, 0.1, 1.0]),
       z=st.sampled_from([0.0, 1e-4]))
def test_cross_entropy_loss_and_grad(data, n, c, nthreads, reduction, ls, z):
    tg.set_num_threads(nthreads)
    dtype = data.draw(st.sampled_from(FLOATS))
    ignore = data.draw(st.sampled_from([-100, 0, 2**40]))
    x = make_input(data, [n, c], dtype, data.draw(layout([n, c])), -6, 6)
    bad = data.draw(st.integers(0, 7)) == 0
    tvals = [data.draw(st.sampled_from([ignore, data.draw(st.integers(0, max(c - 1, 0)))])) if c else ignore
             for _ in range(n)]
    if bad and n:
        tvals[data.draw(st.integers(0, n - 1))] = c + 1 if c + 1 != ignore else c + 2
    tdt = data.draw(st.sampled_from([np.int64, np.int32]))
    if tdt == np.int32:
        ignore = -100 if ignore == 2**40 else ignore
        tvals = [-100 if v == 2**40 else v for v in tvals]
    target, _ = guarded([n], tdt, data.draw(layout([n], allow_zero_stride=False)))
    target[...] = np.asarray(tvals, np.int64)
    weight = None
    if c and data.draw(st.booleans()):
        weight = make_input(data, [c], F32, data.draw(layout([c])), 0.1, 2)
    lp_out, lp_buf = guarded([n, c], dtype, data.draw(layout([n, c], allow_zero_stride=False)))
    before = snapshot([x, target, weight])
    result, err = run_documented(lambda: tg.cross_entropy_loss(x, target, weight, reduction, ignore, ls, z,
                                                               True, out=lp_out))
    assert_unchanged(before, [x, target, weight])
    bad_rows = [i for i, v in enumerate(tvals) if v != ignore and not 0 <= v < c]
    if bad_rows:
        assert isinstance(err, IndexError) and f"target[{bad_rows[0]}]" in str(err), err
        return
    assert err is None, err
    loss, lp, zloss, lse = result
    assert lp is lp_out
    assert_guard_intact(lp_out, lp_buf)
    rloss, rlp, rz, rlse = ref_forward(np.asarray(x, np.float64), target, weight, reduction, ignore, ls, z)
    ce_close(lp, rlp, dtype, "log_prob")
    ce_close(lse, rlse, dtype, "lse")
    ce_close(loss, rloss, dtype, "loss")

    # the gradient, from the rounded log_prob, with scalar or 0-d/(N,) upstream gradients
    g_shape = [n] if reduction == "none" else []
    g = make_input(data, g_shape, dtype, data.draw(layout(g_shape)), 0.5, 2)
    if reduction != "none" and data.draw(st.booleans()):
        g = float(g)  # a Python scalar is accepted where a 0-d array is
    gz = None if z == 0 or data.draw(st.booleans()) else make_input(data, g_shape, dtype, data.draw(layout(g_shape)))
    out, buf = guarded([n, c], dtype, data.draw(layout([n, c], allow_zero_stride=False)))
    before = snapshot([lp, target, weight, lse])
    dx, err = run_documented(lambda: tg.cross_entropy_loss_grad(g, lp, target, weight, gz, lse, reduction, ignore,
                                                               ls, z, out=out))
    assert_unchanged(before, [lp, target, weight, lse])
    assert err is None, err
    assert_guard_intact(out, buf)
    if c == 0:  # nothing to compare (the reference indexes classes)
        assert dx.shape == (n, 0)
        return
    ref = ref_grad(np.asarray(g, np.float64), lp, target, weight, gz, lse, reduction, ignore, ls, z)
    ce_close(dx, ref, dtype, "x_grad")


# ---- the fused linear cross entropy family ------------------------------------------------------

def gemm_tol(dtype, h):
    return {F32: 1e-4, F16: 1e-2, BF16: 6e-2}[np.dtype(dtype)] * max(1.0, np.sqrt(h))


@given(data=st.data(), bt=st.integers(1, 12), h=st.integers(1, 24), v=st.integers(1, 40), nthreads=thread_counts,
       reduction=st.sampled_from(["none", "mean", "sum"]))
def test_fused_linear_cross_entropy(data, bt, h, v, nthreads, reduction):
    tg.set_num_threads(nthreads)
    dtype = data.draw(st.sampled_from(FLOATS))
    x = make_input(data, [bt, h], dtype, data.draw(layout([bt, h], allow_zero_stride=False)), -1, 1)
    w = make_input(data, [v, h], dtype, data.draw(layout([v, h], allow_zero_stride=False)), -1, 1)
    tvals = [data.draw(st.sampled_from([-100, data.draw(st.integers(0, v - 1))])) for _ in range(bt)]
    bad = data.draw(st.integers(0, 7)) == 0
    if bad:
        tvals[data.draw(st.integers(0, bt - 1))] = v
    target = np.asarray(tvals, data.draw(st.sampled_from([np.int64, np.int32])))
    before = snapshot([x, w, target])
    result, err = run_documented(lambda: tg.fused_linear_cross_entropy(x, w, target, -100, reduction))
    assert_unchanged(before, [x, w, target])
    if bad:
        assert isinstance(err, IndexError), err
        return
    assert err is None, err
    loss, gx, gw = result
    ref_loss, _, ref_gx, ref_gw, _ = linear_cross_entropy(x, w, target, reduction)
    tol = gemm_tol(dtype, h)
    np.testing.assert_allclose(f64(loss), ref_loss, rtol=tol, atol=tol, equal_nan=True)
    # (every row ignored with "mean": zero gradients, as PyTorch)
    np.testing.assert_allclose(f64(gx), ref_gx, rtol=tol, atol=tol)
    np.testing.assert_allclose(f64(gw), ref_gw, rtol=tol, atol=tol)


@given(data=st.data(), bt=st.integers(1, 12), h=st.integers(1, 16), v=st.integers(1, 24), nthreads=thread_counts)
def test_vocabulary_parallel_fused_linear_cross_entropy(data, bt, h, v, nthreads):
    tg.set_num_threads(nthreads)
    dtype = data.draw(st.sampled_from(FLOATS))
    start = data.draw(st.sampled_from([0, 5, 100]))
    x = make_input(data, [bt, h], dtype, data.draw(layout([bt, h], allow_zero_stride=False)), -1, 1)
    w = make_input(data, [v, h], dtype, data.draw(layout([v, h], allow_zero_stride=False)), -1, 1)
    target = np.asarray([data.draw(st.integers(0, start + v + 3)) for _ in range(bt)], np.int64)
    before = snapshot([x, w, target])
    result, err = run_documented(lambda: tg.fused_linear_online_max_sum(x, w, target, start, start + v, True))
    assert_unchanged(before, [x, w, target])
    assert err is None, err
    lmax, sexp, pred, mask, masked, logits = result
    ref_max, _, _, outside, ref_masked, ref_logits = online_max_sum(x, w, target, start, start + v)
    tol = gemm_tol(dtype, h)
    np.testing.assert_allclose(f64(lmax), ref_max, rtol=tol, atol=tol)
    # sum and predicted logit relative to tilegrad's own max (the statistics travel together)
    np.testing.assert_allclose(f64(sexp), np.exp(ref_logits - f64(lmax)[:, None]).sum(1), rtol=tol, atol=tol)
    bits = np.unpackbits(mask, bitorder="little")[:bt].astype(bool)
    np.testing.assert_array_equal(bits, outside)
    np.testing.assert_array_equal(masked, ref_masked)
    ref_pred = np.where(outside, 0.0, ref_logits[np.arange(bt), ref_masked] - f64(lmax))
    np.testing.assert_allclose(f64(pred), ref_pred, rtol=tol, atol=tol)

    # the loss from these statistics (single rank: they are already global)
    before = snapshot([lmax, sexp, pred, logits])
    (loss, softmax), err = run_documented(
        lambda: tg.fused_cross_entropy_loss_with_max_sum(lmax, sexp, pred, 0.0, logits))
    assert_unchanged(before, [lmax, sexp, pred, logits])
    assert err is None, err
    np.testing.assert_allclose(f64(loss), np.log(f64(sexp)) - f64(pred), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(f64(softmax), np.exp(f64(logits) - f64(lmax)[:, None]) / f64(sexp)[:, None],
                               rtol=tol, atol=tol)

    # the gradients, memory-saving mode
    grad = make_input(data, [bt], F32, ([0], [1], None), -2, 2)
    before = snapshot([grad, x, w, mask, masked, lmax, sexp])
    (gx, gw), err = run_documented(lambda: tg.fused_linear_cross_entropy_loss_grad(
        grad, x, w, mask, masked, 0.0, lmax, sexp))
    assert_unchanged(before, [grad, x, w, mask, masked, lmax, sexp])
    assert err is None, err
    ref_gx, ref_gw = loss_grad(grad, x, w, outside, ref_masked, lmax, sexp, None)
    np.testing.assert_allclose(f64(gx), ref_gx, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(f64(gw), ref_gw, rtol=tol, atol=tol * 4)


# ---- non-array arguments ------------------------------------------------------------------------

ODD_VALUES = [None, True, 2.5, float("nan"), "3", "mean\0x", b"1", 2**63, -2**63 - 1, 2**64, [1], np.float64(1.0),
              np.int8(3), np.bool_(False), object()]


@given(value=st.sampled_from(ODD_VALUES), which=st.sampled_from(["num_weights", "padding_idx", "scale",
                                                                   "ignore_index", "reduction", "label_smoothing",
                                                                   "threads"]))
def test_odd_argument_values_raise_documented_errors(value, which):
    g, i = np.ones((3, 2), F32), np.array([0, 1, 1])
    x, t = np.ones((3, 4), F32), np.array([0, 1, 2])
    calls = {
        "num_weights": lambda: tg.embedding_dense_backward(g, i, value),
        "padding_idx": lambda: tg.embedding_dense_backward(g, i, 4, value),
        "scale": lambda: tg.embedding_dense_backward(g, i, 4, -1, value),
        "ignore_index": lambda: tg.cross_entropy_loss(x, t, ignore_index=value),
        "reduction": lambda: tg.cross_entropy_loss(x, t, reduction=value),
        "label_smoothing": lambda: tg.cross_entropy_loss(x, t, label_smoothing=value),
        "threads": lambda: tg.set_num_threads(value),
    }
    result, err = run_documented(calls[which])
    if err is not None:
        assert "incompatible function arguments" not in str(err)
        if isinstance(err, TypeError):
            assert repr(value) in str(err), str(err)


# ---- rms_norm / rms_norm_grad -------------------------------------------------------------------

@given(data=st.data(), lead=shapes(max_dims=3, max_size=24), norm=shapes(min_dims=1, max_dims=2, max_side=9),
       nthreads=thread_counts)
def test_rms_norm_and_grad(data, lead, norm, nthreads):
    """gamma over the trailing dims `norm`; every layout of x / gamma / dy and the outputs."""
    assume(0 not in norm)
    tg.set_num_threads(nthreads)
    shape = list(lead) + list(norm)
    dtype = data.draw(st.sampled_from(FLOATS))
    gamma_dtype = data.draw(st.sampled_from([dtype, F32]))
    x = make_input(data, shape, dtype, data.draw(layout(shape)))
    g = make_input(data, norm, gamma_dtype, data.draw(layout(norm)), 0.5, 2)
    y, ybuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    rstd_shape = list(lead) + [1] * len(norm)
    rstd, rbuf = guarded(rstd_shape, F32, data.draw(layout(rstd_shape, allow_zero_stride=False)))
    eps = data.draw(st.sampled_from([1e-6, 1e-5, 0.1]))
    before = snapshot([x, g])
    result, err = run_documented(lambda: tg.rms_norm(x, g, eps, out=y, rstd_out=rstd))
    assert_unchanged(before, [x, g])
    assert err is None, err
    assert result[0] is y and result[1] is rstd
    yr, rr, ys = rms_ref.rms_norm_ref(x, g, eps)
    rms_ref.assert_close(y, yr, ys, rms_ref.Y_ULPS)
    rms_ref.assert_close(rstd, rr, rr, rms_ref.RSTD_ULPS)
    assert_guard_intact(y, ybuf)
    assert_guard_intact(rstd, rbuf)

    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    dx, dxbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    dgamma, dgbuf = guarded(norm, F32, data.draw(layout(norm, allow_zero_stride=False)))
    before = snapshot([dy, x, rstd, g])
    result, err = run_documented(lambda: tg.rms_norm_grad(dy, x, rstd, g, out=dx, dgamma_out=dgamma))
    assert_unchanged(before, [dy, x, rstd, g])
    assert err is None, err
    dxr, dgr, dxs, dgs = rms_ref.rms_norm_grad_ref(dy, x, rstd, g)
    rms_ref.assert_close(dx, dxr, dxs, rms_ref.DX_ULPS)
    if x.size == 0:  # no rows: dgamma is NaN (the vendor's 950 behaviour), never a silent zero
        assert np.isnan(dgamma).all()
    else:
        assert (np.abs(dgamma - dgr) <= rms_ref.DGAMMA_REL * dgs + 1e-30).all()
    assert_guard_intact(dx, dxbuf)
    assert_guard_intact(dgamma, dgbuf)


# ---- layer_norm / layer_norm_backward -----------------------------------------------------------

@given(data=st.data(), lead=shapes(max_dims=3, max_size=24), norm=shapes(min_dims=1, max_dims=2, max_side=9),
       nthreads=thread_counts)
def test_layer_norm_and_backward(data, lead, norm, nthreads):
    """Over the trailing dims `norm`, weight and bias each present or absent; every layout of the
    inputs and the outputs; every outputMask."""
    assume(0 not in norm)
    tg.set_num_threads(nthreads)
    shape, ns = list(lead) + list(norm), list(norm)
    dtype = data.draw(st.sampled_from(FLOATS))
    pdtype = data.draw(st.sampled_from([dtype, F32]))
    x = make_input(data, shape, dtype, data.draw(layout(shape)))
    w = make_input(data, norm, pdtype, data.draw(layout(norm)), 0.5, 2) if data.draw(st.booleans()) else None
    b = make_input(data, norm, pdtype, data.draw(layout(norm))) if data.draw(st.booleans()) else None
    y, ybuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    stats_shape = list(lead) + [1] * len(norm)
    mean, mbuf = guarded(stats_shape, F32, data.draw(layout(stats_shape, allow_zero_stride=False)))
    rstd, rbuf = guarded(stats_shape, F32, data.draw(layout(stats_shape, allow_zero_stride=False)))
    eps = data.draw(st.sampled_from([1e-6, 1e-5, 0.1]))
    given_inputs = [t for t in (x, w, b) if t is not None]
    before = snapshot(given_inputs)
    result, err = run_documented(lambda: tg.layer_norm(x, ns, w, b, eps, out=y, mean_out=mean, rstd_out=rstd))
    assert_unchanged(before, given_inputs)
    assert err is None, err
    assert result[0] is y and result[1] is mean and result[2] is rstd
    yr, mr, rr, ys, ms = ln_ref.layer_norm_ref(x, ns, w, b, eps)
    ln_ref.assert_close(y, yr, ys, ln_ref.OUT_ULPS, "out")
    ln_ref.assert_close(mean, mr, ms, ln_ref.STAT_ULPS, "mean")
    ln_ref.assert_close(rstd, rr, rr, ln_ref.STAT_ULPS, "rstd")
    for t, buf in ((y, ybuf), (mean, mbuf), (rstd, rbuf)):
        assert_guard_intact(t, buf)

    mask = data.draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    dx, dxbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    dw, dwbuf = guarded(norm, F32, data.draw(layout(norm, allow_zero_stride=False)))
    db, dbbuf = guarded(norm, F32, data.draw(layout(norm, allow_zero_stride=False)))
    read = [dy, x, mean, rstd] + [t for t in (w, b) if t is not None]
    before = snapshot(read)
    result, err = run_documented(lambda: tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b, output_mask=mask,
                                                                dx_out=dx, dweight_out=dw, dbias_out=db))
    assert_unchanged(before, read)
    assert err is None, err
    dxr, dwr, dbr, dxs, dws, dbs = ln_ref.layer_norm_backward_ref(dy, x, ns, mean, rstd, w)
    if mask[0]:
        ln_ref.assert_close(dx, dxr, dxs, ln_ref.DX_ULPS, "dx")
        assert_guard_intact(dx, dxbuf)
    for on, got, want, scale, buf in ((mask[1], dw, dwr, dws, dwbuf), (mask[2], db, dbr, dbs, dbbuf)):
        if on:
            assert (np.abs(got - want) <= ln_ref.PARAM_REL * scale + 1e-30).all()
            assert_guard_intact(got, buf)
    assert [r is None for r in result] == [not m for m in mask]


# ---- add_rms_norm / add_rms_norm_backward -------------------------------------------------------

@given(data=st.data(), lead=shapes(max_dims=3, max_size=24), norm=shapes(min_dims=1, max_dims=2, max_side=9),
       nthreads=thread_counts)
def test_add_rms_norm_and_backward(data, lead, norm, nthreads):
    """gamma over the trailing dims `norm` (x1's dtype); every layout of x1 / x2 / gamma / dy /
    dresidual and the outputs; dresidual optional."""
    assume(0 not in norm)
    tg.set_num_threads(nthreads)
    shape = list(lead) + list(norm)
    dtype = data.draw(st.sampled_from(FLOATS))
    x1 = make_input(data, shape, dtype, data.draw(layout(shape)))
    x2 = make_input(data, shape, dtype, data.draw(layout(shape)))
    g = make_input(data, norm, dtype, data.draw(layout(norm)), 0.5, 2)
    y, ybuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    xo, xbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    rstd_shape = list(lead) + [1] * len(norm)
    rstd, rbuf = guarded(rstd_shape, F32, data.draw(layout(rstd_shape, allow_zero_stride=False)))
    eps = data.draw(st.sampled_from([1e-6, 1e-5, 0.1]))
    before = snapshot([x1, x2, g])
    result, err = run_documented(lambda: tg.add_rms_norm(x1, x2, g, eps, out=y, rstd_out=rstd, x_out=xo))
    assert_unchanged(before, [x1, x2, g])
    assert err is None, err
    assert result[0] is y and result[1] is rstd and result[2] is xo
    yr, rr, ys, xr = add_rms_ref.add_rms_norm_ref(x1, x2, g, eps)
    np.testing.assert_array_equal(np.asarray(xo).astype(np.float64), xr.astype(np.float64))
    rms_ref.assert_close(y, yr, ys, rms_ref.Y_ULPS)
    rms_ref.assert_close(rstd, rr, rr, rms_ref.RSTD_ULPS)
    for out, buf in ((y, ybuf), (xo, xbuf), (rstd, rbuf)):
        assert_guard_intact(out, buf)

    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    dres = make_input(data, shape, dtype, data.draw(layout(shape))) if data.draw(st.booleans()) else None
    dx, dxbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    dgamma, dgbuf = guarded(norm, F32, data.draw(layout(norm, allow_zero_stride=False)))
    inputs = [a for a in (dy, xo, rstd, g, dres) if a is not None]
    before = snapshot(inputs)
    result, err = run_documented(lambda: tg.add_rms_norm_backward(dy, xo, rstd, g, dres, out=dx, dgamma_out=dgamma))
    assert_unchanged(before, inputs)
    assert err is None, err
    dxr, dgr, dxs, dgs = add_rms_ref.add_rms_norm_backward_ref(dy, xo, rstd, g, dres)
    rms_ref.assert_close(dx, dxr, dxs, rms_ref.DX_ULPS)
    if xo.size == 0:  # no rows: dgamma is NaN, as rms_norm_grad's
        assert np.isnan(dgamma).all()
    else:
        assert (np.abs(dgamma - dgr) <= rms_ref.DGAMMA_REL * dgs + 1e-30).all()
    assert_guard_intact(dx, dxbuf)
    assert_guard_intact(dgamma, dgbuf)


# ---- swi_glu / swi_glu_grad ---------------------------------------------------------------------

@given(data=st.data(), shape=shapes(min_dims=1, max_dims=4, max_size=48), nthreads=thread_counts)
def test_swi_glu_and_grad(data, shape, nthreads):
    """x doubled along a drawn dim (an odd size there must be refused); every layout."""
    tg.set_num_threads(nthreads)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    odd = data.draw(st.integers(0, 5)) == 0
    x_shape = list(shape)
    x_shape[dim] = 2 * x_shape[dim] + (1 if odd else 0)
    dtype = data.draw(st.sampled_from(FLOATS))
    x = make_input(data, x_shape, dtype, data.draw(layout(x_shape)))
    out, buf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([x])
    result, err = run_documented(lambda: tg.swi_glu(x, dim, out=out))
    assert_unchanged(before, [x])
    if odd:
        assert isinstance(err, ValueError) and "must be even" in str(err)
        assert_guard_intact(out, buf)
        return
    assert err is None, err
    assert result is out
    swiglu_ref.assert_close(out, *swiglu_ref.swi_glu_ref(x, dim))
    assert_guard_intact(out, buf)

    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    dx, dxbuf = guarded(x_shape, dtype, data.draw(layout(x_shape, allow_zero_stride=False)))
    before = snapshot([dy, x])
    result, err = run_documented(lambda: tg.swi_glu_grad(dy, x, dim, out=dx))
    assert_unchanged(before, [dy, x])
    assert err is None, err
    swiglu_ref.assert_close(dx, *swiglu_ref.swi_glu_grad_ref(dy, x, dim))
    assert_guard_intact(dx, dxbuf)


# ---- every operator of the registry --------------------------------------------------------------

def _arrays_of(value):
    """The arrays (and Python numbers) in a result or argument, flattened in order."""
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in _arrays_of(v)]
    return [] if value is None else [np.asarray(value)]


def _bits(a):
    return a.view(UINT[a.itemsize]) if a.dtype.kind == "f" else a


def _sample_run(op, seed, dtype, nthreads):
    """The operator's sample call at nthreads: (what it returned and wrote in place, inputs it must not
    change, those inputs as they were before the call)."""
    tg.set_num_threads(nthreads)
    fn, args, kwargs = python_call(op, np.random.default_rng(seed), dtype)
    in_place = set(op["sample"].get("in_place", []))
    read_only = _arrays_of([a for i, a in enumerate(args) if i not in in_place]) + _arrays_of(list(kwargs.values()))
    before = snapshot(read_only)
    result, err = run_documented(lambda: fn(*args, **kwargs))
    assert err is None, f"{op['python']} on its registry sample ({dtype}): {err}"
    return _arrays_of(result) + _arrays_of([args[i] for i in sorted(in_place)]), read_only, before


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op["name"])
@given(seed=st.integers(0, 2**32 - 1), nthreads=thread_counts)
def test_every_operator_is_thread_count_independent_and_leaves_inputs_alone(op, seed, nthreads):
    """Every registered operator, on its registry sample at each of its dtypes (random values): the
    same bits at 1 thread and at nthreads, and its read-only inputs unchanged."""
    for name in op["dtypes"]:
        one, _, _ = _sample_run(op, seed, FLOAT_DTYPES[name], 1)
        many, inputs, before = _sample_run(op, seed, FLOAT_DTYPES[name], nthreads)
        assert_unchanged(before, inputs)
        assert len(one) == len(many)
        for i, (a, b) in enumerate(zip(one, many)):
            assert np.array_equal(_bits(a), _bits(b)), f"{op['python']} ({name}) result {i} differs at {nthreads} threads"


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op["name"])
def test_every_operator_refuses_dtypes_it_does_not_list(op):
    """A floating dtype outside the operator's registered dtypes (float64 always) raises a documented
    error naming the dtype, never a crash or a result."""
    for name, dtype in {**FLOAT_DTYPES, "float64": np.dtype(np.float64)}.items():
        if name in op["dtypes"]:
            continue
        fn, args, kwargs = python_call(op, np.random.default_rng(0), dtype)
        result, err = run_documented(lambda: fn(*args, **kwargs))
        assert err is not None, f"{op['python']} accepted {name}, which operators.json does not list"
        assert name in str(err) or {"float64": "double"}.get(name, name) in str(err), str(err)
# ---- gelu / gelu_backward -----------------------------------------------------------------------

@given(data=st.data(), shape=shapes(), nthreads=thread_counts)
def test_gelu_and_backward(data, shape, nthreads):
    """Both forms; the backward with broadcast inputs of any dtypes (mixed: a float32 gradient)."""
    tg.set_num_threads(nthreads)
    form = data.draw(st.sampled_from(["none", "tanh"]))
    dtype = data.draw(st.sampled_from(FLOATS))
    x = make_input(data, shape, dtype, data.draw(layout(shape)), -12, 12)
    out, buf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([x])
    result, err = run_documented(lambda: tg.gelu(x, form, out=out))
    assert_unchanged(before, [x])
    assert err is None, err
    assert result is out
    gelu_ref.assert_close(out, *gelu_ref.gelu_ref(x, form))
    assert_guard_intact(out, buf)

    dt_dy = data.draw(st.sampled_from(FLOATS))
    dy_shape, x_shape = broadcast_source(data, shape), broadcast_source(data, shape)
    dy = make_input(data, dy_shape, dt_dy, data.draw(layout(dy_shape)))
    x = make_input(data, x_shape, dtype, data.draw(layout(x_shape)), -12, 12)
    full = list(np.broadcast_shapes(tuple(dy_shape), tuple(x_shape)))
    wrong = data.draw(st.integers(0, 5)) == 0  # an output of the wrong shape must be refused
    out_shape = full + [2] if wrong else full
    dx, dxbuf = guarded(out_shape, dt_dy if dt_dy == dtype else F32,
                        data.draw(layout(out_shape, allow_zero_stride=False)))
    before = snapshot([dy, x])
    result, err = run_documented(lambda: tg.gelu_backward(dy, x, form, out=dx))
    assert_unchanged(before, [dy, x])
    assert_guard_intact(dx, dxbuf) if err is not None else None
    if wrong:
        assert isinstance(err, ValueError)
        return
    assert err is None, err
    gelu_ref.assert_close(dx, *gelu_ref.gelu_backward_ref(dy, x, form))
    assert_guard_intact(dx, dxbuf)


# ---- ge_glu / ge_glu_backward -------------------------------------------------------------------

@given(data=st.data(), shape=shapes(min_dims=1, max_dims=4, max_size=48), nthreads=thread_counts)
def test_ge_glu_and_backward(data, shape, nthreads):
    """x doubled along a drawn dim (an odd size there must be refused); both forms and directions."""
    tg.set_num_threads(nthreads)
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    form, left = data.draw(st.sampled_from(["none", "tanh"])), data.draw(st.booleans())
    odd = data.draw(st.integers(0, 5)) == 0
    x_shape = list(shape)
    x_shape[dim] = 2 * x_shape[dim] + (1 if odd else 0)
    dtype = data.draw(st.sampled_from(FLOATS))
    x = make_input(data, x_shape, dtype, data.draw(layout(x_shape)))
    out, buf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    g, gbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([x])
    result, err = run_documented(lambda: tg.ge_glu(x, dim, form, left, out=out, out_gelu=g))
    assert_unchanged(before, [x])
    if odd:
        assert isinstance(err, ValueError) and "must be even" in str(err)
        assert_guard_intact(out, buf)
        assert_guard_intact(g, gbuf)
        return
    assert err is None, err
    assert result[0] is out and result[1] is g
    (want, scale), (want_g, scale_g) = gelu_ref.ge_glu_ref(x, dim, form, left)
    gelu_ref.assert_close(out, want, scale)
    gelu_ref.assert_close(g, want_g, scale_g)
    assert_guard_intact(out, buf)
    assert_guard_intact(g, gbuf)

    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    dx, dxbuf = guarded(x_shape, dtype, data.draw(layout(x_shape, allow_zero_stride=False)))
    before = snapshot([dy, x, g])
    result, err = run_documented(lambda: tg.ge_glu_backward(dy, x, g, dim, form, left, out=dx))
    assert_unchanged(before, [dy, x, g])
    assert err is None, err
    gelu_ref.assert_close(dx, *gelu_ref.ge_glu_backward_ref(dy, x, g, dim, form, left))
    assert_guard_intact(dx, dxbuf)


# ---- gelu_mul / gelu_mul_backward ---------------------------------------------------------------

@given(data=st.data(), shape=shapes(), nthreads=thread_counts)
def test_gelu_mul_and_backward(data, shape, nthreads):
    """GeGLU on two tensors of any layouts; an `up` of another shape must be refused."""
    tg.set_num_threads(nthreads)
    form = data.draw(st.sampled_from(["none", "tanh"]))
    dtype = data.draw(st.sampled_from(FLOATS))
    gate = make_input(data, shape, dtype, data.draw(layout(shape)), -12, 12)
    wrong = data.draw(st.integers(0, 5)) == 0
    up_shape = list(shape) + [2] if wrong else list(shape)
    up = make_input(data, up_shape, dtype, data.draw(layout(up_shape)))
    out, buf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([gate, up])
    result, err = run_documented(lambda: tg.gelu_mul(gate, up, form, out=out))
    assert_unchanged(before, [gate, up])
    assert_guard_intact(out, buf)
    if wrong:
        assert isinstance(err, ValueError) and "gelu_mul: up shape" in str(err)
        return
    assert err is None, err
    assert result is out
    gelu_ref.assert_close(out, *gelu_ref.gelu_mul_ref(gate, up, form))

    dy = make_input(data, shape, dtype, data.draw(layout(shape)))
    d_gate, gbuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    d_up, ubuf = guarded(shape, dtype, data.draw(layout(shape, allow_zero_stride=False)))
    before = snapshot([dy, gate, up])
    result, err = run_documented(lambda: tg.gelu_mul_backward(dy, gate, up, form, out=(d_gate, d_up)))
    assert_unchanged(before, [dy, gate, up])
    assert err is None, err
    (want_g, scale_g), (want_u, scale_u) = gelu_ref.gelu_mul_backward_ref(dy, gate, up, form)
    gelu_ref.assert_close(d_gate, want_g, scale_g)
    gelu_ref.assert_close(d_up, want_u, scale_u)
    assert_guard_intact(d_gate, gbuf)
    assert_guard_intact(d_up, ubuf)
