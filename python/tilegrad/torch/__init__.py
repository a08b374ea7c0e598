"""tilegrad for PyTorch: autograd-aware functions, nn modules, one-line model patching.

    import tilegrad.torch as tgt
    loss = tgt.cross_entropy(logits, target, label_smoothing=0.1)       # backward on tilegrad
    loss = tgt.linear_cross_entropy(hidden, lm_head.weight, target)     # logits never whole
    out = tgt.scaled_dot_product_attention(q, k, v, is_causal=True)  # flash attention on tilegrad
    h, residual = tgt.add_rms_norm(residual, x, norm.weight)          # residual + x, then RMSNorm, fused
    tgt.patch(model)           # swap supported modules in place; tgt.unpatch(model) undoes it
    tgt.enable()               # route torch.nn.functional globally; tgt.disable() undoes it
    tgt.empty_cache()          # give the recycled output buffers back (TILEGRAD_TORCH_POOL_MB bounds them)

The operators are registered with ``torch.library`` as ``torch.ops.tilegrad.*`` (fake kernels and
autograd formulas), so ``torch.compile(fullgraph=True)`` traces through them. CPU tensors go to the
C++ core without a copy. tilegrad calls made from here use ``torch.get_num_threads()`` threads.
Needs the optional extra: ``pip install "tilegrad[torch]"``.
"""

try:
    import torch  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("tilegrad.torch needs PyTorch: pip install 'tilegrad[torch]'") from error

# The floor of the torch extra (pyproject.toml): F.linear_cross_entropy and nn.LinearCrossEntropyLoss,
# which tilegrad.torch follows and derives from, appeared in torch 2.13.
MINIMUM_TORCH = (2, 13)


def _require_torch(version: str) -> None:
    """Refuse a torch older than the supported range with what to do, instead of an AttributeError
    from deep inside the import."""
    release = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    if release < MINIMUM_TORCH:
        floor = ".".join(map(str, MINIMUM_TORCH))
        raise ImportError(f"tilegrad.torch needs torch>={floor}, found torch {version}: "
                          f"pip install 'torch>={floor}' (or 'tilegrad[torch]')")


_require_torch(torch.__version__)

from . import nn
from ._add_rms_norm import add_rms_norm
from ._attention import scaled_dot_product_attention
from ._gelu import geglu, gelu, gelu_mul
from ._layer_norm import layer_norm
from ._linear import linear
from . import optim  # tilegrad.torch.optim.AdamW
from . import checkpoint  # tilegrad.torch.checkpoint.save / load
from ._rms_norm import rms_norm
from ._rope import apply_rotary_pos_emb, rotary_position_embedding
from ._swiglu import silu_mul, swiglu
from ._tensor import empty_cache
from .functional import binary_cross_entropy_with_logits, cross_entropy, embedding, linear_cross_entropy, silu
from .patching import PatchSummary, disable, enable, patch, unpatch

__all__ = [
    "add_rms_norm",
    "apply_rotary_pos_emb",
    "binary_cross_entropy_with_logits",
    "checkpoint",
    "cross_entropy",
    "disable",
    "embedding",
    "empty_cache",
    "enable",
    "geglu",
    "gelu",
    "gelu_mul",
    "layer_norm",
    "linear",
    "linear_cross_entropy",
    "nn",
    "patch",
    "PatchSummary",
    "rms_norm",
    "rotary_position_embedding",
    "scaled_dot_product_attention",
    "silu",
    "silu_mul",
    "swiglu",
    "unpatch",
]


def __getattr__(name):
    """The distributed module loads on first use (it imports torch.distributed)."""
    if name == "distributed":
        import importlib
        return importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module 'tilegrad.torch' has no attribute {name!r}")
