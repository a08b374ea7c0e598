"""aclnnGelu, aclnnGeluV2, aclnnGeluBackward and aclnnGeluBackwardV2 through the aclnn C ABI (ctypes):
results equal the Python API's bit for bit (V1 is the tanh form), and the status code + message of
every bad input."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        assert_null_out_pointers_refused, get_workspace_size, launch, run_op)
from reference.gelu import BF16, F16, F32
from helpers import normal


def _gelu(x, out):
    with AclTensors() as t:
        return run_op("aclnnGelu", [t.new(x), t.new(out)])


def _gelu_v2(x, approximate, y):
    with AclTensors() as t:
        return run_op("aclnnGeluV2", [t.new(x), ctypes.c_int64(approximate), t.new(y)])


def _backward(dy, x, dx):
    with AclTensors() as t:
        return run_op("aclnnGeluBackward", [t.new(dy), t.new(x), t.new(dx)])


def _backward_v2(dy, x, approximate, dx):
    with AclTensors() as t:
        return run_op("aclnnGeluBackwardV2", [t.new(dy), t.new(x), ctypes.c_char_p(approximate), t.new(dx)])


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
def test_matches_python_api(isa, dtype):
    x = normal((5, 37), dtype, 1, 3.0)
    dy = normal((5, 37), dtype, 2, 3.0)
    for code, form in ((0, "none"), (1, "tanh")):
        y = np.zeros_like(x)
        assert _gelu_v2(x, code, y) == (ACLNN_SUCCESS, "")
        np.testing.assert_array_equal(y.view(np.uint8), tg.gelu(x, form).view(np.uint8))
        dx = np.zeros_like(x)
        assert _backward_v2(dy, x, form.encode(), dx) == (ACLNN_SUCCESS, "")
        np.testing.assert_array_equal(dx.view(np.uint8), tg.gelu_backward(dy, x, form).view(np.uint8))
    out = np.zeros_like(x)
    assert _gelu(x, out) == (ACLNN_SUCCESS, "")  # the vendor's aclnnGelu is the tanh form
    np.testing.assert_array_equal(out.view(np.uint8), tg.gelu(x, "tanh").view(np.uint8))
    dx = np.zeros_like(x)
    assert _backward(dy, x, dx) == (ACLNN_SUCCESS, "")  # and so is its backward
    np.testing.assert_array_equal(dx.view(np.uint8), tg.gelu_backward(dy, x, "tanh").view(np.uint8))


def test_broadcast_strided_workspace_zero_and_empty():
    x = normal((10, 32), BF16, 3, 3.0)[::2, ::-1]
    dy = normal((1, 16), F32, 4, 3.0)
    dx = np.zeros((5, 32), F32)[:, ::2][:, :16]
    xs = x[:, :16]
    with AclTensors() as t:
        status, ws, ex = get_workspace_size("aclnnGeluBackwardV2", [t.new(dy), t.new(xs), ctypes.c_char_p(b"none"),
                                                                    t.new(dx)])
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch("aclnnGeluBackwardV2", ex, 0) == ACLNN_SUCCESS
    np.testing.assert_array_equal(dx, tg.gelu_backward(dy, xs))
    e = np.zeros((0, 4), F32)
    assert _gelu(e, e.copy()) == (ACLNN_SUCCESS, "")
    assert _backward_v2(e, e, b"tanh", e.copy()) == (ACLNN_SUCCESS, "")


def test_null_pointers():
    x = normal((2, 4), F32, 5, 3.0)
    with AclTensors() as t:
        s, m = run_op("aclnnGelu", [None, t.new(x)])
        assert s == ACLNN_ERR_PARAM_NULLPTR and "aclnnGelu: self" in m, m
        s, m = run_op("aclnnGeluV2", [t.new(x), ctypes.c_int64(0), None])
        assert s == ACLNN_ERR_PARAM_NULLPTR and "aclnnGeluV2: y" in m, m
        s, m = run_op("aclnnGeluBackwardV2", [t.new(x), t.new(x), ctypes.c_char_p(None), t.new(np.zeros_like(x))])
        assert s == ACLNN_ERR_PARAM_NULLPTR and "approximate" in m, m
        for i, name in enumerate(["gradOutput", "self", "gradInput"]):
            args = [t.new(x), t.new(x), t.new(np.zeros_like(x))]
            args[i] = None
            s, m = run_op("aclnnGeluBackward", args)
            assert s == ACLNN_ERR_PARAM_NULLPTR and name in m, (name, m)
        assert_null_out_pointers_refused("aclnnGeluV2", [t.new(x), ctypes.c_int64(1), t.new(np.zeros_like(x))])


def test_forward_errors():
    x = normal((4, 6), F32, 6, 3.0)
    assert _gelu(x.astype(np.float64), np.zeros((4, 6), np.float64)) == (
        ACLNN_ERR_PARAM_INVALID, "aclnnGelu: self dtype must be one of {float32, float16, bfloat16}, got float64")
    assert _gelu(x, np.zeros((4, 6), F16)) == (ACLNN_ERR_PARAM_INVALID, "aclnnGelu: out dtype float16 != self "
                                                                        "dtype float32")
    assert _gelu(x, np.zeros((4, 5), F32)) == (ACLNN_ERR_PARAM_INVALID,
                                               "aclnnGelu: out shape [4,5] != self shape [4,6]")
    # the vendor's code maps every value but 1 to erf; tilegrad refuses all but 0 and 1
    for code in (2, -1):
        assert _gelu_v2(x, code, np.zeros_like(x)) == (
            ACLNN_ERR_PARAM_INVALID, f"aclnnGeluV2: approximate must be 0 (none) or 1 (tanh), got {code}")
    assert _gelu_v2(x, 5, np.zeros((4, 6), BF16))[1] == "aclnnGeluV2: y dtype bfloat16 != x dtype float32"


def test_backward_errors():
    x, dy = normal((4, 6), F32, 7, 3.0), normal((4, 6), F32, 8, 3.0)
    dx = np.zeros_like(x)
    assert _backward_v2(dy, x, b"gelu", dx) == (ACLNN_ERR_PARAM_INVALID,
                                                'aclnnGeluBackwardV2: approximate must be "none" or "tanh", got "gelu"')
    assert _backward(dy.astype(BF16), x, dx.astype(BF16)) == (
        ACLNN_ERR_PARAM_INVALID, "aclnnGeluBackward: gradInput dtype must be float32 (gradOutput bfloat16, self "
                                 "float32), got bfloat16")
    assert _backward(dy[:, :4], x, dx)[0] == ACLNN_ERR_PARAM_INVALID
    assert _backward(dy, x, dx[:, :4]) == (
        ACLNN_ERR_PARAM_INVALID, "aclnnGeluBackward: gradInput shape [4,4] != broadcast of gradOutput [4,6] and "
                                 "self [4,6] = [4,6]")
    # the tensors are checked before the attribute (the vendor's order)
    assert _backward_v2(dy, x, b"bad", dx[:, :4])[1].startswith("aclnnGeluBackwardV2: gradInput shape")
