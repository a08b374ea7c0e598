"""aclnnFusedAdamw and aclnnApplyAdamWV2 through the aclnn C ABI (ctypes): results equal the Python
API's; the vendor's status codes and check order with messages; nothing written on bad input."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors, create_tensor,
                        lib, run_op)
from helpers import expect_status

FUSED, V2 = "aclnnFusedAdamw", "aclnnApplyAdamWV2"
lib.aclCreateTensorList.restype = ctypes.c_void_p
lib.aclCreateTensorList.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
lib.aclDestroyTensorList.argtypes = [ctypes.c_void_p]
D = ctypes.c_double
F = ctypes.c_float


def _slots(n, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = (5 + 3 * i, 4)
        out.append([rng.standard_normal(s).astype(dtype), rng.standard_normal(s).astype(dtype),
                    (rng.standard_normal(s) * 0.1).astype(dtype), (rng.random(s) * 0.01).astype(dtype),
                    (rng.random(s) * 0.01).astype(dtype)])
    return out


class Lists:
    """aclTensorLists over arrays (a list owns its tensors: destroying it destroys them)."""

    def __init__(self):
        self.lists = []

    def new(self, arrays):
        if arrays is None:
            return None
        ptrs = [None if a is None else create_tensor(a) for a in arrays]
        arr = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
        lst = lib.aclCreateTensorList(arr, len(ptrs))
        self.lists.append(lst)
        return lst

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for lst in self.lists:
            lib.aclDestroyTensorList(lst)


def _fused(slots, steps, amsgrad=False, scale=None, found_inf=None, lr=1e-2, wd=0.05, drop_max=False, extra=None):
    cols = [list(c) for c in zip(*slots)] if slots else [[]] * 5
    with Lists() as L, AclTensors() as T:
        args = [L.new(cols[0]), L.new(cols[1]), L.new(cols[2]), L.new(cols[3]),
                None if drop_max else L.new(cols[4]), L.new(steps), T.new(scale), T.new(found_inf),
                D(lr), D(0.9), D(0.999), D(wd), D(1e-8), ctypes.c_bool(amsgrad), ctypes.c_bool(False)]
        if extra:
            extra(args, L, T)
        return run_op(FUSED, args)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_fused_equals_python_api(isa, dtype, amsgrad):
    a, b = _slots(3, dtype), _slots(3, dtype)
    steps = [np.array([k], np.float32) for k in (0, 4, 9)]
    assert _fused(a, steps, amsgrad=amsgrad) == (ACLNN_SUCCESS, "")
    cols = [list(c) for c in zip(*b)]
    tg.fused_adamw(*cols[:4], cols[4] if amsgrad else None, steps, lr=1e-2, weight_decay=0.05, amsgrad=amsgrad)
    for x, y in zip(a, b):
        for u, w in zip(x, y):
            np.testing.assert_array_equal(u, w)


def test_found_inf_and_grad_scale():
    a = _slots(2)
    before = [[x.copy() for x in s] for s in a]
    steps = [np.array([1.0], np.float32)] * 2
    assert _fused(a, steps, scale=np.array([2.0], np.float32), found_inf=np.array([1.0], np.float32)) == (0, "")
    for s, t in zip(a, before):
        for x, y in zip(s, t):
            np.testing.assert_array_equal(x, y)
    b = _slots(2)
    assert _fused(a, steps, scale=np.array([2.0], np.float32), found_inf=np.array([0.0], np.float32)) == (0, "")
    cols = [list(c) for c in zip(*b)]
    tg.fused_adamw(*cols[:4], None, steps, lr=1e-2, weight_decay=0.05, grad_scale=np.array([2.0], np.float32))
    np.testing.assert_array_equal(a[0][0], b[0][0])


def test_fused_status_codes():
    steps = [np.array([1.0], np.float32)] * 2
    # Attributes come first in the vendor's order, even before null pointers.
    expect_status(_fused(_slots(2), steps, lr=-1.0), ACLNN_ERR_PARAM_INVALID,
                  "aclnnFusedAdamw: lr must be >= 0, got -1")
    expect_status(_fused(_slots(2), steps, amsgrad=True, drop_max=True), ACLNN_ERR_PARAM_INVALID,
                  "maxExpAvgSqsRef must be given when amsgrad is true")

    def null_grads(args, L, T):
        args[1] = None
    expect_status(_fused(_slots(2), steps, extra=null_grads), ACLNN_ERR_PARAM_NULLPTR, "aclnnFusedAdamw: grads")

    def null_element(args, L, T):
        s = _slots(2)
        args[2] = L.new([s[0][2], None])
    expect_status(_fused(_slots(2), steps, extra=null_element), ACLNN_ERR_PARAM_NULLPTR,
                  "expAvgsRef[1] must not be null")
    expect_status(_fused(_slots(2), steps[:1]), ACLNN_ERR_PARAM_INVALID,
                  "stateSteps must hold one tensor per paramsRef tensor (2), got 1")
    expect_status(_fused([], []), ACLNN_ERR_PARAM_INVALID, "paramsRef must hold at least one tensor")
    mixed = _slots(2)
    mixed[1][1] = mixed[1][1].astype(np.float16)  # the vendor's FusedAdamw takes no dtype mixes
    expect_status(_fused(mixed, steps), ACLNN_ERR_PARAM_INVALID, "grads[1] dtype float16 != paramsRef[0] dtype float32")
    bad_max = _slots(2)
    bad_max[0][4] = np.zeros((2, 2), np.float32)  # rejected here (the vendor only logs it)
    expect_status(_fused(bad_max, steps, amsgrad=True), ACLNN_ERR_PARAM_INVALID, "maxExpAvgSqsRef[0] shape [2,2]")
    expect_status(_fused(_slots(2), [np.array([1.0], np.float32), np.array([1, 2], np.int64)]), ACLNN_ERR_PARAM_INVALID,
                  "stateSteps[1]")
    expect_status(_fused(_slots(2), steps, scale=np.array([1.0, 2.0], np.float32)), ACLNN_ERR_PARAM_INVALID,
                  "gradScaleOptional must have exactly one element")


def test_negative_step_fails_at_launch_writing_nothing():
    a = _slots(2)
    before = [[x.copy() for x in s] for s in a]
    expect_status(_fused(a, [np.array([3.0], np.float32), np.array([-2.0], np.float32)]), ACLNN_ERR_PARAM_INVALID,
                  "stateSteps[1] must be finite and >= 0 (the update uses t = step + 1), got -2")
    for s, t in zip(a, before):
        for x, y in zip(s, t):
            np.testing.assert_array_equal(x, y)


def _v2(var, m, v, mx, g, step, amsgrad=False, lr=1e-2):
    with AclTensors() as t:
        return run_op(V2, [t.new(var), t.new(m), t.new(v), t.new(mx), t.new(g), t.new(step), F(lr), F(0.9),
                           F(0.999), F(0.05), F(1e-8), ctypes.c_bool(amsgrad), ctypes.c_bool(False)])


def test_v2_vendor_mixed_tuple_equals_python(isa):
    import ml_dtypes
    rng = np.random.default_rng(2)
    var, m, v = (rng.standard_normal((6, 10)).astype(np.float32) for _ in range(3))
    v = np.abs(v) * 0.01
    g = rng.standard_normal((6, 10)).astype(ml_dtypes.bfloat16)
    mx = (np.abs(rng.standard_normal((6, 10))) * 0.01).astype(ml_dtypes.bfloat16)
    copies = [x.copy() for x in (var, m, v, mx)]
    assert _v2(var, m, v, mx, g, np.array([2], np.int64), amsgrad=True) == (ACLNN_SUCCESS, "")
    tg.apply_adam_w(copies[0], copies[1], copies[2], g, np.array([2], np.int64), lr=1e-2, weight_decay=0.05,
                    amsgrad=True, max_v=copies[3])
    for x, y in zip((var, m, v, mx), copies):
        np.testing.assert_array_equal(x.view(np.uint8), y.view(np.uint8))


def test_v2_status_codes():
    a = _slots(1)[0]
    st = np.array([1.0], np.float32)
    expect_status(_v2(None, a[2], a[3], None, a[1], st), ACLNN_ERR_PARAM_NULLPTR, "aclnnApplyAdamWV2: varRef")
    expect_status(_v2(a[0], a[2], a[3], None, a[1], None), ACLNN_ERR_PARAM_NULLPTR, "aclnnApplyAdamWV2: step")
    expect_status(_v2(a[0], a[2], a[3], None, a[1], st, amsgrad=True), ACLNN_ERR_PARAM_NULLPTR,
                  "maxGradNormOptionalRef")
    expect_status(_v2(a[0], a[2], a[3], None, a[1].astype(np.float64), st), ACLNN_ERR_PARAM_INVALID,
                  "aclnnApplyAdamWV2: grad dtype must be one of {float32, float16, bfloat16}, got float64")
    expect_status(_v2(a[0], a[2][:2], a[3], None, a[1], st), ACLNN_ERR_PARAM_INVALID,
                  "mRef shape [2,4] != varRef shape")
    expect_status(_v2(a[0], a[2], a[3], None, a[1], np.array([1, 2], np.int64)), ACLNN_ERR_PARAM_INVALID,
                  "step must have exactly one element")
    expect_status(_v2(a[0], a[2], a[3], None, a[1], np.array([1], np.int32)), ACLNN_ERR_PARAM_INVALID, "step dtype")
    empty = [np.zeros((0, 3), np.float32) for _ in range(4)]
    assert _v2(empty[0], empty[1], empty[2], None, empty[3], st) == (ACLNN_SUCCESS, "")
