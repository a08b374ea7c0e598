"""Independent float64 reference for AddRmsNorm and tilegrad's fused backward, written from the
vendor's document (aclnnAddRmsNorm.md) and the specification's AddRmsNorm section, never from
tilegrad's code:

    x_out = x1 + x2, rounded to x1's dtype (an output of that dtype)
    y, rstd = RMSNorm of x_out (reference.rms_norm)
    dx = RMSNormGrad's dx of (dy, x_out, rstd, gamma) + dresidual   (the gradient of x1 and of x2)
    dgamma = RMSNormGrad's dgamma
"""

import numpy as np

from reference.rms_norm import rms_norm_grad_ref, rms_norm_ref


def add_ref(x1, x2):
    """x1 + x2 exactly in float64 (exact for two float16 / bfloat16 values), rounded once to x1's dtype."""
    return (np.asarray(x1).astype(np.float64) + np.asarray(x2).astype(np.float64)).astype(x1.dtype)


def add_rms_norm_ref(x1, x2, gamma, eps):
    """(y, rstd, y_scale, x_out): y and rstd in float64, x_out in x1's dtype."""
    x_out = add_ref(x1, x2)
    y, rstd, scale = rms_norm_ref(x_out, gamma, eps)
    return y, rstd, scale, x_out


def add_rms_norm_backward_ref(dy, x_out, rstd, gamma, dresidual=None):
    """(dx, dgamma, dx_scale, dgamma_scale) in float64."""
    dx, dgamma, dx_scale, dgamma_scale = rms_norm_grad_ref(dy, x_out, rstd, gamma)
    if dresidual is not None:
        dres = np.asarray(dresidual).astype(np.float64)
        dx, dx_scale = dx + dres, dx_scale + np.abs(dres)
    return dx, dgamma, dx_scale, dgamma_scale
