"""The aclrt* CPU runtime and aclTensor handling behind acl/acl.h, through ctypes: init/finalize,
device ids, streams, 64-byte aligned tracked memory, aclrtMemcpy range checks, aclCreateTensor
argument checks, and the specification section 0 rules every operator shares (views outside storage,
private formats, single-use executors, workspace, out-pointers)."""

import ctypes
import threading

import numpy as np
import pytest

from acl_ctypes import (ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors,
                        assert_null_out_pointers_refused, create_tensor, get_workspace_size, last_error, launch, lib,
                        run_op)

ACL_SUCCESS = 0
ACL_ERROR_INVALID_PARAM = 100000
ACL_ERROR_BAD_ALLOC = 200000
ACL_ERROR_RT_PARAM_INVALID = 107000
ACL_ERROR_RT_INVALID_DEVICEID = 107001
H2D, D2H, D2D, H2H, DEFAULT = 1, 2, 3, 0, 4

vp = ctypes.c_void_p
lib.aclInit.argtypes = [ctypes.c_char_p]
lib.aclrtSetDevice.argtypes = [ctypes.c_int32]
lib.aclrtResetDevice.argtypes = [ctypes.c_int32]
lib.aclrtGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int32)]
lib.aclrtGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_uint32)]
lib.aclrtCreateStream.argtypes = [ctypes.POINTER(vp)]
lib.aclrtDestroyStream.argtypes = [vp]
lib.aclrtSynchronizeStream.argtypes = [vp]
lib.aclrtMalloc.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t, ctypes.c_int]
lib.aclrtMallocHost.argtypes = [ctypes.POINTER(vp), ctypes.c_size_t]
lib.aclrtFree.argtypes = [vp]
lib.aclrtFreeHost.argtypes = [vp]
lib.aclrtMemcpy.argtypes = [vp, ctypes.c_size_t, vp, ctypes.c_size_t, ctypes.c_int]
lib.aclrtMemset.argtypes = [vp, ctypes.c_size_t, ctypes.c_int32, ctypes.c_size_t]
lib.aclrtGetSysParamOpt.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
lib.aclrtSetSysParamOpt.argtypes = [ctypes.c_int, ctypes.c_int64]


def malloc(size):
    p = vp()
    assert lib.aclrtMalloc(ctypes.byref(p), size, 0) == ACL_SUCCESS, last_error()
    return p.value


# ---- init, devices, streams ------------------------------------------------------------------------

def test_init_finalize():
    assert lib.aclInit(None) == ACL_SUCCESS
    assert lib.aclFinalize() == ACL_SUCCESS
    assert lib.aclInit(b"/nonexistent/acl.json") == ACL_SUCCESS  # no config is needed on the CPU
    assert lib.aclFinalize() == ACL_SUCCESS


def test_devices():
    assert lib.aclrtSetDevice(0) == ACL_SUCCESS
    assert lib.aclrtSetDevice(1) == ACL_ERROR_RT_INVALID_DEVICEID
    assert last_error() == "aclrtSetDevice: deviceId must be 0 (the CPU), got 1"
    assert lib.aclrtResetDevice(2) == ACL_ERROR_RT_INVALID_DEVICEID
    assert last_error() == "aclrtResetDevice: deviceId must be 0 (the CPU), got 2"
    dev, count = ctypes.c_int32(-1), ctypes.c_uint32(0)
    assert lib.aclrtGetDevice(ctypes.byref(dev)) == ACL_SUCCESS and dev.value == 0
    assert lib.aclrtGetDeviceCount(ctypes.byref(count)) == ACL_SUCCESS and count.value == 1
    assert lib.aclrtGetDeviceCount(None) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtResetDevice(0) == ACL_SUCCESS


def test_streams():
    streams = []
    for _ in range(4):
        s = vp()
        assert lib.aclrtCreateStream(ctypes.byref(s)) == ACL_SUCCESS and s.value
        streams.append(s.value)
    assert len(set(streams)) == 4
    assert lib.aclrtCreateStream(None) == ACL_ERROR_INVALID_PARAM
    for s in streams:
        assert lib.aclrtSynchronizeStream(vp(s)) == ACL_SUCCESS
        assert lib.aclrtDestroyStream(vp(s)) == ACL_SUCCESS
    assert lib.aclrtDestroyStream(vp(streams[0])) == ACL_ERROR_RT_PARAM_INVALID
    assert last_error() == "aclrtDestroyStream: not a live stream"
    assert lib.aclrtSynchronizeDevice() == ACL_SUCCESS


def test_launch_on_a_stream_is_synchronous():
    dy, x, out = np.ones(1000, np.float32), np.linspace(-5, 5, 1000, dtype=np.float32), np.zeros(1000, np.float32)
    s = vp()
    assert lib.aclrtCreateStream(ctypes.byref(s)) == ACL_SUCCESS
    fn = lib.aclnnSiluBackward
    fn.restype = ctypes.c_int32
    fn.argtypes = [vp, ctypes.c_uint64, vp, vp]
    with AclTensors() as t:
        status, ws, ex = get_workspace_size("aclnnSiluBackward", [t.new(dy), t.new(x), t.new(out)])
        assert status == ACLNN_SUCCESS
        assert fn(None, ws, ex, s) == ACLNN_SUCCESS
        assert (out != 0).sum() > 990  # written by the time the launch returned
    assert lib.aclrtSynchronizeStream(s) == ACL_SUCCESS
    assert lib.aclrtDestroyStream(s) == ACL_SUCCESS


def test_sys_param_deterministic():
    v = ctypes.c_int64(-1)
    assert lib.aclrtGetSysParamOpt(0, ctypes.byref(v)) == ACL_SUCCESS and v.value == 1
    assert lib.aclrtSetSysParamOpt(0, 0) == ACL_SUCCESS
    assert lib.aclrtGetSysParamOpt(5, ctypes.byref(v)) == ACL_ERROR_INVALID_PARAM
    assert last_error() == "aclrtGetSysParamOpt: unknown option 5"


# ---- memory ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 63, 64, 65, 1000, 4096, 1 << 20, (1 << 20) + 3])
def test_malloc_is_64_byte_aligned_and_usable(size):
    p = malloc(size)
    assert p % 64 == 0
    buf = (ctypes.c_uint8 * size).from_address(p)
    ctypes.memset(p, 0x5A, size)
    assert buf[0] == 0x5A and buf[size - 1] == 0x5A
    assert lib.aclrtFree(vp(p)) == ACL_SUCCESS


def test_malloc_errors_and_double_free():
    p = vp()
    assert lib.aclrtMalloc(ctypes.byref(p), 0, 0) == ACL_ERROR_INVALID_PARAM
    assert last_error() == "aclrtMalloc: size must be > 0"
    assert lib.aclrtMalloc(None, 8, 0) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtMalloc(ctypes.byref(p), 1 << 60, 0) == ACL_ERROR_BAD_ALLOC
    assert "too large" in last_error()
    q = malloc(32)
    assert lib.aclrtFree(vp(q)) == ACL_SUCCESS
    assert lib.aclrtFree(vp(q)) == ACL_ERROR_INVALID_PARAM
    assert last_error() == "aclrtFree: pointer was not returned by aclrtMalloc (or was already freed)"
    host = np.zeros(16, np.uint8)
    assert lib.aclrtFree(vp(host.ctypes.data)) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtFree(None) == ACL_ERROR_INVALID_PARAM
    h = vp()
    assert lib.aclrtMallocHost(ctypes.byref(h), 100) == ACL_SUCCESS and h.value % 64 == 0
    assert lib.aclrtFreeHost(h) == ACL_SUCCESS


def test_memcpy_every_kind():
    """Each kind in its own direction (host = NumPy memory, device = aclrtMalloc), and DEFAULT in all."""
    src = np.arange(100, dtype=np.float32)
    back = np.zeros(100, np.float32)
    host_copy = np.zeros(100, np.float32)
    dev_a, dev_b = malloc(400), malloc(400)
    s, b, h = vp(src.ctypes.data), vp(back.ctypes.data), vp(host_copy.ctypes.data)
    try:
        for h2d, d2d, d2h, h2h in ((H2D, D2D, D2H, H2H), (DEFAULT, DEFAULT, DEFAULT, DEFAULT)):
            back[:] = 0
            host_copy[:] = 0
            assert lib.aclrtMemcpy(vp(dev_a), 400, s, 400, h2d) == ACL_SUCCESS
            assert lib.aclrtMemcpy(vp(dev_b), 400, vp(dev_a), 400, d2d) == ACL_SUCCESS
            assert lib.aclrtMemcpy(b, 400, vp(dev_b), 400, d2h) == ACL_SUCCESS
            np.testing.assert_array_equal(back, src)
            assert lib.aclrtMemcpy(h, 400, s, 400, h2h) == ACL_SUCCESS
            np.testing.assert_array_equal(host_copy, src)
            assert lib.aclrtMemcpy(vp(dev_a + 396), 4, s, 4, h2d) == ACL_SUCCESS  # last element
    finally:
        lib.aclrtFree(vp(dev_a))
        lib.aclrtFree(vp(dev_b))


def test_memcpy_device_pointer_must_be_inside_an_allocation():
    """Hostile-testing defect: aclrtMemcpy((char*)p + 64, 1, src, 1, HOST_TO_DEVICE) on a 64-byte
    allocation returned 0 and wrote one byte past it (ASan heap-buffer-overflow). A device-side
    pointer must lie inside a live allocation, the whole range with it."""
    dev = malloc(64)
    src = np.full(8, 0xAB, np.uint8)
    dst = np.zeros(8, np.uint8)
    try:
        assert lib.aclrtMemcpy(vp(dev + 64), 1, vp(src.ctypes.data), 1, H2D) == ACL_ERROR_INVALID_PARAM
        assert "dst" in (msg := last_error()) and "not inside any live aclrtMalloc allocation" in msg, msg
        assert lib.aclrtMemcpy(vp(dst.ctypes.data), 1, vp(dev + 64), 1, D2H) == ACL_ERROR_INVALID_PARAM
        assert "src" in last_error()
        assert lib.aclrtMemcpy(vp(dev + 64), 1, vp(dev), 1, D2D) == ACL_ERROR_INVALID_PARAM
        assert lib.aclrtMemset(vp(dev + 64), 1, 0, 1) == ACL_ERROR_INVALID_PARAM
        assert "aclrtMemset: devPtr" in last_error()
        # host memory is never a device pointer
        assert lib.aclrtMemcpy(vp(dst.ctypes.data), 8, vp(src.ctypes.data), 8, H2D) == ACL_ERROR_INVALID_PARAM
        assert (dst == 0).all()
        # a freed allocation is no longer device memory
        q = malloc(16)
        assert lib.aclrtFree(vp(q)) == ACL_SUCCESS
        assert lib.aclrtMemcpy(vp(q), 1, vp(src.ctypes.data), 1, H2D) == ACL_ERROR_INVALID_PARAM
        # the last byte inside is fine
        assert lib.aclrtMemcpy(vp(dev + 63), 1, vp(src.ctypes.data), 1, H2D) == ACL_SUCCESS
        assert ctypes.c_uint8.from_address(dev + 63).value == 0xAB
    finally:
        lib.aclrtFree(vp(dev))


def test_memcpy_refuses_overruns():
    dev = malloc(64)
    host = np.zeros(64, np.uint8)
    big = np.zeros(256, np.uint8)
    h = host.ctypes.data
    try:
        assert lib.aclrtMemcpy(vp(h), 8, vp(big.ctypes.data), 12, H2H) == ACL_ERROR_INVALID_PARAM
        assert last_error() == "aclrtMemcpy: count 12 > destMax 8"
        # destination range past the allocation (even with a destMax that claims it fits)
        assert lib.aclrtMemcpy(vp(dev + 60), 8, vp(h), 8, H2D) == ACL_ERROR_INVALID_PARAM
        assert last_error() == ("aclrtMemcpy: dst range of 8 bytes at offset 60 runs past its aclrtMalloc "
                                "allocation of 64 bytes")
        assert lib.aclrtMemcpy(vp(dev), 256, vp(big.ctypes.data), 65, H2D) == ACL_ERROR_INVALID_PARAM
        assert "dst range of 65 bytes at offset 0 runs past" in last_error()
        # source range past the allocation
        assert lib.aclrtMemcpy(vp(big.ctypes.data), 256, vp(dev + 32), 33, D2H) == ACL_ERROR_INVALID_PARAM
        assert last_error() == ("aclrtMemcpy: src range of 33 bytes at offset 32 runs past its aclrtMalloc "
                                "allocation of 64 bytes")
        assert lib.aclrtMemcpy(None, 8, vp(h), 8, H2H) == ACL_ERROR_INVALID_PARAM
        assert lib.aclrtMemcpy(vp(h), 8, vp(h), 8, 7) == ACL_ERROR_INVALID_PARAM
        assert last_error() == "aclrtMemcpy: unknown kind 7"
        assert lib.aclrtMemset(vp(dev), 100, 0, 65) == ACL_ERROR_INVALID_PARAM
        assert "aclrtMemset: devPtr range of 65 bytes at offset 0 runs past" in last_error()
        assert lib.aclrtMemset(vp(dev), 4, 0, 5) == ACL_ERROR_INVALID_PARAM
        assert last_error() == "aclrtMemset: count 5 > maxCount 4"
        assert lib.aclrtMemset(vp(dev), 64, 7, 64) == ACL_SUCCESS
        assert lib.aclrtMemcpy(vp(h), 64, vp(dev), 64, D2H) == ACL_SUCCESS
        assert (host == 7).all()
        assert (big == 0).all()  # nothing was written by the refused copies
    finally:
        lib.aclrtFree(vp(dev))


# ---- aclCreateTensor ---------------------------------------------------------------------------------

def _create(shape, strides, offset=0, storage=None, data=None, dims_num=None, strides_null=False, storage_null=False):
    arr = lambda v: (ctypes.c_int64 * max(len(v), 1))(*v)  # noqa: E731
    storage = storage if storage is not None else [int(np.prod(shape or [1]))]
    buf = np.zeros(64, np.float32) if data is None else data
    return lib.aclCreateTensor(None if shape is None else arr(shape), len(shape or []) if dims_num is None else dims_num,
                               0, None if strides_null else arr(strides), offset, 2,
                               None if storage_null else arr(storage), len(storage), vp(buf.ctypes.data))


@pytest.mark.parametrize("shape, strides", [([2, 3], [3, 1]), ([4, 0, 5, 2], [10, 10, 2, 1]), ([7], [1]), ([], [])])
def test_create_tensor_null_strides_are_contiguous(shape, strides):
    """strides == NULL (the vendor's samples pass it for contiguous tensors): row-major over the view
    dims, a 0-sized dimension counting as 1; aclGetViewStrides returns them."""
    t = _create(shape, None, strides_null=True)
    assert t is not None, last_error()
    try:
        got, n = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_uint64()
        lib.aclGetViewStrides.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)),
                                          ctypes.POINTER(ctypes.c_uint64)]
        assert lib.aclGetViewStrides(vp(t), ctypes.byref(got), ctypes.byref(n)) == ACLNN_SUCCESS
        assert [got[i] for i in range(n.value)] == strides
        ctypes.CDLL(None).free(got)
    finally:
        lib.aclDestroyTensor(vp(t))


def test_create_tensor_null_strides_overflowing():
    assert _create([2, 1 << 40, 1 << 40], None, strides_null=True, storage=[1]) is None
    assert last_error() == ("aclCreateTensor: the contiguous strides of view dims [2,1099511627776,1099511627776] "
                            "overflow int64")


def test_create_tensor_bad_arguments():
    assert _create(None, [1], dims_num=2) is None
    assert last_error() == "aclCreateTensor: viewDims is null but viewDimsNum is 2"
    assert _create([2, 3], [3, 1], storage_null=True) is None
    assert last_error() == "aclCreateTensor: storageDims is null but storageDimsNum is 1"
    assert _create([2, -3], [3, 1], storage=[6]) is None
    assert last_error() == "aclCreateTensor: negative view dimension in [2,-3]"
    assert _create([2, 3], [3, 1], storage=[-6]) is None
    assert last_error() == "aclCreateTensor: negative storage dimension"
    assert _create([2, 3], [3, 1], offset=-1) is None
    assert last_error() == "aclCreateTensor: offset must be >= 0, got -1"
    assert _create([2, 3], [3, 1], dims_num=100) is None
    assert last_error() == "aclCreateTensor: viewDimsNum 100 is not a plausible rank"


@pytest.mark.parametrize("code", [-1, 5, 13, 14, 15, 18, 26, 28, 99, 1 << 20])
def test_create_tensor_unknown_dtype_is_null(code):
    """Hostile-testing defect: aclCreateTensor with data type 99 returned a tensor; the header promises NULL."""
    buf = np.zeros(4, np.float32)
    dims = (ctypes.c_int64 * 1)(4)
    strides = (ctypes.c_int64 * 1)(1)
    t = lib.aclCreateTensor(dims, 1, code, strides, 0, 2, dims, 1, vp(buf.ctypes.data))
    assert t is None
    assert last_error() == f"aclCreateTensor: dataType {code} is not a data type tilegrad knows"


@pytest.mark.parametrize("code, name", [(16, "complex64"), (17, "complex128")])
def test_complex_inputs_are_named_in_messages(code, name):
    """Hostile-testing defect: COMPLEX64/COMPLEX128 inputs were reported as dtype "undefined"."""
    a = np.zeros(8, np.float32)
    storage = np.zeros(8, np.complex128)  # big enough for either complex type
    with AclTensors() as t:
        x = create_tensor(storage, dtype_code=code)
        try:
            status, msg = run_op(OP, [t.new(a), x, t.new(a.copy())])
        finally:
            lib.aclDestroyTensor(vp(x))
    assert status == ACLNN_ERR_PARAM_INVALID
    assert name in msg and "undefined" not in msg, msg


def test_destroy_null_executor_is_161001():
    """Hostile-testing defect: aclDestroyAclOpExecutor(nullptr) returned 161002 instead of 161001."""
    assert lib.aclDestroyAclOpExecutor(None) == ACLNN_ERR_PARAM_NULLPTR
    assert last_error() == "aclDestroyAclOpExecutor: executor is null"
    assert lib.aclDestroyAclOpExecutor(vp(0x12345)) == ACLNN_ERR_PARAM_INVALID


def test_recent_error_message_is_cleared_when_read():
    """Hostile-testing defect: aclGetRecentErrMsg kept reporting an old error after later successful
    calls. As the vendor's, reading returns the thread's latest message and clears it."""
    assert lib.aclrtSetDevice(5) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtSetDevice(0) == ACL_SUCCESS
    assert last_error() == "aclrtSetDevice: deviceId must be 0 (the CPU), got 5"
    assert last_error() == ""
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        assert run_op(OP, [t.new(a), t.new(a.copy()), t.new(a.copy())]) == (ACLNN_SUCCESS, "")
    assert last_error() == ""


def test_create_tensor_getters():
    t = _create([2, 3], [1, 2], offset=5, storage=[11])
    assert t
    try:
        dims, n = ctypes.POINTER(ctypes.c_int64)(), ctypes.c_uint64()
        for getter, expect in ((lib.aclGetViewShape, [2, 3]), (lib.aclGetViewStrides, [1, 2]),
                               (lib.aclGetStorageShape, [11])):
            getter.argtypes = [vp, ctypes.POINTER(ctypes.POINTER(ctypes.c_int64)), ctypes.POINTER(ctypes.c_uint64)]
            assert getter(vp(t), ctypes.byref(dims), ctypes.byref(n)) == ACLNN_SUCCESS
            assert [dims[i] for i in range(n.value)] == expect
            ctypes.CDLL(None).free(dims)
        off, fmt, dt = ctypes.c_int64(), ctypes.c_int(), ctypes.c_int()
        assert lib.aclGetViewOffset(vp(t), ctypes.byref(off)) == ACLNN_SUCCESS and off.value == 5
        assert lib.aclGetFormat(vp(t), ctypes.byref(fmt)) == ACLNN_SUCCESS and fmt.value == 2
        assert lib.aclGetDataType(vp(t), ctypes.byref(dt)) == ACLNN_SUCCESS and dt.value == 0
        assert lib.aclGetDataType(vp(t), None) == ACLNN_ERR_PARAM_NULLPTR
        assert last_error() == "aclGetDataType: dataType is null"
        assert lib.aclGetViewOffset(None, ctypes.byref(off)) == ACLNN_ERR_PARAM_NULLPTR
    finally:
        lib.aclDestroyTensor(vp(t))


# ---- specification section 0 rules through an operator --------------------------------------------------

OP = "aclnnSiluBackward"


def test_view_outside_storage_is_161002():
    a = np.zeros(8, np.float32)
    with AclTensors() as t:
        status, msg = run_op(OP, [t.new(a), t.new(a.copy(), storage=[5]), t.new(a.copy())])
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg == ("aclnnSiluBackward: self view (shape [8], strides [1], offset 0) reaches elements [0, 7] "
                   "outside its storage of 5 elements (storage shape [5])")


def test_huge_strides_and_dims_are_rejected_not_overflowed():
    """Views whose extent does not fit int64 must be refused, not wrap around into 'inside storage'."""
    a = np.zeros(8, np.float32)
    big = 1 << 62
    with AclTensors() as t:
        for kw in (dict(shape=[3], strides=[big], storage=[8]), dict(shape=[2, 2], strides=[big, big], storage=[8]),
                   dict(shape=[big, 4], strides=[4, 1], storage=[8]), dict(shape=[8], strides=[1], storage=[big, 8])):
            status, msg = run_op(OP, [t.new(a), t.new(a.copy(), **kw), t.new(a.copy())])
            assert status == ACLNN_ERR_PARAM_INVALID, (kw, status, msg)
            assert "overflows 64-bit indexing" in msg or "outside its storage" in msg, msg


@pytest.mark.parametrize("fmt", [3, 4, 12, 29, 32, 33])
def test_private_formats_are_161002(fmt):
    a = np.zeros(8, np.float32)
    with AclTensors() as t:
        status, msg = run_op(OP, [t.new(a, fmt=fmt), t.new(a.copy()), t.new(a.copy())])
    assert status == ACLNN_ERR_PARAM_INVALID
    assert msg.startswith(f"aclnnSiluBackward: gradOutput format {fmt} is a private packed format")


def test_executor_reuse_is_161002():
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, [t.new(a), t.new(a.copy()), t.new(a.copy())])
        assert status == ACLNN_SUCCESS
        assert launch(OP, ex, ws) == ACLNN_SUCCESS
        assert launch(OP, ex, ws) == ACLNN_ERR_PARAM_INVALID
    assert "is not live (already launched, destroyed, or never created)" in last_error()


def test_null_workspace_with_size_is_161002():
    a = np.ones(8, np.float32)
    fn = lib.aclnnSiluBackward
    fn.restype = ctypes.c_int32
    fn.argtypes = [vp, ctypes.c_uint64, vp, vp]
    with AclTensors() as t:
        status, ws, ex = get_workspace_size(OP, [t.new(a), t.new(a.copy()), t.new(a.copy())])
        assert fn(None, 64, ex, None) == ACLNN_ERR_PARAM_INVALID
        assert last_error() == "aclnnSiluBackward: workspace is null but workspaceSize is 64"
        assert lib.aclDestroyAclOpExecutor(vp(ex)) == ACLNN_SUCCESS


def test_null_out_pointers_are_161001():
    a = np.ones(8, np.float32)
    with AclTensors() as t:
        assert_null_out_pointers_refused("aclnnSiluBackward", [t.new(a), t.new(a.copy()), t.new(a.copy())])


def test_error_messages_are_thread_local():
    assert lib.aclrtSetDevice(3) == ACL_ERROR_RT_INVALID_DEVICEID
    seen = {}

    def other():
        seen["before"] = last_error()
        lib.aclrtSetDevice(4)
        seen["after"] = last_error()

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert seen["before"] == "" and seen["after"].endswith("got 4")
    assert last_error().endswith("got 3")


def test_create_tensor_helper_roundtrip():
    """Sanity of the ctypes helper used by every C ABI test: a negative-stride view is described
    with the offset of its first element inside the covered storage."""
    a = np.arange(10, dtype=np.float32)[::-3]
    t = create_tensor(a)
    off = ctypes.c_int64()
    assert lib.aclGetViewOffset(vp(t), ctypes.byref(off)) == ACLNN_SUCCESS and off.value == 9
    lib.aclDestroyTensor(vp(t))


# ---- the wider runtime: contexts, events, async copies, memory info, argument objects ----------------

pp = ctypes.POINTER(vp)
for _name, _args in {
    "aclrtCreateContext": [pp, ctypes.c_int32], "aclrtDestroyContext": [vp], "aclrtSetCurrentContext": [vp],
    "aclrtGetCurrentContext": [pp], "aclrtCreateEvent": [pp], "aclrtCreateEventWithFlag": [pp, ctypes.c_uint32],
    "aclrtDestroyEvent": [vp], "aclrtRecordEvent": [vp, vp], "aclrtResetEvent": [vp, vp],
    "aclrtSynchronizeEvent": [vp], "aclrtQueryEventStatus": [vp, ctypes.POINTER(ctypes.c_int)],
    "aclrtEventElapsedTime": [ctypes.POINTER(ctypes.c_float), vp, vp], "aclrtStreamWaitEvent": [vp, vp],
    "aclrtMemcpyAsync": [vp, ctypes.c_size_t, vp, ctypes.c_size_t, ctypes.c_int, vp],
    "aclrtMemsetAsync": [vp, ctypes.c_size_t, ctypes.c_int32, ctypes.c_size_t, vp],
    "aclrtGetMemInfo": [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)],
    "aclrtGetRunMode": [ctypes.POINTER(ctypes.c_int)], "aclrtSynchronizeDevice": [],
    "aclCreateIntArray": [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64],
    "aclCreateFloatArray": [ctypes.POINTER(ctypes.c_float), ctypes.c_uint64],
    "aclCreateBoolArray": [ctypes.POINTER(ctypes.c_bool), ctypes.c_uint64],
    "aclCreateScalar": [vp, ctypes.c_int], "aclCreateTensorList": [pp, ctypes.c_uint64],
    "aclGetIntArraySize": [vp, ctypes.POINTER(ctypes.c_uint64)],
    "aclGetTensorListSize": [vp, ctypes.POINTER(ctypes.c_uint64)],
    "aclDestroyIntArray": [vp], "aclDestroyFloatArray": [vp], "aclDestroyBoolArray": [vp],
    "aclDestroyScalar": [vp], "aclDestroyTensorList": [vp],
    "aclFloatToFloat16": [ctypes.c_float], "aclFloat16ToFloat": [ctypes.c_uint16], "aclDataTypeSize": [ctypes.c_int],
}.items():
    getattr(lib, _name).argtypes = _args
for _name in ("aclCreateIntArray", "aclCreateFloatArray", "aclCreateBoolArray", "aclCreateScalar",
              "aclCreateTensorList"):
    getattr(lib, _name).restype = vp
lib.aclrtGetSocName.restype = ctypes.c_char_p
lib.aclFloatToFloat16.restype = ctypes.c_uint16
lib.aclFloat16ToFloat.restype = ctypes.c_float
lib.aclDataTypeSize.restype = ctypes.c_size_t


def test_contexts():
    default = vp()
    assert lib.aclrtGetCurrentContext(ctypes.byref(default)) == ACL_SUCCESS and default.value
    ctx = vp()
    assert lib.aclrtCreateContext(ctypes.byref(ctx), 1) == ACL_ERROR_RT_INVALID_DEVICEID
    assert lib.aclrtCreateContext(ctypes.byref(ctx), 0) == ACL_SUCCESS
    cur = vp()
    assert lib.aclrtGetCurrentContext(ctypes.byref(cur)) == ACL_SUCCESS and cur.value == ctx.value  # now current
    assert lib.aclrtSetCurrentContext(default) == ACL_SUCCESS
    assert lib.aclrtSetCurrentContext(ctx) == ACL_SUCCESS
    assert lib.aclrtDestroyContext(ctx) == ACL_SUCCESS
    assert lib.aclrtGetCurrentContext(ctypes.byref(cur)) == ACL_SUCCESS and cur.value == default.value
    assert lib.aclrtDestroyContext(ctx) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtSetCurrentContext(ctx) == ACL_ERROR_INVALID_PARAM
    assert "is not a live context" in last_error()
    assert lib.aclrtGetCurrentContext(None) == ACL_ERROR_INVALID_PARAM


def test_events():
    start, end = vp(), vp()
    assert lib.aclrtCreateEvent(ctypes.byref(start)) == ACL_SUCCESS
    assert lib.aclrtCreateEventWithFlag(ctypes.byref(end), 8) == ACL_SUCCESS
    status, ms = ctypes.c_int(-1), ctypes.c_float(-1)
    assert lib.aclrtQueryEventStatus(end, ctypes.byref(status)) == ACL_SUCCESS and status.value == 0  # not recorded
    assert lib.aclrtEventElapsedTime(ctypes.byref(ms), start, end) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtRecordEvent(start, None) == ACL_SUCCESS
    assert lib.aclrtRecordEvent(end, None) == ACL_SUCCESS
    assert lib.aclrtSynchronizeEvent(end) == ACL_SUCCESS
    assert lib.aclrtStreamWaitEvent(None, end) == ACL_SUCCESS
    assert lib.aclrtQueryEventStatus(end, ctypes.byref(status)) == ACL_SUCCESS and status.value == 1
    assert lib.aclrtEventElapsedTime(ctypes.byref(ms), start, end) == ACL_SUCCESS and 0 <= ms.value < 60_000
    assert lib.aclrtResetEvent(end, None) == ACL_SUCCESS
    assert lib.aclrtQueryEventStatus(end, ctypes.byref(status)) == ACL_SUCCESS and status.value == 0
    assert lib.aclrtDestroyEvent(start) == ACL_SUCCESS and lib.aclrtDestroyEvent(end) == ACL_SUCCESS
    assert lib.aclrtDestroyEvent(end) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtRecordEvent(vp(0x4321), None) == ACL_ERROR_INVALID_PARAM
    assert "is not a live event" in last_error()


def test_async_copies_are_done_on_return_and_check_the_stream():
    stream = vp()
    assert lib.aclrtCreateStream(ctypes.byref(stream)) == ACL_SUCCESS
    dev = malloc(64)
    src = np.arange(16, dtype=np.float32)
    back = np.zeros(16, np.float32)
    try:
        assert lib.aclrtMemsetAsync(vp(dev), 64, 0x7F, 64, stream) == ACL_SUCCESS
        assert ctypes.c_uint8.from_address(dev + 63).value == 0x7F
        assert lib.aclrtMemcpyAsync(vp(dev), 64, vp(src.ctypes.data), 64, H2D, stream) == ACL_SUCCESS
        assert lib.aclrtMemcpyAsync(vp(back.ctypes.data), 64, vp(dev), 64, D2H, None) == ACL_SUCCESS
        np.testing.assert_array_equal(back, src)
        assert lib.aclrtMemcpyAsync(vp(dev + 64), 1, vp(src.ctypes.data), 1, H2D, stream) == ACL_ERROR_INVALID_PARAM
        assert lib.aclrtMemsetAsync(vp(dev), 64, 0, 65, stream) == ACL_ERROR_INVALID_PARAM
        assert lib.aclrtDestroyStream(stream) == ACL_SUCCESS
        assert lib.aclrtMemcpyAsync(vp(dev), 64, vp(src.ctypes.data), 64, H2D, stream) == ACL_ERROR_RT_PARAM_INVALID
        assert "is not a live stream" in last_error()
        assert lib.aclrtSynchronizeStream(stream) == ACL_ERROR_RT_PARAM_INVALID
        assert lib.aclrtSynchronizeDevice() == ACL_SUCCESS
    finally:
        lib.aclrtFree(vp(dev))


def test_memory_info_run_mode_soc():
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    for attr in range(10):
        assert lib.aclrtGetMemInfo(attr, ctypes.byref(free), ctypes.byref(total)) == ACL_SUCCESS
        assert 0 < free.value <= total.value
    assert lib.aclrtGetMemInfo(10, ctypes.byref(free), ctypes.byref(total)) == ACL_ERROR_INVALID_PARAM
    assert lib.aclrtGetMemInfo(0, None, ctypes.byref(total)) == ACL_ERROR_INVALID_PARAM
    mode = ctypes.c_int(-1)
    assert lib.aclrtGetRunMode(ctypes.byref(mode)) == ACL_SUCCESS and mode.value == 1  # ACL_HOST
    assert lib.aclrtGetSocName() == b"tilegrad-cpu"


def test_float16_conversions_and_type_sizes():
    values = np.array([0.0, -0.0, 1.0, 0.1, 65504.0, 65520.0, 1e-8, 2.0 ** -24, 3 * 2.0 ** -26, -7.25, np.inf],
                      np.float32)
    with np.errstate(over="ignore"):  # 65520 -> inf is the point
        want = np.array(values).astype(np.float16).view(np.uint16)
    for v, w in zip(values, want):
        assert lib.aclFloatToFloat16(float(v)) == int(w), v
    for bits in (0x0001, 0x03FF, 0x3C00, 0x7BFF, 0xFC00, 0x8000):
        assert lib.aclFloat16ToFloat(bits) == float(np.array(bits, np.uint16).view(np.float16)), bits
    assert np.isnan(lib.aclFloat16ToFloat(0x7E00))
    sizes = {0: 4, 1: 2, 2: 1, 3: 4, 4: 1, 6: 2, 7: 2, 8: 4, 9: 8, 10: 8, 11: 8, 12: 1, 16: 8, 17: 16, 27: 2}
    for code, size in sizes.items():
        assert lib.aclDataTypeSize(code) == size, code
    assert lib.aclDataTypeSize(99) == 0 and lib.aclDataTypeSize(-1) == 0


def test_argument_objects():
    n = ctypes.c_uint64()
    ints = (ctypes.c_int64 * 3)(4, -5, 6)
    a = lib.aclCreateIntArray(ints, 3)
    assert a and lib.aclGetIntArraySize(vp(a), ctypes.byref(n)) == ACLNN_SUCCESS and n.value == 3
    assert lib.aclDestroyIntArray(vp(a)) == ACLNN_SUCCESS
    assert lib.aclCreateIntArray(None, 2) is None
    assert last_error() == "aclCreateIntArray: value is null but size is 2"
    empty = lib.aclCreateIntArray(None, 0)
    assert empty and lib.aclDestroyIntArray(vp(empty)) == ACLNN_SUCCESS
    f = lib.aclCreateFloatArray((ctypes.c_float * 2)(1.5, 2.5), 2)
    b = lib.aclCreateBoolArray((ctypes.c_bool * 1)(True), 1)
    assert f and b
    assert lib.aclDestroyFloatArray(vp(f)) == ACLNN_SUCCESS and lib.aclDestroyBoolArray(vp(b)) == ACLNN_SUCCESS
    value = ctypes.c_double(2.5)
    s = lib.aclCreateScalar(ctypes.byref(value), 11)
    assert s and lib.aclDestroyScalar(vp(s)) == ACLNN_SUCCESS
    assert lib.aclCreateScalar(ctypes.byref(value), 99) is None
    assert last_error() == "aclCreateScalar: dataType 99 is not a data type tilegrad knows"
    assert lib.aclCreateScalar(None, 0) is None
    t1 = create_tensor(np.zeros(4, np.float32))
    t2 = create_tensor(np.zeros(3, np.int64))
    tl = lib.aclCreateTensorList((vp * 2)(t1, t2), 2)
    assert tl and lib.aclGetTensorListSize(vp(tl), ctypes.byref(n)) == ACLNN_SUCCESS and n.value == 2
    assert lib.aclDestroyTensorList(vp(tl)) == ACLNN_SUCCESS  # destroys t1 and t2 (ASan would see a double free)
    assert lib.aclGetIntArraySize(None, ctypes.byref(n)) == ACLNN_ERR_PARAM_NULLPTR
