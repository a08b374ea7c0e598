"""AdamW (``aclnnApplyAdamWV2`` for one tensor, ``aclnnFusedAdamw`` for lists), in place."""

from typing import Optional, Sequence

import numpy as np

from . import _core

_STEP_NOTE = """The step follows the vendor's convention: the update uses ``t = step + 1``, so pass the
    number of steps taken before this one (``torch.optim.AdamW``'s ``state["step"]`` before it
    increments it)."""


def apply_adam_w(var: np.ndarray, m: np.ndarray, v: np.ndarray, grad: np.ndarray, step: np.ndarray, *,
                 lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999, weight_decay: float = 1e-2,
                 eps: float = 1e-8, amsgrad: bool = False, maximize: bool = False,
                 max_v: Optional[np.ndarray] = None) -> None:
    """One AdamW step on one tensor, in place: CANN ``aclnnApplyAdamWV2``.

    Per element, in float32 (``g = -grad`` when ``maximize``)::

        var *= 1 - lr*weight_decay;  m = lerp(m, g, 1 - beta1);  v = beta2*v + (1 - beta2)*g*g
        vmax = max(max_v, v) if amsgrad else v      (stored back into max_v)
        var -= lr/(1 - beta1^t) * m / (sqrt(vmax)/sqrt(1 - beta2^t) + eps),   t = step + 1

    Args:
        var, m, v: parameter and moments, updated in place; float32, float16 or bfloat16 each
            (computed in float32, each result rounded once to its own dtype); any strides.
        grad: gradient, same shape, float32, float16 or bfloat16.
        step: one-element float32 or int64 array (read only).
        max_v: the AMSGrad running maximum of ``v`` (the vendor's ``maxGradNormOptionalRef``),
            required when ``amsgrad``; updated in place.
        lr, beta1, beta2, weight_decay, eps: as ``torch.optim.AdamW``; passed as float32 (the
            C ABI's types).

    """ + _STEP_NOTE + """ Bad input raises ValueError/TypeError and nothing is written.
    """
    _core.apply_adam_w(var, m, v, grad, step, max_v, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize)


def fused_adamw(params: Sequence[np.ndarray], grads: Sequence[np.ndarray], exp_avgs: Sequence[np.ndarray],
                exp_avg_sqs: Sequence[np.ndarray], max_exp_avg_sqs: Optional[Sequence[np.ndarray]],
                state_steps: Sequence[np.ndarray], *, lr: float = 1e-3, beta1: float = 0.9, beta2: float = 0.999,
                weight_decay: float = 1e-2, eps: float = 1e-8, amsgrad: bool = False, maximize: bool = False,
                grad_scale: Optional[np.ndarray] = None, found_inf: Optional[np.ndarray] = None,
                max_grad_norm: Optional[float] = None,
                model_params: Optional[Sequence[np.ndarray]] = None,
                grad_norm: Optional[float] = None) -> Optional[float]:
    """One AdamW step over lists of tensors, in place: CANN ``aclnnFusedAdamw``, PyTorch ``_fused_adamw_``.

    The same update as :func:`apply_adam_w` for every ``params[i]``, all tensors in one parallel
    region split by bytes. All tensors of all lists share one dtype (float32, float16 or bfloat16);
    ``state_steps`` are one-element float32 or int64 arrays of one dtype. ``max_exp_avg_sqs`` may
    be None or empty unless ``amsgrad``.

    Args:
        grad_scale: optional one-element float32 array: grads are multiplied by ``1/grad_scale``.
        found_inf: optional one-element float32 array: exactly 1.0 skips the whole update.
        max_grad_norm: tilegrad extension: clip first, as ``torch.nn.utils.clip_grad_norm_(...,
            max_grad_norm)``: the global L2 norm of all grads (summed in a fixed order: the same
            value for any thread count) scales the grads by ``min(1, max_grad_norm/(norm + 1e-6))``
            inside the update. The norm (before clipping) is returned.
        model_params: tilegrad extension (master weights): ``params`` and the moments are float32,
            ``grads`` and ``model_params`` float16 or bfloat16; each updated float32 param is also
            rounded once into ``model_params[i]``.
        grad_norm: with ``max_grad_norm``, clip with this global norm (from :func:`adamw_grad_norm`
            over every call's grads, e.g. several parameter groups) instead of this call's own.

    Returns:
        The gradient norm when ``max_grad_norm`` is given, else None.

    """ + _STEP_NOTE + """ Bad input raises ValueError/TypeError and nothing is written.
    """
    return _core.fused_adamw(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2,
                             weight_decay, eps, amsgrad, maximize, grad_scale, found_inf, max_grad_norm, model_params,
                             grad_norm)


def adamw_grad_norm(grads: Sequence[np.ndarray]) -> float:
    """The global L2 norm of ``grads`` as :func:`fused_adamw`'s clipping computes it.

    Squares summed in float64 over fixed blocks in a fixed order: the same value for any thread
    count and ISA (``torch.nn.utils.get_total_norm`` sums per-tensor norms in float32).
    """
    return _core.adamw_grad_norm(grads)
