"""tilegrad: fast CPU backward operators with the exact semantics of Huawei CANN ``aclnn``.

Every operator takes NumPy arrays (float32, float16 or ``ml_dtypes.bfloat16``; any strides),
computes in float32 and rounds each output element once. Errors raise ``ValueError`` (bad shape,
dtype or value), ``TypeError`` (not an array) or ``IndexError`` (an index out of range) with the
message the aclnn C ABI reports through ``aclGetRecentErrMsg``; the aclnn status code is the
exception's ``code`` attribute.
"""

from ._runtime import (
    active_isa,
    build_info,
    detected_isa,
    get_num_threads,
    max_isa,
    set_max_isa,
    set_num_threads,
)
from ._paths import get_cmake_dir, get_include, get_library
from ._cross_entropy import cross_entropy_loss, cross_entropy_loss_grad
from ._silu_backward import silu_backward

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "active_isa",
    "build_info",
    "cross_entropy_loss",
    "cross_entropy_loss_grad",
    "detected_isa",
    "get_cmake_dir",
    "get_include",
    "get_library",
    "get_num_threads",
    "max_isa",
    "set_max_isa",
    "set_num_threads",
    "silu_backward",
]
