"""Zero-copy hand-off between torch tensors and the NumPy arrays tilegrad's core takes.

A CPU strided tensor becomes a NumPy array over the same memory (``Tensor.numpy()``; bfloat16, which
NumPy cannot name, travels as an int16 view re-labelled ``ml_dtypes.bfloat16``), so the C++ kernels
read the caller's tensors and write into tensors torch allocated. Nothing is copied.
"""

from typing import Optional

import ml_dtypes
import numpy as np
import torch

# Floating dtypes tilegrad's kernels compute on.
KERNEL_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def unsupported_reason(t: torch.Tensor, float_dtypes=KERNEL_FLOAT_DTYPES) -> Optional[str]:
    """Why ``t`` cannot go to a tilegrad kernel (None when it can): device, layout or dtype."""
    if t.device.type != "cpu":
        return f"device {t.device}"
    if t.layout != torch.strided:
        return f"layout {t.layout}"
    if t.dtype not in float_dtypes:
        return f"dtype {t.dtype}"
    return None


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a CPU strided tensor (same memory; any strides; writes go to ``t``)."""
    if t.requires_grad:
        t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def optional_numpy(t: Optional[torch.Tensor]) -> Optional[np.ndarray]:
    """``as_numpy`` for an optional tensor."""
    return None if t is None else as_numpy(t)


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """The tensor over a NumPy array's memory (bfloat16 through an int16 view)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
