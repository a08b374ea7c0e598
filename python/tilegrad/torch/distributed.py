"""Vocabulary-parallel cross entropy on torch.distributed (Megatron-style tensor parallelism).

Every rank of the process group holds the same ``hidden`` states and one contiguous slice
``[vocab_start_index, vocab_start_index + V_shard)`` of the output projection's rows. The loss of
``cross_entropy(hidden @ full_weight.T, target)`` is computed without any rank ever holding the full
vocabulary, with tilegrad's three vocabulary-parallel operators (the CANN
``aclnnFusedLinearOnlineMaxSum`` / ``aclnnFusedCrossEntropyLossWithMaxSum`` /
``aclnnFusedLinearCrossEntropyLossGrad`` trio):

    forward:  local max / sum-exp / target logit (fused GEMM, logits never whole)
              -> all-reduce MAX of the max, one SUM all-reduce of the rescaled statistics
              -> per-row loss, identical on every rank
    backward: local gradient (memory-saving mode: logits recomputed block by block)
              -> grad_hidden all-reduced (SUM), grad_weight_shard stays local

Label smoothing is layered on top (the operators take ``label_smoothing == 0`` only): it needs the mean
logit of each row over the whole vocabulary, which is ``hidden @ sum_j w_j / V``, so it costs one extra
all-reduced column and two small corrections, never the logits.

Tensors outside tilegrad's path (non-CPU, float64, ...) take an equivalent torch implementation of the
same algorithm, so the result is never wrong, only slower.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import sys
from typing import Any, Callable, Optional, Tuple

import torch
import torch.distributed as dist

import tilegrad as _tg

from ._tensor import as_numpy, from_numpy, sync_threads, unsupported_reason

__all__ = ["vocab_parallel_cross_entropy", "run_then_exit"]

_REDUCTIONS = ("none", "mean", "sum")


@dataclasses.dataclass(frozen=True)
class _Options:
    """Non-tensor arguments, passed through ``Function.apply`` as one object (no long positional lists)."""

    vocab_start_index: int
    group: Any
    ignore_index: int
    label_smoothing: float
    reduction: str


# ----------------------------------------------------------------------------------------------
# process-group helpers: without an initialized process group everything is one rank

def _distributed(group: Any) -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1


def _all_reduce(t: torch.Tensor, op: Any, group: Any) -> torch.Tensor:
    if _distributed(group):
        dist.all_reduce(t, op=op, group=group)
    return t


# ----------------------------------------------------------------------------------------------
# the two local backends: tilegrad's operators, or the same algorithm in torch ops

def _use_tilegrad(hidden: torch.Tensor, weight: torch.Tensor) -> bool:
    return unsupported_reason(hidden) is None and unsupported_reason(weight) is None


def _local_statistics(x: torch.Tensor, w: torch.Tensor, target: torch.Tensor, start: int
                      ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """This rank's ``(logits_max, sum_exp_logits, predicted_logits)``, float32 ``(BT,)`` each.

    ``predicted_logits[i] = L[i, target[i] - start] - logits_max[i]`` when the target is in the shard,
    else 0. Rows whose target must count nowhere carry target -1 (outside every shard).
    """
    end = start + w.shape[0]
    if _use_tilegrad(x, w):
        sync_threads()
        mx, sum_exp, pred, _, _, _ = _tg.fused_linear_online_max_sum(as_numpy(x), as_numpy(w), as_numpy(target),
                                                                     start, end)
        return torch.from_numpy(mx), torch.from_numpy(sum_exp), torch.from_numpy(pred)
    logits = (x @ w.T).to(_accumulation_dtype(x))
    if w.shape[0] == 0:
        mx = logits.new_full((x.shape[0],), float("-inf"))
        sum_exp = logits.new_zeros((x.shape[0],))
    else:
        mx = logits.max(dim=1).values
        sum_exp = torch.exp(logits - mx[:, None]).sum(dim=1)
    in_shard = (target >= start) & (target < end)
    local = torch.where(in_shard, target - start, 0)
    picked = logits.gather(1, local[:, None]).squeeze(1) if w.shape[0] else torch.zeros_like(mx)
    pred = torch.where(in_shard, picked - mx, 0.0)
    return mx, sum_exp, pred


def _local_gradients(grad_rows: torch.Tensor, x: torch.Tensor, w: torch.Tensor, target: torch.Tensor,
                     start: int, gmax: torch.Tensor, gsum: torch.Tensor
                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """``G = grad_rows[:, None] * (softmax(L) - onehot(target))`` on this shard; returns
    ``(G @ w, G.T @ x)`` (this rank's part of grad_hidden, and grad_weight_shard)."""
    end = start + w.shape[0]
    in_shard = (target >= start) & (target < end)
    local = torch.where(in_shard, target - start, 0)
    if _use_tilegrad(x, w):
        sync_threads()
        gi, gw = _tg.fused_linear_cross_entropy_loss_grad(
            as_numpy(grad_rows), as_numpy(x), as_numpy(w), as_numpy(~in_shard), as_numpy(local),
            logits_max=as_numpy(gmax), sum_exp_logits=as_numpy(gsum))
        return from_numpy(gi), from_numpy(gw)
    acc = _accumulation_dtype(x)
    logits = (x @ w.T).to(acc)
    g = torch.exp(logits - gmax[:, None].to(acc)) / gsum[:, None].to(acc)
    g[in_shard, local[in_shard]] -= 1.0
    g = (g * grad_rows[:, None].to(acc)).to(x.dtype)
    return g @ w, g.T @ x


# ----------------------------------------------------------------------------------------------
# the autograd function

def _accumulation_dtype(t: torch.Tensor) -> torch.dtype:
    """float32 for 16-bit inputs, the input dtype when wider."""
    return torch.promote_types(t.dtype, torch.float32)


def _row_weights(valid: torch.Tensor, reduction: str, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """(per-row factor of the reduction, number of counted rows) for mean/sum/none."""
    count = valid.sum()
    if reduction == "mean":
        # no counted rows: the loss is NaN (0/0, as in torch) but every gradient is 0, as in torch
        return valid.to(dtype) / count.clamp(min=1).to(dtype), count
    return valid.to(dtype), count


class _VocabParallelCrossEntropy(torch.autograd.Function):
    """Forward/backward of :func:`vocab_parallel_cross_entropy` on 2-D hidden and 1-D target."""

    @staticmethod
    def forward(ctx: Any, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                opts: _Options) -> torch.Tensor:
        group, start, eps = opts.group, opts.vocab_start_index, opts.label_smoothing
        valid = target != opts.ignore_index
        # -1 lies outside every shard, so ignored rows pick no target logit on any rank
        target = torch.where(valid, target, torch.full_like(target, -1))
        end = start + weight.shape[0]
        in_shard = (target >= start) & (target < end)

        mx, sum_exp, pred = _local_statistics(hidden, weight, target, start)
        gmax = _all_reduce(mx.clone(), dist.ReduceOp.MAX, group)
        # one SUM all-reduce carries: rescaled sum-exp, target logit, how many ranks own each target,
        # and (label smoothing) the local sum of logits plus the shard size for the global V
        scale = torch.where(sum_exp > 0, torch.exp(mx - gmax), 0.0)
        columns = [sum_exp * scale, torch.where(in_shard, pred + mx - gmax, 0.0), in_shard.to(sum_exp.dtype)]
        if eps:
            acc = _accumulation_dtype(hidden)
            columns.append((hidden.to(acc) @ weight.to(acc).sum(dim=0)).to(sum_exp.dtype))
        packed = torch.cat([torch.stack(columns).reshape(-1),
                            torch.tensor([float(weight.shape[0])], dtype=sum_exp.dtype)])
        packed = _all_reduce(packed, dist.ReduceOp.SUM, group)
        rows = packed[:-1].reshape(len(columns), -1)
        gsum, gpred, owners = rows[0], rows[1], rows[2]
        vocab_size = float(packed[-1])

        # every counted target must lie in exactly one shard (all ranks see the same counts, so all
        # ranks raise together and no collective is left hanging)
        bad = valid & (owners != 1)
        if bool(bad.any()):
            i = int(bad.nonzero()[0, 0])
            raise IndexError(f"vocab_parallel_cross_entropy: target[{i}] = {int(target[i])} is not in exactly one "
                             f"rank's vocabulary shard (global vocabulary size {int(vocab_size)}, "
                             f"{int(owners[i])} shards hold it)")

        if _use_tilegrad(hidden, weight) and gsum.numel():
            loss_rows = from_numpy(_tg.fused_cross_entropy_loss_with_max_sum(
                as_numpy(gmax), as_numpy(gsum), as_numpy(gpred))[0])
        else:
            loss_rows = torch.log(gsum) - gpred
        if eps:
            # (1-eps) * (lse - z_t) + eps * (lse - mean_j z_j) = (lse - z_t) + eps * (z_t - mean_j z_j)
            mean_logit = rows[3] / vocab_size
            loss_rows = loss_rows + eps * (gpred + gmax - mean_logit)
        loss_rows = torch.where(valid, loss_rows, 0.0)

        factors, count = _row_weights(valid, opts.reduction, gsum.dtype)
        ctx.save_for_backward(hidden, weight, target, gmax, gsum, factors)
        ctx.opts, ctx.vocab_size = opts, vocab_size
        out_dtype = hidden.dtype
        if opts.reduction == "none":
            return loss_rows.to(out_dtype)
        total = loss_rows.sum()
        return (total / count if opts.reduction == "mean" else total).to(out_dtype)

    @staticmethod
    def backward(ctx: Any, grad_out: torch.Tensor) -> Tuple[Optional[torch.Tensor], ...]:
        hidden, weight, target, gmax, gsum, factors = ctx.saved_tensors
        opts = ctx.opts
        grad_rows = (factors * grad_out.to(factors.dtype)).contiguous()
        gi, gw = _local_gradients(grad_rows, hidden, weight, target, opts.vocab_start_index, gmax, gsum)
        eps = opts.label_smoothing
        # sum the ranks' parts in float32 (or wider) and round once
        gi = gi.to(_accumulation_dtype(hidden))
        if eps:
            gi, gw = _add_smoothing_gradients(gi, gw, grad_rows, hidden, weight, target, opts.vocab_start_index,
                                              eps, ctx.vocab_size)
        gi = _all_reduce(gi.contiguous(), dist.ReduceOp.SUM, opts.group).to(hidden.dtype)
        return (gi if ctx.needs_input_grad[0] else None, gw.to(weight.dtype) if ctx.needs_input_grad[1] else None,
                None, None)


def _add_smoothing_gradients(gi: torch.Tensor, gw: torch.Tensor, grad_rows: torch.Tensor, hidden: torch.Tensor,
                             weight: torch.Tensor, target: torch.Tensor, start: int, eps: float,
                             vocab_size: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Add the label-smoothing part of dL/dz_ij, ``grad_rows[i] * eps * (onehot_ij - 1/V)``, to both gradients.

    The operators computed ``grad_rows[i] * (softmax_ij - onehot_ij)``; smoothing turns the target
    coefficient into ``1 - eps`` and subtracts ``eps / V`` everywhere, which are rank-one updates.
    """
    acc = _accumulation_dtype(hidden)
    x, w, g = hidden.to(acc), weight.to(acc), grad_rows.to(acc)
    in_shard = (target >= start) & (target < start + weight.shape[0])
    local = torch.where(in_shard, target - start, 0)
    picked_w = torch.where(in_shard[:, None], w[local], 0.0) if weight.shape[0] else torch.zeros_like(x)
    gi = gi.to(acc) + (eps * g)[:, None] * (picked_w - w.sum(dim=0) / vocab_size)
    gx = g[:, None] * x
    gw_corr = torch.zeros_like(w).index_add_(0, local[in_shard], gx[in_shard]) - gx.sum(dim=0) / vocab_size
    return gi, gw.to(acc) + eps * gw_corr


# ----------------------------------------------------------------------------------------------
# public entry point

def _check_arguments(hidden: torch.Tensor, weight_shard: torch.Tensor, target: torch.Tensor,
                     vocab_start_index: int, ignore_index: int, label_smoothing: float, reduction: str) -> None:
    for name, value in (("hidden", hidden), ("weight_shard", weight_shard), ("target", target)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"vocab_parallel_cross_entropy: {name} must be a torch.Tensor, got {type(value).__name__}")
    if hidden.dim() < 1:
        raise ValueError(f"vocab_parallel_cross_entropy: hidden must have shape (..., H), got {tuple(hidden.shape)}")
    if weight_shard.dim() != 2 or weight_shard.shape[1] != hidden.shape[-1]:
        raise ValueError(f"vocab_parallel_cross_entropy: weight_shard must have shape (V_shard, {hidden.shape[-1]}), "
                         f"got {tuple(weight_shard.shape)}")
    if weight_shard.dtype != hidden.dtype:
        raise TypeError(f"vocab_parallel_cross_entropy: weight_shard dtype {weight_shard.dtype} must match "
                        f"hidden dtype {hidden.dtype}")
    if not hidden.is_floating_point():
        raise TypeError(f"vocab_parallel_cross_entropy: hidden must be floating point, got {hidden.dtype}")
    if tuple(target.shape) != tuple(hidden.shape[:-1]):
        raise ValueError(f"vocab_parallel_cross_entropy: target shape {tuple(target.shape)} must equal "
                         f"hidden.shape[:-1] = {tuple(hidden.shape[:-1])}")
    if target.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"vocab_parallel_cross_entropy: target must be int32 or int64 class indices, got {target.dtype}")
    if isinstance(vocab_start_index, bool) or not isinstance(vocab_start_index, int) or vocab_start_index < 0:
        raise ValueError(f"vocab_parallel_cross_entropy: vocab_start_index must be an int >= 0, got {vocab_start_index!r}")
    if isinstance(ignore_index, bool) or not isinstance(ignore_index, int):
        raise TypeError(f"vocab_parallel_cross_entropy: ignore_index must be an int, got {ignore_index!r}")
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(f"vocab_parallel_cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"vocab_parallel_cross_entropy: reduction must be one of 'none', 'mean', 'sum', "
                         f"got {reduction!r}")


def vocab_parallel_cross_entropy(hidden: torch.Tensor, weight_shard: torch.Tensor, target: torch.Tensor, *,
                                 vocab_start_index: int, group: Any = None, ignore_index: int = -100,
                                 label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """Cross entropy of ``hidden @ W.T`` against ``target`` with ``W`` split by rows across ``group``.

    Same value and gradients as ``torch.nn.functional.cross_entropy(hidden @ W.T, target,
    ignore_index=..., label_smoothing=..., reduction=...)`` on one process holding the whole ``W``,
    where ``W`` is the concatenation of all ranks' ``weight_shard`` in the order of their
    ``vocab_start_index``. The ``(tokens, V)`` logits never exist whole on any rank.

    Args:
        hidden: ``(..., H)`` float32/float16/bfloat16 (others take a torch fallback), identical on
            every rank of ``group`` (tensor parallelism); its gradient is all-reduced (SUM).
        weight_shard: ``(V_shard, H)``, rows ``[vocab_start_index, vocab_start_index + V_shard)`` of
            the full projection, same dtype as ``hidden``; its gradient stays local.
        target: ``hidden.shape[:-1]`` int32/int64 global vocabulary ids, or ``ignore_index``.
        vocab_start_index: first global vocabulary id held by this rank.
        group: the ``torch.distributed`` process group (default group when None); without an
            initialized process group the call is single-process (``weight_shard`` is the whole vocabulary).
        ignore_index: rows with this target contribute loss 0 and zero gradient.
        label_smoothing: in ``[0, 1]``, as in torch (uniform over the global vocabulary).
        reduction: ``"mean"`` over non-ignored rows (NaN when there are none, as in torch),
            ``"sum"`` or ``"none"`` (shape ``target.shape``).

    Returns:
        The loss in ``hidden``'s dtype (computed in float32), identical on every rank.

    Raises:
        TypeError / ValueError: bad argument (named in the message).
        IndexError: a non-ignored target that no rank's shard (or more than one) holds; raised on
            every rank together.
    """
    _check_arguments(hidden, weight_shard, target, vocab_start_index, ignore_index, label_smoothing, reduction)
    opts = _Options(int(vocab_start_index), group, int(ignore_index), float(label_smoothing), reduction)
    # the operators take any strides: a view is passed as it is, never copied
    hidden2d = hidden.reshape(-1, hidden.shape[-1])
    loss = _VocabParallelCrossEntropy.apply(hidden2d, weight_shard, target.reshape(-1), opts)
    return loss.reshape(target.shape) if reduction == "none" else loss


def run_then_exit(main: Callable[[], Any]) -> None:
    """Run ``main()`` in a torch.distributed (gloo) process, then end the process with its status.

    Use it as a script's entry point under ``torchrun``: ``run_then_exit(main)``. Once ``main``
    returns or raises, the ``atexit`` handlers run, stdout and stderr are flushed and the process ends
    with ``os._exit``, skipping the interpreter's teardown: there, the C++ static destructors of gloo's
    threads can end a rank that finished its work in ``std::terminate`` (SIGABRT, seen under
    AddressSanitizer and after a Ctrl-C), failing the whole job after its files are written.

    The exit status is ``main``'s ``SystemExit`` code (a non-integer code is printed to stderr and
    gives 1, as the interpreter does), 0 when it returns, and 1 after printing the traceback of any
    other exception (KeyboardInterrupt included). It never returns.
    """
    if not callable(main):
        raise TypeError(f"tilegrad.torch.distributed.run_then_exit: main must be callable, got "
                        f"{type(main).__name__}: pass the function itself, e.g. run_then_exit(main)")
    code = 0
    try:
        main()
    except SystemExit as stop:
        code = _exit_status(stop.code)
    except BaseException:  # noqa: B902 (KeyboardInterrupt included: the traceback, then exit 1)
        sys.excepthook(*sys.exc_info())
        code = 1
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_status(code: Any) -> int:
    """The status the interpreter gives ``SystemExit(code)``, printing a message code as it would."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
