"""aclnnEmbeddingDenseBackward through the aclnn C ABI (ctypes): results equal the Python API's and the
float64 reference (reference/embedding.py) for every padding form; null tensors and out-pointers
(161001), validation and launch-time index errors with their messages (161002), executor and
workspace rules, empty input."""

import ctypes

import numpy as np

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, last_error, launch, lib, run_op)
from reference.embedding import BF16
from reference.embedding import assert_embedding_close as check
from test_embedding_dense_backward import OP, rand_grad


def c_args(t, grad, idx, out, num_weights, padding=2**64 - 1, scale=False):
    return [t.new(grad), t.new(idx), ctypes.c_uint64(num_weights), ctypes.c_uint64(padding % 2**64),
            ctypes.c_bool(scale), t.new(out)]


def test_c_abi_matches_python():
    rng = np.random.default_rng(10)
    v, d = 17, 20
    idx = rng.integers(0, v, size=(5, 8)).astype(np.int32)
    grad = rand_grad(rng, (5, 8, d), BF16)
    for padding in (3, -1, 2**63, 17):
        for scale in (False, True):
            out = np.full((v, d), np.nan, np.float32)
            with AclTensors() as t:
                status, ws, ex = get_workspace_size(OP, c_args(t, grad, idx, out, v, padding, scale))
                assert status == ACLNN_SUCCESS and ws > 0
                assert launch(OP, ex, ws) == ACLNN_SUCCESS
            expect = tg.embedding_dense_backward(grad, idx, v, padding if padding < 2**63 else -1, scale,
                                                 out=np.empty((v, d), np.float32))
            np.testing.assert_array_equal(out, expect)
            check(out, grad, idx, v, padding if 0 <= padding < v else -1, scale)


def test_c_abi_errors():
    g = np.ones((4, 3), np.float32)
    i = np.arange(4)
    o = np.zeros((5, 3), np.float32)
    with AclTensors() as t:
        # Null tensors and out-pointers: 161001.
        for pos, name in ((0, "grad"), (1, "indices"), (5, "out")):
            args = c_args(t, g, i, o, 5)
            args[pos] = None
            status, msg = run_op(OP, args)
            assert status == ACLNN_ERR_PARAM_NULLPTR and name in msg
        fn = lib.aclnnEmbeddingDenseBackwardGetWorkspaceSize
        fn.restype = ctypes.c_int32
        ex = ctypes.c_void_p()
        ws = ctypes.c_uint64()
        a = c_args(t, g, i, o, 5)
        assert fn(ctypes.c_void_p(a[0]), ctypes.c_void_p(a[1]), a[2], a[3], a[4], ctypes.c_void_p(a[5]), None,
                  ctypes.byref(ex)) == ACLNN_ERR_PARAM_NULLPTR
        assert fn(ctypes.c_void_p(a[0]), ctypes.c_void_p(a[1]), a[2], a[3], a[4], ctypes.c_void_p(a[5]),
                  ctypes.byref(ws), None) == ACLNN_ERR_PARAM_NULLPTR
        # 161002 at phase 1, same messages as Python.
        bad = [
            (c_args(t, g.astype(np.float64), i, o, 5), "grad dtype must be one of"),
            (c_args(t, g, i.astype(np.uint32), o, 5), "indices dtype must be one of"),
            (c_args(t, g, i, o.astype(np.int64), 5), "out dtype must be one of"),
            (c_args(t, np.ones([1] * 8 + [4], np.float32), np.arange(1), np.zeros((5, 4), np.float32), 5),
             "grad rank must be in [2, 8], got 9"),
            (c_args(t, g, i[:3], o, 5), "leading dims whose product equals numel(indices) = 3"),
            (c_args(t, g, i, o, 6), "out shape [5,3] != [numWeights, grad last dim] = [6,3]"),
            (c_args(t, g, i, o, 2**64 - 1), "out shape [5,3] != [numWeights, grad last dim] = [18446744073709551615,3]"),
            ([t.new(g), t.new(i, fmt=3), ctypes.c_uint64(5), ctypes.c_uint64(0), ctypes.c_bool(False), t.new(o)],
             "indices"),
        ]
        for args, msg in bad:
            status, text = run_op(OP, args)
            assert status == ACLNN_ERR_PARAM_INVALID and msg in text and text.startswith(OP), text
        # An index out of range: 161002 at launch, with position and value.
        status, msg = run_op(OP, c_args(t, g, np.array([0, 1, 9, 2]), o, 5))
        assert status == ACLNN_ERR_PARAM_INVALID
        assert msg == f"{OP}: indices[2] must be in [0, numWeights) = [0, 5), got 9"
        status, msg = run_op(OP, c_args(t, g, np.array([0, 1, -4, 2]), o, 5, 0))
        assert status == ACLNN_ERR_PARAM_INVALID and msg.endswith("got -4")
        # Second launch of one executor; workspace too small; null workspace with a size.
        status, ws, ex = get_workspace_size(OP, c_args(t, g, i, o, 5))
        assert status == ACLNN_SUCCESS and ws > 0
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
        assert launch(OP, ex, ws) == ACLNN_ERR_PARAM_INVALID and "not live" in last_error()
        status, ws, ex = get_workspace_size(OP, c_args(t, g, i, o, 5))
        assert launch(OP, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID and "smaller than" in last_error()
        assert lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex)) == 0
        status, ws, ex = get_workspace_size(OP, c_args(t, g, i, o, 5))
        fn = getattr(lib, OP)
        fn.restype = ctypes.c_int32
        assert fn(None, ctypes.c_uint64(ws), ctypes.c_void_p(ex), None) == ACLNN_ERR_PARAM_INVALID
        assert lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex)) == 0
        # Empty: workspace 0, out zeroed.
        o2 = np.full((5, 3), 3.0, np.float32)
        status, ws, ex = get_workspace_size(OP, c_args(t, np.zeros((0, 3), np.float32), np.zeros(0, np.int64), o2, 5))
        assert status == ACLNN_SUCCESS and ws == 0
        assert launch(OP, ex, 0) == ACLNN_SUCCESS and np.all(o2 == 0)


def test_c_abi_truncates_float_indices_and_names_bad_ones():
    """The vendor's contract (spec section 4): float indices truncate toward zero through the C ABI
    (the Python entry refuses them, as torch does); NaN, inf and out-of-range floats are launch errors."""
    rng = np.random.default_rng(12)
    v, d = 40, 19
    for idt in (np.float32, np.float16, np.float64):
        idx = np.concatenate([rng.uniform(-0.99, v - 0.01, size=60), [-0.9, -0.0, 0.5, v - 0.5]]).astype(idt)
        idx = idx[np.trunc(idx.astype(np.float64)) < v]  # fp16 rounding may reach v
        grad = rand_grad(rng, (idx.size, d), np.float32)
        out = np.full((v, d), np.nan, np.float32)
        with AclTensors() as t:
            status, ws, ex = get_workspace_size(OP, c_args(t, grad, idx, out, v, 1, True))
            assert status == ACLNN_SUCCESS
            assert launch(OP, ex, ws) == ACLNN_SUCCESS
        check(out, grad, idx, v, 1, True)
    g = np.ones((4, 3), np.float32)
    for bad, text in ((np.nan, "nan"), (np.inf, "inf"), (-1.0, "-1"), (5.0, "5"), (-1e30, "-1e+30")):
        with AclTensors() as t:
            status, ws, ex = get_workspace_size(OP, c_args(t, g, np.array([0, 1, bad, 1]), np.zeros((5, 3), np.float32), 5))
            assert status == ACLNN_SUCCESS
            assert launch(OP, ex, ws) == ACLNN_ERR_PARAM_INVALID
            assert last_error().endswith(f"indices[2] must be in [0, numWeights) = [0, 5), got {text}")
