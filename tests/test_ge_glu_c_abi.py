"""aclnnGeGluV3 / aclnnGeGluV3Backward (and aclnnGeGlu / aclnnGeGluBackward, the activateLeft = false
forms) through the aclnn C ABI (ctypes): results equal the Python API's bit for bit, and the status
code + message of every bad input (all 161002: the vendor's aclnn layer checks them by hand)."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.gelu import BF16, F16, F32
from helpers import half_shape, normal


def _fwd(x, dim, approximate, left, out, out_gelu):
    with AclTensors() as t:
        return run_op("aclnnGeGluV3", [t.new(x), ctypes.c_int64(dim), ctypes.c_int64(approximate),
                                       ctypes.c_bool(left), t.new(out), t.new(out_gelu)])


def _bwd(dy, x, gelu, dim, approximate, left, dx):
    with AclTensors() as t:
        return run_op("aclnnGeGluV3Backward", [t.new(dy), t.new(x), t.new(gelu), ctypes.c_int64(dim),
                                               ctypes.c_int64(approximate), ctypes.c_bool(left), t.new(dx)])


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape,dim", [((4, 10), -1), ((4, 10), 0), ((3, 6, 5), 1)])
def test_matches_python_api(isa, dtype, shape, dim):
    x = normal(shape, dtype, 1, 3.0)
    half = half_shape(shape, dim)
    dy = normal(half, dtype, 2, 3.0)
    for code, form in ((0, "none"), (1, "tanh")):
        for left in (False, True):
            out, g = np.zeros(half, dtype), np.zeros(half, dtype)
            assert _fwd(x, dim, code, left, out, g) == (ACLNN_SUCCESS, "")
            want_out, want_g = tg.ge_glu(x, dim, form, left)
            np.testing.assert_array_equal(out.view(np.uint8), want_out.view(np.uint8))
            np.testing.assert_array_equal(g.view(np.uint8), want_g.view(np.uint8))
            dx = np.zeros(shape, dtype)
            assert _bwd(dy, x, g, dim, code, left, dx) == (ACLNN_SUCCESS, "")
            want = tg.ge_glu_backward(dy, x, g, dim, form, left)
            np.testing.assert_array_equal(dx.view(np.uint8), want.view(np.uint8))


def test_v1_activates_the_right_half():
    """aclnnGeGlu / aclnnGeGluBackward = the V3 operators with activateLeft = false."""
    x, dy = normal((3, 8), F32, 3, 3.0), normal((3, 4), F32, 4, 3.0)
    out, g = np.zeros((3, 4), F32), np.zeros((3, 4), F32)
    with AclTensors() as t:
        assert run_op("aclnnGeGlu", [t.new(x), ctypes.c_int64(-1), ctypes.c_int64(0), t.new(out), t.new(g)]) == (
            ACLNN_SUCCESS, "")
        want_out, want_g = tg.ge_glu(x, -1, "none", False)
        np.testing.assert_array_equal(out, want_out)
        np.testing.assert_array_equal(g, want_g)
        dx = np.zeros_like(x)
        assert run_op("aclnnGeGluBackward", [t.new(dy), t.new(x), t.new(g), ctypes.c_int64(-1), ctypes.c_int64(0),
                                             t.new(dx)]) == (ACLNN_SUCCESS, "")
        np.testing.assert_array_equal(dx, tg.ge_glu_backward(dy, x, g, -1, "none", False))


def test_strided_workspace_zero_and_empty():
    x = normal((10, 32), BF16, 5, 3.0)[::2, ::-1]
    out = np.zeros((5, 32), BF16)[:, ::2]
    g = np.zeros((5, 16), BF16)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size("aclnnGeGluV3", [t.new(x), ctypes.c_int64(-1), ctypes.c_int64(1),
                                                             ctypes.c_bool(True), t.new(out), t.new(g)])
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch("aclnnGeGluV3", ex, 0) == ACLNN_SUCCESS
    np.testing.assert_array_equal(out.view(np.uint16), tg.ge_glu(x, -1, "tanh", True)[0].view(np.uint16))
    e = np.zeros((0, 4), F32)
    assert _fwd(e, -1, 1, True, np.zeros((0, 2), F32), np.zeros((0, 2), F32)) == (ACLNN_SUCCESS, "")
    assert _bwd(np.zeros((0, 2), F32), e, np.zeros((0, 2), F32), -1, 1, True, e.copy()) == (ACLNN_SUCCESS, "")


def test_null_pointers():
    x, h = normal((2, 4), F32, 6, 3.0), np.zeros((2, 2), F32)
    with AclTensors() as t:
        for i, name in enumerate(["self", "out", "outGelu"]):
            args = [t.new(x), ctypes.c_int64(-1), ctypes.c_int64(1), ctypes.c_bool(False), t.new(h), t.new(h.copy())]
            args[[0, 4, 5][i]] = None
            s, m = run_op("aclnnGeGluV3", args)
            assert s == ACLNN_ERR_PARAM_NULLPTR and name in m, (name, m)
        for i, name in enumerate(["gradOutput", "self", "gelu", "gradInput"]):
            args = [t.new(h), t.new(x), t.new(h.copy()), ctypes.c_int64(-1), ctypes.c_int64(1), ctypes.c_bool(False),
                    t.new(np.zeros_like(x))]
            args[[0, 1, 2, 6][i]] = None
            s, m = run_op("aclnnGeGluV3Backward", args)
            assert s == ACLNN_ERR_PARAM_NULLPTR and name in m, (name, m)


def test_forward_errors():
    x, h = normal((4, 6), F32, 7, 3.0), np.zeros((4, 3), F32)
    op = "aclnnGeGluV3"
    assert _fwd(x, -1, 2, False, h, h.copy()) == (ACLNN_ERR_PARAM_INVALID,
                                                  f"{op}: approximate must be 0 (none) or 1 (tanh), got 2")
    assert _fwd(x, 2, 1, False, h, h.copy()) == (ACLNN_ERR_PARAM_INVALID, f"{op}: dim must be in [-2, 1], got 2")
    assert _fwd(x[:3], 0, 1, False, np.zeros((1, 6), F32), np.zeros((1, 6), F32)) == (
        ACLNN_ERR_PARAM_INVALID, f"{op}: self shape[0] must be even, got 3 (shape [3,6])")
    assert _fwd(x, -1, 1, False, h.astype(F16), h) == (ACLNN_ERR_PARAM_INVALID,
                                                       f"{op}: out dtype float16 != self dtype float32")
    assert _fwd(x, -1, 1, False, h, np.zeros((4, 2), F32)) == (
        ACLNN_ERR_PARAM_INVALID, f"{op}: outGelu shape must be self shape with dim -1 halved [4,3], got [4,2]")


def test_backward_errors():
    x, dy = normal((4, 6), F32, 8, 3.0), normal((4, 3), F32, 9, 3.0)
    g, dx = np.zeros_like(dy), np.zeros_like(x)
    op = "aclnnGeGluV3Backward"
    assert _bwd(dy, x, g, -1, -1, True, dx) == (ACLNN_ERR_PARAM_INVALID,
                                                f"{op}: approximate must be 0 (none) or 1 (tanh), got -1")
    assert _bwd(dy.astype(BF16), x, g, -1, 1, True, dx) == (ACLNN_ERR_PARAM_INVALID,
                                                            f"{op}: self dtype float32 != gradOutput dtype bfloat16")
    assert _bwd(dy, x, g, 0, 1, True, dx) == (
        ACLNN_ERR_PARAM_INVALID, f"{op}: gradOutput shape must be self shape with dim 0 halved [2,6], got [4,3]")
    assert _bwd(dy, x, g, -1, 1, True, dx[:, :4]) == (ACLNN_ERR_PARAM_INVALID,
                                                      f"{op}: gradInput shape [4,4] != self shape [4,6]")
