"""aclnnSiluBackward through the aclnn C ABI (ctypes): results over dtypes, strides and broadcasting
equal the Python API's; every specification section 0 / 1 error code with its message; executor rules."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import (ACL_CODES, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        get_workspace_size, last_error, launch, lib, run_op)
from reference.silu import BF16, F16, F32, assert_silu_close
from helpers import expect_status, normal

OP = "aclnnSiluBackward"
DTYPES = [F32, F16, BF16]
DTYPE_IDS = ["fp32", "fp16", "bf16"]


def _run(dy, x, out, **kw):
    with AclTensors() as t:
        return run_op(OP, [t.new(dy), t.new(x), t.new(out, **kw)])


# ---- results --------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_contiguous_matches_python_api(isa, dtype):
    dy, x = normal((7, 129), dtype, 1, 4.0), normal((7, 129), dtype, 2, 4.0)
    out = np.zeros((7, 129), dtype)
    assert _run(dy, x, out) == (ACLNN_SUCCESS, "")
    assert_silu_close(out, dy, x)
    np.testing.assert_array_equal(out.view(np.uint8), tg.silu_backward(dy, x).view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_strided_views(isa, dtype):
    dy = normal((40, 30), dtype, 3, 4.0)[::-1, ::2]
    x = normal((30, 40), dtype, 4, 4.0).T[::-1, 1::2]
    outbuf = np.zeros((30, 80), dtype)
    out = outbuf.T[::2, ::-2]
    assert out.shape == dy.shape == x.shape
    assert _run(dy, x, out) == (ACLNN_SUCCESS, "")
    assert_silu_close(out, dy, x)
    assert (outbuf.T[1::2] == 0).all()


def test_broadcast_and_mixed_dtypes(isa):
    dy = normal((5, 1, 3), BF16, 5, 4.0)
    x = normal((4, 1), F16, 6, 4.0)
    out = np.zeros((5, 4, 3), F32)
    assert _run(dy, x, out) == (ACLNN_SUCCESS, "")
    assert_silu_close(out, dy, x)


def test_in_place_and_empty_and_0d():
    dy, x = normal(100, F32, 7, 4.0), normal(100, F32, 8, 4.0)
    y = dy.copy()
    with AclTensors() as t:
        ty = t.new(y)
        assert run_op(OP, [ty, t.new(x), ty]) == (ACLNN_SUCCESS, "")
    assert_silu_close(y, dy, x)
    e = np.zeros((0, 3), F32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, [t.new(e), t.new(e), t.new(e.copy())])
        assert (status, ws) == (ACLNN_SUCCESS, 0)
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
    out = np.zeros((), F32)
    assert _run(np.array(1.0, F32), np.array(0.5, F32), out) == (ACLNN_SUCCESS, "")
    assert_silu_close(out, np.float32(1.0), np.float32(0.5))


def test_plain_formats_accepted():
    for fmt in (0, 1, 2, 27, 30, 16, 35, 47):  # NCHW, NHWC, ND, NDHWC, NCDHW, HWCN, NC, NCL
        dy, x, out = normal(8, F32, 9, 4.0), normal(8, F32, 10, 4.0), np.zeros(8, F32)
        assert _run(dy, x, out, fmt=fmt) == (ACLNN_SUCCESS, "")
        assert_silu_close(out, dy, x)


# ---- errors: 161001 ----------------------------------------------------------------------------

def test_null_tensors():
    f = np.zeros(4, F32)
    with AclTensors() as t:
        a, b, c = t.new(f), t.new(f.copy()), t.new(f.copy())
        for args, name in (([None, b, c], "gradOutput"), ([a, None, c], "self"), ([a, b, None], "gradInput")):
            status, msg = run_op(OP, args)
            assert status == ACLNN_ERR_PARAM_NULLPTR
            assert msg == f"aclnnSiluBackward: {name} is null"


def test_null_out_pointers():
    f = np.zeros(4, F32)
    fn = lib.aclnnSiluBackwardGetWorkspaceSize
    fn.restype = ctypes.c_int32
    with AclTensors() as t:
        a, b, c = (ctypes.c_void_p(t.new(v)) for v in (f, f.copy(), f.copy()))
        ws, ex = ctypes.c_uint64(0), ctypes.c_void_p(None)
        assert fn(a, b, c, None, ctypes.byref(ex)) == ACLNN_ERR_PARAM_NULLPTR
        assert last_error() == "aclnnSiluBackwardGetWorkspaceSize: workspaceSize out-pointer is null"
        assert fn(a, b, c, ctypes.byref(ws), None) == ACLNN_ERR_PARAM_NULLPTR
        assert last_error() == "aclnnSiluBackwardGetWorkspaceSize: executor out-pointer is null"
        # the null out-pointer is reported before a null tensor: nothing can be returned anyway
        assert fn(None, b, c, ctypes.byref(ws), None) == ACLNN_ERR_PARAM_NULLPTR


def test_null_data_with_elements():
    f = np.zeros(4, F32)
    with AclTensors() as t:
        a = t.new(f)
        shape = (ctypes.c_int64 * 1)(4)
        nodata = lib.aclCreateTensor(shape, 1, 0, (ctypes.c_int64 * 1)(1), 0, 2, shape, 1, None)
        try:
            status, msg = run_op(OP, [a, nodata, t.new(f.copy())])
        finally:
            lib.aclDestroyTensor(ctypes.c_void_p(nodata))
    # Phase 1 accepts a tensor without data (the vendor's samples set addresses later, issue 13); the
    # launch refuses it.
    assert status == ACLNN_ERR_PARAM_NULLPTR and msg == (
        "aclnnSiluBackward: self data is null (give it an address with aclSetInputTensorAddr / "
        "aclSetOutputTensorAddr before launching)")


def test_null_executor_at_launch():
    assert launch(OP, None, 0) == ACLNN_ERR_PARAM_NULLPTR
    assert last_error() == "aclnnSiluBackward: executor is null"


# ---- errors: 161002 ----------------------------------------------------------------------------

def test_dtype_errors():
    f = np.zeros(4, F32)
    for name, arr in (("int32", np.zeros(4, np.int32)), ("float64", np.zeros(4)), ("int8", np.zeros(4, np.int8)),
                      ("bool", np.zeros(4, bool)), ("uint16", np.zeros(4, np.uint16))):
        expect_status(_run(arr, f, f.copy()), ACLNN_ERR_PARAM_INVALID,
                      f"aclnnSiluBackward: gradOutput dtype must be one of {{float32, float16, bfloat16}}, got {name}")
        expect_status(_run(f, arr, f.copy()), ACLNN_ERR_PARAM_INVALID, "self dtype must be one of")
        expect_status(_run(f, f.copy(), arr), ACLNN_ERR_PARAM_INVALID, "gradInput dtype must be one of")
    expect_status(_run(f, f.copy(), np.zeros(4, F16)), ACLNN_ERR_PARAM_INVALID,
                  "aclnnSiluBackward: gradInput dtype float16 != self dtype float32 (gradOutput and self share a dtype, "
                  "so gradInput must too)")
    expect_status(_run(np.zeros(4, BF16), np.zeros(4, BF16), f), ACLNN_ERR_PARAM_INVALID,
                  "gradInput dtype float32 != self dtype bfloat16")
    expect_status(_run(np.zeros(4, F16), f, np.zeros(4, F16)), ACLNN_ERR_PARAM_INVALID,
                  "aclnnSiluBackward: gradOutput dtype float16 != self dtype float32, so gradInput must be float32, got float16")
    # an unknown aclDataType code: aclCreateTensor returns NULL (issue 13), so no operator ever sees one
    with AclTensors() as t, pytest.raises(ValueError, match="aclCreateTensor: dataType 99 is not a data type"):
        t.new(f, dtype_code=99)


def test_shape_and_rank_errors():
    f24, f25 = np.zeros((2, 4), F32), np.zeros((2, 5), F32)
    expect_status(_run(f24, f24.copy(), f25), ACLNN_ERR_PARAM_INVALID,
                  "aclnnSiluBackward: gradInput shape [2,5] != self shape [2,4]")
    expect_status(_run(np.zeros(3, F32), f24, f24.copy()), ACLNN_ERR_PARAM_INVALID,
                  "aclnnSiluBackward: gradOutput shape [3] and self shape [2,4] do not broadcast")
    expect_status(_run(np.zeros((1, 4), F32), f24, f25), ACLNN_ERR_PARAM_INVALID,
                  "gradInput shape [2,5] != broadcast of gradOutput [1,4] and self [2,4] = [2,4]")
    # gradInput may not be smaller than the broadcast shape
    expect_status(_run(np.zeros((3, 1), F32), np.zeros((1, 4), F32), np.zeros((1, 4), F32)), ACLNN_ERR_PARAM_INVALID,
                  "gradInput shape [1,4] != broadcast of gradOutput [3,1] and self [1,4] = [3,4]")
    r9 = np.zeros((1,) * 8 + (2,), F32)
    expect_status(_run(r9, r9.copy(), r9.copy()), ACLNN_ERR_PARAM_INVALID,
                  "rank must be at most 8, got 9 (shape [1,1,1,1,1,1,1,1,2])")
    r8 = np.zeros((1,) * 7 + (2,), F32)
    assert _run(r8, r8.copy(), r8.copy()) == (ACLNN_SUCCESS, "")


@pytest.mark.parametrize("fmt,name", [(3, "NC1HWC0"), (4, "FRACTAL_Z"), (29, "FRACTAL_NZ"), (32, "NDC1HWC0"),
                                      (33, "FRACTAL_Z_3D"), (12, "NC1HWC0_C04")])
@pytest.mark.parametrize("arg", [0, 1, 2])
def test_private_formats_rejected(fmt, name, arg):
    arrs = [np.zeros(8, F32) for _ in range(3)]
    with AclTensors() as t:
        ptrs = [t.new(a, fmt=fmt if i == arg else 2) for i, a in enumerate(arrs)]
        status, msg = run_op(OP, ptrs)
    argname = ["gradOutput", "self", "gradInput"][arg]
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg.startswith(f"aclnnSiluBackward: {argname} format {fmt} is a private packed format")


def test_views_outside_storage():
    a = np.zeros(16, F32)
    f = np.zeros(8, F32)
    cases = [
        (dict(storage=[7]), "self view (shape [8], strides [1], offset 0) reaches elements [0, 7] outside its storage of 7 elements"),
        (dict(offset=9, storage=[16]), "reaches elements [9, 16] outside its storage of 16 elements"),
        (dict(strides=[3], storage=[16]), "reaches elements [0, 21]"),
        (dict(strides=[-1], offset=3, storage=[16]), "reaches elements [-4, 3]"),
        (dict(storage=[2, 3]), "outside its storage of 6 elements (storage shape [2,3])"),
        (dict(storage=[0]), "outside its storage of 0 elements"),
    ]
    for kw, text in cases:
        with AclTensors() as t:
            status, msg = run_op(OP, [t.new(f), t.new(a[:8], **kw), t.new(f.copy())])
        assert status == ACLNN_ERR_PARAM_INVALID and text in msg, (kw, msg)
    # the output too: nothing outside the described storage may be written
    with AclTensors() as t:
        status, msg = run_op(OP, [t.new(f), t.new(f.copy()), t.new(a[:8], offset=12, storage=[16])])
    assert status == ACLNN_ERR_PARAM_INVALID and msg.startswith("aclnnSiluBackward: gradInput view")
    assert (a == 0).all()


def test_overlap_errors():
    f = np.zeros((3, 4), F32)
    buf = np.zeros(32, F32)
    with AclTensors() as t:
        status, msg = run_op(OP, [t.new(f), t.new(f.copy()), t.new(buf[:4], shape=[3, 4], strides=[0, 1], storage=[4])])
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg == ("aclnnSiluBackward: gradInput has overlapping elements (strides [0,1] for shape [3,4]); "
                   "outputs need distinct addresses")
    x = buf[:12].reshape(3, 4)
    expect_status(_run(f, x, buf[2:14].reshape(3, 4)), ACLNN_ERR_PARAM_INVALID,
                  "aclnnSiluBackward: gradInput overlaps self without being the same view (only exact in-place aliasing is allowed)")
    expect_status(_run(x, f, x[:, ::-1]), ACLNN_ERR_PARAM_INVALID,
                  "gradInput overlaps gradOutput without being the same view")


def test_validation_order_nullptr_before_dtype():
    i = np.zeros(4, np.int32)
    with AclTensors() as t:
        status, msg = run_op(OP, [t.new(i), None, t.new(np.zeros(4, F32))])
    assert status == ACLNN_ERR_PARAM_NULLPTR and msg == "aclnnSiluBackward: self is null"
    # dtype before shape
    expect_status(_run(np.zeros(3, np.int32), np.zeros(4, F32), np.zeros(5, F32)), ACLNN_ERR_PARAM_INVALID,
                  "gradOutput dtype must be one of")


# ---- executors ------------------------------------------------------------------------------------

def _executor(t, dy, x, out):
    status, ws, ex = get_workspace_size(OP, [t.new(dy), t.new(x), t.new(out)])
    assert status == ACLNN_SUCCESS and ws == 0 and ex
    return ex


def test_executor_is_single_use():
    dy, x, out = normal(50, F32, 11, 4.0), normal(50, F32, 12, 4.0), np.zeros(50, F32)
    with AclTensors() as t:
        ex = _executor(t, dy, x, out)
        assert launch(OP, ex, 0) == ACLNN_SUCCESS
        assert_silu_close(out, dy, x)
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "is not live (already launched, destroyed, or never created)" in last_error()


def test_destroyed_executor_cannot_launch():
    with AclTensors() as t:
        ex = _executor(t, np.zeros(4, F32), np.zeros(4, F32), np.zeros(4, F32))
        assert lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex)) == ACLNN_SUCCESS
        assert launch(OP, ex, 0) == ACLNN_ERR_PARAM_INVALID
        assert "is not live" in last_error()
        assert lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex)) == ACLNN_ERR_PARAM_INVALID
    assert launch(OP, 0xDEAD0, 0) == ACLNN_ERR_PARAM_INVALID


def test_workspace_rules():
    """SiLU backward asks for 0 bytes, so 'smaller than asked' cannot happen; a null workspace with a
    non-zero size is 161002 and does not consume the executor; a larger real workspace is fine."""
    dy, x, out = normal(20, F32, 13, 4.0), normal(20, F32, 14, 4.0), np.zeros(20, F32)
    with AclTensors() as t:
        ex = _executor(t, dy, x, out)
        fn = lib.aclnnSiluBackward
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
        assert fn(None, 128, ex, None) == ACLNN_ERR_PARAM_INVALID
        assert last_error() == "aclnnSiluBackward: workspace is null but workspaceSize is 128"
        assert (out == 0).all()
        assert launch(OP, ex, 256) == ACLNN_SUCCESS  # a workspace larger than needed
    assert_silu_close(out, dy, x)


def test_error_codes_match_python_messages():
    """The C ABI message and the Python exception message are the same text."""
    f24, f25 = np.zeros((2, 4), F32), np.zeros((2, 5), F32)
    status, msg = _run(f24, f24.copy(), f25)
    with pytest.raises(ValueError) as info:
        tg.silu_backward(f24, f24, out=f25)
    assert info.value.code == status == ACLNN_ERR_PARAM_INVALID
    assert str(info.value) == msg


def test_acl_codes_table_matches_semantics():
    assert ACL_CODES == {"float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7,
                         "uint32": 8, "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "bfloat16": 27}
