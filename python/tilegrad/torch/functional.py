"""``torch.nn.functional``-compatible functions whose backward runs on tilegrad's kernels.

Same signatures, defaults and results as torch's. Each function sends what tilegrad supports
(CPU dense float32 / float16 / bfloat16 tensors, class-index targets, ...) to the ``tilegrad::``
kernels and everything else to torch's own function, so a call never gives a wrong result and never
copies a large tensor behind the caller's back.

=====================================  =======================================  ===================================
tilegrad.torch                         torch equivalent                         falls back to torch's function for
=====================================  =======================================  ===================================
``silu(input, inplace=False)``         ``F.silu``                               ``inplace=True``
``cross_entropy(...)``                 ``F.cross_entropy`` (+ z-loss)           probability targets, class weights
                                                                                that require grad
``embedding(...)``                     ``F.embedding``                          ``max_norm``, ``sparse=True``, 0-d
                                                                                indices
``binary_cross_entropy_with_logits``   ``F.binary_cross_entropy_with_logits``   a target shaped unlike the input,
                                                                                weight / pos_weight that require
                                                                                grad
``linear_cross_entropy(...)``          ``F.linear_cross_entropy``               K-dim weights, a weight or bias of
                                                                                another dtype than the input, class
                                                                                weights that require grad
=====================================  =======================================  ===================================

Every function also falls back for tensors off the CPU, sparse tensors, tensor subclasses and other
dtypes (e.g. float64). Where it does not, the same arguments are accepted and the results are as
precise at every size: eager calls below a measured size (``CROSSOVER``, shared with the decoder
functions) and calls under ``torch.func`` transforms run torch ops that compute what the kernel
computes (16-bit tensors widened to float32, each result rounded once; float32 class weights and
int32 targets as the kernel takes them). Exceptions, to avoid a float32 copy of a whole weight:
``embedding`` and ``linear_cross_entropy`` with 16-bit weights take the kernel at every size, and
under ``torch.func`` run torch's own functions (16-bit gradient sums as torch's). ``torch.compile``
always takes the ``torch.ops.tilegrad`` ops.

Each function lives with its operator family (``_silu.py``, ``_cross_entropy.py``, ``_embedding.py``,
``_bce.py``, ``_linear_cross_entropy.py``: its ``torch.library`` ops, its eager autograd node, its
composite); this module is their public face, and the set ``tilegrad.torch.enable()`` routes
``torch.nn.functional`` to. The decoder-block functions (``rms_norm``, ``add_rms_norm``, ``layer_norm``,
``silu_mul``, ``swiglu``, ``gelu``, ``gelu_mul``, ``geglu``, ``rotary_position_embedding``,
``apply_rotary_pos_emb``) are exported from ``tilegrad.torch``.
"""

from ._bce import binary_cross_entropy_with_logits
from ._cross_entropy import cross_entropy
# CROSSOVER: the one crossover registry of every tilegrad.torch function; TORCH_FUNCTIONS: torch's own
# functions, captured at import (both also read from here)
from ._eager import CROSSOVER, TORCH_FUNCTIONS  # noqa: F401
from ._embedding import embedding
from ._linear_cross_entropy import linear_cross_entropy
from ._silu import silu

__all__ = ["silu", "cross_entropy", "embedding", "binary_cross_entropy_with_logits", "linear_cross_entropy"]
