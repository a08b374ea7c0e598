"""aclnnBinaryCrossEntropyWithLogitsBackward through the aclnn C ABI (ctypes): results against the
float64 reference (reference/bce.py), data read at launch, empty tensors, null tensors and
out-pointers (161001), validation errors with their messages (161002), executor misuse."""

import ctypes

import numpy as np
import pytest

from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        assert_null_out_pointers_refused, get_workspace_size, last_error, launch, run_op)
from bce_cases import make_backward as make
from reference.bce import F16, F32, BF16
from reference.bce import assert_bce_close as check
from test_binary_cross_entropy_with_logits_backward import OP


def c_args(t, dy, x, tg_, w, pw, out, reduction):
    return [t.new(dy), t.new(x), t.new(tg_), t.new(w), t.new(pw), ctypes.c_int64(reduction), t.new(out)]


def test_c_abi_success_and_workspace():
    dy, x, t, w, pw = make((5, 33), dtypes=(F16, BF16, F32, F16, F32), w_shape=(5, 1), pw_shape=(33,))
    out = np.full((5, 33), np.nan, F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, dy, x, t, w, pw, out, 1))
        assert status == ACLNN_SUCCESS and ws == 0 and ex
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
        check(out, dy, x, t, w, pw, "mean")
        # a second launch of the same executor is refused
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "not live" in last_error()
        # null optional tensors and reduction none
        out2 = np.empty((5, 33), F32)
        dy2 = np.ones((5, 33), F16)
        status, msg = run_op(OP, c_args(T, dy2, x, t, None, None, out2, 0))
        assert status == ACLNN_SUCCESS, msg
        check(out2, dy2, x, t, None, None, "none")


def test_c_abi_reads_data_at_launch():
    # Phase 1 only sees shapes; the data (including one-element operands) is read in phase 2.
    dy, x, t, w, pw = make((3, 40), w_shape=(1,), pw_shape=())
    out = np.empty((3, 40), F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, dy, x, t, w, pw, out, 2))
        assert status == ACLNN_SUCCESS
        dy[...] = 3.0
        w[...] = 0.25
        pw[...] = 5.0
        x[...] = x[::-1]
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
    check(out, dy, x, t, w, pw, "sum")


def test_c_abi_empty():
    dy, x, t, w, pw = make((2, 0), w_shape=(0,), pw_shape=(1,))
    out = np.empty((2, 0), F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, dy, x, t, w, pw, out, 1))
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(OP, ex, 0, workspace=None) == ACLNN_SUCCESS


@pytest.mark.parametrize("null_index,name", [(0, "gradOutput"), (1, "self"), (2, "target"), (6, "out")])
def test_c_abi_null_tensors(null_index, name):
    dy, x, t, w, pw = make((2, 3))
    out = np.empty((2, 3), F32)
    with AclTensors() as T:
        args = c_args(T, dy, x, t, w, pw, out, 1)
        args[null_index] = None
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_NULLPTR
    assert msg == f"{OP}: {name} is null"


def test_c_abi_null_out_pointers():
    dy, x, t, w, pw = make((2, 3))
    out = np.empty((2, 3), F32)
    with AclTensors() as T:
        assert_null_out_pointers_refused(OP, c_args(T, dy, x, t, w, pw, out, 1))


def test_c_abi_errors():
    dy, x, t, w, pw = make((4, 6), w_shape=(6,), pw_shape=(4, 1))
    out = np.empty((4, 6), F32)
    cases = [
        (dict(out=np.empty((4, 6), F16)), "out dtype float16 != target dtype float32"),
        (dict(x=x.astype(np.float64)), "self dtype must be one of {float32, float16, bfloat16}, got float64"),
        (dict(w=w.astype(np.int32)), "weightOptional dtype must be one of"),
        (dict(t=t[:3]), "target shape [3,6] != self shape [4,6]"),
        (dict(out=np.empty((4, 5), F32)), "out shape [4,5] != self shape [4,6]"),
        (dict(dy=np.ones((5,), F32)), "gradOutput shape [5] does not broadcast to self shape [4,6]"),
        (dict(pw=np.ones((2, 6), F32)), "posWeightOptional shape [2,6] does not broadcast to self shape [4,6]"),
        (dict(reduction=3), "reduction must be 0 (none), 1 (mean) or 2 (sum), got 3"),
        (dict(reduction=-7), "got -7"),
        (dict(x=np.ones((1,) * 9, F32), t=np.ones((1,) * 9, F32), out=np.ones((1,) * 9, F32)),
         "self rank must be at most 8, got 9"),
    ]
    for change, expected in cases:
        a = dict(dy=dy, x=x, t=t, w=w, pw=pw, out=out, reduction=1)
        a.update(change)
        with AclTensors() as T:
            status, msg = run_op(OP, c_args(T, a["dy"], a["x"], a["t"], a["w"], a["pw"], a["out"], a["reduction"]))
        assert status == ACLNN_ERR_PARAM_INVALID, (change, msg)
        assert msg.startswith(OP + ": ") and expected in msg, (expected, msg)
    # validation order: dtype before shape before reduction
    with AclTensors() as T:
        status, msg = run_op(OP, c_args(T, dy, x.astype(np.float64), t[:3], w, pw, out, 9))
        assert "self dtype" in msg
        status, msg = run_op(OP, c_args(T, dy, x, t[:3], w, pw, out, 9))
        assert "target shape" in msg
    # private formats are refused
    with AclTensors() as T:
        args = [T.new(dy), T.new(x, fmt=3), T.new(t), None, None, ctypes.c_int64(1), T.new(out)]
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_INVALID and "private packed format" in msg
    # a view reaching outside its storage is refused
    with AclTensors() as T:
        args = [T.new(dy), T.new(x, storage=[10]), T.new(t), None, None, ctypes.c_int64(1), T.new(out)]
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_INVALID and "outside its storage" in msg


def test_c_abi_workspace_and_executor_misuse():
    dy, x, t, w, pw = make((2, 3))
    out = np.empty((2, 3), F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, dy, x, t, w, pw, out, 1))
        assert status == ACLNN_SUCCESS and ws == 0
        # an executor of this op refused by another op, then run by its own
        assert launch("aclnnSiluBackward", ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "was created by " + OP in last_error()
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert launch(OP, None, 0) == ACLNN_ERR_PARAM_NULLPTR
