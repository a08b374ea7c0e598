"""aclnnRmsNormGrad through the aclnn C ABI (ctypes): results equal the Python API's bit for bit,
the workspace rules, and the status code + message of every bad input."""

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.rms_norm import BF16, F16, F32
from helpers import normal

OP = "aclnnRmsNormGrad"
TILING_ERROR = 561002


def _inputs(shape, k, dtype, gdtype, seed):
    x, g, dy = normal(shape, dtype, seed), normal(shape[-k:], gdtype, seed + 1), normal(shape, dtype, seed + 2)
    return dy, x, tg.rms_norm(x, g)[1], g


def _run(dy, x, rstd, g, dx, dg):
    with AclTensors() as t:
        return run_op(OP, [t.new(dy), t.new(x), t.new(rstd), t.new(g), t.new(dx), t.new(dg)])


@pytest.mark.parametrize("dtype,gdtype", [(F32, F32), (F16, F16), (BF16, BF16), (F16, F32), (BF16, F32)])
def test_matches_python_api(isa, dtype, gdtype):
    dy, x, rstd, g = _inputs((2, 3, 4, 8), 2, dtype, gdtype, 1)
    dx, dg = np.zeros(x.shape, dtype), np.zeros((4, 8), F32)
    assert _run(dy, x, rstd, g, dx, dg) == (ACLNN_SUCCESS, "")
    want = tg.rms_norm_grad(dy, x, rstd, g)
    np.testing.assert_array_equal(dx.view(np.uint8), want[0].view(np.uint8))
    np.testing.assert_array_equal(dg, want[1])


def test_strided_and_workspace():
    dy, x, rstd, g = _inputs((40, 64), 1, F16, F16, 3)
    dys, xs, rs = dy[::4, ::2], x[::4, ::2], rstd[::4]
    gs = g[::2]
    dx, dg = np.zeros(xs.shape, F16), np.zeros(32, F32)
    with AclTensors() as t:
        args = [t.new(dys), t.new(xs), t.new(rs), t.new(gs), t.new(dx), t.new(dg)]
        status, ws, ex = get_workspace_size(OP, args)
        assert status == ACLNN_SUCCESS and ws > 0
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
    want = tg.rms_norm_grad(dys, xs, rs, gs)
    np.testing.assert_array_equal(dx.view(np.uint16), want[0].view(np.uint16))
    np.testing.assert_array_equal(dg, want[1])


def test_empty_rows_dgamma_nan():
    g = normal(8, F32, 5)
    e = np.zeros((0, 8), F32)
    dg = np.zeros(8, F32)
    assert _run(e, e, np.zeros((0, 1), F32), g, e.copy(), dg) == (ACLNN_SUCCESS, "")
    assert np.isnan(dg).all()


def test_null_pointers():
    dy, x, rstd, g = _inputs((4, 8), 1, F32, F32, 7)
    for i, name in enumerate(["dy", "x", "rstd", "gamma", "dxOut", "dgammaOut"]):
        with AclTensors() as t:
            args = [t.new(dy), t.new(x), t.new(rstd), t.new(g), t.new(np.zeros_like(x)), t.new(np.zeros(8, F32))]
            args[i] = None
            status, msg = run_op(OP, args)
        assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg, (name, msg)


@pytest.mark.parametrize("case,code,message", [
    ("x_f16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNormGrad: x dtype float16 != dy dtype float32"),
    ("rstd_bf16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNormGrad: rstd dtype must be one of {float32}, got bfloat16"),
    ("dx_f16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNormGrad: dxOut dtype float16 != x dtype float32"),
    ("dg_f16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNormGrad: dgammaOut dtype must be one of {float32}, got float16"),
    ("dy_shape", TILING_ERROR, "aclnnRmsNormGrad: dy shape must equal x shape [4,8], got [4,7]"),
    ("rstd_shape", TILING_ERROR, "aclnnRmsNormGrad: rstd shape must be x's leading dims [4] (size-1 dims aside), got [5,1]"),
    ("gamma_shape", TILING_ERROR, "aclnnRmsNormGrad: gamma shape must equal the trailing dims of x [4,8], got [2,4]"),
    ("dg_shape", TILING_ERROR, "aclnnRmsNormGrad: dgammaOut shape must equal gamma shape [8], got [9]"),
])
def test_errors(case, code, message):
    dy, x, rstd, g = _inputs((4, 8), 1, F32, F32, 9)
    dx, dg = np.zeros_like(x), np.zeros(8, F32)
    if case == "x_f16": x = x.astype(F16)
    if case == "rstd_bf16": rstd = rstd.astype(BF16)
    if case == "dx_f16": dx = dx.astype(F16)
    if case == "dg_f16": dg = dg.astype(F16)
    if case == "dy_shape": dy = dy[:, :7]
    if case == "rstd_shape": rstd = np.ones((5, 1), F32)
    if case == "gamma_shape": g = g.reshape(2, 4)
    if case == "dg_shape": dg = np.zeros(9, F32)
    assert _run(dy, x, rstd, g, dx, dg) == (code, message)
