"""Repeatable executors through the C ABI (ctypes), with the vendor's semantics: without
aclSetAclOpExecutorRepeatable an executor is single-use; a repeatable one launches any number of times
until aclDestroyAclOpExecutor, and aclSetInputTensorAddr / aclSetOutputTensorAddr give it new data for
the next launch (index = position among the operator's input / output tensors, optional ones included).
Values are checked against float64 NumPy (SiLU backward) or against a fresh single-use run on the same
data (the operators' own tests check those against references)."""

import ctypes
import re

import numpy as np
import pytest

from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        create_tensor, get_workspace_size, last_error, launch, lib, run_op)
from reference.silu import silu_backward_f64

vp = ctypes.c_void_p
for name in ("aclSetAclOpExecutorRepeatable", "aclDestroyAclOpExecutor"):
    getattr(lib, name).argtypes = [vp]
    getattr(lib, name).restype = ctypes.c_int32
for name in ("aclSetInputTensorAddr", "aclSetOutputTensorAddr"):
    getattr(lib, name).argtypes = [vp, ctypes.c_size_t, vp, vp]
    getattr(lib, name).restype = ctypes.c_int32
for name in ("aclSetDynamicInputTensorAddr", "aclSetDynamicOutputTensorAddr"):
    getattr(lib, name).argtypes = [vp, ctypes.c_size_t, ctypes.c_size_t, vp, vp]
    getattr(lib, name).restype = ctypes.c_int32
lib.aclGetRawTensorAddr.argtypes = [vp, ctypes.POINTER(vp)]

SILU = "aclnnSiluBackward"


def _repeatable(op, args):
    status, ws, ex = get_workspace_size(op, args)
    assert status == ACLNN_SUCCESS, last_error()
    assert lib.aclSetAclOpExecutorRepeatable(vp(ex)) == ACLNN_SUCCESS
    return ws, ex


def _relaunch_with_input(op, ex, ws, index, tensor, data):
    """Points input `index` (the aclTensor `tensor`) of a repeatable executor at `data`, launches again."""
    assert lib.aclSetInputTensorAddr(vp(ex), index, vp(tensor), vp(data.ctypes.data)) == ACLNN_SUCCESS
    assert launch(op, ex, ws) == ACLNN_SUCCESS, last_error()


def test_repeatable_executor_launches_until_destroyed():
    rng = np.random.default_rng(1)
    dy, x = rng.standard_normal(40).astype(np.float32), rng.standard_normal(40).astype(np.float32)
    dx = np.zeros(40, np.float32)
    with AclTensors() as t:
        ws, ex = _repeatable(SILU, [t.new(dy), t.new(x), t.new(dx)])
        for _ in range(4):
            dx[:] = 0
            assert launch(SILU, ex, ws) == ACLNN_SUCCESS, last_error()
            np.testing.assert_allclose(dx, silu_backward_f64(dy, x), rtol=2e-6, atol=1e-7)
        x *= -2  # same addresses, new values: the next launch reads them
        assert launch(SILU, ex, ws) == ACLNN_SUCCESS
        np.testing.assert_allclose(dx, silu_backward_f64(dy, x), rtol=2e-6, atol=1e-7)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
        assert launch(SILU, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert "is not live" in last_error()
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_ERR_PARAM_INVALID


def test_non_repeatable_executor_stays_single_use():
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(SILU, [t.new(a), t.new(a.copy()), t.new(a.copy())])
        assert launch(SILU, ex, ws) == ACLNN_SUCCESS
        assert launch(SILU, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert lib.aclSetAclOpExecutorRepeatable(vp(ex)) == ACLNN_ERR_PARAM_INVALID  # released by its launch


def test_new_input_and_output_addresses():
    rng = np.random.default_rng(2)
    dy, x = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    dx = np.zeros((3, 5), np.float32)
    with AclTensors() as t:
        tdy, tx, tdx = t.new(dy), t.new(x), t.new(dx)
        ws, ex = _repeatable(SILU, [tdy, tx, tdx])
        for step in range(3):
            x2 = rng.standard_normal((3, 5)).astype(np.float32)
            dy2 = rng.standard_normal((3, 5)).astype(np.float32)
            dx2 = np.full((3, 5), np.nan, np.float32)
            assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tdy), vp(dy2.ctypes.data)) == ACLNN_SUCCESS, last_error()
            assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(tx), vp(x2.ctypes.data)) == ACLNN_SUCCESS
            assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(tdx), vp(dx2.ctypes.data)) == ACLNN_SUCCESS
            assert launch(SILU, ex, ws) == ACLNN_SUCCESS, last_error()
            np.testing.assert_allclose(dx2, silu_backward_f64(dy2, x2), rtol=2e-6, atol=1e-7)
            # the caller's tensor records the new address too (as the vendor's)
            addr = vp()
            assert lib.aclGetRawTensorAddr(vp(tx), ctypes.byref(addr)) == ACLNN_SUCCESS
            assert addr.value == x2.ctypes.data
        assert (dx == 0).all()  # the first output buffer was never written
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


def test_new_addresses_are_validated_at_launch():
    """A new output that overlaps an input partially is refused at the launch, as at GetWorkspaceSize."""
    buf = np.zeros(16, np.float32)
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        tdy, tx, tdx = t.new(a), t.new(a.copy()), t.new(np.zeros(8, np.float32))
        ws, ex = _repeatable(SILU, [tdy, tx, tdx])
        assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(tx), vp(buf.ctypes.data)) == ACLNN_SUCCESS
        assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(tdx), vp(buf.ctypes.data + 8)) == ACLNN_SUCCESS
        assert launch(SILU, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert "overlap" in last_error()
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


def test_set_address_errors():
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        tdy, tx, tdx = t.new(a), t.new(a.copy()), t.new(a.copy())
        status, ws, ex = get_workspace_size(SILU, [tdy, tx, tdx])
        other = a.copy()
        assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tdy), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert "is not repeatable" in last_error()
        assert lib.aclSetAclOpExecutorRepeatable(vp(ex)) == ACLNN_SUCCESS
        assert lib.aclSetInputTensorAddr(vp(ex), 2, vp(tdy), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert last_error() == "aclSetInputTensorAddr: index 2 is out of range: aclnnSiluBackward has 2 input tensors"
        assert lib.aclSetOutputTensorAddr(vp(ex), 1, vp(tdx), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert "index 1 is out of range: aclnnSiluBackward has 1 output tensors" in last_error()
        assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tx), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert "is not the gradOutput (input 0) passed to aclnnSiluBackwardGetWorkspaceSize" in last_error()
        assert lib.aclSetInputTensorAddr(vp(ex), 0, None, vp(other.ctypes.data)) == ACLNN_ERR_PARAM_NULLPTR
        assert lib.aclSetInputTensorAddr(None, 0, vp(tdy), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_NULLPTR
        assert lib.aclSetAclOpExecutorRepeatable(None) == ACLNN_ERR_PARAM_NULLPTR
        list_ptr = vp(0x40)  # never dereferenced: the executor is checked first, then "no tensor lists"
        assert lib.aclSetDynamicInputTensorAddr(vp(ex), 0, 0, list_ptr, None) == ACLNN_ERR_PARAM_INVALID
        assert "has no tensor-list parameter" in last_error()
        assert lib.aclSetDynamicOutputTensorAddr(None, 0, 0, list_ptr, None) == ACLNN_ERR_PARAM_NULLPTR
        assert launch(SILU, ex, ws) == ACLNN_SUCCESS  # the refused calls changed nothing
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
        assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tdy), vp(other.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert "is not live" in last_error()


def test_optional_input_that_was_null_has_no_address():
    op = "aclnnBinaryCrossEntropyWithLogitsBackward"
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal((4, 3)).astype(np.float32), rng.uniform(0, 1, (4, 3)).astype(np.float32)
    g = np.ones((4, 3), np.float32)
    out = np.zeros((4, 3), np.float32)
    w = np.ones((4, 3), np.float32)
    with AclTensors() as t:
        tg_, tx, ty, tout = t.new(g), t.new(x), t.new(y), t.new(out)
        ws, ex = _repeatable(op, [tg_, tx, ty, None, None, ctypes.c_int64(0), tout])
        tw = t.new(w)
        assert lib.aclSetInputTensorAddr(vp(ex), 3, vp(tw), vp(w.ctypes.data)) == ACLNN_ERR_PARAM_INVALID
        assert "input 3 (weightOptional) of aclnnBinaryCrossEntropyWithLogitsBackward was null" in last_error()
        # a real input works, and matches a single-use run on the same data
        x2 = rng.standard_normal((4, 3)).astype(np.float32)
        _relaunch_with_input(op, ex, ws, 1, tx, x2)
        fresh = np.zeros((4, 3), np.float32)
        assert run_op(op, [t.new(g), t.new(x2), t.new(y), None, None, ctypes.c_int64(0), t.new(fresh)]) == \
            (ACLNN_SUCCESS, "")
        np.testing.assert_array_equal(out, fresh)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


def test_cross_entropy_keeps_its_own_copy_of_the_reduction_string():
    """The executor rebuilds after new addresses; the caller's reduction buffer may have changed."""
    fwd = "aclnnCrossEntropyLoss"
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 9)).astype(np.float32)
    target = rng.integers(0, 9, 6).astype(np.int64)
    reduction = ctypes.create_string_buffer(b"sum")

    def args(t, x_, loss, lp):
        return [t.new(x_), t.new(target), None, ctypes.cast(reduction, ctypes.c_char_p), ctypes.c_int64(-100),
                ctypes.c_double(0.0), ctypes.c_double(0.0), ctypes.c_bool(False), t.new(loss), t.new(lp), None, None]

    with AclTensors() as t:
        loss, lp = np.zeros((), np.float32), np.zeros((6, 9), np.float32)
        a = args(t, x, loss, lp)
        ws, ex = _repeatable(fwd, a)
        reduction.value = b"bad"
        x2 = rng.standard_normal((6, 9)).astype(np.float32)
        _relaunch_with_input(fwd, ex, ws, 0, a[0], x2)
        reduction.value = b"sum"
        fresh_loss, fresh_lp = np.zeros((), np.float32), np.zeros((6, 9), np.float32)
        assert run_op(fwd, args(t, x2, fresh_loss, fresh_lp)) == (ACLNN_SUCCESS, "")
        assert loss == fresh_loss and (lp == fresh_lp).all()
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


def test_embedding_backward_with_workspace_relaunches():
    op = "aclnnEmbeddingDenseBackward"
    rng = np.random.default_rng(5)
    grad = rng.standard_normal((50, 8)).astype(np.float32)
    idx = rng.integers(0, 20, 50).astype(np.int64)
    out = np.zeros((20, 8), np.float32)
    with AclTensors() as t:
        tgrad, tidx, tout = t.new(grad), t.new(idx), t.new(out)
        ws, ex = _repeatable(op, [tgrad, tidx, ctypes.c_uint64(20), ctypes.c_uint64(2**64 - 1), ctypes.c_bool(True),
                                  tout])
        want = np.zeros((20, 8))
        counts = np.bincount(idx, minlength=20)
        np.add.at(want, idx, grad.astype(np.float64) / counts[idx][:, None])
        for _ in range(3):
            out[:] = np.nan
            assert launch(op, ex, ws) == ACLNN_SUCCESS, last_error()
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        idx2 = rng.integers(0, 20, 50).astype(np.int64)
        assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(tidx), vp(idx2.ctypes.data)) == ACLNN_SUCCESS
        assert launch(op, ex, ws) == ACLNN_SUCCESS
        counts2 = np.bincount(idx2, minlength=20)
        want2 = np.zeros((20, 8))
        np.add.at(want2, idx2, grad.astype(np.float64) / counts2[idx2][:, None])
        np.testing.assert_allclose(out, want2, rtol=1e-5, atol=1e-6)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


@pytest.mark.parametrize("threads", [2, 4])
def test_destroy_while_other_threads_use_other_executors(threads):
    """Executors are independent: many repeatable ones created, launched and destroyed concurrently."""
    import threading

    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        dy, x = rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32)
        dx = np.zeros(64, np.float32)
        with AclTensors() as t:
            for _ in range(20):
                ws, ex = _repeatable(SILU, [t.new(dy), t.new(x), t.new(dx)])
                for _ in range(3):
                    if launch(SILU, ex, ws) != ACLNN_SUCCESS:
                        errors.append(last_error())
                if lib.aclDestroyAclOpExecutor(vp(ex)) != ACLNN_SUCCESS:
                    errors.append(last_error())
            if not np.allclose(dx, silu_backward_f64(dy, x), rtol=2e-6, atol=1e-7):
                errors.append("wrong values")

    ths = [threading.Thread(target=work, args=(s,)) for s in range(threads)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert errors == []


def _tensor_without_data(shape, dtype_code):
    dims = (ctypes.c_int64 * len(shape))(*shape)
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * shape[i + 1]
    ptr = lib.aclCreateTensor(dims, len(shape), dtype_code, (ctypes.c_int64 * len(shape))(*strides), 0, 2, dims,
                              len(shape), None)
    assert ptr, last_error()
    return ptr


def test_vendor_sample_tensors_without_data_then_addresses():
    """The vendor's aclSetInputTensorAddr sample: tensors created with nullptr data, GetWorkspaceSize,
    aclSetAclOpExecutorRepeatable, then every address set before the launch."""
    rng = np.random.default_rng(6)
    tdy, tx, tdx = (_tensor_without_data([2, 3], 0) for _ in range(3))
    try:
        status, ws, ex = get_workspace_size(SILU, [tdy, tx, tdx])
        assert status == ACLNN_SUCCESS, last_error()
        assert lib.aclSetAclOpExecutorRepeatable(vp(ex)) == ACLNN_SUCCESS
        # launching before the addresses are known is refused, not a crash
        assert launch(SILU, ex, ws) == ACLNN_ERR_PARAM_NULLPTR
        assert re.fullmatch(r"aclnnSiluBackward: (gradOutput|self|gradInput) data is null \(give it an address "
                            r"with aclSetInputTensorAddr / aclSetOutputTensorAddr before launching\)", last_error())
        for _ in range(2):
            dy, x = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
            dx = np.zeros((2, 3), np.float32)
            assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tdy), vp(dy.ctypes.data)) == ACLNN_SUCCESS
            assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(tx), vp(x.ctypes.data)) == ACLNN_SUCCESS
            assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(tdx), vp(dx.ctypes.data)) == ACLNN_SUCCESS
            assert launch(SILU, ex, ws) == ACLNN_SUCCESS, last_error()
            np.testing.assert_allclose(dx, silu_backward_f64(dy, x), rtol=2e-6, atol=1e-7)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
    finally:
        for p in (tdy, tx, tdx):
            lib.aclDestroyTensor(vp(p))


def test_tensors_without_data_get_the_same_workspace_and_checks():
    """Phase 1 over tensors without data asks for the workspace real data would (embedding backward
    needs one), and addresses that overlap badly are still refused at the launch."""
    op = "aclnnEmbeddingDenseBackward"
    rng = np.random.default_rng(7)
    grad = rng.standard_normal((30, 4)).astype(np.float32)
    idx = rng.integers(0, 10, 30).astype(np.int64)
    out = np.zeros((10, 4), np.float32)
    scalars = [ctypes.c_uint64(10), ctypes.c_uint64(3), ctypes.c_bool(False)]
    with AclTensors() as t:
        status, ws_real, ex_real = get_workspace_size(op, [t.new(grad), t.new(idx), *scalars, t.new(out)])
        assert status == ACLNN_SUCCESS and lib.aclDestroyAclOpExecutor(vp(ex_real)) == ACLNN_SUCCESS
    tg_, ti, to = _tensor_without_data([30, 4], 0), _tensor_without_data([30], 9), _tensor_without_data([10, 4], 0)
    try:
        status, ws, ex = get_workspace_size(op, [tg_, ti, *scalars, to])
        assert status == ACLNN_SUCCESS and ws == ws_real > 0
        assert lib.aclSetAclOpExecutorRepeatable(vp(ex)) == ACLNN_SUCCESS
        assert lib.aclSetInputTensorAddr(vp(ex), 0, vp(tg_), vp(grad.ctypes.data)) == ACLNN_SUCCESS
        assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(ti), vp(idx.ctypes.data)) == ACLNN_SUCCESS
        assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(to), vp(grad.ctypes.data + 16)) == ACLNN_SUCCESS
        assert launch(op, ex, ws) == ACLNN_ERR_PARAM_INVALID  # out overlaps grad
        assert "overlap" in last_error()
        assert lib.aclSetOutputTensorAddr(vp(ex), 0, vp(to), vp(out.ctypes.data)) == ACLNN_SUCCESS
        assert launch(op, ex, ws) == ACLNN_SUCCESS, last_error()
        want = np.zeros((10, 4))
        keep = idx != 3  # paddingIdx 3 gets no gradient
        np.add.at(want, idx[keep], grad[keep].astype(np.float64))
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
    finally:
        for p in (tg_, ti, to):
            lib.aclDestroyTensor(vp(p))


# ---- every operator: a repeatable executor takes new addresses for all of its tensors -------------

lib.aclCreateTensorList.restype = ctypes.c_void_p
lib.aclCreateTensorList.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64]
lib.aclDestroyTensorList.argtypes = [vp]
F32 = np.float32
c_i64, c_u64, c_f64, c_f32, c_bool = ctypes.c_int64, ctypes.c_uint64, ctypes.c_double, ctypes.c_float, ctypes.c_bool


class RebindCase:
    """An operator's C ABI call over named arrays. `inputs` / `outputs`: its tensor parameters in the order
    of its GetWorkspaceSize signature (what aclSetInputTensorAddr / aclSetOutputTensorAddr count; a list
    parameter ends in "[]"); `arrays(rng)`: fresh data for them (None: a null optional tensor; a list of
    arrays for a list parameter); `args(p)`: the call's arguments with p[name] the tensor (list) pointers;
    `written`: what the operator writes (outputs, and the updated operands of in-place operators)."""

    def __init__(self, op, inputs, outputs, arrays, args, written=None):
        self.op, self.inputs, self.outputs, self.arrays, self.args = op, inputs, outputs, arrays, args
        self.written = written or outputs


def _rn(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def _flce_stats(rng, bt, h, v):
    x, w = _rn(rng, (bt, h), 0.5), _rn(rng, (v, h), 0.5)
    logits = x.astype(np.float64) @ w.astype(np.float64).T
    mx = logits.max(axis=1).astype(F32)
    se = np.exp(logits - mx[:, None]).sum(axis=1).astype(F32)
    return x, w, logits.astype(F32), mx, se


def _rebind_cases():
    bt, h, v = 9, 8, 24

    def flce_grad_arrays(rng):
        x, w, _, mx, se = _flce_stats(rng, bt, h, v)
        mask = np.packbits(rng.random(bt) < 0.3, bitorder="little")
        return {"grad": _rn(rng, bt), "input": x, "weight": w, "targetMask": mask,
                "maskedTarget": rng.integers(0, v, bt).astype(np.int64), "logitsMaxOptional": mx,
                "sumExpLogitsOptional": se, "softmaxOptional": None,
                "inputGradOut": np.zeros((bt, h), F32), "weightGradOut": np.zeros((v, h), F32)}

    def adamw_slot(rng, shape):
        return [_rn(rng, shape), _rn(rng, shape), _rn(rng, shape, 0.1), np.abs(_rn(rng, shape, 0.01)),
                np.abs(_rn(rng, shape, 0.01))]

    def fused_adamw_arrays(rng):
        slots = [adamw_slot(rng, s) for s in [(5, 4), (7,), (3, 3)]]
        lists = [list(c) for c in zip(*slots)]
        return {"paramsRef[]": lists[0], "grads[]": lists[1], "expAvgsRef[]": lists[2], "expAvgSqsRef[]": lists[3],
                "maxExpAvgSqsRef[]": lists[4], "stateSteps[]": [np.array([k], F32) for k in (0, 3, 7)],
                "gradScaleOptional": np.array([2.0], F32), "foundInfOptional": np.array([0.0], F32)}

    def attention_arrays(rng):
        """BSND, 4 query heads over 2 kv heads, Sq 7 != Skv 9, an explicit [Sq, Skv] mask (mode 1)."""
        return {"query": _rn(rng, (1, 7, 4, 8)), "key": _rn(rng, (1, 9, 2, 8)), "value": _rn(rng, (1, 9, 2, 8)),
                "attenMaskOptional": (rng.random((7, 9)) < 0.3).astype(np.uint8)}

    def fa_arrays(rng):
        return {**attention_arrays(rng), "realShiftOptional": None, "dropMaskOptional": None,
                "paddingMaskOptional": None, "softmaxMaxOut": np.zeros((1, 4, 7, 8), F32),
                "softmaxSumOut": np.zeros((1, 4, 7, 8), F32), "softmaxOutOut": None,
                "attentionOutOut": np.zeros((1, 7, 4, 8), F32)}

    def fa_grad_arrays(rng):
        a = attention_arrays(rng)
        return {"query": a["query"], "keyIn": a["key"], "value": a["value"], "dy": _rn(rng, (1, 7, 4, 8)),
                "pseShiftOptional": None, "dropMaskOptional": None, "paddingMaskOptional": None,
                "attenMaskOptional": a["attenMaskOptional"], "softmaxMaxOptional": _rn(rng, (1, 4, 7, 8)),
                "softmaxSumOptional": rng.uniform(1.0, 3.0, (1, 4, 7, 8)).astype(F32), "softmaxInOptional": None,
                "attentionInOptional": _rn(rng, (1, 7, 4, 8)), "dqOut": np.zeros((1, 7, 4, 8), F32),
                "dkOut": np.zeros((1, 9, 2, 8), F32), "dvOut": np.zeros((1, 9, 2, 8), F32), "dpseOut": None}

    def fa_attributes():  # scaleValue, keepProb, preTokens, nextTokens, headNum, inputLayout, innerPrecise, sparseMode
        return [c_f64(0.35), c_f64(1.0), c_i64(2**31 - 1), c_i64(2**31 - 1), c_i64(4), ctypes.c_char_p(b"BSND"),
                c_i64(0), c_i64(1)]

    return [
        RebindCase("aclnnFlashAttentionScore",
                   ["query", "key", "value", "realShiftOptional", "dropMaskOptional", "paddingMaskOptional",
                    "attenMaskOptional"], ["softmaxMaxOut", "softmaxSumOut", "softmaxOutOut", "attentionOutOut"],
                   fa_arrays,
                   lambda p: [p["query"], p["key"], p["value"], p["realShiftOptional"], p["dropMaskOptional"],
                              p["paddingMaskOptional"], p["attenMaskOptional"], None, *fa_attributes(),
                              p["softmaxMaxOut"], p["softmaxSumOut"], p["softmaxOutOut"], p["attentionOutOut"]],
                   written=["softmaxMaxOut", "softmaxSumOut", "attentionOutOut"]),
        RebindCase("aclnnFlashAttentionScoreGrad",
                   ["query", "keyIn", "value", "dy", "pseShiftOptional", "dropMaskOptional", "paddingMaskOptional",
                    "attenMaskOptional", "softmaxMaxOptional", "softmaxSumOptional", "softmaxInOptional",
                    "attentionInOptional"], ["dqOut", "dkOut", "dvOut", "dpseOut"],
                   fa_grad_arrays,
                   lambda p: [p["query"], p["keyIn"], p["value"], p["dy"], p["pseShiftOptional"], p["dropMaskOptional"],
                              p["paddingMaskOptional"], p["attenMaskOptional"], p["softmaxMaxOptional"],
                              p["softmaxSumOptional"], p["softmaxInOptional"], p["attentionInOptional"], None,
                              *fa_attributes(), p["dqOut"], p["dkOut"], p["dvOut"], p["dpseOut"]],
                   written=["dqOut", "dkOut", "dvOut"]),
        RebindCase("aclnnSiluBackward", ["gradOutput", "self"], ["gradInput"],
                   lambda rng: {"gradOutput": _rn(rng, (3, 5)), "self": _rn(rng, (3, 5)),
                                "gradInput": np.zeros((3, 5), F32)},
                   lambda p: [p["gradOutput"], p["self"], p["gradInput"]]),
        RebindCase("aclnnBinaryCrossEntropyWithLogits", ["self", "target", "weightOptional", "posWeightOptional"],
                   ["out"],
                   lambda rng: {"self": _rn(rng, (4, 3)), "target": rng.random((4, 3)).astype(F32),
                                "weightOptional": np.abs(_rn(rng, 3)), "posWeightOptional": np.abs(_rn(rng, 3)),
                                "out": np.zeros((4, 3), F32)},
                   lambda p: [p["self"], p["target"], p["weightOptional"], p["posWeightOptional"], c_i64(0),
                              p["out"]]),
        RebindCase("aclnnBinaryCrossEntropyWithLogitsBackward",
                   ["gradOutput", "self", "target", "weightOptional", "posWeightOptional"], ["out"],
                   lambda rng: {"gradOutput": _rn(rng, (4, 3)), "self": _rn(rng, (4, 3)),
                                "target": rng.random((4, 3)).astype(F32), "weightOptional": np.abs(_rn(rng, 3)),
                                "posWeightOptional": np.abs(_rn(rng, 3)), "out": np.zeros((4, 3), F32)},
                   lambda p: [p["gradOutput"], p["self"], p["target"], p["weightOptional"], p["posWeightOptional"],
                              c_i64(0), p["out"]]),
        RebindCase("aclnnCrossEntropyLoss", ["input", "target", "weightOptional"],
                   ["lossOut", "logProbOut", "zlossOut", "lseForZlossOut"],
                   lambda rng: {"input": _rn(rng, (6, 9), 2.0), "target": rng.integers(0, 9, 6).astype(np.int64),
                                "weightOptional": rng.uniform(0.5, 1.5, 9).astype(F32), "lossOut": np.zeros(6, F32),
                                "logProbOut": np.zeros((6, 9), F32), "zlossOut": np.zeros(6, F32),
                                "lseForZlossOut": np.zeros(6, F32)},
                   lambda p: [p["input"], p["target"], p["weightOptional"], ctypes.c_char_p(b"none"), c_i64(-100),
                              c_f64(0.1), c_f64(1e-3), c_bool(True), p["lossOut"], p["logProbOut"], p["zlossOut"],
                              p["lseForZlossOut"]]),
        RebindCase("aclnnCrossEntropyLossGrad",
                   ["gradLoss", "logProb", "target", "weightOptional", "gradZlossOptional", "lseForZlossOptional"],
                   ["xGradOut"],
                   lambda rng: {"gradLoss": _rn(rng, 6), "logProb": -np.abs(_rn(rng, (6, 9))),
                                "target": rng.integers(0, 9, 6).astype(np.int64),
                                "weightOptional": rng.uniform(0.5, 1.5, 9).astype(F32), "gradZlossOptional": _rn(rng, 6),
                                "lseForZlossOptional": _rn(rng, 6), "xGradOut": np.zeros((6, 9), F32)},
                   lambda p: [p["gradLoss"], p["logProb"], p["target"], p["weightOptional"], p["gradZlossOptional"],
                              p["lseForZlossOptional"], ctypes.c_char_p(b"none"), c_i64(-100), c_f64(0.1), c_f64(1e-3),
                              p["xGradOut"]]),
        RebindCase("aclnnEmbeddingDenseBackward", ["grad", "indices"], ["out"],
                   lambda rng: {"grad": _rn(rng, (50, 8)), "indices": rng.integers(0, 20, 50).astype(np.int64),
                                "out": np.zeros((20, 8), F32)},
                   lambda p: [p["grad"], p["indices"], c_u64(20), c_u64(3), c_bool(True), p["out"]]),
        RebindCase("aclnnFusedLinearOnlineMaxSum", ["input", "weight", "target"],
                   ["logitsMaxLocalOut", "sumExpLogitsLocalOut", "predictedLogitsLocalOut", "targetMaskOut",
                    "maskedTargetOut", "vocabParallelLogitsOutOptional"],
                   lambda rng: {"input": _rn(rng, (bt, h), 0.5), "weight": _rn(rng, (v, h), 0.5),
                                "target": rng.integers(0, 2 * v, bt).astype(np.int64),
                                "logitsMaxLocalOut": np.zeros(bt, F32), "sumExpLogitsLocalOut": np.zeros(bt, F32),
                                "predictedLogitsLocalOut": np.zeros(bt, F32),
                                "targetMaskOut": np.zeros((bt + 7) // 8, np.uint8),
                                "maskedTargetOut": np.zeros(bt, np.int64),
                                "vocabParallelLogitsOutOptional": np.zeros((bt, v), F32)},
                   lambda p: [p["input"], p["weight"], p["target"], c_i64(v // 2), c_i64(v // 2 + v),
                              p["logitsMaxLocalOut"], p["sumExpLogitsLocalOut"], p["predictedLogitsLocalOut"],
                              p["targetMaskOut"], p["maskedTargetOut"], p["vocabParallelLogitsOutOptional"]]),
        RebindCase("aclnnFusedCrossEntropyLossWithMaxSum",
                   ["logitsMax", "sumExpLogits", "predictedLogits", "inputOptional", "weightOptional",
                    "vocabParallelLogitsOptional"], ["lossOut", "softMaxOutOptional"],
                   lambda rng: dict(zip(["logitsMax", "sumExpLogits", "predictedLogits", "vocabParallelLogitsOptional"],
                                        (lambda s: (s[3], s[4], -np.abs(_rn(rng, bt)), s[2]))(
                                            _flce_stats(rng, bt, h, v))),
                                    inputOptional=None, weightOptional=None, lossOut=np.zeros(bt, F32),
                                    softMaxOutOptional=np.zeros((bt, v), F32)),
                   lambda p: [p["logitsMax"], p["sumExpLogits"], p["predictedLogits"], c_f32(0.0), p["inputOptional"],
                              p["weightOptional"], p["vocabParallelLogitsOptional"], p["lossOut"],
                              p["softMaxOutOptional"]]),
        RebindCase("aclnnFusedLinearCrossEntropyLossGrad",
                   ["grad", "input", "weight", "targetMask", "maskedTarget", "logitsMaxOptional",
                    "sumExpLogitsOptional", "softmaxOptional"], ["inputGradOut", "weightGradOut"],
                   flce_grad_arrays,
                   lambda p: [p["grad"], p["input"], p["weight"], p["targetMask"], p["maskedTarget"], c_f32(0.0),
                              p["logitsMaxOptional"], p["sumExpLogitsOptional"], p["softmaxOptional"],
                              p["inputGradOut"], p["weightGradOut"]]),
        RebindCase("aclnnRmsNorm", ["x", "gamma"], ["yOut", "rstdOut"],
                   lambda rng: {"x": _rn(rng, (5, 16)), "gamma": _rn(rng, 16), "yOut": np.zeros((5, 16), F32),
                                "rstdOut": np.zeros((5, 1), F32)},
                   lambda p: [p["x"], p["gamma"], c_f64(1e-6), p["yOut"], p["rstdOut"]]),
        RebindCase("aclnnAddRmsNorm", ["x1", "x2", "gamma"], ["yOut", "rstdOut", "xOut"],
                   lambda rng: {"x1": _rn(rng, (5, 16)), "x2": _rn(rng, (5, 16)), "gamma": _rn(rng, 16),
                                "yOut": np.zeros((5, 16), F32), "rstdOut": np.zeros((5, 1), F32),
                                "xOut": np.zeros((5, 16), F32)},
                   lambda p: [p["x1"], p["x2"], p["gamma"], c_f64(1e-6), p["yOut"], p["rstdOut"], p["xOut"]]),
        RebindCase("aclnnRmsNormGrad", ["dy", "x", "rstd", "gamma"], ["dxOut", "dgammaOut"],
                   lambda rng: {"dy": _rn(rng, (5, 16)), "x": _rn(rng, (5, 16)),
                                "rstd": rng.uniform(0.5, 2.0, (5, 1)).astype(F32), "gamma": _rn(rng, 16),
                                "dxOut": np.zeros((5, 16), F32), "dgammaOut": np.zeros(16, F32)},
                   lambda p: [p["dy"], p["x"], p["rstd"], p["gamma"], p["dxOut"], p["dgammaOut"]]),
        RebindCase("aclnnSwiGlu", ["x"], ["out"],
                   lambda rng: {"x": _rn(rng, (4, 8)), "out": np.zeros((4, 4), F32)},
                   lambda p: [p["x"], c_i64(-1), p["out"]]),
        RebindCase("aclnnSwiGluGrad", ["yGrad", "x"], ["out"],
                   lambda rng: {"yGrad": _rn(rng, (4, 4)), "x": _rn(rng, (4, 8)), "out": np.zeros((4, 8), F32)},
                   lambda p: [p["yGrad"], p["x"], c_i64(-1), p["out"]]),
        RebindCase("aclnnRotaryPositionEmbedding", ["x", "cos", "sin"], ["out"],
                   lambda rng: {"x": _rn(rng, (1, 4, 2, 8)), "cos": _rn(rng, (1, 4, 1, 8)),
                                "sin": _rn(rng, (1, 4, 1, 8)), "out": np.zeros((1, 4, 2, 8), F32)},
                   lambda p: [p["x"], p["cos"], p["sin"], c_i64(0), p["out"]]),
        RebindCase("aclnnRotaryPositionEmbeddingGrad", ["dy", "cos", "sin", "xOptional"],
                   ["dxOut", "dcosOut", "dsinOut"],
                   lambda rng: {"dy": _rn(rng, (1, 4, 2, 8)), "cos": _rn(rng, (1, 4, 1, 8)),
                                "sin": _rn(rng, (1, 4, 1, 8)), "xOptional": _rn(rng, (1, 4, 2, 8)),
                                "dxOut": np.zeros((1, 4, 2, 8), F32), "dcosOut": np.zeros((1, 4, 1, 8), F32),
                                "dsinOut": np.zeros((1, 4, 1, 8), F32)},
                   lambda p: [p["dy"], p["cos"], p["sin"], p["xOptional"], c_i64(0), p["dxOut"], p["dcosOut"],
                              p["dsinOut"]]),
        RebindCase("aclnnApplyAdamWV2", ["varRef", "mRef", "vRef", "maxGradNormOptionalRef", "grad", "step"], [],
                   lambda rng: dict(zip(["varRef", "grad", "mRef", "vRef", "maxGradNormOptionalRef"],
                                        adamw_slot(rng, (6, 5))), step=np.array([4.0], F32)),
                   lambda p: [p["varRef"], p["mRef"], p["vRef"], p["maxGradNormOptionalRef"], p["grad"], p["step"],
                              c_f32(1e-2), c_f32(0.9), c_f32(0.999), c_f32(0.05), c_f32(1e-8), c_bool(True),
                              c_bool(False)],
                   written=["varRef", "mRef", "vRef", "maxGradNormOptionalRef"]),
        RebindCase("aclnnFusedAdamw",
                   ["paramsRef[]", "grads[]", "expAvgsRef[]", "expAvgSqsRef[]", "maxExpAvgSqsRef[]", "stateSteps[]",
                    "gradScaleOptional", "foundInfOptional"], [],
                   fused_adamw_arrays,
                   lambda p: [p["paramsRef[]"], p["grads[]"], p["expAvgsRef[]"], p["expAvgSqsRef[]"],
                              p["maxExpAvgSqsRef[]"], p["stateSteps[]"], p["gradScaleOptional"], p["foundInfOptional"],
                              c_f64(1e-2), c_f64(0.9), c_f64(0.999), c_f64(0.05), c_f64(1e-8), c_bool(True),
                              c_bool(False)],
                   written=["paramsRef[]", "expAvgsRef[]", "expAvgSqsRef[]", "maxExpAvgSqsRef[]"]),
    ]


class _Pointers:
    """aclTensors (and aclTensorLists) over named arrays; destroyed on exit (a list owns its tensors)."""

    def __init__(self):
        self.tensors = AclTensors()
        self.lists = []

    def new(self, arrays):
        p = {}
        for name, a in arrays.items():
            if isinstance(a, list):
                elements = [create_tensor(x) for x in a]
                p[name] = lib.aclCreateTensorList((vp * len(elements))(*elements), len(elements))
                self.lists.append(p[name])
            else:
                p[name] = self.tensors.new(a)
        return p

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.tensors.__exit__(*exc)
        for lst in self.lists:
            lib.aclDestroyTensorList(vp(lst))


def _set_address(ex, side, index, name, p, array):
    """Points tensor parameter `index` (counted on `side`) of executor ex, named `name`, at `array`'s data."""
    if name.endswith("[]"):
        fn = lib.aclSetDynamicInputTensorAddr if side == "input" else lib.aclSetDynamicOutputTensorAddr
        for i, a in enumerate(array):
            assert fn(vp(ex), index, i, vp(p[name]), vp(a.ctypes.data)) == ACLNN_SUCCESS, last_error()
    else:
        fn = lib.aclSetInputTensorAddr if side == "input" else lib.aclSetOutputTensorAddr
        assert fn(vp(ex), index, vp(p[name]), vp(array.ctypes.data)) == ACLNN_SUCCESS, last_error()


def _copy(arrays):
    return {k: None if a is None else ([x.copy() for x in a] if isinstance(a, list) else a.copy())
            for k, a in arrays.items()}


def _assert_same(got, want, what):
    if isinstance(want, list):
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g, w, err_msg=f"{what}[{i}]")
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("case", _rebind_cases(), ids=lambda c: c.op)
def test_every_operator_takes_new_addresses(case):
    """A repeatable executor launched over data A, then given B's address for every tensor parameter it
    took (inputs through aclSetInputTensorAddr, outputs through aclSetOutputTensorAddr, list elements
    through aclSetDynamic*TensorAddr), launches over B: B's results equal a single-use run on a copy of
    B, and A is left as the first launch wrote it."""
    rng = np.random.default_rng(11)
    a, b = case.arrays(rng), case.arrays(rng)
    fresh = _copy(b)
    with _Pointers() as ptrs:
        p = ptrs.new(a)
        ws, ex = _repeatable(case.op, case.args(p))
        assert launch(case.op, ex, ws) == ACLNN_SUCCESS, last_error()
        a_after_first = _copy(a)
        for side, names in (("input", case.inputs), ("output", case.outputs)):
            for index, name in enumerate(names):
                if a[name] is not None and not (side == "output" and name in case.inputs):
                    _set_address(ex, side, index, name, p, b[name])
        assert launch(case.op, ex, ws) == ACLNN_SUCCESS, last_error()
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
        for name in case.written:
            _assert_same(a[name], a_after_first[name], f"{name} of the first data after the rebound launch")
    with _Pointers() as ptrs:
        assert run_op(case.op, case.args(ptrs.new(fresh))) == (ACLNN_SUCCESS, "")
    for name in case.written:
        _assert_same(b[name], fresh[name], name)


def test_optimizer_new_addresses_are_validated_at_launch():
    """aclnnApplyAdamWV2 in place: mRef moved onto varRef's memory is refused at the launch (161002), and
    nothing is written; its own addresses back, the executor launches again."""
    case = next(c for c in _rebind_cases() if c.op == "aclnnApplyAdamWV2")
    a = case.arrays(np.random.default_rng(12))
    before = _copy(a)
    with _Pointers() as ptrs:
        p = ptrs.new(a)
        ws, ex = _repeatable(case.op, case.args(p))
        assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(p["mRef"]), vp(a["varRef"].ctypes.data)) == ACLNN_SUCCESS
        assert launch(case.op, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert "must not overlap" in last_error()
        for name in case.written:
            np.testing.assert_array_equal(a[name], before[name])
        assert lib.aclSetInputTensorAddr(vp(ex), 1, vp(p["mRef"]), vp(a["mRef"].ctypes.data)) == ACLNN_SUCCESS
        assert launch(case.op, ex, ws) == ACLNN_SUCCESS, last_error()
        assert not np.array_equal(a["varRef"], before["varRef"])
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


@pytest.mark.parametrize("op, output, index, onto", [("aclnnFlashAttentionScore", "attentionOutOut", 3, "query"),
                                                      ("aclnnFlashAttentionScoreGrad", "dkOut", 1, "dy")])
def test_flash_attention_new_addresses_are_validated_at_launch(op, output, index, onto):
    """An output moved onto an input's memory through aclSetOutputTensorAddr is refused at the launch
    (161002, naming both) and nothing is written; its own address back, the executor launches again."""
    case = next(c for c in _rebind_cases() if c.op == op)
    a = case.arrays(np.random.default_rng(13))
    before = _copy(a)
    with _Pointers() as ptrs:
        p = ptrs.new(a)
        ws, ex = _repeatable(case.op, case.args(p))
        assert lib.aclSetOutputTensorAddr(vp(ex), index, vp(p[output]), vp(a[onto].ctypes.data)) == ACLNN_SUCCESS
        assert launch(case.op, ex, ws) == ACLNN_ERR_PARAM_INVALID
        assert last_error().startswith(f"{op}: {output} overlaps {onto} ")
        for name in case.written + case.inputs:
            _assert_same(a[name], before[name], name)
        assert lib.aclSetOutputTensorAddr(vp(ex), index, vp(p[output]), vp(a[output].ctypes.data)) == ACLNN_SUCCESS
        assert launch(case.op, ex, ws) == ACLNN_SUCCESS, last_error()
        assert np.abs(a[output]).max() > 0
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS
