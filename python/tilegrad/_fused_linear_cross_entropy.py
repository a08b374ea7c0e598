"""Vocabulary-parallel fused linear cross entropy (``aclnnFusedLinearOnlineMaxSum``,
``aclnnFusedCrossEntropyLossWithMaxSum``, ``aclnnFusedLinearCrossEntropyLossGrad``) and the
single-process ``fused_linear_cross_entropy``."""

import threading
from typing import Optional, Tuple

import ml_dtypes
import numpy as np

from . import _core
from ._args import check_bool, check_float, check_int, check_str


def fused_linear_online_max_sum(input: np.ndarray, weight: np.ndarray, target: np.ndarray,
                                vocab_start_index: int, vocab_end_index: int, return_logits: bool = False
                                ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           Optional[np.ndarray]]:
    """Per-rank statistics of a vocabulary-parallel cross entropy (CANN ``aclnnFusedLinearOnlineMaxSum``).

    This rank holds vocabulary ids ``[vocab_start_index, vocab_end_index)`` as the first rows of the
    output projection ``weight`` (``V >= vocab_end_index - vocab_start_index`` rows, as the vendor allows).
    With ``L = input @ weight.T`` (fp32 accumulation), for each row ``i``:

    - ``logits_max[i] = max_j L[i, j]``, ``sum_exp_logits[i] = sum_j exp(L[i, j] - logits_max[i])``
      (over all ``V`` columns);
    - ``target_mask`` bit ``i`` (uint8, bit-packed LSB first, ``ceil(BT/8)`` bytes) is 1 when
      ``target[i]`` is outside ``[vocab_start_index, vocab_end_index)``; the padding bits of the last
      byte are those of a target 0 (1 unless 0 is in the shard), as the vendor's;
    - ``masked_target[i] = target[i] - vocab_start_index`` inside the shard, else 0;
    - ``predicted_logits[i] = L[i, masked_target[i]] - logits_max[i]`` inside the shard, else 0.

    Args:
        input: ``(BT, H)`` float16, bfloat16 or float32.
        weight: ``(V, H)``, same dtype, ``V >= vocab_end_index - vocab_start_index`` (more: ValueError).
        target: ``(BT,)`` int32 or int64 global vocabulary ids.
        return_logits: also return ``L`` rounded to the input dtype (``(BT, V)``).

    Returns:
        ``(logits_max, sum_exp_logits, predicted_logits, target_mask, masked_target, logits)``;
        the first three float32 ``(BT,)``, ``masked_target`` of target's dtype, ``logits`` None
        unless asked. Between ranks all-reduce: ``gmax = max(logits_max)``,
        ``gsum = sum(sum_exp_logits * exp(logits_max - gmax))``,
        ``gpred = sum(where(mask, 0, predicted_logits + logits_max - gmax))``.
    """
    op = "aclnnFusedLinearOnlineMaxSum"
    return tuple(_core.fused_linear_online_max_sum(input, weight, target,
                                                   check_int(op, "vocab_start_index", vocab_start_index),
                                                   check_int(op, "vocab_end_index", vocab_end_index),
                                                   check_bool(op, "return_logits", return_logits)))


def _zero_label_smoothing(label_smoothing) -> float:
    """The vendor's operator takes label smoothing 0 only; any other value (even 1e-50, which a float32
    cast would turn into 0) is refused, never silently dropped."""
    value = check_float("aclnnFusedCrossEntropyLossWithMaxSum", "label_smoothing", label_smoothing)
    if value != 0.0:
        raise ValueError(f"aclnnFusedCrossEntropyLossWithMaxSum: labelSmoothing must be 0, got {label_smoothing!r}")
    return value


def fused_cross_entropy_loss_with_max_sum(logits_max: np.ndarray, sum_exp_logits: np.ndarray,
                                          predicted_logits: np.ndarray, label_smoothing: float = 0.0,
                                          logits: Optional[np.ndarray] = None
                                          ) -> Tuple[np.ndarray, Optional[np.ndarray]]:
    """Loss from the all-reduced statistics (CANN ``aclnnFusedCrossEntropyLossWithMaxSum``).

    ``loss = log(sum_exp_logits) - predicted_logits`` (float32 ``(BT,)``). With ``logits`` (``(BT, V)``,
    float32/float16/bfloat16) also ``softmax = exp(logits - logits_max[:, None]) / sum_exp_logits[:, None]``
    (float32), else ``softmax`` is None. ``label_smoothing`` must be 0.
    """
    return tuple(_core.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp_logits, predicted_logits,
                                                             _zero_label_smoothing(label_smoothing), logits))


def fused_linear_cross_entropy_loss_grad(grad: np.ndarray, input: np.ndarray, weight: np.ndarray,
                                         target_mask: np.ndarray, masked_target: np.ndarray,
                                         label_smoothing: float = 0.0, logits_max: Optional[np.ndarray] = None,
                                         sum_exp_logits: Optional[np.ndarray] = None,
                                         softmax: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
    """Gradients of the vocabulary-parallel cross entropy (CANN ``aclnnFusedLinearCrossEntropyLossGrad``).

    ``G = softmax`` when given (high-performance mode; the array is never modified), else
    ``G = exp(input @ weight.T - logits_max[:, None]) / sum_exp_logits[:, None]`` recomputed block by
    block (memory-saving mode: the ``(BT, V)`` matrix never exists whole). For each row whose
    ``target_mask`` bit is 0: ``G[i, masked_target[i]] -= 1``; then ``G[i, :] *= grad[i]``; G is
    rounded once to the input dtype; ``grad_input = G @ weight`` ``(BT, H)`` and
    ``grad_weight = G.T @ input`` ``(V, H)``, accumulated in float32 and rounded once.

    Args:
        grad: ``(BT,)`` float32 upstream gradient per row.
        input, weight: ``(BT, H)``, ``(V, H)`` float16, bfloat16 or float32 (same dtype).
        target_mask: uint8 bit-packed LSB first (``len * 8 >= BT``) or bool ``(BT,)``; 1 = target not
            in this shard.
        masked_target: ``(BT,)`` int32/int64 local target (must be in ``[0, V)`` where the bit is 0,
            else IndexError).
        logits_max, sum_exp_logits: ``(BT,)`` float32 global statistics (memory-saving mode).
        softmax: ``(BT, V)`` float32 (high-performance mode).

    Returns:
        ``(grad_input, grad_weight)`` in the input dtype.
    """
    return tuple(_core.fused_linear_cross_entropy_loss_grad(grad, input, weight, target_mask, masked_target,
                                                            check_float("aclnnFusedLinearCrossEntropyLossGrad",
                                                                        "label_smoothing", label_smoothing),
                                                            logits_max, sum_exp_logits,
                                                            softmax))


def fused_linear_cross_entropy(input: np.ndarray, weight: np.ndarray, target: np.ndarray,
                               ignore_index: int = -100, reduction: str = "mean", *,
                               bias: Optional[np.ndarray] = None, class_weight: Optional[np.ndarray] = None,
                               label_smoothing: float = 0.0, lse_square_scale: float = 0.0,
                               softcap: Optional[float] = None, grad_output=None, filter_eps=None,
                               memory_budget: Optional[int] = None,
                               filter_tolerance: Optional[float] = None, grad_input: bool = True,
                               grad_weight: bool = True, grad_bias: bool = True,
                               filter_weight_bound: str = "column") -> Tuple[np.ndarray, ...]:
    """Loss and all gradients of ``cross_entropy(linear(input, weight, bias), target)`` in one call.

    Same values as ``torch.nn.functional.linear_cross_entropy(input, weight, target, linear_bias=bias,
    weight=class_weight, ignore_index=ignore_index, reduction=reduction,
    label_smoothing=label_smoothing)`` followed by ``backward(grad_output)``, without ever
    materializing the ``(BT, V)`` logits, plus two extras: z-loss (``lse_square_scale * lse**2`` per
    non-ignored row, added to the loss; its mean divides by the number of non-ignored rows) and a
    logit softcap (logits ``softcap * tanh(z / softcap)``, Gemma 2). Every output is bit-identical
    for any thread count.

    Plans (chosen from ``memory_budget``, default ``TILEGRAD_FLCE_BUDGET`` or 64 MiB; see
    :func:`fused_linear_cross_entropy_plan`): "whole" (the fp32 logits fit: three GEMMs), "chunked"
    (row chunks whose fp32 logits fit next to the fp32 grad_weight accumulator, which for float32
    weights is the output itself: three GEMMs per chunk, grad_weight accumulated in fp32 and rounded
    once), "vocab_outer" (forward statistics, then the gradient recomputes the logits block by block:
    four GEMMs, small memory).

    Args:
        input: ``(BT, H)`` float16, bfloat16 or float32.
        weight: ``(V, H)`` same dtype (the projection).
        target: ``(BT,)`` int32/int64 in ``[0, V)`` or ``ignore_index`` (IndexError otherwise).
        ignore_index: rows with this target have loss 0 and zero gradient.
        reduction: ``"mean"`` (CE over the sum of the targets' class weights, z-loss over the number
            of non-ignored rows; NaN if every row is ignored, gradients then 0), ``"sum"`` or ``"none"``.
        bias: optional ``(V,)`` linear bias, same dtype (its gradient is returned).
        class_weight: optional ``(V,)`` float class weights (PyTorch's ``weight``).
        label_smoothing: in ``[0, 1]``.
        lse_square_scale: z-loss coefficient (>= 0).
        softcap: optional logit cap, a float > 0; None or ``inf`` (the limit, ``z``): no cap.
        grad_output: upstream gradient: a scalar, or ``(BT,)`` per row for ``"none"`` (default 1).
        filter_eps: gradient filtering. None (default): exact. ``"auto"``: error-bounded filtering
            at the default tolerance, the same as ``filter_tolerance=filter_tolerance_default(dtype)``
            (see ``filter_tolerance``). A float ``eps > 0`` (unbounded, Cut Cross Entropy's test):
            each block of the logits gradient the plan forms (a row chunk, or a vocabulary-outer
            block) is cut into blocks of 64 rows x 128 vocabulary columns, and every block whose
            entries of ``p - onehot(target)`` (before the upstream gradient and the mean's 1/N) are
            all below ``eps`` in magnitude is left out of both gradient GEMMs; the dropped entries
            are each below ``eps`` but their sum is not bounded (on flat distributions it changes
            grad_input by tens of percent).
        memory_budget: workspace bytes for the plan choice (default ``TILEGRAD_FLCE_BUDGET``).
        filter_tolerance: error-bounded gradient filtering with tolerance ``0 < tau < 1`` (excludes a
            float ``filter_eps``). With ``G`` the logits gradient, ``S_i = sum_j |G_ij| ||weight_j||``
            and ``T_j = sum_i |G_ij| ||input_i||``: a 64 x 128 block is left out of
            ``grad_input = G @ weight`` only while every row it covers keeps
            ``sum over dropped j of |G_ij| ||weight_j|| <= tau * S_i``, so
            ``||grad_input_i - exact_i|| <= tau * S_i`` on any distribution; likewise out of
            ``grad_weight = G.T @ input`` with ``T_j`` per vocabulary column. Rounding ``G`` to the
            input dtype (unit roundoff ``u``) already moves ``grad_input_i`` by up to ``u * S_i``;
            the default ``tau = u`` (2**-8 for bfloat16, 2**-11 for float16, 2**-24 for float32)
            at most doubles that bound. The loss and grad_bias stay exact, NaN is never dropped;
            :func:`fused_linear_cross_entropy_filter_stats` gives the blocks skipped and the largest
            dropped fractions.
        filter_weight_bound: grad_weight's bound under bounded filtering. ``"column"`` (default):
            ``||grad_weight_j - exact_j|| <= tau * T_j`` per vocabulary column, so a rare token's
            column (small entries spread over every row) is never dropped and the grad_weight GEMM
            is practically never filtered. ``"average"``: ``<= tau * (T_j + Tbar)`` with
            ``Tbar = sum_k T_k / V``, the average column's: columns above the average keep a
            ``2 * tau`` relative bound, columns far under it (rare tokens) may be dropped whole,
            so both gradient GEMMs are filtered on concentrated distributions.
        grad_input, grad_weight, grad_bias: False skips that gradient (its GEMM, and for
            ``grad_weight`` the fp32 accumulator of 16-bit weights, so a frozen projection takes the
            three-GEMM plans at a smaller budget); None is returned in its place. All False: the loss
            alone (one GEMM).

    Returns:
        ``(loss, grad_input, grad_weight)``, then ``grad_bias`` if ``bias`` was given, then
        ``z_loss`` (the z-loss part alone, shaped like ``loss``) if ``lse_square_scale != 0``. loss
        and z_loss are float32 (shape ``()``, or ``(BT,)`` for "none"), gradients in the input dtype.
    """
    op = "fused_linear_cross_entropy"
    eps, tol = filter_settings(filter_eps, filter_tolerance, getattr(input, "dtype", None))
    weight_average = filter_weight_average(filter_weight_bound)
    cap = _softcap(softcap)
    if memory_budget is not None and check_int(op, "memory_budget", memory_budget) <= 0:
        raise ValueError(f"fused_linear_cross_entropy: memory_budget must be None or > 0 bytes, got {memory_budget!r}")
    go = None if grad_output is None else np.asarray(grad_output, dtype=np.float32)
    loss, gi, gw, gb, zl, blocks, bounded = _core.fused_linear_cross_entropy(
        input, weight, target, check_int(op, "ignore_index", ignore_index), reduction, bias, class_weight,
        check_float(op, "label_smoothing", label_smoothing), check_float(op, "lse_square_scale", lse_square_scale),
        cap, go, 0 if memory_budget is None else int(memory_budget), eps, tol,
        check_bool(op, "grad_input", grad_input), check_bool(op, "grad_weight", grad_weight),
        check_bool(op, "grad_bias", grad_bias), weight_average)
    _last_filter_blocks.value = blocks
    _last_filter_blocks.bounded = dict(bounded, tolerance=tol)
    out = (loss, gi, gw)
    if bias is not None:
        out += (gb,)
    if lse_square_scale != 0.0:
        out += (zl,)
    return out


def _softcap(softcap) -> float:
    """The core's softcap (0.0: no cap) of ``softcap``: None or ``inf`` (the limit of
    ``softcap * tanh(z / softcap)``, which is ``z``) mean no cap; otherwise a finite float > 0."""
    if softcap is None:
        return 0.0
    cap = check_float("fused_linear_cross_entropy", "softcap", softcap)
    if cap == np.inf:
        return 0.0
    if not (np.isfinite(cap) and cap > 0.0):
        raise ValueError(f"fused_linear_cross_entropy: softcap must be a float > 0, or None / inf for no cap, "
                         f"got {softcap!r}")
    return cap


def filter_settings(filter_eps, filter_tolerance, dtype) -> Tuple[float, float]:
    """``(eps, tolerance)`` of the filtering arguments for inputs of ``dtype`` (0.0: off; at most one is
    set): ``filter_eps`` None, "auto" (bounded at :func:`filter_tolerance_default`) or a float >= 0
    (the per-entry threshold); ``filter_tolerance`` None or a float in [0, 1) (bounded; 0.0: off).
    A tolerance of 1 or more bounds nothing: every row's whole gradient is within it of the exact one
    (``||exact_i|| <= S_i``), so every block could be dropped."""
    op = "fused_linear_cross_entropy"
    tol = 0.0
    if filter_tolerance is not None:
        tol = check_float(op, "filter_tolerance", filter_tolerance)
        if not 0.0 <= tol < 1.0:
            raise ValueError(f"{op}: filter_tolerance must be None or a float in [0, 1) (the largest fraction of "
                             f"a row's bound sum the filter may drop; 1 or more would allow dropping every block), "
                             f"got {filter_tolerance!r}")
    if isinstance(filter_eps, str):
        if filter_eps != "auto":
            raise ValueError(f"{op}: filter_eps must be None, 'auto' or a float >= 0, got {filter_eps!r}")
        if filter_tolerance is not None:
            raise ValueError(f"{op}: filter_eps='auto' is bounded filtering at the default tolerance; "
                             f"pass filter_tolerance={filter_tolerance!r} alone")
        return 0.0, filter_tolerance_default(dtype)
    eps = filter_threshold(filter_eps, dtype)
    if eps > 0.0 and tol > 0.0:
        raise ValueError(f"{op}: filter_eps={filter_eps!r} (unbounded) and filter_tolerance={filter_tolerance!r} "
                         "(bounded) exclude each other: set one")
    return eps, tol


FILTER_WEIGHT_BOUNDS = ("column", "average")


def filter_weight_average(filter_weight_bound) -> bool:
    """True for ``filter_weight_bound="average"``, False for "column"; anything else is refused."""
    if check_str("fused_linear_cross_entropy", "filter_weight_bound", filter_weight_bound) not in FILTER_WEIGHT_BOUNDS:
        raise ValueError(f"fused_linear_cross_entropy: filter_weight_bound must be one of {FILTER_WEIGHT_BOUNDS}, "
                         f"got {filter_weight_bound!r}")
    return filter_weight_bound == "average"


def filter_tolerance_default(dtype) -> float:
    """The unit roundoff of ``dtype`` (``finfo(dtype).eps / 2``: 2**-8 for bfloat16, 2**-11 for float16,
    2**-24 for float32): G rounded to the dtype already moves each row of grad_input by up to this
    fraction of the bound sum, so filtering at it at most doubles the worst case."""
    if dtype is None or np.dtype(dtype) not in _FILTER_DTYPES:
        raise TypeError(f"fused_linear_cross_entropy: filter_eps='auto' needs a float16, bfloat16 or float32 "
                        f"input, got dtype {dtype}")
    return float(ml_dtypes.finfo(dtype).eps) / 2.0


def filter_threshold(filter_eps, dtype) -> float:
    """The per-entry threshold of a float ``filter_eps`` (None or a finite float >= 0; 0.0: off). "auto"
    means bounded filtering (:func:`filter_settings`), so it has no threshold: 0.0."""
    op = "fused_linear_cross_entropy"
    if filter_eps is None:
        return 0.0
    if isinstance(filter_eps, str):
        filter_settings(filter_eps, None, dtype)  # checks the string and the dtype
        return 0.0
    eps = check_float(op, "filter_eps", filter_eps)
    if not (np.isfinite(eps) and eps >= 0.0):
        raise ValueError(f"{op}: filter_eps must be None, 'auto' or a finite float >= 0, got {filter_eps!r}")
    return eps


_FILTER_DTYPES = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32))


class _LastFilterBlocks(threading.local):
    value = (0, 0)
    bounded = {}


_last_filter_blocks = _LastFilterBlocks()


def fused_linear_cross_entropy_filter_stats(detail: bool = False):
    """Gradient filtering in this thread's last :func:`fused_linear_cross_entropy` call.

    ``(active, total)`` 64 x 128 logits-gradient blocks (``(0, 0)`` without filtering): a block is
    active when a gradient product ran on it. With ``detail=True``, a dict adding, for bounded
    filtering (``filter_tolerance`` or ``filter_eps="auto"``; zeros otherwise): ``tolerance``,
    ``input_blocks_run`` / ``weight_blocks_run`` (blocks the grad_input / grad_weight product ran on,
    of ``blocks``), ``input_skipped`` / ``weight_skipped`` (their skipped shares), and
    ``max_row_dropped`` / ``max_column_dropped``: the largest dropped fraction of any row's
    ``S_i`` / any vocabulary column's ``T_j`` (each at most ``tolerance``)."""
    active, total = _last_filter_blocks.value
    if not detail:
        return (active, total)
    b = dict(_last_filter_blocks.bounded) or {"blocks": 0, "input_blocks_run": 0, "weight_blocks_run": 0,
                                              "max_row_dropped": 0.0, "max_column_dropped": 0.0, "tolerance": 0.0}
    blocks = b["blocks"]
    b["input_skipped"] = 1.0 - b["input_blocks_run"] / blocks if blocks else 0.0
    b["weight_skipped"] = 1.0 - b["weight_blocks_run"] / blocks if blocks else 0.0
    return {"active": active, "total": total, **b}


def fused_linear_cross_entropy_plan(bt: int, h: int, v: int, dtype=np.float32,
                                    memory_budget: Optional[int] = None) -> dict:
    """The plan :func:`fused_linear_cross_entropy` takes for ``(BT, H) x (V, H)`` operands of ``dtype``
    at this memory budget (bytes; default ``TILEGRAD_FLCE_BUDGET`` or 64 MiB): a dict with ``plan``
    ("whole", "chunked" or "vocab_outer"), ``gemms`` (3 or 4), ``chunk_rows``, ``num_chunks``,
    ``workspace_bytes`` (logits chunk, 16-bit G chunk, fp32 grad_weight accumulator) and the budget."""
    from . import get_num_threads
    size = np.dtype(dtype).itemsize
    return dict(_core._flce_fused_tiling(int(bt), int(h), int(v), size, 0 if memory_budget is None else int(memory_budget),
                                         True, get_num_threads()))
