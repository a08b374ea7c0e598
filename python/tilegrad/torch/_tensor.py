"""Zero-copy hand-off between torch tensors and the NumPy arrays tilegrad's core takes.

A CPU strided tensor becomes a NumPy array over the same memory (``Tensor.numpy()``; bfloat16, which
NumPy cannot name, travels as an int16 view re-labelled ``ml_dtypes.bfloat16``), so the C++ kernels
read the caller's tensors and write into tensors torch allocated. Nothing is copied.

Every call into the core also hands it torch's thread count (:func:`sync_threads`).
"""

import ctypes
import math
import os
import sys
import threading
import warnings
from typing import Optional, Sequence

import ml_dtypes
import numpy as np
import torch

from .. import _core

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


# The array-interface type of each dtype handed over directly (bfloat16 as int16, re-labelled after).
_TYPESTRS = {torch.float32: "<f4", torch.float16: "<f2", torch.bfloat16: "<i2", torch.float64: "<f8",
             torch.int64: "<i8", torch.int32: "<i4", torch.int16: "<i2", torch.int8: "|i1", torch.uint8: "|u1",
             torch.bool: "|b1", torch.complex64: "<c8", torch.complex128: "<c16"}
_PLAIN_TYPES = (torch.Tensor, torch.nn.Parameter)


class _TensorMemory:
    """A tensor's memory as NumPy's array interface describes it. The array made from it has this
    object as its base, which holds the tensor: its memory lives as long as the array, as with
    ``Tensor.numpy()``."""

    __slots__ = ("__array_interface__", "tensor")

    def __init__(self, t: torch.Tensor, typestr: str) -> None:
        itemsize = t.element_size()
        self.tensor = t
        self.__array_interface__ = {"shape": tuple(t.shape), "typestr": typestr, "data": (t.data_ptr(), False),
                                    "strides": tuple(s * itemsize for s in t.stride()), "version": 3}


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """The NumPy view of a CPU strided tensor (same memory; any strides; writes go to ``t``).

    Made from the tensor's pointer, sizes and strides (no dispatcher call: ``Tensor.numpy()`` runs
    four, and a training step hands thousands of tensors to the core); ``Tensor.numpy()`` itself
    (its checks and errors) for anything else: empty tensors, conjugate / negative views, subclasses."""
    typestr = _TYPESTRS.get(t.dtype)
    if (typestr is not None and t.is_cpu and t.layout is torch.strided and type(t) in _PLAIN_TYPES
            and not t.is_conj() and not t.is_neg() and t.numel() > 0):
        array = np.asarray(_TensorMemory(t, typestr))
    else:
        if t.requires_grad:
            t = t.detach()
        array = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()
    return array.view(ml_dtypes.bfloat16) if t.dtype == torch.bfloat16 else array


def optional_numpy(t: Optional[torch.Tensor]) -> Optional[np.ndarray]:
    """``as_numpy`` for an optional tensor."""
    return None if t is None else as_numpy(t)


def numpy_dtype(dtype: torch.dtype) -> Optional[np.dtype]:
    """The NumPy dtype of a kernel float dtype (bfloat16 as ``ml_dtypes.bfloat16``), else None."""
    return {torch.float32: np.dtype(np.float32), torch.float16: np.dtype(np.float16),
            torch.bfloat16: np.dtype(ml_dtypes.bfloat16)}.get(dtype)


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """The tensor over a NumPy array's memory (bfloat16 through an int16 view)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


# Large outputs come from a pool of recycled buffers. Measured on the project machine (a KVM guest,
# transparent huge pages in "madvise" mode): a fresh torch allocation of this size is mmap'ed on 4 KiB
# pages (torch madvises huge pages only with THP_MEM_ALLOC_ENABLE=1), so its first write costs one minor
# page fault per 4 KiB (256,000 for a 1 GB cross-entropy gradient; more than the kernel that fills it),
# and it is unmapped again on free. NumPy's large arrays are madvised to huge pages, and a recycled one
# costs no fault at all. Training repeats the same output sizes every step, so a buffer whose tensors
# are all gone (the pool holds the only reference) is handed out again, also for a request up to
# _REUSE_WASTE smaller (size classes: varying shapes reuse one buffer instead of pooling one per shape).
# The pool owns at most TILEGRAD_TORCH_POOL_MB in all (default 2048: the largest benchmarked step, cross
# entropy 8192 x 32000 float32, needs 2 x 1000 MiB; 0 disables it); beyond that outputs are ordinary
# allocations. Unused buffers are released by empty_cache() and, before a new buffer is allocated, when
# the system is short of memory.
_POOLED_MIN_BYTES = 4 << 20
_DEFAULT_POOL_MB = 2048
# A new buffer is rounded up to a size class (8 per power of two: at most 12.5% larger than asked), and
# an unused buffer is reused for any request it exceeds by at most this fraction.
_CLASSES_PER_OCTAVE = 8
_REUSE_WASTE = 0.25
# "Short of memory": less available than this fraction of the machine's memory (/proc/meminfo).
_LOW_MEMORY_FRACTION = 0.10


def _pool_limit_bytes() -> int:
    value = os.environ.get("TILEGRAD_TORCH_POOL_MB", str(_DEFAULT_POOL_MB))
    try:
        megabytes = int(value)
    except ValueError:
        warnings.warn(f"TILEGRAD_TORCH_POOL_MB must be a whole number of MiB, got {value!r}; using "
                      f"{_DEFAULT_POOL_MB}", RuntimeWarning, stacklevel=2)
        megabytes = _DEFAULT_POOL_MB
    return max(0, megabytes) << 20


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to its size class: a multiple of 1/8 of the power of two below it."""
    step = max(1, (1 << (max(nbytes, 1).bit_length() - 1)) // _CLASSES_PER_OCTAVE)
    return -(-nbytes // step) * step


def memory_is_low(meminfo: str = "/proc/meminfo") -> bool:
    """True when the system has less than _LOW_MEMORY_FRACTION of its memory available (False where
    /proc/meminfo cannot be read). Read only before a new buffer is allocated, which costs far more."""
    try:
        with open(meminfo) as f:
            fields = dict(line.split(":", 1) for line in f)
        total = int(fields["MemTotal"].split()[0])
        available = int(fields["MemAvailable"].split()[0])
    except (OSError, KeyError, ValueError):
        return False
    return available < _LOW_MEMORY_FRACTION * total


def _trim_malloc() -> None:
    """Return freed heap memory to the system: buffers below glibc's mmap threshold (which grows to
    32 MiB as large blocks are freed) live on the heap, where free() alone keeps them resident."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


class _BufferPool:
    """Byte buffers (NumPy) recycled once no tensor views them any more; safe from many threads.

    A buffer is in use while anything else references it: a tensor over it, or a NumPy view of it
    (``take`` returns ``buffer[:nbytes]``, whose ``base`` is the buffer)."""

    def __init__(self, limit_bytes: int, memory_is_low=memory_is_low) -> None:
        self.limit_bytes = limit_bytes
        self._memory_is_low = memory_is_low
        self._buffers: list = []
        self._lock = threading.Lock()

    def _unused(self) -> list:
        """The buffers no tensor views any more: the pool's list holds the only reference
        (getrefcount counts that one, the loop variable and its own argument)."""
        return [b for b in self._buffers if sys.getrefcount(b) == 3]

    def _best_fit(self, unused: list, nbytes: int) -> Optional[np.ndarray]:
        """The smallest unused buffer that holds ``nbytes`` and exceeds it by at most _REUSE_WASTE."""
        fits = [b for b in unused if nbytes <= b.nbytes <= nbytes * (1 + _REUSE_WASTE)]
        return min(fits, key=lambda b: b.nbytes) if fits else None

    def _drop(self, buffers: list) -> None:
        dropped = {id(b) for b in buffers}
        self._buffers = [b for b in self._buffers if id(b) not in dropped]

    def take(self, nbytes: int) -> np.ndarray:
        """``nbytes`` bytes: a view of an unused pooled buffer, else of a new one (pooled while within
        the limit; unused buffers are dropped, oldest first, to make room)."""
        with self._lock:
            unused = self._unused()
            buffer = self._best_fit(unused, nbytes)
            if buffer is not None:
                return buffer[:nbytes]
            capacity = size_class(nbytes)
            if unused and self._memory_is_low():
                self._drop(unused)
                unused = []
                _trim_malloc()
            pooled = sum(b.nbytes for b in self._buffers)
            evict = []
            for b in unused:
                if pooled + capacity <= self.limit_bytes:
                    break
                pooled -= b.nbytes
                evict.append(b)
            self._drop(evict)
            del unused, evict
            if pooled + capacity > self.limit_bytes:
                return np.empty(nbytes, np.uint8)
            buffer = np.empty(capacity, np.uint8)
            self._buffers.append(buffer)
            return buffer[:nbytes]

    def release_unused(self) -> int:
        """Drop every buffer no tensor views and hand the memory back to the system; the bytes freed."""
        with self._lock:
            unused = self._unused()
            freed = sum(b.nbytes for b in unused)
            self._drop(unused)
            del unused
        _trim_malloc()
        return freed

    def pooled_bytes(self) -> int:
        """Bytes the pool holds (in use or not)."""
        with self._lock:
            return sum(b.nbytes for b in self._buffers)


_pool = _BufferPool(_pool_limit_bytes())


def empty_cache() -> int:
    """Release the output buffers tilegrad.torch keeps for reuse (those no tensor uses any more) back
    to the system; returns the bytes released. Buffers still viewed by a tensor stay until it is gone.
    Like ``torch.cuda.empty_cache()``: later large outputs are fresh allocations again until the pool
    refills (its bound: ``TILEGRAD_TORCH_POOL_MB``)."""
    return _pool.release_unused()


def new_output(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    """A C-contiguous CPU tensor for a kernel to write: large ones from the recycled pool."""
    shape = tuple(shape)
    nbytes = dtype.itemsize * math.prod(shape)
    if nbytes < _POOLED_MIN_BYTES or _pool.limit_bytes == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.from_numpy(_pool.take(nbytes)).view(dtype).view(shape)


def dense_order(t: torch.Tensor) -> Optional[list]:
    """``t``'s dims from the outermost in memory to the innermost when ``t`` is a permutation of a
    C-contiguous tensor (Hugging Face's ``(B, S, N, D)`` projections seen as ``(B, N, S, D)``), else None."""
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    expected = 1
    for d in reversed(order):
        if t.shape[d] > 1 and t.stride(d) != expected:
            return None
        expected *= t.shape[d]
    return order


def new_output_like(like: torch.Tensor, last_dim: Optional[int] = None) -> torch.Tensor:
    """A tensor for a kernel to write of ``like``'s shape (its last dim ``last_dim`` where given) and
    dtype, laid out in memory in ``like``'s dim order, as ``torch.empty_like`` lays it out: a gradient
    or output the model views back through the inverse permutation then needs no copy."""
    shape = list(like.shape)
    if last_dim is not None:
        shape[-1] = last_dim
    order = dense_order(like)
    if order is None or order == sorted(order):
        return new_output(shape, like.dtype)
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    if like.dtype.itemsize * step < _POOLED_MIN_BYTES or _pool.limit_bytes == 0:
        return torch.empty_strided(shape, strides, dtype=like.dtype)
    return new_output((step,), like.dtype).as_strided(shape, strides)


# ---------------------------------------------------------------------------------------------------
# One thread knob: tilegrad calls made through tilegrad.torch use torch.get_num_threads(). torch and
# tilegrad share one GNU OpenMP runtime (same libgomp.so.1) and its thread pool; tilegrad passes its
# thread count to each parallel region explicitly, so following torch's setting keeps the two from
# oversubscribing the cores.


def sync_threads() -> None:
    """Give tilegrad torch's current thread count (a no-op when they already agree).

    Compared with tilegrad's own current setting, not with the last value given: a
    ``tilegrad.set_num_threads(1)`` in between must not make a later ``torch.set_num_threads(2)``
    look unchanged. Both reads are plain integer getters (well under a microsecond)."""
    n = torch.get_num_threads()
    if n != _core.get_num_threads():
        _core.set_num_threads(n)
