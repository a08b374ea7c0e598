"""tilegrad: fast CPU backward operators with the exact semantics of Huawei CANN ``aclnn``.

Every operator takes NumPy arrays (float32, float16 or ``ml_dtypes.bfloat16``; any strides),
computes in float32 and rounds each output element once. Errors raise ``ValueError`` (bad shape,
dtype or value), ``TypeError`` (not an array) or ``IndexError`` (an index out of range) with the
message the aclnn C ABI reports through ``aclGetRecentErrMsg``; the aclnn status code is the
exception's ``code`` attribute.
"""

from importlib import metadata as _metadata

from ._runtime import (
    active_isa,
    build_info,
    detected_isa,
    get_num_threads,
    max_isa,
    set_max_isa,
    set_num_threads,
)
from ._paths import get_ascend_home, get_cmake_dir, get_include, get_library
from ._adamw import adamw_grad_norm, apply_adam_w, fused_adamw
from ._binary_cross_entropy_with_logits import binary_cross_entropy_with_logits, binary_cross_entropy_with_logits_backward
from ._embedding_dense_backward import embedding_dense_backward
from ._flash_attention_score import flash_attention_score, flash_attention_score_grad
from ._fused_linear_cross_entropy import (
    fused_cross_entropy_loss_with_max_sum,
    fused_linear_cross_entropy,
    fused_linear_cross_entropy_filter_stats,
    fused_linear_cross_entropy_loss_grad,
    fused_linear_cross_entropy_plan,
    fused_linear_online_max_sum,
)
from ._add_rms_norm import add_rms_norm, add_rms_norm_backward
from ._cross_entropy import cross_entropy_loss, cross_entropy_loss_grad
from ._ge_glu import ge_glu, ge_glu_backward, gelu_mul, gelu_mul_backward
from ._gelu import gelu, gelu_backward
from ._layer_norm import layer_norm, layer_norm_backward
from ._rms_norm import rms_norm, rms_norm_grad
from ._rotary_position_embedding import rotary_position_embedding, rotary_position_embedding_grad
from ._linear import linear, linear_backward
from ._silu_backward import silu_backward
from ._swi_glu import silu_mul, silu_mul_grad, swi_glu, swi_glu_grad

# The installed distribution's metadata, written from pyproject.toml (the version's one source).
__version__ = _metadata.version("tilegrad")

__all__ = [
    "__version__",
    "active_isa",
    "add_rms_norm",
    "add_rms_norm_backward",
    "adamw_grad_norm",
    "apply_adam_w",
    "binary_cross_entropy_with_logits",
    "binary_cross_entropy_with_logits_backward",
    "build_info",
    "cross_entropy_loss",
    "cross_entropy_loss_grad",
    "detected_isa",
    "embedding_dense_backward",
    "flash_attention_score",
    "flash_attention_score_grad",
    "fused_adamw",
    "fused_cross_entropy_loss_with_max_sum",
    "fused_linear_cross_entropy",
    "fused_linear_cross_entropy_filter_stats",
    "fused_linear_cross_entropy_loss_grad",
    "fused_linear_cross_entropy_plan",
    "fused_linear_online_max_sum",
    "ge_glu",
    "ge_glu_backward",
    "gelu_mul",
    "gelu_mul_backward",
    "gelu",
    "gelu_backward",
    "get_ascend_home",
    "get_cmake_dir",
    "get_include",
    "get_library",
    "get_num_threads",
    "layer_norm",
    "layer_norm_backward",
    "linear",
    "linear_backward",
    "max_isa",
    "rms_norm",
    "rms_norm_grad",
    "rotary_position_embedding",
    "rotary_position_embedding_grad",
    "set_max_isa",
    "set_num_threads",
    "silu_backward",
    "silu_mul",
    "silu_mul_grad",
    "swi_glu",
    "swi_glu_grad",
]
