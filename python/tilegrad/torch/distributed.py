"""Vocabulary-parallel cross entropy on torch.distributed (Megatron-style tensor parallelism), and
the helpers a data- or vocabulary-parallel training script needs around it (process group, vocabulary
shards, gradient clipping over shards, agreement checks between ranks, the gloo exit work-around).

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

The training helpers (``examples/train_lm_distributed.py`` uses every one of them):

* :func:`start_process_group`: a gloo group from ``torchrun``'s environment, or a group of one
  without it, with a message that names a lost rank instead of gloo's bare error;
* :func:`vocab_shard_bounds`, :func:`gather_vocab_shards`, :func:`vocab_parallel_embedding`: the rows of a
  vocabulary matrix each rank holds, the whole matrix back (checkpoints, sampling), and the lookup of
  an embedding split that way (an LM head tied to its embedding);
* :func:`clip_grad_norm_`: ``torch.nn.utils.clip_grad_norm_`` over replicated and sharded parameters;
* :func:`check_same_on_all_ranks`, :func:`any_rank`, :func:`local_main_rank_first`: ranks that agree on
  their options, stop after the same step, and let one rank per machine fill a cache first;
* :func:`run_then_exit`: a rank's entry point that avoids gloo's destructors aborting it at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import datetime
import os
import sys
import tempfile
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Tuple

import torch
import torch.distributed as dist

import tilegrad as _tg

from ._tensor import as_numpy, from_numpy, sync_threads, unsupported_reason

__all__ = ["vocab_parallel_cross_entropy", "vocab_parallel_embedding", "vocab_shard_bounds", "gather_vocab_shards",
           "clip_grad_norm_", "start_process_group", "check_same_on_all_ranks", "any_rank", "local_main_rank_first",
           "run_then_exit"]

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


# ----------------------------------------------------------------------------------------------
# training helpers around the loss: process group, vocabulary shards, clipping, agreement

_NAME = "tilegrad.torch.distributed"


def _group_rank_world(group: Any) -> Tuple[int, int]:
    """(rank, world size) in ``group``; (0, 1) without an initialized process group."""
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1
    return dist.get_rank(group), dist.get_world_size(group)


def _check_int(function: str, name: str, value: Any, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{_NAME}.{function}: {name} must be an int >= {least}, got {value!r}")


def vocab_shard_bounds(vocab_size: int, world_size: int, rank: int) -> Tuple[int, int]:
    """Rows ``[start, end)`` of a ``vocab_size``-row matrix held by ``rank`` of ``world_size`` ranks.

    The shards are contiguous, in rank order, cover every row once and differ in size by at most one
    row (``start = vocab_size * rank // world_size``), so that ``torch.cat`` of the ranks' shards in
    rank order is the whole matrix. This is the split :func:`gather_vocab_shards` expects.

    Raises:
        ValueError: a size or rank that is not an int in range (named with its value), or fewer rows
            than ranks (a rank would hold nothing).
    """
    _check_int("vocab_shard_bounds", "world_size", world_size, 1)
    _check_int("vocab_shard_bounds", "vocab_size", vocab_size, world_size)
    _check_int("vocab_shard_bounds", "rank", rank, 0)
    if rank >= world_size:
        raise ValueError(f"{_NAME}.vocab_shard_bounds: rank must be < world_size {world_size}, got {rank}")
    return vocab_size * rank // world_size, vocab_size * (rank + 1) // world_size


def gather_vocab_shards(shard: torch.Tensor, vocab_size: int, group: Any = None) -> torch.Tensor:
    """The whole ``(vocab_size, ...)`` tensor from every rank's rows (:func:`vocab_shard_bounds`' split).

    A collective: every rank of ``group`` calls it and every rank gets the whole tensor (e.g. to save
    a checkpoint in the single-process layout, or to sample with the whole LM head). Without an
    initialized process group ``shard`` is the whole tensor and is returned as it is.

    Raises:
        TypeError: ``shard`` is not a tensor with at least one dimension.
        ValueError: ``shard`` does not have this rank's number of rows.
    """
    if not isinstance(shard, torch.Tensor) or shard.dim() < 1:
        raise TypeError(f"{_NAME}.gather_vocab_shards: shard must be a torch.Tensor of rows, got "
                        f"{type(shard).__name__}{tuple(shard.shape) if isinstance(shard, torch.Tensor) else ''}")
    rank, world = _group_rank_world(group)
    start, end = vocab_shard_bounds(vocab_size, world, rank)
    if shard.shape[0] != end - start:
        raise ValueError(f"{_NAME}.gather_vocab_shards: rank {rank} of {world} holds rows [{start}, {end}) of "
                         f"vocab_size {vocab_size}: shard must have {end - start} rows, got {shard.shape[0]}")
    if world == 1:
        return shard
    longest = -(-vocab_size // world)  # all_gather takes equal shapes: pad every shard to the longest
    padded = shard.new_zeros((longest, *shard.shape[1:]))
    padded[:shard.shape[0]] = shard
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded, group=group)
    sizes = [end - start for start, end in (vocab_shard_bounds(vocab_size, world, r) for r in range(world))]
    return torch.cat([part[:size] for part, size in zip(parts, sizes)])


class _SumOverRanks(torch.autograd.Function):
    """Forward: all-reduce SUM of the ranks' partial results. Backward: identity, as the output's
    gradient is the same on every rank (everything after it is replicated)."""

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, group: Any) -> torch.Tensor:
        return _all_reduce(partial.contiguous().clone(), dist.ReduceOp.SUM, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Tuple[torch.Tensor, None]:
        return grad, None


def vocab_parallel_embedding(ids: torch.Tensor, weight_shard: torch.Tensor, *, vocab_start_index: int,
                             group: Any = None) -> torch.Tensor:
    """``torch.nn.functional.embedding(ids, W)`` with the rows of ``W`` split across ``group``.

    Each rank looks up the ids that fall in its rows ``[vocab_start_index, vocab_start_index +
    V_shard)`` (zeros for the others) and the parts are summed over the ranks, so every rank gets the
    whole ``ids.shape + (H,)`` result. The gradient of ``weight_shard`` is this rank's rows of the
    embedding's gradient, assuming, as in tensor parallelism, that everything after the lookup is the
    same on every rank. This is the lookup of an LM head split with :func:`vocab_parallel_cross_entropy`
    that is tied to its embedding. A collective: every rank of ``group`` calls it with the same ``ids``.

    Raises:
        TypeError: ``ids`` is not an integer tensor, or ``weight_shard`` not a floating-point matrix.
        ValueError: a negative ``vocab_start_index``.
        IndexError: an id that no rank's shard holds (on every rank together, none left waiting).
    """
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"{_NAME}.vocab_parallel_embedding: ids must be an int32 or int64 tensor, got "
                        f"{ids.dtype if isinstance(ids, torch.Tensor) else type(ids).__name__}")
    if not isinstance(weight_shard, torch.Tensor) or weight_shard.dim() != 2 or not weight_shard.is_floating_point():
        raise TypeError(f"{_NAME}.vocab_parallel_embedding: weight_shard must be a floating-point (V_shard, H) "
                        f"tensor, got {getattr(weight_shard, 'dtype', type(weight_shard).__name__)} "
                        f"{tuple(getattr(weight_shard, 'shape', ()))}")
    _check_int("vocab_parallel_embedding", "vocab_start_index", vocab_start_index, 0)
    local = ids - vocab_start_index
    mine = (local >= 0) & (local < weight_shard.shape[0])
    owners = _all_reduce(mine.to(torch.int32), dist.ReduceOp.SUM, group)
    if not bool((owners == 1).all()):
        at = tuple(int(i) for i in (owners != 1).nonzero()[0])
        raise IndexError(f"{_NAME}.vocab_parallel_embedding: ids[{', '.join(map(str, at))}] = {int(ids[at])} is "
                         f"in {int(owners[at])} ranks' shards, must be in exactly one")
    from .functional import embedding  # tilegrad's lookup (and its backward) on this rank's rows
    rows = embedding(torch.where(mine, local, 0), weight_shard)
    return _SumOverRanks.apply(rows * mine.unsqueeze(-1).to(rows.dtype), group)


def clip_grad_norm_(replicated: Iterable[torch.Tensor], sharded: Iterable[torch.Tensor], max_norm: float,
                    group: Any = None) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` of a model whose ``sharded`` parameters are split across ``group``.

    The norm is that of every gradient of the whole model: the ``replicated`` parameters' gradients
    (the same on every rank) counted once, the ``sharded`` ones' summed over the ranks. When it exceeds
    ``max_norm`` every gradient is scaled in place by ``max_norm / (norm + 1e-6)``, torch's factor, on
    every rank alike (replicas stay identical). Parameters without a gradient are skipped. A collective.

    Returns:
        The total norm before clipping, a float64 scalar tensor (the same on every rank).

    Raises:
        ValueError: ``max_norm`` is not a positive finite number.
    """
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, float)) or not 0 < max_norm < float("inf"):
        raise ValueError(f"{_NAME}.clip_grad_norm_: max_norm must be a positive finite number, got {max_norm!r}")
    local = [p.grad for p in sharded if p.grad is not None]
    shared = [p.grad for p in replicated if p.grad is not None]
    norm = (_all_reduce(_squares(local).reshape(1), dist.ReduceOp.SUM, group)[0] + _squares(shared)).sqrt()
    coefficient = max_norm / (float(norm) + 1e-6)
    if coefficient < 1.0:
        torch._foreach_mul_(local + shared, coefficient)
    return norm


def _squares(grads: Iterable[torch.Tensor]) -> torch.Tensor:
    """The sum of the squares of every element, in float64 (the same on every rank for the same grads)."""
    return sum((g.double().square().sum() for g in grads), torch.zeros((), dtype=torch.float64))


def start_process_group(timeout_s: float = 300.0) -> Tuple[int, int]:
    """Join a gloo process group; returns ``(rank, world_size)``.

    Under ``torchrun`` (``RANK`` and ``WORLD_SIZE`` in the environment) the group is torchrun's job;
    without it, a group of one (this process), so that the same script runs alone unchanged. A rank
    waiting longer than ``timeout_s`` for another stops with an error; an uncaught error of a
    collective (a rank died, was killed or stayed silent) is then printed after one line saying so,
    instead of gloo's bare "Connection closed by peer". An already initialized group is kept.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number of seconds.
    """
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s < float("inf"):
        raise ValueError(f"{_NAME}.start_process_group: timeout_s must be a positive finite number of seconds, "
                         f"got {timeout_s!r}")
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=timeout_s)
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            dist.init_process_group("gloo", timeout=timeout)
        else:  # a store in a private folder, removed at exit: no port to choose, nothing left behind
            folder = tempfile.mkdtemp(prefix="tilegrad_group_")
            atexit.register(_remove_folder, folder)
            dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=0, world_size=1,
                                    timeout=timeout)
        previous = sys.excepthook.previous if isinstance(sys.excepthook, _ExplainLostRank) else sys.excepthook
        sys.excepthook = _ExplainLostRank(previous, timeout_s)
    return dist.get_rank(), dist.get_world_size()


def _remove_folder(folder: str) -> None:
    import shutil
    shutil.rmtree(folder, ignore_errors=True)


class _ExplainLostRank:
    """An excepthook: an uncaught error of a collective gets one line saying what most likely happened."""

    def __init__(self, previous: Callable, timeout_s: float) -> None:
        self.previous, self.timeout_s = previous, timeout_s

    def __call__(self, kind, value, tb) -> None:
        # a torch.distributed error, or gloo's own RuntimeError ("Connection closed by peer", "Timed out
        # waiting ... for recv"), which can also surface from DDP's all-reduce inside backward()
        if isinstance(value, dist.DistError) or (isinstance(value, RuntimeError) and "gloo" in str(value)):
            rank = dist.get_rank() if dist.is_initialized() else os.environ.get("RANK", "?")
            print(f"{_NAME}: rank {rank} lost contact with the other ranks ({str(value).splitlines()[0][:300]}): "
                  f"another rank probably died or was killed, or stayed silent longer than the timeout "
                  f"({self.timeout_s:g} s)", file=sys.stderr, flush=True)
        self.previous(kind, value, tb)


def check_same_on_all_ranks(values: Dict[str, Any], group: Any = None) -> None:
    """Raise on every rank when the ranks' ``values`` differ (e.g. their options, or a digest of their
    initial weights), naming the first key that differs, its value on rank 0 and on the first rank
    that differs. Values are compared as ``str``. A collective.

    Raises:
        TypeError: ``values`` is not a dict.
        ValueError: the ranks disagree (on every rank, so that none is left waiting in a collective).
    """
    if not isinstance(values, dict):
        raise TypeError(f"{_NAME}.check_same_on_all_ranks: values must be a dict, got {type(values).__name__}")
    mine = {str(key): str(value) for key, value in values.items()}
    rank, world = _group_rank_world(group)
    everyone = [mine] * world
    if world > 1:
        dist.all_gather_object(everyone, mine, group=group)
    for key in dict.fromkeys(k for theirs in everyone for k in theirs):
        seen = [theirs.get(key, "(missing)") for theirs in everyone]
        other = next((r for r, value in enumerate(seen) if value != seen[0]), None)
        if other is not None:
            raise ValueError(f"{_NAME}.check_same_on_all_ranks: the ranks disagree on {key}: {seen[0]} on rank 0, "
                             f"{seen[other]} on rank {other} (this is rank {rank})")


def any_rank(flag: bool, group: Any = None) -> bool:
    """True on every rank when ``flag`` is true on at least one (e.g. a Ctrl-C that reached one rank:
    every rank then stops after the same step). A collective."""
    return bool(_all_reduce(torch.tensor([int(bool(flag))], dtype=torch.int32), dist.ReduceOp.MAX, group)[0])


@contextlib.contextmanager
def local_main_rank_first(group: Any = None) -> Iterator[None]:
    """Run the block on each machine's first rank (``LOCAL_RANK`` 0) before the machine's other ranks,
    e.g. to fill a cache that they then read. A collective (one barrier per rank)."""
    if not _distributed(group):
        yield
        return
    first = int(os.environ.get("LOCAL_RANK", "0")) == 0
    if not first:
        dist.barrier(group=group)
    try:
        yield
    finally:  # even when the block failed: the others then try it themselves instead of waiting
        if first:
            dist.barrier(group=group)


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
