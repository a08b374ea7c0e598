"""The routing every tilegrad.torch function shares on its eager path.

In eager mode a function calls a lean ``torch.autograd.Function`` whose forward and backward reach
the C++ core directly (a ``torch.library`` op costs tens of microseconds of dispatch per call);
under ``torch.compile`` / ``torch.export`` it calls the ``torch.ops.tilegrad`` op instead (fake
kernel, registered autograd). Everything the kernels cannot take goes to torch's composite, which
gives the same values:

- tensors off the CPU, not strided, of other dtypes, or tensor subclasses (DTensor, ...: their
  dispatch has no rule for a tilegrad op, torch's own op has one);
- a ``torch.func`` transform (its wrapped tensors cannot be handed to the core);
- sizes below a measured crossover, where torch's kernel plus its lighter autograd node is faster.

Second derivatives: a backward that runs with grad mode on (``create_graph=True``) recomputes the
gradient through the differentiable composite (:func:`recompute_grads`) instead of the kernels.
"""

from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor

from ._tensor import unsupported_reason

# Tensor types handed to the core: a subclass (DTensor, a tensor wrapper) keeps its own dispatch.
_PLAIN_TENSOR_TYPES = (Tensor, torch.nn.Parameter)


def on_kernel_path(*tensors: Optional[Tensor]) -> bool:
    """True when every given tensor can go to a tilegrad kernel: a dense CPU tensor of a kernel dtype,
    not a subclass (while compiling or exporting, tracing's own fake / functional tensors pass)."""
    if not all(t is None or unsupported_reason(t) is None for t in tensors):
        return False
    return all(t is None or type(t) in _PLAIN_TENSOR_TYPES for t in tensors) or torch.compiler.is_compiling()


def transform_active() -> bool:
    """A torch.func transform (grad, vmap, jacrev, ...) is running: its wrapped tensors cannot go to
    the kernels, so the composite runs (same values)."""
    return torch._C._functorch.peek_interpreter_stack() is not None


def below_crossover(crossover: Dict[str, Dict[torch.dtype, int]], op: str, size: int, dtype: torch.dtype) -> bool:
    """``size`` is below the measured size at which tilegrad's call overtakes torch's composite
    (``crossover[op][dtype]``; 0 or missing: tilegrad at every size)."""
    return size < crossover[op].get(dtype, 0)


def recompute_grads(fn, inputs: Sequence[Optional[Tensor]], grads: Sequence[Optional[Tensor]]) -> List:
    """Gradients of the differentiable composite ``fn(*inputs)`` w.r.t. the inputs that require grad,
    with ``create_graph=True`` (a backward run under grad mode: higher-order gradients); None elsewhere."""
    with torch.enable_grad():
        outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    pairs = [(o, g) for o, g in zip(outputs, grads) if g is not None and o.requires_grad]
    wanted = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    result: List = [None] * len(inputs)
    if pairs and wanted:
        found = torch.autograd.grad([o for o, _ in pairs], [inputs[i] for i in wanted], [g for _, g in pairs],
                                    create_graph=True, allow_unused=True)
        for i, g in zip(wanted, found):
            result[i] = g
    return result
