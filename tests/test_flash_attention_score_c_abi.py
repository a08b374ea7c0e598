"""aclnnFlashAttentionScore / aclnnFlashAttentionScoreGrad through the aclnn C ABI (ctypes): results
equal the Python API's bit for bit, the workspace rules, and the status code + message of bad inputs
(null pointers 161001; unsupported or invalid attributes 161002)."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        assert_null_out_pointers_refused, get_workspace_size, launch, last_error, run_op)
from reference.flash_attention import BF16, F32
from helpers import normal

FWD = "aclnnFlashAttentionScore"
BWD = "aclnnFlashAttentionScoreGrad"
INT32_MAX = 2147483647


def _layout(s):
    return ctypes.c_char_p(s.encode()) if s is not None else None


def _fwd_args(t, q, k, v, smax, ssum, out, mask=None, scale=0.5, keep=1.0, pre=INT32_MAX, nxt=INT32_MAX, heads=4,
              layout="BSND", mode=0, pse=None, drop=None):
    return [t.new(q), t.new(k), t.new(v), t.new(pse), t.new(drop), None, t.new(mask), None, ctypes.c_double(scale),
            ctypes.c_double(keep), ctypes.c_int64(pre), ctypes.c_int64(nxt), ctypes.c_int64(heads), _layout(layout),
            ctypes.c_int64(0), ctypes.c_int64(mode), t.new(smax), t.new(ssum), None, t.new(out)]


def _bwd_args(t, q, k, v, dy, smax, ssum, out, dq, dk, dv, mask=None, scale=0.5, heads=4, layout="BSND", mode=0):
    return [t.new(q), t.new(k), t.new(v), t.new(dy), None, None, None, t.new(mask), t.new(smax), t.new(ssum), None,
            t.new(out), None, ctypes.c_double(scale), ctypes.c_double(1.0), ctypes.c_int64(INT32_MAX),
            ctypes.c_int64(INT32_MAX), ctypes.c_int64(heads), _layout(layout), ctypes.c_int64(0),
            ctypes.c_int64(mode), t.new(dq), t.new(dk), t.new(dv), None]


def _problem(dtype=F32):
    q = normal((2, 19, 4, 16), dtype, 1)
    k = normal((2, 23, 2, 16), dtype, 2)
    v = normal((2, 23, 2, 16), dtype, 3)
    dy = normal((2, 19, 4, 16), dtype, 4)
    return q, k, v, dy


def _stats():
    return np.zeros((2, 4, 19, 8), F32), np.zeros((2, 4, 19, 8), F32)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_matches_python_api(isa, dtype):
    q, k, v, dy = _problem(dtype)
    mask = np.triu(np.ones((2048, 2048), np.uint8), 1)
    smax, ssum = _stats()
    out = np.zeros(q.shape, dtype)
    with AclTensors() as t:
        assert run_op(FWD, _fwd_args(t, q, k, v, smax, ssum, out, mask=mask, mode=3)) == (ACLNN_SUCCESS, "")
    want = tg.flash_attention_score(q, k, v, 4, "BSND", scale_value=0.5, atten_mask=mask, sparse_mode=3)
    for got, w in zip((out, smax, ssum), want):
        np.testing.assert_array_equal(got.view(np.uint8), w.view(np.uint8))
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    with AclTensors() as t:
        args = _bwd_args(t, q, k, v, dy, smax, ssum, out, dq, dk, dv, mask=mask, mode=3)
        assert run_op(BWD, args) == (ACLNN_SUCCESS, "")
    want_g = tg.flash_attention_score_grad(q, k, v, dy, 4, "BSND", softmax_max=smax, softmax_sum=ssum,
                                           attention_out=out, scale_value=0.5, atten_mask=mask, sparse_mode=3)
    for got, w in zip((dq, dk, dv), want_g):
        np.testing.assert_array_equal(got.view(np.uint8), w.view(np.uint8))


def test_workspace_rules():
    q, k, v, _ = _problem()
    smax, ssum = _stats()
    out = np.zeros_like(q)
    with AclTensors() as t:
        args = _fwd_args(t, q, k, v, smax, ssum, out)
        assert_null_out_pointers_refused(FWD, args)
        status, ws, ex = get_workspace_size(FWD, args)
        assert status == ACLNN_SUCCESS and ws > 0
        assert launch(FWD, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
        assert "workspace" in last_error()


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_grad_workspace_is_the_plans_and_enough(dtype):
    # Skv = 300: three 128-column kv blocks, so three kv groups and their fp32 dQ slabs. The size phase 1
    # reports is the plan's exactly, and a launch in that much uninitialised workspace (launch() takes
    # np.empty) gives the Python API's bits.
    from tilegrad import _core
    q, k, v = normal((1, 40, 4, 16), dtype, 5), normal((1, 300, 2, 16), dtype, 6), normal((1, 300, 2, 16), dtype, 7)
    dy = normal((1, 40, 4, 16), dtype, 8)
    mask = np.triu(np.ones((2048, 2048), np.uint8), 1)
    out, smax, ssum = tg.flash_attention_score(q, k, v, 4, "BSND", scale_value=0.5, atten_mask=mask, sparse_mode=3)
    want = tg.flash_attention_score_grad(q, k, v, dy, 4, "BSND", softmax_max=smax, softmax_sum=ssum,
                                         attention_out=out, scale_value=0.5, atten_mask=mask, sparse_mode=3)
    plan = _core._flash_attention_score_grad_tiling(1, 4, 2, 40, 300, 16, 16, threads=tg.get_num_threads())
    assert plan["kv_groups"] == 3
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(BWD, _bwd_args(t, q, k, v, dy, smax, ssum, out, dq, dk, dv, mask=mask,
                                                            mode=3))
        assert status == ACLNN_SUCCESS
        if dtype == F32:  # the hook plans fp32 operands (bf16 inputs: bf16 operands, another size)
            assert ws == plan["workspace_bytes"]
        assert launch(BWD, ex, ws) == ACLNN_SUCCESS
    for got, w in zip((dq, dk, dv), want):
        np.testing.assert_array_equal(got.view(np.uint8), w.view(np.uint8))


@pytest.mark.parametrize("which", ["query", "key", "value", "softmaxMaxOut", "softmaxSumOut", "attentionOutOut",
                                   "inputLayout"])
def test_null_required_argument(which):
    q, k, v, _ = _problem()
    smax, ssum = _stats()
    out = np.zeros_like(q)
    with AclTensors() as t:
        args = _fwd_args(t, q, k, v, smax, ssum, out)
        index = {"query": 0, "key": 1, "value": 2, "inputLayout": 13, "softmaxMaxOut": 16, "softmaxSumOut": 17,
                 "attentionOutOut": 19}[which]
        args[index] = None
        status, msg = run_op(FWD, args)
    assert status == ACLNN_ERR_PARAM_NULLPTR
    assert FWD in msg and which in msg


GRAD_REQUIRED = {"query": 0, "keyIn": 1, "value": 2, "dy": 3, "softmaxMaxOptional": 8, "softmaxSumOptional": 9,
                 "attentionInOptional": 11, "inputLayout": 18, "dqOut": 21, "dkOut": 22, "dvOut": 23}


@pytest.mark.parametrize("which", list(GRAD_REQUIRED))
def test_grad_null_required_argument(which):
    q, k, v, dy = _problem()
    smax, ssum = _stats()
    out = np.zeros_like(q)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    with AclTensors() as t:
        args = _bwd_args(t, q, k, v, dy, smax, ssum, out, dq, dk, dv)
        args[GRAD_REQUIRED[which]] = None
        status, msg = run_op(BWD, args)
    assert status == ACLNN_ERR_PARAM_NULLPTR
    assert BWD in msg and which in msg


@pytest.mark.parametrize("change,message", [
    (dict(keep=0.9), "keepProb 0.9 < 1 needs dropMaskOptional"),
    (dict(keep=0.9, drop=np.zeros(2 * 4 * 19 * 23 // 8 + 1, np.uint8)), "dropout"),
    (dict(keep=0.0), "keepProb must be in (0, 1]"),
    (dict(pse=np.zeros((2, 4, 19, 23), F32)), "pse"),
    (dict(mode=6), "prefix"),
    (dict(mode=8), "varlen"),
    (dict(layout="TND"), "varlen"),
    (dict(layout="BSNH"), "inputLayout must be"),
    (dict(heads=0), "headNum must be > 0"),
    (dict(mode=2, mask=np.zeros((19, 23), np.uint8)), "[2048,2048]"),
])
def test_invalid_arguments(change, message):
    q, k, v, _ = _problem()
    smax, ssum = _stats()
    out = np.zeros_like(q)
    with AclTensors() as t:
        status, msg = run_op(FWD, _fwd_args(t, q, k, v, smax, ssum, out, **change))
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg.startswith(FWD + ":") and message in msg


def test_reserved_tensors_are_never_read_or_written():
    # paddingMask, softmaxOut (forward), softmaxIn and dpse (grad) are the vendor's reserved parameters:
    # given, they change nothing and stay as they were.
    q, k, v, dy = _problem()
    smax, ssum = _stats()
    out = np.zeros_like(q)
    want = tg.flash_attention_score(q, k, v, 4, "BSND", scale_value=0.5)
    padding = np.full((2, 4, 19, 23), np.nan, F32)
    softmax_out = np.full((2, 4, 19, 23), 7.0, F32)
    with AclTensors() as t:
        args = _fwd_args(t, q, k, v, smax, ssum, out)
        args[5], args[18] = t.new(padding), t.new(softmax_out)
        assert run_op(FWD, args) == (ACLNN_SUCCESS, "")
    for got, w in zip((out, smax, ssum), want):
        np.testing.assert_array_equal(got, w)
    assert np.isnan(padding).all() and (softmax_out == 7.0).all()
    want_g = tg.flash_attention_score_grad(q, k, v, dy, 4, "BSND", softmax_max=smax, softmax_sum=ssum,
                                           attention_out=out, scale_value=0.5)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    dpse = np.full((2, 4, 19, 23), 7.0, F32)
    with AclTensors() as t:
        args = _bwd_args(t, q, k, v, dy, smax, ssum, out, dq, dk, dv)
        args[6], args[10], args[24] = t.new(padding), t.new(softmax_out), t.new(dpse)
        assert run_op(BWD, args) == (ACLNN_SUCCESS, "")
    for got, w in zip((dq, dk, dv), want_g):
        np.testing.assert_array_equal(got, w)
    assert np.isnan(padding).all() and (softmax_out == 7.0).all() and (dpse == 7.0).all()
