"""aclnnLayerNorm and aclnnLayerNormBackward through the aclnn C ABI (ctypes): results equal the Python
API's bit for bit (optional tensors given or null, every outputMask), the workspace rules, and the status
code + message of every bad input in the vendor's check order."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors, bool_array,
                        get_workspace_size, int_array, launch, run_op)
from reference.layer_norm import BF16, F16, F32

FWD = "aclnnLayerNorm"
BWD = "aclnnLayerNormBackward"


def _data(shape, dtype, seed, scale=1.0, offset=0.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale + offset).astype(dtype)


def _forward(t, x, ns, w, b, eps, out, mean, rstd):
    return [t.new(x), int_array(ns), t.new(w), t.new(b), ctypes.c_double(eps), t.new(out), t.new(mean), t.new(rstd)]


@pytest.mark.parametrize("dtype,pdtype", [(F32, F32), (F16, F16), (BF16, BF16), (F16, F32), (BF16, F32)])
@pytest.mark.parametrize("weight,bias", [(True, True), (False, True), (True, False), (False, False)])
def test_forward_matches_python_api(isa, dtype, pdtype, weight, bias):
    x = _data((2, 3, 4, 8), dtype, 1)
    w = _data((4, 8), pdtype, 2, 0.5, 1.0) if weight else None
    b = _data((4, 8), pdtype, 3, 0.5) if bias else None
    out, mean, rstd = np.zeros(x.shape, dtype), np.zeros((2, 3, 1, 1), F32), np.zeros((2, 3, 1, 1), F32)
    with AclTensors() as t:
        assert run_op(FWD, _forward(t, x, [4, 8], w, b, 1e-5, out, mean, rstd)) == (ACLNN_SUCCESS, "")
    want = tg.layer_norm(x, [4, 8], w, b, 1e-5)
    for got, exp in zip((out, mean, rstd), want):
        np.testing.assert_array_equal(got.view(np.uint8), exp.view(np.uint8))


def test_forward_without_stats_and_strided():
    x = _data((40, 64), F16, 4)[::4, ::2]
    out = np.zeros(x.shape, F16)
    with AclTensors() as t:
        args = _forward(t, x, [32], None, None, 1e-5, out, None, None)
        status, ws, ex = get_workspace_size(FWD, args)
        assert status == ACLNN_SUCCESS and ws > 0
        assert launch(FWD, ex, ws) == ACLNN_SUCCESS
    np.testing.assert_array_equal(out.view(np.uint16), tg.layer_norm(x, [32])[0].view(np.uint16))


def _backward(t, dy, x, ns, mean, rstd, w, b, mask, dx, dw, db):
    return [t.new(dy), t.new(x), int_array(ns), t.new(mean), t.new(rstd), t.new(w), t.new(b),
            None if mask is None else bool_array(mask), t.new(dx), t.new(dw), t.new(db)]


def _backward_inputs(shape, k, dtype, seed):
    x, dy = _data(shape, dtype, seed), _data(shape, dtype, seed + 1)
    ns = list(shape[-k:])
    w, b = _data(ns, dtype, seed + 2, 0.5, 1.0), _data(ns, dtype, seed + 3)
    _, mean, rstd = tg.layer_norm(x, ns, w, b)
    return dy, x, ns, mean, rstd, w, b


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True), (False, False, True),
                                  (False, False, False)], ids=lambda m: "".join("1" if v else "0" for v in m))
def test_backward_matches_python_api(isa, dtype, mask):
    dy, x, ns, mean, rstd, w, b = _backward_inputs((3, 5, 24), 1, dtype, 5)
    dx, dw, db = np.full(x.shape, 3, dtype), np.full(24, 3, F32), np.full(24, 3, F32)
    with AclTensors() as t:
        assert run_op(BWD, _backward(t, dy, x, ns, mean, rstd, w, b, mask, dx, dw, db)) == (ACLNN_SUCCESS, "")
    want = tg.layer_norm_backward(dy, x, ns, mean, rstd, w, b, output_mask=mask)
    for on, got, exp in zip(mask, (dx, dw, db), want):
        if on:
            np.testing.assert_array_equal(got.view(np.uint8), exp.view(np.uint8))
        else:
            assert (got.astype(F32) == 3).all()  # left alone


def test_backward_masked_outputs_may_be_null():
    dy, x, ns, mean, rstd, w, b = _backward_inputs((4, 8), 1, F32, 6)
    db = np.zeros(8, F32)
    with AclTensors() as t:
        args = _backward(t, dy, x, ns, mean, rstd, None, None, (False, False, True), None, None, db)
        assert run_op(BWD, args) == (ACLNN_SUCCESS, "")
    np.testing.assert_allclose(db, dy.sum(0, dtype=np.float64), rtol=1e-6, atol=1e-6)  # fp32 partials


def test_backward_empty_rows_zero_param_grads():
    e = np.zeros((0, 8), F32)
    dw, db = np.full(8, 5, F32), np.full(8, 5, F32)
    with AclTensors() as t:
        stats = np.zeros((0, 1), F32)
        args = _backward(t, e, e, [8], stats, stats, None, None, (True, True, True), e.copy(), dw, db)
        assert run_op(BWD, args) == (ACLNN_SUCCESS, "")
    assert (dw == 0).all() and (db == 0).all()


def test_forward_null_pointers():
    x = _data((4, 8), F32, 7)
    for i, name in [(0, "input"), (1, "normalizedShape"), (5, "out")]:
        with AclTensors() as t:
            args = _forward(t, x, [8], None, None, 1e-5, np.zeros_like(x), None, None)
            args[i] = None
            status, msg = run_op(FWD, args)
        assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg, (name, msg)


def test_backward_null_pointers_and_mask():
    dy, x, ns, mean, rstd, w, b = _backward_inputs((4, 8), 1, F32, 8)
    for i, name in [(0, "gradOut"), (1, "input"), (2, "normalizedShape"), (3, "mean"), (4, "rstd"),
                    (7, "outputMask"), (8, "gradInputOut"), (9, "gradWeightOut"), (10, "gradBiasOut")]:
        with AclTensors() as t:
            args = _backward(t, dy, x, ns, mean, rstd, w, b, (True, True, True), np.zeros_like(x),
                             np.zeros(8, F32), np.zeros(8, F32))
            args[i] = None
            status, msg = run_op(BWD, args)
        assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg, (name, msg)
    with AclTensors() as t:
        args = _backward(t, dy, x, ns, mean, rstd, w, b, (True, True), np.zeros_like(x), None, None)
        assert run_op(BWD, args) == (ACLNN_ERR_PARAM_INVALID, "aclnnLayerNormBackward: outputMask must have 3 "
                                                              "entries, got 2")


@pytest.mark.parametrize("case,message", [
    ("ns_short", "aclnnLayerNorm: normalizedShape must equal the trailing dims of input [4,8], got [4]"),
    ("ns_empty", "aclnnLayerNorm: normalizedShape must have 1 to input rank (2) dims, got []"),
    ("w_shape", "aclnnLayerNorm: weightOptional shape must equal normalizedShape [8], got [9]"),
    ("b_dtype", "aclnnLayerNorm: biasOptional dtype must be input's (float16) or float32, got bfloat16"),
    ("out_shape", "aclnnLayerNorm: out shape must equal input shape [4,8], got [4,7]"),
    ("x_f64", "aclnnLayerNorm: input dtype must be one of {float32, float16, bfloat16}, got float64"),
    ("rstd_shape", "aclnnLayerNorm: rstdOutOptional shape must be input's leading dims [4] (size-1 dims aside), "
                   "got [2]"),
])
def test_forward_errors(case, message):
    x = _data((4, 8), F16, 9)
    ns, w, b, out, mean, rstd = [8], None, None, np.zeros_like(x), np.zeros((4, 1), F32), np.zeros((4, 1), F32)
    if case == "ns_short": x, out, ns = _data((4, 8), F16, 9).reshape(1, 4, 8), np.zeros((1, 4, 8), F16), [4]
    if case == "ns_empty": ns = []
    if case == "w_shape": w = np.ones(9, F16)
    if case == "b_dtype": b = np.ones(8, BF16)
    if case == "out_shape": out = np.zeros((4, 7), F16)
    if case == "x_f64": x = x.astype(np.float64)
    if case == "rstd_shape": rstd = np.zeros(2, F32)
    if case == "ns_short":
        message = "aclnnLayerNorm: normalizedShape must equal the trailing dims of input [8], got [4]"
    with AclTensors() as t:
        assert run_op(FWD, _forward(t, x, ns, w, b, 1e-5, out, mean, rstd)) == (ACLNN_ERR_PARAM_INVALID, message)


@pytest.mark.parametrize("case,message", [
    ("dy_dtype", "aclnnLayerNormBackward: gradOut dtype float16 != input dtype float32"),
    ("mean_numel", "aclnnLayerNormBackward: mean shape must be input's leading dims [4] (size-1 dims aside), "
                   "got [5,1]"),
    ("dw_shape", "aclnnLayerNormBackward: gradWeightOut shape must equal normalizedShape [8], got [4,2]"),
    ("dx_dtype", "aclnnLayerNormBackward: gradInputOut dtype bfloat16 != input dtype float32"),
])
def test_backward_errors(case, message):
    dy, x, ns, mean, rstd, w, b = _backward_inputs((4, 8), 1, F32, 10)
    dx, dw, db = np.zeros_like(x), np.zeros(8, F32), np.zeros(8, F32)
    if case == "dy_dtype": dy = dy.astype(F16)
    if case == "mean_numel": mean = np.zeros((5, 1), F32)
    if case == "dw_shape": dw = np.zeros((4, 2), F32)
    if case == "dx_dtype": dx = dx.astype(BF16)
    with AclTensors() as t:
        args = _backward(t, dy, x, ns, mean, rstd, w, b, (True, True, True), dx, dw, db)
        assert run_op(BWD, args) == (ACLNN_ERR_PARAM_INVALID, message)
