"""aclnnSwiGlu and aclnnSwiGluGrad through the aclnn C ABI (ctypes): results equal the Python API's bit
for bit (contiguous and strided, every dim), and the status code + message of every bad input."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.swi_glu import BF16, F16, F32
from helpers import half_shape, normal

TILING_ERROR = 561002


def _fwd(x, dim, out):
    with AclTensors() as t:
        return run_op("aclnnSwiGlu", [t.new(x), ctypes.c_int64(dim), t.new(out)])


def _bwd(dy, x, dim, out):
    with AclTensors() as t:
        return run_op("aclnnSwiGluGrad", [t.new(dy), t.new(x), ctypes.c_int64(dim), t.new(out)])


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape,dim", [((4, 10), -1), ((4, 10), 0), ((3, 6, 5), 1)])
def test_matches_python_api(isa, dtype, shape, dim):
    x = normal(shape, dtype, 1, 3.0)
    half = half_shape(shape, dim)
    out = np.zeros(half, dtype)
    assert _fwd(x, dim, out) == (ACLNN_SUCCESS, "")
    np.testing.assert_array_equal(out.view(np.uint8), tg.swi_glu(x, dim).view(np.uint8))
    dy = normal(half, dtype, 2, 3.0)
    dx = np.zeros(shape, dtype)
    assert _bwd(dy, x, dim, dx) == (ACLNN_SUCCESS, "")
    np.testing.assert_array_equal(dx.view(np.uint8), tg.swi_glu_grad(dy, x, dim).view(np.uint8))


def test_strided_workspace_zero_and_empty():
    x = normal((10, 32), BF16, 3, 3.0)[::2, ::-1]
    out = np.zeros((5, 32), BF16)[:, ::2]
    with AclTensors() as t:
        status, ws, ex = get_workspace_size("aclnnSwiGlu", [t.new(x), ctypes.c_int64(-1), t.new(out)])
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch("aclnnSwiGlu", ex, 0) == ACLNN_SUCCESS
    np.testing.assert_array_equal(out.view(np.uint16), tg.swi_glu(x).view(np.uint16))
    e = np.zeros((0, 4), F32)
    assert _fwd(e, -1, np.zeros((0, 2), F32)) == (ACLNN_SUCCESS, "")
    assert _bwd(np.zeros((0, 2), F32), e, -1, e.copy()) == (ACLNN_SUCCESS, "")


def test_null_pointers():
    x, out, dy = normal((2, 4), F32, 4, 3.0), np.zeros((2, 2), F32), normal((2, 2), F32, 5, 3.0)
    with AclTensors() as t:
        s, m = run_op("aclnnSwiGlu", [None, ctypes.c_int64(-1), t.new(out)])
        assert s == ACLNN_ERR_PARAM_NULLPTR and "x" in m
        s, m = run_op("aclnnSwiGlu", [t.new(x), ctypes.c_int64(-1), None])
        assert s == ACLNN_ERR_PARAM_NULLPTR and "out" in m
        for i, name in enumerate(["yGrad", "x", "out"]):
            args = [t.new(dy), t.new(x), ctypes.c_int64(-1), t.new(np.zeros_like(x))]
            args[i if i < 2 else 3] = None
            s, m = run_op("aclnnSwiGluGrad", args)
            assert s == ACLNN_ERR_PARAM_NULLPTR and name in m, (name, m)


def test_forward_errors():
    x = normal((4, 6), F32, 6, 3.0)
    assert _fwd(x.astype(np.float64), -1, np.zeros((4, 3), np.float64)) == (
        ACLNN_ERR_PARAM_INVALID, "aclnnSwiGlu: x dtype must be one of {float32, float16, bfloat16}, got float64")
    assert _fwd(x, -1, np.zeros((4, 3), F16)) == (ACLNN_ERR_PARAM_INVALID,
                                                  "aclnnSwiGlu: out dtype float16 != x dtype float32")
    assert _fwd(x, 2, np.zeros((4, 3), F32)) == (TILING_ERROR, "aclnnSwiGlu: dim must be in [-2, 1], got 2")
    assert _fwd(x[:3], 0, np.zeros((1, 6), F32)) == (TILING_ERROR,
                                                     "aclnnSwiGlu: x shape[0] must be even, got 3 (shape [3,6])")
    assert _fwd(x, -1, np.zeros((4, 2), F32)) == (
        TILING_ERROR, "aclnnSwiGlu: out shape must be x shape with dim -1 halved [4,3], got [4,2]")


def test_backward_errors():
    x, dy = normal((4, 6), F32, 7, 3.0), normal((4, 3), F32, 8, 3.0)
    dx = np.zeros_like(x)
    assert _bwd(dy.astype(BF16), x, -1, dx) == (ACLNN_ERR_PARAM_INVALID,
                                                "aclnnSwiGluGrad: x dtype float32 != yGrad dtype bfloat16")
    assert _bwd(dy, x, -1, dx.astype(F16)) == (ACLNN_ERR_PARAM_INVALID,
                                               "aclnnSwiGluGrad: out dtype float16 != x dtype float32")
    assert _bwd(dy, x, -3, dx) == (TILING_ERROR, "aclnnSwiGluGrad: dim must be in [-2, 1], got -3")
    assert _bwd(dy, x, 0, dx) == (TILING_ERROR,
                                  "aclnnSwiGluGrad: yGrad shape must be x shape with dim 0 halved [2,6], got [4,3]")
    assert _bwd(dy, x, -1, dx[:, :4]) == (TILING_ERROR,
                                          "aclnnSwiGluGrad: out shape must equal x shape [4,6], got [4,4]")
