"""aclnnAddRmsNorm through the aclnn C ABI (ctypes): results equal the Python API's bit for bit
(contiguous and strided), the workspace rules, empty inputs, and the status code + message of every
bad input (the vendor's hand-written aclnn layer: 161001 for null pointers, 161002 for dtypes and
shapes)."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.add_rms_norm import add_rms_norm_ref
from reference.rms_norm import BF16, F16, F32, Y_ULPS, assert_close
from helpers import normal

OP = "aclnnAddRmsNorm"


def _args(t, x1, x2, g, eps, y, rstd, xo):
    return [t.new(x1), t.new(x2), t.new(g), ctypes.c_double(eps), t.new(y), t.new(rstd), t.new(xo)]


def _run(x1, x2, g, eps, y, rstd, xo):
    with AclTensors() as t:
        return run_op(OP, _args(t, x1, x2, g, eps, y, rstd, xo))


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
def test_matches_python_api(isa, dtype):
    x1, x2, g = normal((2, 3, 4, 8), dtype, 1), normal((2, 3, 4, 8), dtype, 2), normal((4, 8), dtype, 3)
    y, xo, rstd = np.zeros(x1.shape, dtype), np.zeros(x1.shape, dtype), np.zeros((2, 3, 1, 1), F32)
    assert _run(x1, x2, g, 1e-5, y, rstd, xo) == (ACLNN_SUCCESS, "")
    want_y, want_r, want_x = tg.add_rms_norm(x1, x2, g, 1e-5)
    np.testing.assert_array_equal(y.view(np.uint8), want_y.view(np.uint8))
    np.testing.assert_array_equal(xo.view(np.uint8), want_x.view(np.uint8))
    np.testing.assert_array_equal(rstd, want_r)


def test_vendor_document_sample():
    """The document's example: x1 = x2 = gamma-shaped ramps 0..7, (2, 16), epsilon 1e-6, float32."""
    ramp = np.tile(np.arange(8, dtype=F32), 4).reshape(2, 16)
    g = np.tile(np.arange(8, dtype=F32), 2)
    y, xo, rstd = np.zeros((2, 16), F32), np.zeros((2, 16), F32), np.zeros((2, 1), F32)
    assert _run(ramp, ramp.copy(), g, 1e-6, y, rstd, xo) == (ACLNN_SUCCESS, "")
    yr, rr, ys, xr = add_rms_norm_ref(ramp, ramp, g, 1e-6)
    np.testing.assert_array_equal(xo, xr)
    assert_close(y, yr, ys, Y_ULPS)
    np.testing.assert_allclose(rstd, rr, rtol=1e-6)


def test_strided():
    x1 = normal((8, 64), BF16, 4)[::2, ::-1]
    x2 = normal((4, 64), BF16, 5)
    g = normal(128, BF16, 6)[::2]
    ybuf = np.zeros((4, 128), BF16)
    y, xo, rstd = ybuf[:, ::2], np.zeros((4, 64), BF16), np.zeros((4, 1), F32)
    assert _run(x1, x2, g, 1e-6, y, rstd, xo) == (ACLNN_SUCCESS, "")
    want_y, want_r, want_x = tg.add_rms_norm(x1, x2, g)
    np.testing.assert_array_equal(y.view(np.uint16), want_y.view(np.uint16))
    np.testing.assert_array_equal(xo.view(np.uint16), want_x.view(np.uint16))
    np.testing.assert_array_equal(rstd, want_r)


def test_workspace_and_empty():
    x1, x2, g = normal((16, 32), F32, 7), normal((16, 32), F32, 8), normal(32, F32, 9)
    y, xo, rstd = np.zeros_like(x1), np.zeros_like(x1), np.zeros((16, 1), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, _args(t, x1, x2, g, 1e-6, y, rstd, xo))
        assert status == ACLNN_SUCCESS and ws >= 32 * 4
        assert launch(OP, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
    e = np.zeros((0, 32), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, _args(t, e, e.copy(), g, 1e-6, e.copy(), np.zeros((0, 1), F32),
                                                      e.copy()))
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(OP, ex, 0) == ACLNN_SUCCESS


def test_null_pointers():
    x1, x2, g = normal((4, 8), F32, 10), normal((4, 8), F32, 11), normal(8, F32, 12)
    names = ["x1", "x2", "gamma", None, "yOut", "rstdOut", "xOut"]
    for i, name in enumerate(names):
        if name is None:
            continue
        with AclTensors() as t:
            args = _args(t, x1, x2, g, 1e-6, np.zeros_like(x1), np.zeros((4, 1), F32), np.zeros_like(x1))
            args[i] = None
            status, msg = run_op(OP, args)
        assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg, (name, msg)


@pytest.mark.parametrize("case,message", [
    ("x1_f64", "aclnnAddRmsNorm: x1 dtype must be one of {float32, float16, bfloat16}, got float64"),
    ("x2_f16", "aclnnAddRmsNorm: x2 dtype float16 != x1 dtype float32"),
    ("gamma_bf16", "aclnnAddRmsNorm: gamma dtype bfloat16 != x1 dtype float32"),
    ("y_f16", "aclnnAddRmsNorm: yOut dtype float16 != x1 dtype float32"),
    ("xo_f16", "aclnnAddRmsNorm: xOut dtype float16 != x1 dtype float32"),
    ("rstd_f16", "aclnnAddRmsNorm: rstdOut dtype must be one of {float32}, got float16"),
    ("x2_shape", "aclnnAddRmsNorm: x2 shape must equal x1 shape [4,8], got [4,9]"),
    ("gamma_shape", "aclnnAddRmsNorm: gamma shape must equal the trailing dims of x1 [8], got [7]"),
    ("y_shape", "aclnnAddRmsNorm: yOut shape must equal x1 shape [4,8], got [4,9]"),
    ("rstd_shape", "aclnnAddRmsNorm: rstdOut shape must be x1's leading dims then ones [4,1], got [4]"),
    ("eps", "aclnnAddRmsNorm: epsilon must be >= 0, got -0.5"),
])
def test_errors(case, message):
    x1, x2, g = normal((4, 8), F32, 13), normal((4, 8), F32, 14), normal(8, F32, 15)
    y, xo, rstd, eps = np.zeros_like(x1), np.zeros_like(x1), np.zeros((4, 1), F32), 1e-6
    if case == "x1_f64": x1 = x1.astype(np.float64)
    if case == "x2_f16": x2 = x2.astype(F16)
    if case == "gamma_bf16": g = g.astype(BF16)
    if case == "y_f16": y = y.astype(F16)
    if case == "xo_f16": xo = xo.astype(F16)
    if case == "rstd_f16": rstd = rstd.astype(F16)
    if case == "x2_shape": x2 = np.zeros((4, 9), F32)
    if case == "gamma_shape": g = g[:7]
    if case == "y_shape": y = np.zeros((4, 9), F32)
    if case == "rstd_shape": rstd = np.zeros(4, F32)
    if case == "eps": eps = -0.5
    assert _run(x1, x2, g, eps, y, rstd, xo) == (ACLNN_ERR_PARAM_INVALID, message)
