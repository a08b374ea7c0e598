"""Float64 NumPy reference of embedding dense backward (specification section 4) and the error bound the
tests hold tilegrad to:

    out[r, :] = sum over i with idx_i == r of grad_flat[i, :]   (times 1 / count(r) with scale),
    the padding row zero, rows never hit zero; float indices truncate toward zero, bool is 0/1.
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
# Unit roundoff of each output dtype.
UNIT = {np.dtype(np.float32): 2.0**-24, np.dtype(np.float16): 2.0**-11, BF16: 2.0**-8}


def as_rows(indices):
    """Row numbers of the indices: floats truncate toward zero, bool is 0/1."""
    a = np.asarray(indices)
    if a.dtype.kind == "f":
        return np.trunc(a.astype(np.float64)).astype(np.int64).reshape(-1)
    return a.astype(np.int64).reshape(-1)


def embedding_backward_ref(grad, indices, num_weights, padding_idx=-1, scale=False):
    """float64 result and a per-element bound on |fp32 sum - exact| (before rounding to out)."""
    rows = as_rows(indices)
    d = grad.shape[-1]
    g = np.asarray(grad).astype(np.float64).reshape(rows.size, d)
    out = np.zeros((num_weights, d))
    mag = np.zeros((num_weights, d))
    np.add.at(out, rows, g)
    np.add.at(mag, rows, np.abs(g))
    counts = np.bincount(rows, minlength=num_weights).astype(np.float64)
    hit = counts > 0
    # Summing n terms in fp32 (starting from 0) errs by at most n * u * sum|g|.
    bound = mag * counts[:, None] * 2.0**-24 * 1.01
    if scale:
        out[hit] /= counts[hit, None]
        bound[hit] = bound[hit] / counts[hit, None] + np.abs(out[hit]) * 2.0**-24
    if 0 <= padding_idx < num_weights:
        out[padding_idx] = 0
        bound[padding_idx] = 0
    return out, bound


def assert_embedding_close(result, grad, indices, num_weights, padding_idx=-1, scale=False):
    """tilegrad's result within the fp32-summation bound plus one rounding to the output dtype."""
    exact, bound = embedding_backward_ref(grad, indices, num_weights, padding_idx, scale)
    got = np.asarray(result).astype(np.float64)
    tol = bound * (1 + UNIT[result.dtype]) + np.abs(exact) * UNIT[result.dtype] * 1.0001 + 1e-40
    err = np.abs(got - exact)
    assert got.shape == exact.shape
    assert np.all(err <= tol), f"max err {err.max()} (tol there {tol.flat[np.argmax(err - tol)]})"
