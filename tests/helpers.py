"""Helpers the operator tests share: seeded input data, the error checks of the NumPy API and of the
C ABI, and the shape of a halved dimension (the GLU families). Comparisons against the float64
references live beside them in reference/ (reference/rounding.py: the rounding contract)."""

import numpy as np
import pytest


def normal(shape, dtype, seed, scale=1.0):
    """Standard normal values times ``scale`` from a generator seeded with ``seed``, rounded to
    ``dtype`` (``shape`` () gives a 0-d array)."""
    return np.asarray(np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def half_shape(shape, dim):
    """``shape`` with dimension ``dim`` halved: the shape of each half of a split input."""
    s = list(shape)
    s[dim] //= 2
    return tuple(s)


def raises(fn, exc, code, match, *args, **kw):
    """``fn(*args, **kw)`` raises ``exc`` with a message ``match`` (a regular expression: re.escape a
    literal text; None: any message) finds, and the aclnn status ``code`` as its ``code`` attribute
    (None: any). Returns the exception."""
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kw)
    if code is not None:
        assert info.value.code == code, (info.value.code, str(info.value))
    return info.value


def expect_status(status_msg, code, text):
    """A C ABI call's ``(status, message)`` (acl_ctypes.run_op): the status ``code`` and a message
    containing ``text``."""
    status, msg = status_msg
    assert status == code, (status, msg)
    assert text in msg, msg
