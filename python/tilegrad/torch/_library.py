"""The ``torch.ops.tilegrad`` namespace: the one ``torch.library`` object every family module defines
its ops in (``_silu.py``, ``_cross_entropy.py``, ... each defines its own with :func:`define`, most
through :class:`KernelFunction`).

One op per aclnn operator, plus the forward ops whose autograd formula runs a tilegrad backward. Each
has a fake (meta) implementation, so ``torch.compile(fullgraph=True)`` and ``torch.export`` trace
through it, and the forward ops an autograd formula.

Ops are defined with ``torch.library.Library`` + ``impl`` rather than ``torch.library.custom_op``:
the same fake/autograd registration, at about half the per-call Python overhead (measured here:
~13 us against ~30 us over the raw kernel for a 1K-element SiLU backward).

Implementations hand tensors to the C++ core zero-copy (``_tensor.as_numpy``); outputs are
allocated by torch and written in place by the kernel wherever the core takes an ``out=``.
No output aliases an input.

A function built on a forward kernel and its gradient kernel is declared once as a
:class:`KernelFunction`: its two ops, its eager node and the call of each of the router's paths.
"""

from typing import Callable, NamedTuple, Optional, Sequence

import torch
from torch import Tensor

from ._eager import Path, recompute_grads

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


def like_first_argument(*args) -> Tensor:
    """The fake kernel of an op whose one output has its first argument's shape and dtype."""
    return args[0].new_empty(args[0].shape)


class OpKernel(NamedTuple):
    """One ``torch.library`` op: its schema (``name(args) -> outputs``), CPU kernel and fake kernel;
    ``eager``: what the eager node runs instead of ``impl``, where it may do better than an op can
    (outputs laid out as the inputs are, gradients not wanted left None; default ``impl``)."""
    schema: str
    impl: Callable
    fake: Callable
    eager: Optional[Callable] = None


def _name(schema: str) -> str:
    return schema.split("(", 1)[0]


def _leading_tensors(schema: str) -> int:
    """How many arguments of ``schema`` are plain tensors before its first other argument."""
    arguments = schema.split("(", 1)[1].split(")", 1)[0].split(",")
    count = 0
    while count < len(arguments) and arguments[count].split()[0] == "Tensor":
        count += 1
    return count


class KernelFunction:
    """A function on a forward kernel and its gradient kernel, defined once: the two
    ``torch.library`` ops, the eager node and the call of whichever path the router chose.

    - ``tilegrad::<forward>`` with autograd (``setup`` + ``backward``) on ``tilegrad::<gradient>``:
      the ``torch.compile`` path (:attr:`op`).
    - :attr:`node`: a ``torch.autograd.Function`` called ``node_name`` whose forward runs
      ``forward.impl`` and whose backward runs ``gradient.impl``, no op dispatch: the eager path.
    - ``composite``: the kernels' numerics in differentiable torch ops, taking the op's arguments.

    ``backward(ctx, *grads, grad_kernel)`` is the gradient formula both paths share, ``grads`` those of
    the outputs the function returns and ``grad_kernel`` the gradient op or its impl. By default the
    op's leading tensor arguments are saved and the others kept as ``ctx.options``, and the gradient is
    ``grad_kernel(grad, *tensors, *options)``, or with grad mode on (a second derivative) recomputed
    through ``composite``. ``returns``: the indices of the op's outputs the function returns (default:
    its one output); ``materialize_grads=False``: the node leaves an unused output's gradient None.
    """

    def __init__(self, forward: OpKernel, gradient: OpKernel, *, node_name: str, node_doc: str,
                 composite: Callable, torch_function: Optional[Callable] = None, setup: Optional[Callable] = None,
                 backward: Optional[Callable] = None, returns: Optional[Sequence[int]] = None,
                 materialize_grads: bool = True) -> None:
        self.composite = composite
        self.torch_function = torch_function
        self._returns = None if returns is None else tuple(returns)
        setup = setup or self._save_leading_tensors(_leading_tensors(forward.schema))
        backward = backward or self._composite_gradient
        define(gradient.schema, gradient.impl, gradient.fake)
        grad_op = getattr(torch.ops.tilegrad, _name(gradient.schema))

        def formula(ctx, *grads):
            returned = grads if self._returns is None else (grads[i] for i in self._returns)
            return backward(ctx, *returned, grad_op)

        self.autograd = (formula, setup)
        define(forward.schema, forward.impl, forward.fake, self.autograd)
        self.op = getattr(torch.ops.tilegrad, _name(forward.schema))
        self.node = self._eager_node(node_name, node_doc, forward.eager or forward.impl,
                                     gradient.eager or gradient.impl, setup, backward, materialize_grads)

    def run(self, path: Path, *args):
        """The function on the router's ``path``, with the op's arguments (``Path.TORCH`` calls
        ``torch_function``: a family whose torch function takes other arguments calls it itself)."""
        if path is Path.KERNEL:
            return self.node.apply(*args)
        if path is Path.COMPILE:
            return self._returned(self.op(*args))
        if path is Path.COMPOSITE:
            return self.composite(*args)
        return self.torch_function(*args)

    def _returned(self, outputs):
        """What the function returns of the op's ``outputs``."""
        if self._returns is None:
            return outputs
        if len(self._returns) == 1:
            return outputs[self._returns[0]]
        return tuple(outputs[i] for i in self._returns)

    def _eager_node(self, name, doc, impl, grad_impl, setup, backward, materialize_grads) -> type:
        returned = self._returned

        def forward(ctx, *inputs):
            outputs = impl(*inputs)
            setup(ctx, inputs, outputs)
            if not materialize_grads:
                ctx.set_materialize_grads(False)
            return returned(outputs)

        def node_backward(ctx, *grads):
            return backward(ctx, *grads, grad_impl)

        return type(name, (torch.autograd.Function,), {
            "__doc__": doc, "__module__": impl.__module__, "__qualname__": name,
            "forward": staticmethod(forward), "backward": staticmethod(node_backward)})

    @staticmethod
    def _save_leading_tensors(count: int) -> Callable:
        def setup(ctx, inputs, output) -> None:
            ctx.save_for_backward(*inputs[:count])
            ctx.options = inputs[count:]
        return setup

    def _composite_gradient(self, ctx, grad: Tensor, grad_kernel):
        tensors = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph=True: differentiable, through the composite
            grads = recompute_grads(lambda *t: self.composite(*t, *ctx.options), tensors, (grad,))
        else:
            grads = grad_kernel(grad, *tensors, *ctx.options)
        grads = (grads,) if isinstance(grads, Tensor) else tuple(grads)
        return (*grads, *(None,) * len(ctx.options))
