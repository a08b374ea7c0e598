"""The ``torch.ops.tilegrad`` namespace: the one ``torch.library`` object every family module defines
its ops in (``_silu.py``, ``_cross_entropy.py``, ... each defines its own with :func:`define`).

One op per aclnn operator, plus the forward ops whose autograd formula runs a tilegrad backward. Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace
through it, and the forward ops an autograd formula.

Ops are defined with ``torch.library.Library`` + ``impl`` rather than ``torch.library.custom_op``:
the same fake/autograd registration, at about half the per-call Python overhead (measured here:
~13 us against ~30 us over the raw kernel for a 1K-element SiLU backward).

Implementations hand tensors to the C++ core zero-copy (``_tensor.as_numpy``); outputs are
allocated by torch and written in place by the kernel wherever the core takes an ``out=``.
No output aliases an input.
"""

import torch
from torch import Tensor

LIBRARY = torch.library.Library("tilegrad", "DEF")

# The reduction argument of the ops that take it as an int (the kernels' codes).
REDUCTION_CODES = {"none": 0, "mean": 1, "sum": 2}
REDUCTION_NAMES = {code: name for name, code in REDUCTION_CODES.items()}

# Backends the kernels cannot run on: a clear TypeError instead of the dispatcher's NotImplementedError.
_UNSUPPORTED_BACKENDS = ("CUDA", "XPU", "MPS", "SparseCPU", "SparseCUDA", "SparseCsrCPU", "SparseCsrCUDA",
                         "MkldnnCPU", "QuantizedCPU")


def _unsupported_backend(name: str, backend: str):
    def reject(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, Tensor)]
        found = ", ".join(sorted({f"{t.device} {t.layout}" for t in tensors}))
        raise TypeError(f"tilegrad::{name}: tensors must be dense (strided) CPU tensors, got {found} "
                        f"({backend}); the tilegrad.torch functions fall back to torch for these")
    return reject


def define(schema: str, impl, fake, autograd=None) -> None:
    """Define ``tilegrad::<schema>`` with its CPU kernel, its fake kernel and (optionally) autograd,
    given as ``(backward, setup_context)``."""
    name = schema.split("(", 1)[0]
    LIBRARY.define(schema)
    LIBRARY.impl(name, impl, "CPU")
    for backend in _UNSUPPORTED_BACKENDS:
        LIBRARY.impl(name, _unsupported_backend(name, backend), backend)
    torch.library.register_fake(f"tilegrad::{name}", fake, lib=LIBRARY)
    if autograd is not None:
        backward, setup_context = autograd
        torch.library.register_autograd(f"tilegrad::{name}", backward, setup_context=setup_context, lib=LIBRARY)


def placeholder(like: Tensor) -> Tensor:
    """Placeholder (0 elements, ``like``'s dtype) for an output that was not asked for: ops cannot
    return None, and the fake kernels return the same."""
    return like.new_empty([0])
