"""The rounding contract of tilegrad's float kernels, as one check shared by the references: the
kernels compute in float32 from widened inputs and round each output once to its dtype.

float32 outputs: within ``ulps`` float32 ulp of ``scale``, the magnitude of the formula's terms (where
the terms cancel, no float32 evaluation is accurate relative to the result itself). float16 /
bfloat16 outputs: additionally 1 ulp of the output dtype at the reference value and one subnormal
spacing of the dtype near zero. A NaN where the reference is NaN, and an infinity equal to the
reference's, pass.
"""

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

ULPS = 8.0  # the default allowance: a few float32 roundings of the terms
EPS = {F32: 2.0**-23, F16: 2.0**-10, BF16: 2.0**-7}  # ulp at 1
SUBNORMAL_SPACING = {F32: 2.0**-149, F16: 2.0**-24, BF16: 2.0**-133}


def assert_close(got, ref, scale, ulps=ULPS, dtype=None):
    """``got`` (any float dtype; ``dtype`` overrides the dtype it was rounded to) against the float64
    ``ref`` with the terms' magnitude ``scale``, within the bound of the module docstring."""
    got64 = np.asarray(got).astype(np.float64)
    dtype = np.dtype(dtype or np.asarray(got).dtype)
    bound = ulps * EPS[F32] * scale + 1e-37
    if dtype != F32:
        bound = bound + EPS[dtype] * np.abs(ref) + SUBNORMAL_SPACING[dtype]
    with np.errstate(invalid="ignore"):
        err = np.abs(got64 - ref)
    same_special = (np.isnan(got64) & np.isnan(ref)) | (np.isinf(got64) & (got64 == ref))
    bad = ~(err <= bound) & ~same_special
    assert not bad.any(), (f"{bad.sum()} elements off; worst err {err[bad].max()}, bound there "
                           f"{np.broadcast_to(bound, bad.shape)[bad][np.argmax(err[bad])]}, at "
                           f"{np.argwhere(bad)[:3].tolist()}")
