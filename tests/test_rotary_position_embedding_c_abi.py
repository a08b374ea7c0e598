"""aclnnRotaryPositionEmbedding and aclnnRotaryPositionEmbeddingGrad through the aclnn C ABI (ctypes):
results equal the Python API's (contiguous, strided, in place); xOptional null leaves dcosOut /
dsinOut untouched; the workspace of the gradient's second pass; the status code and message of
every bad input (161001 null, 161002 dtype / format / overlap, 561002 rank / shape / mode)."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, launch, run_op)
from reference.rotary_position_embedding import BF16, F16, F32
from helpers import expect_status, normal

FWD, GRAD = "aclnnRotaryPositionEmbedding", "aclnnRotaryPositionEmbeddingGrad"
TILING = 561002
DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]


def _fwd(x, cos, sin, mode, out, **kw):
    with AclTensors() as t:
        return run_op(FWD, [t.new(x), t.new(cos), t.new(sin), ctypes.c_int64(mode), t.new(out, **kw)])


def _grad(dy, cos, sin, x, mode, dx, dcos, dsin):
    with AclTensors() as t:
        return run_op(GRAD, [t.new(dy), t.new(cos), t.new(sin), t.new(x), ctypes.c_int64(mode), t.new(dx), t.new(dcos),
                             t.new(dsin)])


def _same(a, b):
    return np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


# ---- results ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_results_equal_python_api(isa, dtype, mode):
    x, dy = normal((2, 3, 4, 36), dtype, 1), normal((2, 3, 4, 36), dtype, 2)
    cos, sin = normal((1, 3, 1, 36), dtype, 3), normal((1, 3, 1, 36), dtype, 4)
    out = np.zeros_like(x)
    assert _fwd(x, cos, sin, mode, out) == (ACLNN_SUCCESS, "")
    assert _same(out, tg.rotary_position_embedding(x, cos, sin, mode))
    dx, dcos, dsin = np.zeros_like(x), np.zeros_like(cos), np.zeros_like(cos)
    assert _grad(dy, cos, sin, x, mode, dx, dcos, dsin) == (ACLNN_SUCCESS, "")
    for got, want in zip((dx, dcos, dsin), tg.rotary_position_embedding_grad(dy, cos, sin, x, mode)):
        assert _same(got, want)


def test_strided_and_in_place(isa):
    x = normal((2, 4, 3, 32), F32, 5).transpose(0, 2, 1, 3)[:, ::-1]
    cos, sin = normal((1, 1, 4, 64), F32, 6)[..., ::2], normal((1, 1, 4, 64), F32, 7)[..., ::2]
    out = np.zeros((2, 3, 4, 64), F32)[..., 1::2]
    assert _fwd(x, cos, sin, 3, out) == (ACLNN_SUCCESS, "")
    assert _same(out, tg.rotary_position_embedding(np.ascontiguousarray(x), np.ascontiguousarray(cos),
                                                   np.ascontiguousarray(sin), 3))
    y = np.ascontiguousarray(x)
    want = tg.rotary_position_embedding(y, cos, sin, 1)
    with AclTensors() as t:
        ty = t.new(y)
        assert run_op(FWD, [ty, t.new(cos), t.new(sin), ctypes.c_int64(1), ty]) == (ACLNN_SUCCESS, "")
    assert _same(y, want)


def test_grad_without_x_leaves_dcos_dsin_untouched():
    dy, cos, sin = normal((2, 3, 4, 8), F32, 8), normal((1, 3, 1, 8), F32, 9), normal((1, 3, 1, 8), F32, 10)
    dx, dcos, dsin = np.zeros_like(dy), np.full(cos.shape, 5, F32), np.full(cos.shape, 6, F32)
    assert _grad(dy, cos, sin, None, 0, dx, dcos, dsin) == (ACLNN_SUCCESS, "")
    assert _same(dx, tg.rotary_position_embedding_grad(dy, cos, sin, None, 0)[0])
    assert (dcos == 5).all() and (dsin == 6).all()


def test_grad_second_pass_workspace():
    x, dy = normal((4, 32, 4, 64), F32, 11), normal((4, 32, 4, 64), F32, 12)
    cos, sin = normal((1, 1, 1, 64), F32, 13), normal((1, 1, 1, 64), F32, 14)
    dx, dcos, dsin = np.zeros_like(x), np.zeros_like(cos), np.zeros_like(cos)
    want = tg.rotary_position_embedding_grad(dy, cos, sin, x, 0)
    with AclTensors() as t:
        args = [t.new(dy), t.new(cos), t.new(sin), t.new(x), ctypes.c_int64(0), t.new(dx), t.new(dcos), t.new(dsin)]
        status, ws, ex = get_workspace_size(GRAD, args)
        assert status == ACLNN_SUCCESS and ws > 0  # one fp32 partial row per block
        assert launch(GRAD, ex, ws - 1) == ACLNN_ERR_PARAM_INVALID
        status, ws, ex = get_workspace_size(GRAD, args)
        assert launch(GRAD, ex, ws) == ACLNN_SUCCESS
    for got, w in zip((dx, dcos, dsin), want):
        assert _same(got, w)
    # forward and dx-only gradient: no workspace
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(FWD, [t.new(x), t.new(cos), t.new(sin), ctypes.c_int64(0), t.new(dx)])
        assert (status, ws) == (ACLNN_SUCCESS, 0) and launch(FWD, ex, 0) == ACLNN_SUCCESS


def test_empty():
    e = np.zeros((2, 0, 3, 8), F32)
    c = np.zeros((1, 1, 1, 8), F32)
    assert _fwd(e, c, c.copy(), 0, e.copy()) == (ACLNN_SUCCESS, "")
    dcos = np.full((1, 1, 1, 8), 3, F32)
    dsin = dcos.copy()
    assert _grad(e, c, c.copy(), e.copy(), 0, e.copy(), dcos, dsin) == (ACLNN_SUCCESS, "")
    assert (dcos == 0).all() and (dsin == 0).all()


# ---- errors: 161001 --------------------------------------------------------------------------

def test_null_tensors():
    x, c = np.zeros((1, 2, 1, 4), F32), np.zeros((1, 2, 1, 4), F32)
    with AclTensors() as t:
        tx, tc, ts, to = t.new(x), t.new(c), t.new(c.copy()), t.new(x.copy())
        m = ctypes.c_int64(0)
        for args, name in (([None, tc, ts, m, to], "x"), ([tx, None, ts, m, to], "cos"),
                           ([tx, tc, None, m, to], "sin"), ([tx, tc, ts, m, None], "out")):
            assert run_op(FWD, args) == (ACLNN_ERR_PARAM_NULLPTR, f"{FWD}: {name} is null")
        dx, dc, dsn = t.new(x.copy()), t.new(c.copy()), t.new(c.copy())
        full = [tx, tc, ts, tx, m, dx, dc, dsn]
        for k, name in ((0, "dy"), (1, "cos"), (2, "sin"), (5, "dxOut"), (6, "dcosOut"), (7, "dsinOut")):
            args = list(full)
            args[k] = None
            assert run_op(GRAD, args) == (ACLNN_ERR_PARAM_NULLPTR, f"{GRAD}: {name} is null")
        # dcosOut / dsinOut are required even without xOptional (the vendor's document)
        args = list(full)
        args[3], args[6] = None, None
        assert run_op(GRAD, args) == (ACLNN_ERR_PARAM_NULLPTR, f"{GRAD}: dcosOut is null")


# ---- errors: 161002 --------------------------------------------------------------------------

def test_dtype_errors():
    f = np.zeros((1, 2, 1, 4), F32)
    for name, arr in (("int32", f.astype(np.int32)), ("float64", f.astype(np.float64)), ("int8", f.astype(np.int8))):
        expect_status(_fwd(arr, f, f.copy(), 0, f.copy()), ACLNN_ERR_PARAM_INVALID,
                      f"{FWD}: x dtype must be one of {{float32, float16, bfloat16}}, got {name}")
        expect_status(_grad(arr, f, f.copy(), None, 0, f.copy(), f.copy(), f.copy()), ACLNN_ERR_PARAM_INVALID,
                      f"{GRAD}: dy dtype must be one of {{float32, float16, bfloat16}}, got {name}")
    h = f.astype(F16)
    expect_status(_fwd(f, h, h.copy(), 0, f.copy()), ACLNN_ERR_PARAM_INVALID,
                  f"{FWD}: cos dtype float16 != x dtype float32")
    expect_status(_fwd(f, f.copy(), h, 0, f.copy()), ACLNN_ERR_PARAM_INVALID,
                  f"{FWD}: sin dtype float16 != x dtype float32")
    expect_status(_fwd(f, f.copy(), f.copy(), 0, h), ACLNN_ERR_PARAM_INVALID,
                  f"{FWD}: out dtype float16 != x dtype float32")
    for k, name in ((3, "xOptional"), (5, "dxOut"), (6, "dcosOut"), (7, "dsinOut")):
        args = [f, f.copy(), f.copy(), f.copy(), 0, f.copy(), f.copy(), f.copy()]
        args[k] = f.astype(BF16)
        expect_status(_grad(*args), ACLNN_ERR_PARAM_INVALID, f"{GRAD}: {name} dtype bfloat16 != dy dtype float32")
    # dtype before shape: a bad dtype with a bad rank reports the dtype
    expect_status(_fwd(f[0], h, h, 0, f), ACLNN_ERR_PARAM_INVALID, "cos dtype float16 != x dtype float32")


@pytest.mark.parametrize("arg", [0, 1, 2, 3])
def test_private_formats_rejected(arg):
    arrs = [np.zeros((1, 2, 1, 4), F32) for _ in range(4)]
    with AclTensors() as t:
        ptrs = [t.new(a, fmt=29 if i == arg else 2) for i, a in enumerate(arrs)]
        status, msg = run_op(FWD, ptrs[:3] + [ctypes.c_int64(0)] + ptrs[3:])
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg.startswith(f"{FWD}: {['x', 'cos', 'sin', 'out'][arg]} format 29 is a private packed format")


def test_overlap_errors():
    x, c = np.zeros((1, 2, 3, 4), F32), np.zeros((1, 2, 1, 4), F32)
    expect_status(_fwd(x, c, c.copy(), 0, x[:, ::-1]), ACLNN_ERR_PARAM_INVALID,
                  f"{FWD}: out overlaps x without being the same view")
    buf = np.zeros((1, 2, 1, 4), F32)
    expect_status(_grad(x, c, c.copy(), x.copy(), 0, x.copy(), buf, buf), ACLNN_ERR_PARAM_INVALID,
                  f"{GRAD}: dcosOut overlaps dsinOut")
    xx = x.copy()
    expect_status(_grad(x, c, c.copy(), xx, 0, xx, c.copy(), c.copy()), ACLNN_ERR_PARAM_INVALID,
                  f"{GRAD}: dxOut overlaps xOptional")
    cc = c.copy()
    expect_status(_grad(x, cc, c.copy(), x.copy(), 0, x.copy(), cc, c.copy()), ACLNN_ERR_PARAM_INVALID,
                  f"{GRAD}: dcosOut overlaps cos")


# ---- errors: 561002 --------------------------------------------------------------------------

def test_shape_rank_and_mode_errors():
    x, c = np.zeros((2, 3, 4, 8), F32), np.zeros((1, 3, 1, 8), F32)
    o = lambda: x.copy()  # noqa: E731
    cases = [
        ((x[0], c, c.copy(), 0, o()[0]), f"{FWD}: x must be 4-D, got shape [3,4,8]"),
        ((x, c[0], c.copy(), 0, o()), f"{FWD}: cos must be 4-D, got shape [3,1,8]"),
        ((x, c, c.copy(), 0, o()[None]), f"{FWD}: out must be 4-D, got shape [1,2,3,4,8]"),
        ((x, c, c.copy(), 5, o()), f"{FWD}: mode must be 0 (half), 1 (interleave), 2 (quarter) or 3 (interleave-half), got 5"),
        ((x, c, c.copy(), -1, o()), "got -1"),
        ((x, c, c[:, :1].copy(), 0, o()), f"{FWD}: sin shape [1,1,1,8] != cos shape [1,3,1,8]"),
        ((x, c[..., :4], c[..., :4].copy(), 0, o()), f"{FWD}: cos last dim must equal x's 8, got 4"),
        ((x[..., :6], c[..., :6], c[..., :6].copy(), 2, o()[..., :6]),
         f"{FWD}: x last dim must be a multiple of 4 in mode 2 (quarter), got 6"),
        ((x[..., :5], c[..., :5], c[..., :5].copy(), 1, o()[..., :5]),
         f"{FWD}: x last dim must be a multiple of 2 in mode 1 (interleave), got 5"),
        ((x, np.zeros((2, 3, 2, 8), F32), np.zeros((2, 3, 2, 8), F32), 0, o()), f"{FWD}: cos dim 2 must be 1 or x's 4"),
        ((x, c, c.copy(), 0, o()[:, :2]), f"{FWD}: out shape [2,2,4,8] != x shape [2,3,4,8]"),
    ]
    for args, text in cases:
        expect_status(_fwd(*args), TILING, text)
    big = np.zeros((1, 1, 1, 1040), F32)
    expect_status(_fwd(big, big[..., :1040], big.copy(), 0, big.copy()), TILING,
                  f"{FWD}: x last dim must be at most 1024, got 1040")
    dy = x
    expect_status(_grad(dy, c, c.copy(), x[..., :4], 0, o(), c.copy(), c.copy()), TILING,
                  f"{GRAD}: xOptional shape [2,3,4,4] != dy shape [2,3,4,8]")
    expect_status(_grad(dy, c, c.copy(), None, 0, o(), c[:, :1].copy(), c.copy()), TILING,
                  f"{GRAD}: dcosOut shape [1,1,1,8] != cos shape [1,3,1,8]")
    expect_status(_grad(dy, c, c.copy(), None, 7, o(), c.copy(), c.copy()), TILING, f"{GRAD}: mode must be 0 (half)")
    expect_status(_grad(dy, c, c.copy(), None, 0, o()[..., :4], c.copy(), c.copy()), TILING,
                  f"{GRAD}: dxOut shape [2,3,4,4] != dy shape [2,3,4,8]")
    expect_status(_grad(dy, np.zeros((1, 3, 1, 6), F32), np.zeros((1, 3, 1, 6), F32), None, 0, o(), c.copy(), c.copy()),
                  TILING, f"{GRAD}: cos last dim must equal dy's 8, got 6")
