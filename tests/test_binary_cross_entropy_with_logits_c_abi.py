"""aclnnBinaryCrossEntropyWithLogits through the aclnn C ABI (ctypes): results against the float64
reference (reference/bce.py), the workspace of mean / sum, data read at launch, empty tensors, null
tensors and out-pointers (161001), every validation error with its message (161002), the validation
order, executor misuse."""

import ctypes

import numpy as np
import pytest

from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        assert_null_out_pointers_refused, get_workspace_size, last_error, launch, lib, run_op)
from bce_cases import make_forward as make
from reference.bce import BF16, F16, F32
from reference.bce import assert_bce_forward_close as check
from test_binary_cross_entropy_with_logits import BLOCK, OP


def c_args(T, x, t, w, pw, reduction, out):
    return [T.new(x), T.new(t), T.new(w), T.new(pw), ctypes.c_int64(reduction), T.new(out)]


def test_c_abi_none_and_workspace():
    x, t, w, pw = make((5, 33), dtypes=(BF16, F32, F16, F32), w_shape=(5, 1), pw_shape=(33,))
    out = np.full((5, 33), np.nan, F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, x, t, w, pw, 0, out))
        assert status == ACLNN_SUCCESS and ws == 0 and ex
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
        check(out, x, t, w, pw, "none")
        # a second launch of the same executor is refused
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "not live" in last_error()
        # null optional tensors
        out2 = np.empty((5, 33), F32)
        status, msg = run_op(OP, c_args(T, x, t, None, None, 0, out2))
        assert status == ACLNN_SUCCESS, msg
        check(out2, x, t, None, None, "none")


@pytest.mark.parametrize("reduction,name", [(1, "mean"), (2, "sum")])
@pytest.mark.parametrize("out_shape", [(), (1,)])
def test_c_abi_mean_sum_workspace(reduction, name, out_shape):
    # one double per block of 8192 elements, whatever the thread count
    n = 3 * BLOCK + 100
    x, t, w, pw = make((n,), dtypes=(F32, BF16, F32, BF16), w_shape=(n,), pw_shape=(1,))
    out = np.full(out_shape, np.nan, BF16)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, x, t, w, pw, reduction, out))
        assert status == ACLNN_SUCCESS and ws == 4 * 8
        # a workspace smaller than asked, or none, is refused (161002) and the executor stays usable
        assert launch(OP, ex, ws - 8) == ACLNN_ERR_PARAM_INVALID
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
    check(out.reshape(()), x, t, w, pw, name)


def test_c_abi_reads_data_at_launch():
    # Phase 1 only sees shapes; the data (including one-element operands) is read in phase 2.
    x, t, w, pw = make((3, 40), w_shape=(1,), pw_shape=())
    out = np.empty((), F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, x, t, w, pw, 2, out))
        assert status == ACLNN_SUCCESS
        w[...] = 0.25
        pw[...] = 5.0
        x[...] = x[::-1]
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
    check(out, x, t, w, pw, "sum")


@pytest.mark.parametrize("reduction,expect", [(0, None), (1, "nan"), (2, 0.0)])
def test_c_abi_empty(reduction, expect):
    # none: nothing written; mean: NaN; sum: 0 (the vendor's empty-tensor results), workspace 0
    x, t, w, pw = make((2, 0), w_shape=(0,), pw_shape=(1,))
    out = np.empty((2, 0), F32) if reduction == 0 else np.full((1,), 7.0, F16)
    t = t.astype(out.dtype)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, x, t, w, pw, reduction, out))
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(OP, ex, 0, workspace=None) == ACLNN_SUCCESS
    if expect == "nan":
        assert np.isnan(out[0])
    elif expect is not None:
        assert out[0] == expect


@pytest.mark.parametrize("null_index,name", [(0, "self"), (1, "target"), (5, "out")])
def test_c_abi_null_tensors(null_index, name):
    x, t, w, pw = make((2, 3))
    out = np.empty((), F32)
    with AclTensors() as T:
        args = c_args(T, x, t, w, pw, 1, out)
        args[null_index] = None
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_NULLPTR
    assert msg == f"{OP}: {name} is null"


def test_c_abi_null_out_pointers():
    x, t, w, pw = make((2, 3))
    out = np.empty((), F32)
    with AclTensors() as T:
        assert_null_out_pointers_refused(OP, c_args(T, x, t, w, pw, 1, out))


def test_c_abi_errors():
    x, t, w, pw = make((4, 6), w_shape=(6,), pw_shape=(4, 1))
    cases = [
        (dict(out=np.empty((), F16)), "out dtype float16 != target dtype float32"),
        (dict(out=np.empty((), np.float64), t=t.astype(np.float64)), "target dtype must be one of"),
        (dict(x=x.astype(np.float64)), "self dtype must be one of {float32, float16, bfloat16}, got float64"),
        (dict(t=t.astype(np.int32), out=np.empty((), np.int32)), "target dtype must be one of"),
        (dict(w=w.astype(np.int32)), "weightOptional dtype must be one of"),
        (dict(pw=pw.astype(np.float64)), "posWeightOptional dtype must be one of"),
        (dict(out=np.empty((), np.int64)), "out dtype must be one of"),
        (dict(t=t[:3]), "target shape [3,6] != self shape [4,6]"),
        (dict(reduction=0, out=np.empty((4, 5), F32)), "out shape [4,5] != self shape [4,6]"),
        (dict(reduction=0), "out shape [] != self shape [4,6]"),
        (dict(out=np.empty((4, 6), F32)), "out shape must be [] or [1] for reduction mean, got [4,6]"),
        (dict(reduction=2, out=np.empty((1, 1), F32)), "out shape must be [] or [1] for reduction sum, got [1,1]"),
        (dict(w=np.ones((5,), F32)), "weightOptional shape [5] does not broadcast to self shape [4,6]"),
        (dict(pw=np.ones((2, 6), F32)), "posWeightOptional shape [2,6] does not broadcast to self shape [4,6]"),
        (dict(reduction=3), "reduction must be 0 (none), 1 (mean) or 2 (sum), got 3"),
        (dict(reduction=-7), "got -7"),
        (dict(x=np.ones((1,) * 9, F32), t=np.ones((1,) * 9, F32)), "self rank must be at most 8, got 9"),
        (dict(w=np.ones((1,) * 9, F32)), "weightOptional rank must be at most 8, got 9"),
        (dict(out=np.ones((1,) * 9, F32)), "out rank must be at most 8, got 9"),
    ]
    for change, expected in cases:
        a = dict(x=x, t=t, w=w, pw=pw, out=np.empty((), F32), reduction=1)
        a.update(change)
        with AclTensors() as T:
            status, msg = run_op(OP, c_args(T, a["x"], a["t"], a["w"], a["pw"], a["reduction"], a["out"]))
        assert status == ACLNN_ERR_PARAM_INVALID, (change, msg)
        assert msg.startswith(OP + ": ") and expected in msg, (expected, msg)
    # validation order: dtype before shape before reduction before overlap
    out = np.empty((), F32)
    with AclTensors() as T:
        status, msg = run_op(OP, c_args(T, x.astype(np.float64), t[:3], w, pw, 9, out))
        assert "self dtype" in msg
        status, msg = run_op(OP, c_args(T, x, t[:3], w, pw, 9, out))
        assert "target shape" in msg
        status, msg = run_op(OP, c_args(T, x, t, w, pw, 9, x[0, 1:2]))
        assert "reduction must be" in msg
        status, msg = run_op(OP, c_args(T, x, t, w, pw, 1, x[0, 1:2]))
        assert status == ACLNN_ERR_PARAM_INVALID and "out overlaps self" in msg
    # private formats are refused
    with AclTensors() as T:
        args = [T.new(x, fmt=3), T.new(t), None, None, ctypes.c_int64(1), T.new(out)]
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_INVALID and "private packed format" in msg
    # a view reaching outside its storage is refused
    with AclTensors() as T:
        args = [T.new(x, storage=[10]), T.new(t), None, None, ctypes.c_int64(1), T.new(out)]
        status, msg = run_op(OP, args)
    assert status == ACLNN_ERR_PARAM_INVALID and "outside its storage" in msg


def test_c_abi_executor_misuse():
    x, t, w, pw = make((2, 3))
    out = np.empty((2, 3), F32)
    with AclTensors() as T:
        status, ws, ex = get_workspace_size(OP, c_args(T, x, t, w, pw, 0, out))
        assert status == ACLNN_SUCCESS and ws == 0
        # an executor of this op refused by another op, then run by its own
        assert launch("aclnnBinaryCrossEntropyWithLogitsBackward", ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "was created by " + OP in last_error()
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert launch(OP, None, 0) == ACLNN_ERR_PARAM_NULLPTR
    check(out, x, t, None, None, "none")


def test_c_abi_repeatable_executor_new_addresses():
    # A repeatable executor (mean, with its workspace) relaunches; new input / output addresses
    # (aclSetInputTensorAddr / aclSetOutputTensorAddr) are read by the next launch.
    from test_acl_repeatable_executor import _relaunch_with_input, _repeatable, vp
    x, t, w, pw = make((6, 1500), w_shape=(1500,), pw_shape=(6, 1), seed=12)
    out = np.zeros((1,), F32)
    with AclTensors() as T:
        tx, tt, tw, tpw, tout = T.new(x), T.new(t), T.new(w), T.new(pw), T.new(out)
        ws, ex = _repeatable(OP, [tx, tt, tw, tpw, ctypes.c_int64(1), tout])
        assert ws == 2 * 8
        for _ in range(2):
            out[:] = 0
            assert launch(OP, ex, ws) == ACLNN_SUCCESS, last_error()
            check(out.reshape(()), x, t, w, pw, "mean")
        x2 = make((6, 1500), seed=13)[0]
        _relaunch_with_input(OP, ex, ws, 0, tx, x2)
        check(out.reshape(()), x2, t, w, pw, "mean")
        out2 = np.zeros((1,), F32)
        assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(tout), vp(out2.ctypes.data)) == ACLNN_SUCCESS
        assert launch(OP, ex, ws) == ACLNN_SUCCESS, last_error()
        np.testing.assert_array_equal(out2, out)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
