"""aclnnFusedLinearOnlineMaxSum, aclnnFusedCrossEntropyLossWithMaxSum and
aclnnFusedLinearCrossEntropyLossGrad through the aclnn C ABI (ctypes): a round trip equal to the
Python API (strided outputs), null tensors (161001), validation, launch-time and workspace errors with
their messages (161002), executor rules."""

import ctypes

import numpy as np

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, last_error, launch, run_op)
from reference.fused_linear_cross_entropy import f64
from test_fused_linear_cross_entropy import BF16, make_inputs, rel_err

OMS, LWMS, GRAD = "aclnnFusedLinearOnlineMaxSum", "aclnnFusedCrossEntropyLossWithMaxSum", \
    "aclnnFusedLinearCrossEntropyLossGrad"


def _grad_args(t, g, x, w, mask, mt, mx, s, sm, gi, gw, ls=0.0):
    return [t.new(g), t.new(x), t.new(w), t.new(mask), t.new(mt), ctypes.c_float(ls), t.new(mx), t.new(s),
            t.new(sm), t.new(gi), t.new(gw)]


def test_c_abi_round_trip_and_strided_outputs():
    bt, h, v = 12, 6, 40
    x, w, t = make_inputs(bt, h, v, BF16, seed=21)
    mx, s, p = (np.empty(bt, np.float32) for _ in range(3))
    mask, mt = np.empty(2, np.uint8), np.empty(bt, np.int64)
    logits = np.empty((bt, v), BF16)
    with AclTensors() as tt:
        st, msg = run_op(OMS, [tt.new(x), tt.new(w), tt.new(t), ctypes.c_int64(0), ctypes.c_int64(v), tt.new(mx),
                               tt.new(s), tt.new(p), tt.new(mask), tt.new(mt), tt.new(logits)])
    assert st == ACLNN_SUCCESS, msg
    ref = tg.fused_linear_online_max_sum(x, w, t, 0, v, return_logits=True)
    for a, b in zip((mx, s, p, mask, mt, logits), ref):
        np.testing.assert_array_equal(a, b)
    loss, sm = np.empty(bt, np.float32), np.empty((bt, v), np.float32)
    with AclTensors() as tt:
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(p), ctypes.c_float(0.0), None, None, tt.new(logits),
                                tt.new(loss), tt.new(sm)])
    assert st == ACLNN_SUCCESS, msg
    grad = np.ones(bt, np.float32)
    # outputs as strided views (every other row / column of larger buffers)
    gi_buf, gw_buf = np.zeros((2 * bt, 2 * h), BF16), np.zeros((v, 3 * h), BF16)
    gi, gw = gi_buf[::2, ::2], gw_buf[:, ::3]
    for mode in ("mem", "hp"):
        with AclTensors() as tt:
            st, msg = run_op(GRAD, _grad_args(tt, grad, x, w, mask, mt, mx if mode == "mem" else None,
                                              s if mode == "mem" else None, sm if mode == "hp" else None, gi, gw))
        assert st == ACLNN_SUCCESS, msg
        rgi, rgw = tg.fused_linear_cross_entropy_loss_grad(grad, x, w, mask, mt, logits_max=mx, sum_exp_logits=s,
                                                           softmax=sm if mode == "hp" else None)
        assert rel_err(gi, rgi) < 1e-2 and rel_err(gw, rgw) < 1e-2
        assert np.all(f64(gi_buf[1::2]) == 0) and np.all(f64(gw_buf[:, 1::3]) == 0)


def test_c_abi_errors():
    bt, h, v = 6, 4, 10
    x, w, t = make_inputs(bt, h, v, np.float16, seed=22)
    g = np.ones(bt, np.float32)
    mask, mt = np.zeros(1, np.uint8), t.copy()
    mx, s = np.zeros(bt, np.float32), np.ones(bt, np.float32)
    sm = np.zeros((bt, v), np.float32)
    gi, gw = np.empty((bt, h), np.float16), np.empty((v, h), np.float16)
    with AclTensors() as tt:
        def grad_call(**over):
            args = dict(g=g, x=x, w=w, mask=mask, mt=mt, mx=mx, s=s, sm=None, gi=gi, gw=gw, ls=0.0)
            args.update(over)
            return run_op(GRAD, _grad_args(tt, **args))

        assert grad_call()[0] == ACLNN_SUCCESS
        st, msg = grad_call(mx=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "logitsMaxOptional" in msg
        assert grad_call(mx=None, s=None, sm=sm)[0] == ACLNN_SUCCESS
        st, msg = grad_call(g=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "grad" in msg
        st, msg = grad_call(gw=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "weightGradOut" in msg
        st, msg = grad_call(g=g.astype(np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "grad dtype" in msg
        st, msg = grad_call(gi=np.empty((bt, h), np.float32))
        assert st == ACLNN_ERR_PARAM_INVALID and "inputGradOut dtype" in msg
        st, msg = grad_call(mask=mask.astype(np.int32))
        assert st == ACLNN_ERR_PARAM_INVALID and "targetMask dtype" in msg
        st, msg = grad_call(gw=np.empty((h, v), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "weightGradOut shape [4,10] != (V, H) [10,4]" in msg
        st, msg = grad_call(x=np.ones((bt + 1, h), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "input shape" in msg
        st, msg = grad_call(ls=0.1)
        assert st == ACLNN_ERR_PARAM_INVALID and "labelSmoothing" in msg
        st, msg = grad_call(gi=x)
        assert st == ACLNN_ERR_PARAM_INVALID and "overlaps" in msg
        # private format
        st, ws, ex = get_workspace_size(GRAD, [tt.new(g), tt.new(x, fmt=29), tt.new(w), tt.new(mask), tt.new(mt),
                                               ctypes.c_float(0.0), tt.new(mx), tt.new(s), None, tt.new(gi),
                                               tt.new(gw)])
        assert st == ACLNN_ERR_PARAM_INVALID
        # data-dependent error at launch; second launch; too-small workspace
        bad = mt.copy()
        bad[3] = v
        st, ws, ex = get_workspace_size(GRAD, _grad_args(tt, g, x, w, mask, bad, mx, s, None, gi, gw))
        assert st == ACLNN_SUCCESS and ws > 0
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert "maskedTarget[3] = 10 is out of range [0, 10)" in last_error()
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID  # the executor was released
        st, ws, ex = get_workspace_size(GRAD, _grad_args(tt, g, x, w, mask, mt, mx, s, None, gi, gw))
        assert launch(GRAD, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
        assert "smaller than" in last_error()
        assert launch(GRAD, ex, ws) == ACLNN_SUCCESS
        assert launch(GRAD, ex, ws) == ACLNN_ERR_PARAM_INVALID

        # forward
        outs = [np.empty(bt, np.float32) for _ in range(3)] + [np.empty(1, np.uint8), np.empty(bt, np.int64)]

        def fwd(start=0, end=v, **over):
            a = dict(x=x, w=w, t=t, mx=outs[0], s=outs[1], p=outs[2], mask=outs[3], mt=outs[4], lg=None)
            a.update(over)
            return run_op(OMS, [tt.new(a["x"]), tt.new(a["w"]), tt.new(a["t"]), ctypes.c_int64(start),
                                ctypes.c_int64(end), tt.new(a["mx"]), tt.new(a["s"]), tt.new(a["p"]),
                                tt.new(a["mask"]), tt.new(a["mt"]), tt.new(a["lg"])])

        assert fwd()[0] == ACLNN_SUCCESS
        st, msg = fwd(t=None)
        assert st == ACLNN_ERR_PARAM_NULLPTR and "target" in msg
        st, msg = fwd(start=-1, end=v - 1)
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabStartIndex must be >= 0, got -1" in msg
        st, msg = fwd(start=5, end=4)
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabEndIndex must be >= vocabStartIndex" in msg
        st, msg = fwd(start=3, end=3 + v + 1)
        assert st == ACLNN_ERR_PARAM_INVALID and "must be <= weight rows 10, got 11" in msg
        assert fwd(start=3, end=3 + v - 4)[0] == ACLNN_SUCCESS  # fewer ids than weight rows: the vendor's usage
        st, msg = fwd(mt=np.empty(bt, np.int32))
        assert st == ACLNN_ERR_PARAM_INVALID and "maskedTargetOut dtype" in msg
        st, msg = fwd(mask=np.empty(2, np.uint8))
        assert st == ACLNN_ERR_PARAM_INVALID and "targetMaskOut shape" in msg
        st, msg = fwd(lg=np.empty((bt, v), np.float32))
        assert st == ACLNN_ERR_PARAM_INVALID and "vocabParallelLogitsOutOptional dtype" in msg
        st, msg = fwd(x=np.ones((bt, h + 1), np.float16))
        assert st == ACLNN_ERR_PARAM_INVALID and "hidden size" in msg

        # loss with max sum
        loss = np.empty(bt, np.float32)
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, tt.new(sm),
                                tt.new(loss), None])
        assert st == ACLNN_ERR_PARAM_NULLPTR and "softMaxOutOptional is required" in msg
        st, msg = run_op(LWMS, [tt.new(mx), None, tt.new(mx), ctypes.c_float(0.0), None, None, None, tt.new(loss),
                                None])
        assert st == ACLNN_ERR_PARAM_NULLPTR and "sumExpLogits" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.5), None, None, None,
                                tt.new(loss), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "labelSmoothing must be 0, got 0.5" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, None,
                                tt.new(np.empty(bt + 1, np.float32)), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "lossOut shape" in msg
        st, msg = run_op(LWMS, [tt.new(mx), tt.new(s), tt.new(mx), ctypes.c_float(0.0), None, None, None,
                                tt.new(mx), None])
        assert st == ACLNN_ERR_PARAM_INVALID and "overlaps" in msg
