"""Calls tilegrad's aclnn-compatible C ABI from Python through ctypes (for C ABI tests).

    with AclTensors() as t:
        dy, x, dx = t.new(dy_arr), t.new(x_arr), t.new(out_arr)
        status, msg = run_op("aclnnSiluBackward", [dy, x, dx])

Tensors are created with aclCreateTensor over the arrays' own memory (any strides, including
negative ones: the storage is the span the view covers), so results land in the NumPy arrays.
"""

import ctypes
from typing import List, Optional, Sequence, Tuple

import numpy as np

import tilegrad

lib = ctypes.CDLL(tilegrad.get_library())

ACL_CODES = {
    "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7,
    "uint32": 8, "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "bfloat16": 27,
}
ACLNN_SUCCESS = 0
ACLNN_ERR_PARAM_NULLPTR = 161001
ACLNN_ERR_PARAM_INVALID = 161002

c_int64_p = ctypes.POINTER(ctypes.c_int64)

lib.aclCreateTensor.restype = ctypes.c_void_p
lib.aclCreateTensor.argtypes = [c_int64_p, ctypes.c_uint64, ctypes.c_int, c_int64_p, ctypes.c_int64, ctypes.c_int,
                                c_int64_p, ctypes.c_uint64, ctypes.c_void_p]
lib.aclDestroyTensor.argtypes = [ctypes.c_void_p]
lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
lib.aclDestroyAclOpExecutor.argtypes = [ctypes.c_void_p]


lib.aclCreateIntArray.restype = ctypes.c_void_p
lib.aclCreateIntArray.argtypes = [c_int64_p, ctypes.c_uint64]
lib.aclCreateBoolArray.restype = ctypes.c_void_p
lib.aclCreateBoolArray.argtypes = [ctypes.POINTER(ctypes.c_bool), ctypes.c_uint64]


def int_array(values: Sequence[int]) -> ctypes.c_void_p:
    """An aclIntArray holding `values` (a copy; never destroyed: a few bytes per test call)."""
    return ctypes.c_void_p(lib.aclCreateIntArray(_int64_array(values), len(values)))


def bool_array(values: Sequence[bool]) -> ctypes.c_void_p:
    """An aclBoolArray holding `values` (a copy; never destroyed: a few bytes per test call)."""
    return ctypes.c_void_p(lib.aclCreateBoolArray((ctypes.c_bool * max(len(values), 1))(*values), len(values)))


def last_error() -> str:
    return lib.aclGetRecentErrMsg().decode()


def _int64_array(values: Sequence[int]):
    arr = (ctypes.c_int64 * max(len(values), 1))(*values)
    return arr


def create_tensor(arr: np.ndarray, dtype_code: Optional[int] = None, fmt: int = 2,
                  shape: Optional[Sequence[int]] = None, strides: Optional[Sequence[int]] = None,
                  offset: Optional[int] = None, storage: Optional[Sequence[int]] = None) -> int:
    """aclCreateTensor over arr's memory. Overrides let tests describe inconsistent views."""
    itemsize = arr.itemsize
    el_strides = [s // itemsize for s in arr.strides]
    lo = sum(min(0, (d - 1) * s) for d, s in zip(arr.shape, el_strides)) if arr.size else 0
    hi = sum(max(0, (d - 1) * s) for d, s in zip(arr.shape, el_strides)) if arr.size else 0
    base = arr.ctypes.data + lo * itemsize
    shape = list(arr.shape) if shape is None else list(shape)
    strides = el_strides if strides is None else list(strides)
    offset = -lo if offset is None else offset
    storage = [hi - lo + 1] if storage is None else list(storage)
    code = ACL_CODES[arr.dtype.name] if dtype_code is None else dtype_code
    ptr = lib.aclCreateTensor(_int64_array(shape), len(shape), code, _int64_array(strides), offset, fmt,
                              _int64_array(storage), len(storage), ctypes.c_void_p(base))
    if not ptr:
        raise ValueError(last_error())
    return ptr


class AclTensors:
    """Creates tensors and destroys them all on exit (keeps the arrays alive meanwhile)."""

    def __init__(self):
        self._ptrs: List[int] = []
        self._keep: List[np.ndarray] = []

    def new(self, arr: Optional[np.ndarray], **kw) -> Optional[int]:
        if arr is None:
            return None
        self._keep.append(arr)
        ptr = create_tensor(arr, **kw)
        self._ptrs.append(ptr)
        return ptr

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self._ptrs:
            lib.aclDestroyTensor(ctypes.c_void_p(p))
        self._ptrs.clear()


def _arg(value):
    if value is None:
        return ctypes.c_void_p(None)
    if isinstance(value, (ctypes._SimpleCData, ctypes.Array)):
        return value
    if isinstance(value, int):
        return ctypes.c_void_p(value)
    raise TypeError(f"unsupported argument {value!r}")


def get_workspace_size(op: str, args: Sequence) -> Tuple[int, int, Optional[int]]:
    """Phase 1: returns (status, workspace_size, executor). Tensors are pointers (int) or None;
    scalars must be passed as ctypes values (ctypes.c_int64(-100), ctypes.c_double(0.1), ...)."""
    fn = getattr(lib, op + "GetWorkspaceSize")
    fn.restype = ctypes.c_int32
    ws = ctypes.c_uint64(0)
    ex = ctypes.c_void_p(None)
    status = fn(*[_arg(a) for a in args], ctypes.byref(ws), ctypes.byref(ex))
    return status, ws.value, ex.value


def launch(op: str, executor: Optional[int], workspace_size: int, workspace: Optional[int] = None) -> int:
    """Phase 2 with a workspace of workspace_size bytes (allocated here unless given)."""
    fn = getattr(lib, op)
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p]
    buf = None
    if workspace is None and workspace_size:
        buf = np.empty(workspace_size + 64, np.uint8)
        workspace = (buf.ctypes.data + 63) // 64 * 64
    return fn(workspace, workspace_size, executor, None)


def assert_null_out_pointers_refused(op: str, args: Sequence) -> None:
    """Phase 1 with a null workspaceSize or executor out-pointer returns 161001 naming the pointer."""
    fn = getattr(lib, op + "GetWorkspaceSize")
    fn.restype = ctypes.c_int32
    args = [_arg(a) for a in args]
    ws = ctypes.c_uint64(0)
    ex = ctypes.c_void_p(None)
    assert fn(*args, None, ctypes.byref(ex)) == ACLNN_ERR_PARAM_NULLPTR
    assert "workspaceSize out-pointer is null" in last_error()
    assert fn(*args, ctypes.byref(ws), None) == ACLNN_ERR_PARAM_NULLPTR
    assert "executor out-pointer is null" in last_error()


def run_op(op: str, args: Sequence) -> Tuple[int, str]:
    """Both phases; returns (status, message) with message "" on success."""
    status, ws, ex = get_workspace_size(op, args)
    if status != ACLNN_SUCCESS:
        return status, last_error()
    status = launch(op, ex, ws)
    return status, ("" if status == ACLNN_SUCCESS else last_error())
