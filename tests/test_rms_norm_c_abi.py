"""aclnnRmsNorm through the aclnn C ABI (ctypes): results equal the Python API's bit for bit
(contiguous and strided), the workspace rules, and the status code + message of every bad input."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.rms_norm import BF16, F16, F32
from helpers import normal

OP = "aclnnRmsNorm"
TILING_ERROR = 561002


def _run(x, g, eps, y, rstd):
    with AclTensors() as t:
        return run_op(OP, [t.new(x), t.new(g), ctypes.c_double(eps), t.new(y), t.new(rstd)])


@pytest.mark.parametrize("dtype,gdtype", [(F32, F32), (F16, F16), (BF16, BF16), (F16, F32), (BF16, F32)])
def test_matches_python_api(isa, dtype, gdtype):
    x, g = normal((2, 3, 4, 8), dtype, 1), normal((4, 8), gdtype, 2)
    y, rstd = np.zeros(x.shape, dtype), np.zeros((2, 3, 1, 1), F32)
    assert _run(x, g, 1e-5, y, rstd) == (ACLNN_SUCCESS, "")
    want_y, want_r = tg.rms_norm(x, g, 1e-5)
    np.testing.assert_array_equal(y.view(np.uint8), want_y.view(np.uint8))
    np.testing.assert_array_equal(rstd, want_r)


def test_strided():
    x = normal((8, 64), BF16, 3)[::2, ::-1]
    g = normal(128, F32, 4)[::2]
    ybuf = np.zeros((4, 128), BF16)
    y = ybuf[:, ::2]
    rstd = np.zeros((4, 1), F32)
    assert _run(x, g, 1e-6, y, rstd) == (ACLNN_SUCCESS, "")
    want_y, want_r = tg.rms_norm(x, g)
    np.testing.assert_array_equal(y.view(np.uint16), want_y.view(np.uint16))
    np.testing.assert_array_equal(rstd, want_r)


def test_workspace_and_empty():
    x, g = normal((16, 32), F32, 5), normal(32, F32, 6)
    y, rstd = np.zeros_like(x), np.zeros((16, 1), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, [t.new(x), t.new(g), ctypes.c_double(1e-6), t.new(y), t.new(rstd)])
        assert status == ACLNN_SUCCESS and ws >= 32 * 4
        assert launch(OP, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
    e = np.zeros((0, 32), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, [t.new(e), t.new(g), ctypes.c_double(1e-6), t.new(e.copy()),
                                                 t.new(np.zeros((0, 1), F32))])
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(OP, ex, 0) == ACLNN_SUCCESS


def test_null_pointers():
    x, g = normal((4, 8), F32, 7), normal(8, F32, 8)
    y, rstd = np.zeros_like(x), np.zeros((4, 1), F32)
    names = ["x", "gamma", "yOut", "rstdOut"]
    for i, name in enumerate(names):
        with AclTensors() as t:
            args = [t.new(x), t.new(g), ctypes.c_double(1e-6), t.new(y), t.new(rstd)]
            args[i if i < 2 else i + 1] = None
            status, msg = run_op(OP, args)
        assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg, (name, msg)


@pytest.mark.parametrize("case,code,message", [
    ("x_f64", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNorm: x dtype must be one of {float32, float16, bfloat16}, got float64"),
    ("gamma_bf16_x_f32", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNorm: gamma dtype must be x's dtype (float32) or float32, got bfloat16"),
    ("y_f16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNorm: yOut dtype float16 != x dtype float32"),
    ("rstd_f16", ACLNN_ERR_PARAM_INVALID, "aclnnRmsNorm: rstdOut dtype must be one of {float32}, got float16"),
    ("gamma_shape", TILING_ERROR, "aclnnRmsNorm: gamma shape must equal the trailing dims of x [8], got [7]"),
    ("gamma_rank", TILING_ERROR, "aclnnRmsNorm: gamma rank must be at most x rank 2, got 3"),
    ("y_shape", TILING_ERROR, "aclnnRmsNorm: yOut shape must equal x shape [4,8], got [4,9]"),
    ("rstd_shape", TILING_ERROR, "aclnnRmsNorm: rstdOut shape must be x's leading dims then ones [4,1], got [4]"),
    ("eps", TILING_ERROR, "aclnnRmsNorm: epsilon must be >= 0, got -0.5"),
])
def test_errors(case, code, message):
    x, g = normal((4, 8), F32, 9), normal(8, F32, 10)
    y, rstd, eps = np.zeros_like(x), np.zeros((4, 1), F32), 1e-6
    if case == "x_f64": x = x.astype(np.float64)
    if case == "gamma_bf16_x_f32": g = g.astype(BF16)
    if case == "y_f16": y = y.astype(F16)
    if case == "rstd_f16": rstd = rstd.astype(F16)
    if case == "gamma_shape": g = g[:7]
    if case == "gamma_rank": g = np.ones((1, 4, 8), F32)
    if case == "y_shape": y = np.zeros((4, 9), F32)
    if case == "rstd_shape": rstd = np.zeros(4, F32)
    if case == "eps": eps = -0.5
    assert _run(x, g, eps, y, rstd) == (code, message)
