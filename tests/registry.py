"""The operator registry (cpp/ops/operators.json, installed as tilegrad's share/tilegrad/operators.json)
for the tests: every operator's sample arguments made into arrays, for its NumPy function and for its C
ABI call. The tests that cover every operator (properties, trace, repeatable executors, the C++ list)
iterate over OPERATORS, so a new operator is covered by its registry entry.

A sample array is written ``<dtype>[<dims>]`` with an optional generator: nothing (standard normal, or
0..9 for integers), ``~lo:hi`` (uniform floats in [lo, hi), or integers in [lo, hi)), ``=v`` (every
element v). ``<dtype>``: f32, f16, bf16, i64, i32, u8, or T, the floating dtype under test (one of the
operator's ``dtypes``). A JSON list of samples is a list of arrays (a tensor-list parameter); any other
value (number, string, bool, null) is passed as it is."""

import ctypes
import re

import ml_dtypes
import numpy as np

from tilegrad import _registry

OPERATORS = _registry.operators()
FAMILIES = _registry.families()
FLOAT_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "bfloat16": np.dtype(ml_dtypes.bfloat16)}
_DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16, "i64": np.int64, "i32": np.int32,
           "u8": np.uint8}
_NUMBER = r"-?[0-9.]+(?:e-?[0-9]+)?"
SAMPLE = re.compile(rf"^(T|f32|f16|bf16|i64|i32|u8)\[([0-9,]*)\](?:~({_NUMBER}):({_NUMBER})|=({_NUMBER}))?$")
# The C ABI's scalar parameters: registry key -> ctypes type.
C_SCALARS = {"i64": ctypes.c_int64, "u64": ctypes.c_uint64, "f64": ctypes.c_double, "f32": ctypes.c_float,
             "bool": ctypes.c_bool, "str": lambda s: ctypes.c_char_p(s.encode()), "none": lambda _name: None,
             "i64[]": lambda v: _acl_ctypes().int_array(v), "bool[]": lambda v: _acl_ctypes().bool_array(v)}


def _acl_ctypes():
    """tests/acl_ctypes.py, imported when an aclIntArray / aclBoolArray is first made (it loads the library)."""
    import acl_ctypes

    return acl_ctypes


def operator(name: str) -> dict:
    """The registry entry whose name or aclnn name is `name`."""
    (op,) = [op for op in OPERATORS if name in (op["name"], op["aclnn"])]
    return op


def trace_name(op: dict) -> str:
    """The name on the TILEGRAD_VERBOSE line of the operator's NumPy call: its ``trace`` (the operator
    that NumPy function launches, when it serves several aclnn ones), else its aclnn name, else its own."""
    return op.get("trace") or op["aclnn"] or op["name"]


def sample_array(spec: str, rng: np.random.Generator, float_dtype=np.float32) -> np.ndarray:
    """The array a sample string describes (module docstring), with T = float_dtype."""
    m = SAMPLE.match(spec)
    assert m, f"operators.json: {spec!r} is not a sample array (<dtype>[<dims>], ~lo:hi or =v)"
    kind, dims, lo, hi, fill = m.groups()
    dtype = np.dtype(float_dtype if kind == "T" else _DTYPES[kind])
    shape = tuple(int(d) for d in dims.split(",") if d)
    if fill is not None:
        values = np.full(shape, float(fill))
    elif dtype.kind in "iu":
        values = rng.integers(int(lo or 0), int(hi or 10), shape)
    elif lo is not None:
        values = rng.uniform(float(lo), float(hi), shape)
    else:
        values = rng.standard_normal(shape)
    return values.astype(dtype)


def sample_value(value, rng: np.random.Generator, float_dtype=np.float32):
    """A registry sample value as an argument: arrays for sample strings, lists of them for lists."""
    if isinstance(value, list):
        return [sample_value(v, rng, float_dtype) for v in value]
    if isinstance(value, str) and SAMPLE.match(value):
        return sample_array(value, rng, float_dtype)
    return value


def python_call(op: dict, rng: np.random.Generator, float_dtype=np.float32):
    """(function, args, kwargs): the operator's NumPy function and fresh sample arguments."""
    import tilegrad

    sample = op["sample"]
    args = [sample_value(a, rng, float_dtype) for a in sample["args"]]
    kwargs = {k: sample_value(v, rng, float_dtype) for k, v in sample.get("kwargs", {}).items()}
    return getattr(tilegrad, op["python"]), args, kwargs


def c_abi_tensors(op: dict):
    """(inputs, outputs, written): the names of the operator's tensor parameters, in the order of its
    GetWorkspaceSize signature, as aclSetInputTensorAddr / aclSetOutputTensorAddr count them (in-place
    ones are inputs; a list parameter's name ends in "[]"), and those it writes (non-null outputs and
    the in-place ones)."""
    params = op["c_abi"]
    inputs = [p.get("in") or p.get("inout") for p in params if "in" in p or "inout" in p]
    outputs = [p["out"] for p in params if "out" in p]
    written = [p["out"] for p in params if "out" in p and p["sample"] is not None]
    written += [p["inout"] for p in params if "inout" in p]
    return inputs, outputs, written


def c_abi_arrays(op: dict, rng: np.random.Generator) -> dict:
    """Fresh sample data for every tensor parameter of the C ABI call, by name (None: a null tensor)."""
    return {p.get("in") or p.get("inout") or p.get("out"): sample_value(p["sample"], rng)
            for p in op["c_abi"] if "sample" in p}


def c_abi_args(op: dict, pointers: dict) -> list:
    """The C ABI call's arguments: pointers[name] for a tensor parameter, ctypes values for the rest."""
    args = []
    for p in op["c_abi"]:
        if "sample" in p:
            args.append(pointers[p.get("in") or p.get("inout") or p.get("out")])
        else:
            (kind, value), = p.items()
            args.append(C_SCALARS[kind](value))
    return args
