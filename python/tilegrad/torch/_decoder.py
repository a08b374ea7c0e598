"""The decoder-block operators in PyTorch: RMSNorm, SwiGLU and rotary position embedding.

``torch.library`` ops (``torch.ops.tilegrad.*``, one per aclnn operator plus the autograd forwards)
with fake kernels, so ``torch.compile(fullgraph=True)`` traces through them, and the
``torch.nn.functional``-style functions that route supported tensors to them:

=========================================================  ==========================  ========================
tilegrad.torch                                             torch equivalent            saved for backward
=========================================================  ==========================  ========================
``rms_norm(input, normalized_shape, weight=None, eps=None)``  ``F.rms_norm``             input, fp32 rstd (rows)
``silu_mul(gate, up)``                                     ``F.silu(gate) * up``       gate, up
``swiglu(input, dim=-1)``                                  ``a, b = input.chunk(2, dim)``  input
                                                           ``F.silu(a) * b``
``apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)``  Hugging Face's function     cos, sin
``rotary_position_embedding(input, cos, sin, mode=0)``     the vendor's modes 0-3      cos, sin (and input when
                                                                                       cos / sin need a grad)
=========================================================  ==========================  ========================

The paths of every tilegrad.torch function (``_eager.route``): in eager mode a lean
``torch.autograd.Function`` calls the C++ core directly (a ``torch.library`` op costs tens of
microseconds of dispatch per call, and these run once per layer); under ``torch.compile`` /
``torch.export`` the ``torch.ops.tilegrad`` ops (they have fake kernels); under a ``torch.func``
transform and below the measured crossover the composite: the same formula in torch ops on float32
(16-bit tensors widened, each result rounded once), so the call accepts the same tensors and is as
precise as on the kernels. Second derivatives (``create_graph=True``) recompute that composite
differentiably instead of calling the kernels. What the kernels do not take (tensors off the CPU,
float64, sparse, mismatched dtypes, ...) runs the formula in torch ops on the tensors as they are,
so a call never gives a wrong result. Numerics: fp16 / bf16 are widened to fp32 and every output
is rounded once; PyTorch's ``F.rms_norm`` and Hugging Face's RMSNorm round ``x * rstd`` to the input
dtype before the weight multiply (two roundings), so bf16 results differ from theirs by up to one
bf16 ulp.
"""

from typing import List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import functional as F

from .. import _core
from ._eager import CROSSOVER, Path, route, rounded_once  # noqa: F401  (CROSSOVER: also read as _decoder.CROSSOVER)
from ._eager import on_kernel_path as _on_kernel_path, recompute_grads as _recompute_grads
from ._ops import _define
from ._tensor import as_numpy, new_output
from ._threads import sync_threads

__all__ = ["rms_norm", "silu_mul", "swiglu", "apply_rotary_pos_emb", "rotary_position_embedding"]

# torch's own functions, captured before tilegrad.torch.enable() can reroute torch.nn.functional.
_TORCH_RMS_NORM = F.rms_norm
_TORCH_SILU = F.silu


# ---------------------------------------------------------------------------------------------------
# RMSNorm (aclnnRmsNorm, aclnnRmsNormGrad); gamma over the trailing dims, rstd (rows,) in fp32


def _rstd_shape(input: Tensor, gamma: Tensor) -> List[int]:
    """The vendor's rstd shape: x's leading dims, then ones for the normalized dims."""
    lead = input.dim() - gamma.dim()
    return list(input.shape[:lead]) + [1] * gamma.dim()


def _rms_norm_impl(input: Tensor, gamma: Tensor, eps: float) -> Tuple[Tensor, Tensor]:
    sync_threads()
    y = new_output(input.shape, input.dtype)
    rstd = new_output(_rstd_shape(input, gamma), torch.float32)
    _core.rms_norm(as_numpy(input), as_numpy(gamma), eps, as_numpy(y), as_numpy(rstd))
    return y, rstd


def _rms_norm_fake(input, gamma, eps):
    return input.new_empty(input.shape), input.new_empty(_rstd_shape(input, gamma), dtype=torch.float32)


def _rms_norm_setup(ctx, inputs, output) -> None:
    input, gamma, eps = inputs
    ctx.eps = eps
    ctx.save_for_backward(input, output[1], gamma)


def _rms_norm_composite(input: Tensor, gamma: Tensor, eps: float) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x, g: _TORCH_RMS_NORM(x, g.shape, g, eps), input.dtype, input, gamma)


def _rms_norm_backward(ctx, grad_y: Tensor, grad_kernel):
    """The gradient formula of both paths: the kernel (``grad_kernel``), or under grad mode the
    differentiable composite."""
    input, rstd, gamma = ctx.saved_tensors
    if torch.is_grad_enabled():
        dx, dgamma = _recompute_grads(lambda x, g: _rms_norm_composite(x, g, ctx.eps), (input, gamma), (grad_y,))
        return dx, dgamma, None
    dx, dgamma = grad_kernel(grad_y, input, rstd, gamma)
    return dx, (dgamma.to(gamma.dtype) if ctx.needs_input_grad[1] else None), None


def _rms_norm_grad_formula(ctx, grad_y: Tensor, unused_grad_rstd: Tensor):
    return _rms_norm_backward(ctx, grad_y, torch.ops.tilegrad.rms_norm_grad)


_define("rms_norm(Tensor input, Tensor gamma, float eps) -> (Tensor, Tensor)", _rms_norm_impl, _rms_norm_fake,
        (_rms_norm_grad_formula, _rms_norm_setup))


def _rms_norm_grad_impl(grad_y: Tensor, input: Tensor, rstd: Tensor, gamma: Tensor) -> Tuple[Tensor, Tensor]:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    dgamma = new_output(gamma.shape, torch.float32)
    _core.rms_norm_grad(as_numpy(grad_y), as_numpy(input), as_numpy(rstd), as_numpy(gamma), as_numpy(dx),
                        as_numpy(dgamma))
    return dx, dgamma


def _rms_norm_grad_fake(grad_y, input, rstd, gamma):
    return input.new_empty(input.shape), gamma.new_empty(gamma.shape, dtype=torch.float32)


_define("rms_norm_grad(Tensor grad_y, Tensor input, Tensor rstd, Tensor gamma) -> (Tensor, Tensor)",
        _rms_norm_grad_impl, _rms_norm_grad_fake)


class TilegradRmsNorm(torch.autograd.Function):
    """The eager path: the kernels through ``tilegrad._core``, no op dispatch."""

    @staticmethod
    def forward(ctx, input: Tensor, gamma: Tensor, eps: float) -> Tensor:
        y, rstd = _rms_norm_impl(input, gamma, eps)
        ctx.eps = eps
        ctx.save_for_backward(input, rstd, gamma)
        return y

    @staticmethod
    def backward(ctx, grad_y: Tensor):
        return _rms_norm_backward(ctx, grad_y, _rms_norm_grad_impl)


def rms_norm(input: Tensor, normalized_shape: Union[int, Sequence[int]], weight: Optional[Tensor] = None,
             eps: Optional[float] = None) -> Tensor:
    """``F.rms_norm`` with the forward and backward on tilegrad (``aclnnRmsNorm`` / ``aclnnRmsNormGrad``).

    ``y = x / sqrt(mean(x^2 over normalized_shape) + eps) * weight``; ``eps=None`` is
    ``torch.finfo(input.dtype).eps``, as in torch. Backward saves only the input and the fp32 rstd
    (one float per row) and gives ``weight`` its gradient summed in a fixed order (the same for any
    thread count). fp16 / bf16: computed in fp32, rounded once (torch rounds twice). A negative
    ``eps``, which the vendor's kernel refuses, runs torch's ``F.rms_norm`` (its values, NaN where
    ``mean(x^2) + eps < 0``).
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    supported = (_on_kernel_path(input, weight) and bool(shape) and tuple(input.shape[-len(shape):]) == shape
                 and input.numel() > 0 and (eps is None or eps >= 0)
                 and (weight is None or (tuple(weight.shape) == shape and _rms_norm_dtypes_ok(input, weight))))
    path = route(supported, input.dtype, rms_norm=input.numel())
    if path is Path.TORCH:
        return _TORCH_RMS_NORM(input, normalized_shape, weight, eps)
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    gamma = weight if weight is not None else input.new_ones(shape)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.rms_norm(input, gamma, float(eps))[0]
    if path is Path.COMPOSITE:
        return _rms_norm_composite(input, gamma, float(eps))
    return TilegradRmsNorm.apply(input, gamma, float(eps))


def _rms_norm_dtypes_ok(input: Tensor, weight: Tensor) -> bool:
    """The vendor's (x, gamma) pairs: gamma of x's dtype, or fp32 gamma for fp16 / bf16 x."""
    return weight.dtype == input.dtype or weight.dtype == torch.float32


# ---------------------------------------------------------------------------------------------------
# SwiGLU (aclnnSwiGlu, aclnnSwiGluGrad) and silu_mul (the same formula on two tensors)


def _swi_glu_shape(input: Tensor, dim: int) -> List[int]:
    shape = list(input.shape)
    shape[dim] //= 2
    return shape


def _swi_glu_impl(input: Tensor, dim: int) -> Tensor:
    sync_threads()
    out = new_output(_swi_glu_shape(input, dim), input.dtype)
    _core.swi_glu(as_numpy(input), dim, as_numpy(out))
    return out


def _swi_glu_fake(input, dim):
    return input.new_empty(_swi_glu_shape(input, dim))


def _swi_glu_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(inputs[0])
    ctx.dim = inputs[1]


def _swi_glu_torch(input: Tensor, dim: int) -> Tensor:
    """The formula in torch ops, in the input's dtype."""
    a, b = input.chunk(2, dim)
    return _TORCH_SILU(a) * b


def _swi_glu_composite(input: Tensor, dim: int) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x: _swi_glu_torch(x, dim), input.dtype, input)


def _swi_glu_backward(ctx, grad: Tensor, grad_kernel):
    (input,) = ctx.saved_tensors
    if torch.is_grad_enabled():
        return _recompute_grads(lambda x: _swi_glu_composite(x, ctx.dim), (input,), (grad,))[0], None
    return grad_kernel(grad, input, ctx.dim), None


def _swi_glu_grad_formula(ctx, grad: Tensor):
    return _swi_glu_backward(ctx, grad, torch.ops.tilegrad.swi_glu_grad)


_define("swi_glu(Tensor input, int dim) -> Tensor", _swi_glu_impl, _swi_glu_fake,
        (_swi_glu_grad_formula, _swi_glu_setup))


def _swi_glu_grad_impl(grad: Tensor, input: Tensor, dim: int) -> Tensor:
    sync_threads()
    dx = new_output(input.shape, input.dtype)
    _core.swi_glu_grad(as_numpy(grad), as_numpy(input), dim, as_numpy(dx))
    return dx


def _swi_glu_grad_fake(grad, input, dim):
    return input.new_empty(input.shape)


_define("swi_glu_grad(Tensor grad, Tensor input, int dim) -> Tensor", _swi_glu_grad_impl, _swi_glu_grad_fake)


def _silu_mul_impl(gate: Tensor, up: Tensor) -> Tensor:
    sync_threads()
    out = new_output(gate.shape, gate.dtype)
    _core.silu_mul(as_numpy(gate), as_numpy(up), as_numpy(out))
    return out


def _silu_mul_fake(gate, up):
    return gate.new_empty(gate.shape)


def _silu_mul_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _silu_mul_torch(gate: Tensor, up: Tensor) -> Tensor:
    """The formula in torch ops, with torch's dtype promotion."""
    return _TORCH_SILU(gate) * up


def _silu_mul_composite(gate: Tensor, up: Tensor) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(_silu_mul_torch, gate.dtype, gate, up)


def _silu_mul_backward(ctx, grad: Tensor, grad_kernel):
    gate, up = ctx.saved_tensors
    if torch.is_grad_enabled():
        return tuple(_recompute_grads(_silu_mul_composite, (gate, up), (grad,)))
    return tuple(grad_kernel(grad, gate, up))


def _silu_mul_grad_formula(ctx, grad: Tensor):
    return _silu_mul_backward(ctx, grad, torch.ops.tilegrad.silu_mul_grad)


_define("silu_mul(Tensor gate, Tensor up) -> Tensor", _silu_mul_impl, _silu_mul_fake,
        (_silu_mul_grad_formula, _silu_mul_setup))


def _silu_mul_grad_impl(grad: Tensor, gate: Tensor, up: Tensor) -> Tuple[Tensor, Tensor]:
    sync_threads()
    d_gate, d_up = new_output(gate.shape, gate.dtype), new_output(up.shape, up.dtype)
    _core.silu_mul_grad(as_numpy(grad), as_numpy(gate), as_numpy(up), as_numpy(d_gate), as_numpy(d_up))
    return d_gate, d_up


def _silu_mul_grad_fake(grad, gate, up):
    return gate.new_empty(gate.shape), up.new_empty(up.shape)


_define("silu_mul_grad(Tensor grad, Tensor gate, Tensor up) -> (Tensor, Tensor)", _silu_mul_grad_impl,
        _silu_mul_grad_fake)


class TilegradSiluMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, gate: Tensor, up: Tensor) -> Tensor:
        ctx.save_for_backward(gate, up)
        return _silu_mul_impl(gate, up)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _silu_mul_backward(ctx, grad, _silu_mul_grad_impl)


class TilegradSwiGlu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: Tensor, dim: int) -> Tensor:
        ctx.save_for_backward(input)
        ctx.dim = dim
        return _swi_glu_impl(input, dim)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _swi_glu_backward(ctx, grad, _swi_glu_grad_impl)


def silu_mul(gate: Tensor, up: Tensor) -> Tensor:
    """``F.silu(gate) * up`` in one pass, and one backward pass giving both gradients.

    How a Llama MLP combines its separate gate and up projections. Saves only ``gate`` and ``up``
    for backward (the composite also saves ``silu(gate)``). Shapes and dtypes must match, else
    torch's composite runs.
    """
    supported = gate.shape == up.shape and gate.dtype == up.dtype and _on_kernel_path(gate, up) and gate.numel() > 0
    path = route(supported, gate.dtype, silu_mul=gate.numel())
    if path is Path.TORCH:
        return _silu_mul_torch(gate, up)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.silu_mul(gate, up)
    if path is Path.COMPOSITE:
        return _silu_mul_composite(gate, up)
    return TilegradSiluMul.apply(gate, up)


def swiglu(input: Tensor, dim: int = -1) -> Tensor:
    """The vendor's SwiGLU on one tensor: ``a, b = input.chunk(2, dim); F.silu(a) * b``
    (``aclnnSwiGlu`` / ``aclnnSwiGluGrad``). ``input.shape[dim]`` must be even."""
    if not -input.dim() <= dim < input.dim():
        raise IndexError(f"swiglu: dim must be in [{-input.dim()}, {input.dim() - 1}], got {dim}")
    if input.shape[dim] % 2:
        raise ValueError(f"swiglu: input.shape[{dim}] must be even, got {input.shape[dim]}")
    dim %= input.dim()
    path = route(_on_kernel_path(input) and input.numel() > 0, input.dtype, swiglu=input.numel())
    if path is Path.TORCH:
        return _swi_glu_torch(input, dim)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.swi_glu(input, dim)
    if path is Path.COMPOSITE:
        return _swi_glu_composite(input, dim)
    return TilegradSwiGlu.apply(input, dim)


# ---------------------------------------------------------------------------------------------------
# Rotary position embedding (aclnnRotaryPositionEmbedding, aclnnRotaryPositionEmbeddingGrad)


def _rope_impl(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    sync_threads()
    out = new_output(input.shape, input.dtype)
    _core.rotary_position_embedding(as_numpy(input), as_numpy(cos), as_numpy(sin), mode, as_numpy(out))
    return out


def _rope_fake(input, cos, sin, mode):
    return input.new_empty(input.shape)


def _rope_setup(ctx, inputs, output) -> None:
    input, cos, sin, mode = inputs
    ctx.mode = mode
    # the input only when cos / sin need a gradient (dcos = sum dy * x): otherwise dx needs cos, sin alone
    ctx.save_for_backward(cos, sin, input if (cos.requires_grad or sin.requires_grad) else None)


def _rope_backward(ctx, grad: Tensor, grad_kernel):
    cos, sin, input = ctx.saved_tensors
    if torch.is_grad_enabled():
        if input is None:  # not saved (cos / sin need no gradient): the op is linear in its input, so
            input = torch.zeros_like(grad, requires_grad=True)  # any point gives the same gradient
        dx, dcos, dsin = _recompute_grads(lambda x, c, s: _rope_composite(x, c, s, ctx.mode), (input, cos, sin),
                                          (grad,))
        return dx, dcos, dsin, None
    dx, dcos, dsin = grad_kernel(grad, cos, sin, input, ctx.mode)
    wants_trig = input is not None
    return dx, (dcos if wants_trig else None), (dsin if wants_trig else None), None


def _rope_grad_formula(ctx, grad: Tensor):
    return _rope_backward(ctx, grad, torch.ops.tilegrad.rotary_position_embedding_grad)


_define("rotary_position_embedding(Tensor input, Tensor cos, Tensor sin, int mode) -> Tensor", _rope_impl,
        _rope_fake, (_rope_grad_formula, _rope_setup))


def _rope_grad_impl(grad: Tensor, cos: Tensor, sin: Tensor, input: Optional[Tensor], mode: int
                    ) -> Tuple[Tensor, Tensor, Tensor]:
    sync_threads()
    dx = new_output(grad.shape, grad.dtype)
    dcos, dsin = _trig_grad_outputs(cos, sin, input)
    _core.rotary_position_embedding_grad(as_numpy(grad), as_numpy(cos), as_numpy(sin),
                                         None if input is None else as_numpy(input), mode, as_numpy(dx),
                                         None if input is None else as_numpy(dcos),
                                         None if input is None else as_numpy(dsin))
    return dx, dcos, dsin


def _trig_grad_outputs(cos: Tensor, sin: Tensor, input: Optional[Tensor]) -> Tuple[Tensor, Tensor]:
    """dcos and dsin: cos's shape when the input is given, else 0-element placeholders (nothing is
    computed then; an op cannot return None)."""
    if input is None:
        return cos.new_empty([0]), sin.new_empty([0])
    return new_output(cos.shape, cos.dtype), new_output(sin.shape, sin.dtype)


def _rope_grad_fake(grad, cos, sin, input, mode):
    if input is None:
        return grad.new_empty(grad.shape), cos.new_empty([0]), sin.new_empty([0])
    return grad.new_empty(grad.shape), cos.new_empty(cos.shape), sin.new_empty(sin.shape)


_define("rotary_position_embedding_grad(Tensor grad, Tensor cos, Tensor sin, Tensor? input, int mode) "
        "-> (Tensor, Tensor, Tensor)", _rope_grad_impl, _rope_grad_fake)

_ROPE_MODES = (0, 1, 2, 3)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _rope_torch(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    """The vendor's formulas in torch ops, in the tensors' dtypes (the fallback, and the reference in
    the docs)."""
    if mode == 0:
        return input * cos + _rotate_half(input) * sin
    if mode == 1:
        pairs = input.unflatten(-1, (-1, 2))
        rotated = torch.stack((-pairs[..., 1], pairs[..., 0]), dim=-1).flatten(-2)
        return input * cos + rotated * sin
    if mode == 2:
        quarter = input.shape[-1] // 4
        x1, x2, x3, x4 = input.split(quarter, dim=-1)
        return input * cos + torch.cat((-x2, x1, -x4, x3), dim=-1) * sin
    even, odd = input[..., 0::2], input[..., 1::2]
    return torch.cat((even, odd), dim=-1) * cos + torch.cat((-odd, even), dim=-1) * sin


def _rope_composite(input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
    """The kernels' numerics in torch ops (float32, output rounded once), differentiable."""
    return rounded_once(lambda x, c, s: _rope_torch(x, c, s, mode), input.dtype, input, cos, sin)


class TilegradRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: Tensor, cos: Tensor, sin: Tensor, mode: int) -> Tensor:
        _rope_setup(ctx, (input, cos, sin, mode), None)
        return _rope_impl(input, cos, sin, mode)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return _rope_backward(ctx, grad, _rope_grad_impl)


def _rope_on_kernel(input: Tensor, cos: Tensor, sin: Tensor) -> bool:
    return (input.dim() == 4 and cos.dim() == 4 and cos.shape == sin.shape and input.dtype == cos.dtype == sin.dtype
            and input.shape[-1] == cos.shape[-1] and input.shape[-1] % 2 == 0 and input.numel() > 0
            and _on_kernel_path(input, cos, sin)
            and all(c in (1, x) for c, x in zip(cos.shape[:3], input.shape[:3])))


def rotary_position_embedding(input: Tensor, cos: Tensor, sin: Tensor, mode: int = 0) -> Tensor:
    """The vendor's rotary position embedding (``aclnnRotaryPositionEmbedding``), autograd-aware.

    ``input`` 4-D, ``cos`` / ``sin`` 4-D broadcasting over ``input``'s first three dims, same dtype;
    mode 0 rotate-half (Hugging Face), 1 interleaved pairs (GPT-J / Meta), 2 rotate-half per half of
    the head dim, 3 de-interleave then rotate-half (the vendor's formulas). ``cos`` / ``sin`` get
    gradients (summed over the broadcast dims) when they require them.
    """
    if mode not in _ROPE_MODES:
        raise ValueError(f"rotary_position_embedding: mode must be 0, 1, 2 or 3, got {mode}")
    path = route(_rope_on_kernel(input, cos, sin), input.dtype, rope=input.numel())
    if path is Path.TORCH:
        return _rope_torch(input, cos, sin, mode)
    if path is Path.COMPILE:
        return torch.ops.tilegrad.rotary_position_embedding(input, cos, sin, mode)
    if path is Path.COMPOSITE:
        return _rope_composite(input, cos, sin, mode)
    return TilegradRope.apply(input, cos, sin, mode)


def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, unsqueeze_dim: int = 1
                         ) -> Tuple[Tensor, Tensor]:
    """Hugging Face's ``apply_rotary_pos_emb`` (rotate-half) on tilegrad: same signature and result.

    ``cos`` / ``sin`` of shape (batch, seq, head_dim) are unsqueezed at ``unsqueeze_dim`` and
    broadcast over the heads of ``q`` and ``k`` (which may have different head counts); the
    backward saves only ``cos`` and ``sin`` (the composite saves rotated copies of q and k).
    """
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return rotary_position_embedding(q, cos, sin, 0), rotary_position_embedding(k, cos, sin, 0)
