"""Checks of the operators' non-array arguments, shared by every Python entry point.

Integers must be integers (Python ``int`` or a NumPy integer, never ``bool``, ``float`` or ``str``)
that fit int64; booleans must be ``bool`` or ``numpy.bool_``; strings must be ``str`` without NUL
characters; floats must be real numbers. A wrong type raises ``TypeError`` and a wrong value
``ValueError``, each naming the operator, the argument and the value, so nothing is silently
truncated (``4.7`` rows), reinterpreted (``'no'`` as True) or cut short (``"mean\\0x"``), and no
pybind11 "incompatible function arguments" dump or ``OverflowError`` reaches the caller.
"""

import numbers
from typing import Any, Optional

import numpy as np

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


PARAM_INVALID = 161002  # the aclnn status code every tilegrad exception carries as ``code``


def _type_name(value: Any) -> str:
    return type(value).__name__


def argument_error(kind: type, message: str) -> Exception:
    """A ValueError/TypeError with the ``code`` attribute the C++ layer's exceptions have."""
    e = kind(message)
    e.code = PARAM_INVALID
    return e


def check_int(op: str, name: str, value: Any, lo: Optional[int] = INT64_MIN, hi: Optional[int] = INT64_MAX) -> int:
    """``value`` as a Python int in ``[lo, hi]`` (TypeError if not an integer, ValueError if out of
    range; ``None`` bounds are not checked)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise argument_error(TypeError, f"{op}: {name} must be an int, got {value!r} ({_type_name(value)})")
    value = int(value)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise argument_error(ValueError, f"{op}: {name} must be in [{lo}, {hi}], got {value}")
    return value


def check_optional_int(op: str, name: str, value: Any, lo: int = INT64_MIN, hi: int = INT64_MAX) -> Optional[int]:
    """``None`` or :func:`check_int`."""
    return None if value is None else check_int(op, name, value, lo, hi)


def check_bool(op: str, name: str, value: Any) -> bool:
    """``value`` as a Python bool (TypeError unless it is ``bool`` or ``numpy.bool_``)."""
    if not isinstance(value, (bool, np.bool_)):
        raise argument_error(TypeError, f"{op}: {name} must be a bool, got {value!r} ({_type_name(value)})")
    return bool(value)


def check_str(op: str, name: str, value: Any) -> str:
    """``value`` itself if it is a ``str`` without NUL characters."""
    if not isinstance(value, str):
        raise argument_error(TypeError, f"{op}: {name} must be a str, got {value!r} ({_type_name(value)})")
    if "\0" in value:
        raise argument_error(ValueError, f"{op}: {name} must not contain NUL characters, got {value!r}")
    return value


def check_float(op: str, name: str, value: Any) -> float:
    """``value`` as a Python float (TypeError unless a real number other than bool; NaN passes
    through for the operator's own range check to reject with its rule)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise argument_error(TypeError, f"{op}: {name} must be a float, got {value!r} ({_type_name(value)})")
    return float(value)


def is_scalar_number(value: Any) -> bool:
    """A Python or NumPy real number (not an array, not a bool)."""
    return isinstance(value, (numbers.Real, np.generic)) and not isinstance(value, (bool, np.bool_)) \
        and not isinstance(value, (np.str_, np.bytes_, np.void, np.datetime64, np.timedelta64, np.object_))


def as_operand(value: Any, like: Any, fallback_dtype: Any = np.float32) -> Any:
    """A Python/NumPy scalar as a 0-d array (of ``like``'s dtype when ``like`` is an array, else
    ``fallback_dtype``), anything else unchanged: scalars are accepted wherever a 0-d array is."""
    if not is_scalar_number(value):
        return value
    dtype = like.dtype if isinstance(like, np.ndarray) else fallback_dtype
    return np.asarray(value, dtype=dtype)
