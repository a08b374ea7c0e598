"""aclnnCrossEntropyLoss / aclnnCrossEntropyLossGrad through the aclnn C ABI (ctypes): results equal
the Python API's bit for bit (contiguous and strided), every specification section 0 / 3 error code with its
message, the launch-time target check, and the executor rules (single use, workspace size)."""

import ctypes

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACL_CODES, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, last_error, launch, lib, run_op)

FWD, GRAD = "aclnnCrossEntropyLoss", "aclnnCrossEntropyLossGrad"
F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]


def case(n=6, c=13, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c)) * 2).astype(dtype)
    t = rng.integers(0, c, n).astype(np.int64)
    t[::4] = -100
    w = rng.uniform(0.5, 1.5, c).astype(np.float32)
    return x, t, w


def fwd_args(t, x, target, w, loss, lp, zl, lse, reduction=b"mean", ii=-100, ls=0.0, z=0.0, ret=True, **kw):
    return [t.new(x, **kw.get("x", {})), t.new(target), t.new(w), ctypes.c_char_p(reduction), ctypes.c_int64(ii),
            ctypes.c_double(ls), ctypes.c_double(z), ctypes.c_bool(ret), t.new(loss), t.new(lp), t.new(zl),
            t.new(lse)]


def grad_args(t, g, lp, target, w, gz, lse, out, reduction=b"mean", ii=-100, ls=0.0, z=0.0):
    return [t.new(g), t.new(lp), t.new(target), t.new(w), t.new(gz), t.new(lse), ctypes.c_char_p(reduction),
            ctypes.c_int64(ii), ctypes.c_double(ls), ctypes.c_double(z), t.new(out)]


def bits(a):
    return np.atleast_1d(np.ascontiguousarray(a)).view(np.uint8)


# ---- results --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_forward_and_grad_match_python_api(isa, dtype, reduction):
    x, target, w = case(dtype=dtype)
    n, c = x.shape
    lshape = (n,) if reduction == "none" else ()
    loss, zl = np.zeros(lshape, dtype), np.zeros(lshape, dtype)
    lp, lse = np.zeros((n, c), dtype), np.zeros(n, dtype)
    with AclTensors() as t:
        assert run_op(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse, reduction.encode(), -100, 0.1, 0.01)) == \
            (ACLNN_SUCCESS, "")
    ref = tg.cross_entropy_loss(x, target, w, reduction, -100, 0.1, 0.01, return_zloss=True)
    for got, want in zip((loss, lp, zl, lse), ref):
        np.testing.assert_array_equal(bits(got), bits(want))
    g = np.linspace(0.5, 1.5, n).astype(dtype).reshape(lshape) if reduction == "none" else np.asarray(0.7, dtype)
    gz = np.asarray(np.asarray(g, np.float32) * 0.5).astype(dtype)
    out = np.zeros((n, c), dtype)
    with AclTensors() as t:
        assert run_op(GRAD, grad_args(t, g, lp, target, w, gz, lse, out, reduction.encode(), -100, 0.1, 0.01)) == \
            (ACLNN_SUCCESS, "")
    want = tg.cross_entropy_loss_grad(g, lp, target, w, gz, lse, reduction, -100, 0.1, 0.01)
    np.testing.assert_array_equal(bits(out), bits(want))


def test_strided_views_and_int32_target(isa):
    x, target, w = case(8, 30, BF16, 3)
    xs = np.zeros((8, 60), BF16)
    xs[:, ::2] = x
    xs = xs[:, ::2]
    ws = np.zeros(60, F32)
    ws[::2] = w
    ws = ws[::2]
    lpbuf = np.zeros((30, 16), BF16)
    lp = lpbuf.T[::2]
    loss, zl, lse = np.zeros((1,), BF16), np.zeros((1,), BF16), np.zeros(16, BF16)[::2]
    with AclTensors() as t:
        args = fwd_args(t, xs, target.astype(np.int32), ws, loss, lp, zl, lse, b"sum", -100, 0.3, 0.02)
        assert run_op(FWD, args) == (ACLNN_SUCCESS, "")
    assert (lpbuf.T[1::2] == 0).all()
    ref = tg.cross_entropy_loss(x, target, w, "sum", -100, 0.3, 0.02, return_zloss=True)
    np.testing.assert_array_equal(bits(lp), bits(ref[1]))
    np.testing.assert_array_equal(bits(loss[0]), bits(ref[0]))
    outbuf = np.zeros((8, 90), BF16)
    out = outbuf[:, ::3]
    with AclTensors() as t:
        args = grad_args(t, np.array([2.0], BF16), lp, target, ws, None, lse, out, b"sum", -100, 0.3, 0.02)
        assert run_op(GRAD, args) == (ACLNN_SUCCESS, "")
    np.testing.assert_array_equal(
        bits(out), bits(tg.cross_entropy_loss_grad(2.0, ref[1], target, w, None, ref[3], "sum", -100, 0.3, 0.02)))
    assert (outbuf[:, 1::3] == 0).all()


def test_null_reduction_means_mean_and_optional_outputs_may_be_null():
    x, target, w = case()
    loss, lp = np.zeros((), F32), np.zeros(x.shape, F32)
    with AclTensors() as t:
        args = [t.new(x), t.new(target), None, ctypes.c_char_p(None), ctypes.c_int64(-100), ctypes.c_double(0),
                ctypes.c_double(0), ctypes.c_bool(False), t.new(loss), t.new(lp), None, None]
        assert run_op(FWD, args) == (ACLNN_SUCCESS, "")
    ref = tg.cross_entropy_loss(x, target)
    np.testing.assert_array_equal(bits(loss), bits(ref[0]))
    out = np.zeros(x.shape, F32)
    with AclTensors() as t:
        args = [t.new(np.ones((), F32)), t.new(lp), t.new(target), None, None, None, ctypes.c_char_p(None),
                ctypes.c_int64(-100), ctypes.c_double(0), ctypes.c_double(0), t.new(out)]
        assert run_op(GRAD, args) == (ACLNN_SUCCESS, "")
    np.testing.assert_array_equal(bits(out), bits(tg.cross_entropy_loss_grad(1.0, lp, target)))


def test_vendor_sample_bf16():
    g = np.array(0.1, BF16)
    lp = np.full((2, 3), -0.2, BF16)
    target = np.array([0, 0], np.int64)
    w = np.ones(3, F32)
    out = np.zeros((2, 3), BF16)
    with AclTensors() as t:
        assert run_op(GRAD, grad_args(t, g, lp, target, w, None, None, out)) == (ACLNN_SUCCESS, "")
    np.testing.assert_allclose(out.astype(np.float64), [[-0.0091, 0.0409, 0.0409]] * 2, atol=5e-4)


# ---- data-dependent errors at launch --------------------------------------------------------

def test_target_out_of_range_is_161002_at_launch():
    x, target, w = case(40, 9)
    target[31] = 9
    target[12] = -3
    loss, lp, zl, lse = np.zeros((), F32), np.zeros(x.shape, F32), np.zeros((), F32), np.zeros(40, F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse))
        assert status == ACLNN_SUCCESS
        assert launch(FWD, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert last_error() == ("aclnnCrossEntropyLoss: target[12] = -3 is out of range [0, 9) and is not "
                                "ignoreIndex -100")
    out = np.zeros(x.shape, F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(GRAD, grad_args(t, np.ones((), F32), lp, target, w, None, None, out))
        assert status == ACLNN_SUCCESS
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert last_error().startswith("aclnnCrossEntropyLossGrad: target[12] = -3 is out of range [0, 9)")


# ---- executor rules -------------------------------------------------------------------------

def test_second_launch_and_small_workspace():
    x, target, w = case()
    loss, lp, zl, lse = np.zeros((), F32), np.zeros(x.shape, F32), np.zeros((), F32), np.zeros(6, F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse))
        assert status == ACLNN_SUCCESS and ws > 0
        assert launch(FWD, ex, ws) == ACLNN_SUCCESS
        assert launch(FWD, ex, ws) == ACLNN_ERR_PARAM_INVALID
        status, ws, ex = get_workspace_size(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse))
        assert launch(FWD, ex, ws - 8) == ACLNN_ERR_PARAM_INVALID
        assert "workspace" in last_error()
        lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex))
        status, ws, ex = get_workspace_size(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse))
        assert launch(FWD, ex, ws, workspace=None if ws == 0 else 0) != ACLNN_SUCCESS
        lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex))
    # the gradient needs scratch only for a strided weight with label smoothing
    ws_strided = np.zeros(26, F32)[::2]
    ws_strided[:] = w
    out = np.zeros(x.shape, F32)
    with AclTensors() as t:
        g = np.ones((), F32)
        status, ws, ex = get_workspace_size(GRAD, grad_args(t, g, lp, target, w, None, None, out, ls=0.1))
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(GRAD, ex, 0) == ACLNN_SUCCESS
        assert launch(GRAD, ex, 0) == ACLNN_ERR_PARAM_INVALID
        status, ws, ex = get_workspace_size(GRAD, grad_args(t, g, lp, target, ws_strided, None, None, out, ls=0.1))
        assert status == ACLNN_SUCCESS and ws >= 13 * 4
        assert launch(GRAD, ex, ws - 4) == ACLNN_ERR_PARAM_INVALID
        lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex))
        status, ws, ex = get_workspace_size(GRAD, grad_args(t, g, lp, target, ws_strided, None, None, out, ls=0.1))
        assert launch(GRAD, ex, ws) == ACLNN_SUCCESS
    np.testing.assert_array_equal(out, tg.cross_entropy_loss_grad(1.0, lp, target, w, label_smoothing=0.1))


def test_empty_inputs_succeed_with_zero_workspace_for_the_gradient():
    lp = np.zeros((0, 4), F32)
    target = np.zeros(0, np.int64)
    out = np.zeros((0, 4), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(GRAD, grad_args(t, np.ones((), F32), lp, target, None, None, None, out))
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(GRAD, ex, 0) == ACLNN_SUCCESS
    loss = np.zeros((), F32)
    with AclTensors() as t:
        args = fwd_args(t, lp, target, None, loss, out, None, None, b"sum", ret=False)
        assert run_op(FWD, args) == (ACLNN_SUCCESS, "")
    assert loss == 0


# ---- validation errors ----------------------------------------------------------------------

def test_null_pointers_are_161001():
    x, target, w = case()
    loss, lp, zl, lse = np.zeros((), F32), np.zeros(x.shape, F32), np.zeros((), F32), np.zeros(6, F32)
    for k, name in [(0, "input"), (1, "target"), (8, "lossOut"), (9, "logProbOut"), (10, "zlossOut"),
                    (11, "lseForZlossOut")]:
        with AclTensors() as t:
            args = fwd_args(t, x, target, w, loss, lp, zl, lse)
            args[k] = None
            status, msg = run_op(FWD, args)
            assert status == ACLNN_ERR_PARAM_NULLPTR, name
            assert msg.startswith(f"aclnnCrossEntropyLoss: {name}")
    out = np.zeros(x.shape, F32)
    for k, name in [(0, "gradLoss"), (1, "logProb"), (2, "target"), (10, "xGradOut")]:
        with AclTensors() as t:
            args = grad_args(t, np.ones((), F32), lp, target, w, None, None, out)
            args[k] = None
            status, msg = run_op(GRAD, args)
            assert status == ACLNN_ERR_PARAM_NULLPTR, name
            assert msg.startswith(f"aclnnCrossEntropyLossGrad: {name}")
    with AclTensors() as t:
        fn = getattr(lib, GRAD + "GetWorkspaceSize")
        fn.restype = ctypes.c_int32
        args = grad_args(t, np.ones((), F32), lp, target, w, None, None, out)
        from acl_ctypes import _arg
        ex = ctypes.c_void_p(None)
        assert fn(*[_arg(a) for a in args], None, ctypes.byref(ex)) == ACLNN_ERR_PARAM_NULLPTR
        ws = ctypes.c_uint64(0)
        assert fn(*[_arg(a) for a in args], ctypes.byref(ws), None) == ACLNN_ERR_PARAM_NULLPTR


GRAD_ERRORS = [
    ("dtype", dict(lp=np.zeros((6, 13), np.float64)), "logProb dtype must be one of"),
    ("mixed", dict(out=np.zeros((6, 13), F16)), "xGradOut dtype float16 != logProb dtype float32"),
    ("target_dtype", dict(target=np.zeros(6, np.uint8)), "target dtype must be one of {int64, int32}, got uint8"),
    ("rank", dict(lp=np.zeros((6, 13, 1), F32)), "logProb must have rank 2, got rank 3"),
    ("shape", dict(target=np.zeros(5, np.int64)), "target shape [5] != logProb shape[0] (N) [6]"),
    ("grad_shape", dict(g=np.zeros(6, F32)), "gradLoss shape [6] must be [] or [1] for reduction mean"),
    ("reduction", dict(reduction=b"batchmean"), "reduction must be one of none, mean, sum, got 'batchmean'"),
    ("ls", dict(ls=1.01), "labelSmoothing must be in [0, 1], got 1.01"),
    ("overlap", dict(out="lp_shifted"), "xGradOut overlaps logProb"),
]


@pytest.mark.parametrize("err", GRAD_ERRORS, ids=[e[0] for e in GRAD_ERRORS])
def test_grad_validation_errors_are_161002(err):
    _, kw, msg = err
    x, target, w = case()
    buf = np.zeros((7, 13), F32)
    a = dict(g=np.ones((), F32), lp=buf[:6], target=target, out=np.zeros((6, 13), F32), reduction=b"mean", ls=0.0)
    a.update(kw)
    if isinstance(a["out"], str):
        a["out"] = buf[1:]
    with AclTensors() as t:
        status, message = run_op(GRAD, grad_args(t, a["g"], a["lp"], a["target"], w, None, None, a["out"],
                                                 a["reduction"], -100, a["ls"]))
    assert status == ACLNN_ERR_PARAM_INVALID
    assert message.startswith("aclnnCrossEntropyLossGrad: ") and msg in message


def test_forward_validation_errors_are_161002():
    x, target, w = case()
    n, c = x.shape
    good = dict(x=x, target=target, w=w, loss=np.zeros((), F32), lp=np.zeros((n, c), F32), zl=np.zeros((), F32),
                lse=np.zeros(n, F32))
    bad = [
        (dict(loss=np.zeros((), F16)), "lossOut dtype float16 != input dtype float32"),
        (dict(lp=np.zeros((n, c + 1), F32)), "logProbOut shape"),
        (dict(loss=np.zeros(n, F32)), f"lossOut shape [{n}] must be [] or [1] for reduction mean"),
        (dict(lse=np.zeros(n + 1, F32)), "lseForZlossOut shape"),
        (dict(w=np.ones(c, np.float64)), "weightOptional dtype must be one of {float32}"),
        (dict(lp="x"), "logProbOut overlaps input"),
    ]
    for kw, msg in bad:
        a = dict(good)
        a.update(kw)
        if isinstance(a["lp"], str):
            a["lp"] = x
        with AclTensors() as t:
            status, message = run_op(FWD, fwd_args(t, a["x"], a["target"], a["w"], a["loss"], a["lp"], a["zl"],
                                                   a["lse"]))
        assert status == ACLNN_ERR_PARAM_INVALID, msg
        assert message.startswith("aclnnCrossEntropyLoss: ") and msg in message
    with AclTensors() as t:
        status, message = run_op(FWD, fwd_args(t, x, target, w, good["loss"], good["lp"], good["zl"], good["lse"],
                                               reduction=b"avg"))
    assert status == ACLNN_ERR_PARAM_INVALID and "reduction must be one of none, mean, sum, got 'avg'" in message


def test_private_formats_rejected():
    x, target, w = case()
    lp = np.zeros(x.shape, F32)
    with AclTensors() as t:
        args = grad_args(t, np.ones((), F32), lp, target, w, None, None, np.zeros(x.shape, F32))
        args[1] = t.new(lp, fmt=29)  # FRACTAL_NZ
        status, msg = run_op(GRAD, args)
    assert status == ACLNN_ERR_PARAM_INVALID and "logProb" in msg


@pytest.mark.parametrize("reduction", [b"none", b"mean", b"sum"])
def test_zloss_outputs_ignored_when_zloss_is_off(reduction):
    """z = 0 and returnZloss false: the vendor's document makes zlossOut / lseForZlossOut None, and its
    cann-ops sample passes 1-element tensors for them (N = 4096). Only their dtype is checked; nothing
    is written to them."""
    from reference.cross_entropy import cross_entropy_loss as ref_loss

    x, target, w = case(n=9, c=5, seed=4)
    n, c = x.shape
    loss = np.zeros(n if reduction == b"none" else (), F32)
    lp = np.zeros((n, c), F32)
    zl, lse = np.full(1, -7.25, F32), np.full(1, -7.25, F32)
    with AclTensors() as t:
        status, message = run_op(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse, reduction=reduction, ret=False))
    assert status == ACLNN_SUCCESS, message
    want_loss, want_lp, _, _ = ref_loss(x, target, w, reduction.decode(), -100, 0.0, 0.0)
    np.testing.assert_allclose(loss, want_loss, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(lp, want_lp, rtol=2e-6, atol=1e-6)
    assert zl[0] == -7.25 and lse[0] == -7.25  # never written
    with AclTensors() as t:  # the dtype is still checked
        status, message = run_op(FWD, fwd_args(t, x, target, w, loss, lp, zl.astype(np.float16), lse,
                                               reduction=reduction, ret=False))
    assert status == ACLNN_ERR_PARAM_INVALID and "zlossOut dtype float16 != input dtype float32" in message
    with AclTensors() as t:  # z-loss on: the same 1-element lseForZlossOut is refused
        status, message = run_op(FWD, fwd_args(t, x, target, w, loss, lp, zl, lse, reduction=reduction, z=1e-3,
                                               ret=False))
    assert status == ACLNN_ERR_PARAM_INVALID and "lseForZlossOut shape [1]" in message
