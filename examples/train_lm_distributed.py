"""examples/train_lm.py on several processes or machines: torch.distributed (gloo) under torchrun.

    torchrun --nproc-per-node 2 examples/train_lm_distributed.py                    # data parallel
    torchrun --nproc-per-node 2 examples/train_lm_distributed.py --parallel vocab   # LM head sharded
    torchrun --nnodes 2 --node-rank R --rdzv-endpoint HOST:29500 --nproc-per-node 2 examples/train_lm_distributed.py

It takes every flag of train_lm.py (whose model, data and loop it runs: keep the two files side by
side) and adds --parallel and --dist-timeout.

Two modes (``--parallel``):

* ``data`` (default): DistributedDataParallel. Every rank holds the whole model and trains on its
  slice of every global batch (``--batch-size`` is the global batch); DDP averages the gradients, so
  every rank applies the same update. The logged train loss is the mean over the global batch;
  validation batches are split across the ranks and their losses summed.
* ``vocab``: tensor parallelism of the LM head. Every rank sees the whole batch and holds the same
  transformer, but only rows ``[V*r/N, V*(r+1)/N)`` of the LM head (with their gradient and AdamW
  state). The loss is ``tilegrad.torch.distributed.vocab_parallel_cross_entropy``, which all-reduces
  the gradient of the hidden states, so the replicated layers stay identical without DDP. With a
  tied embedding (``--tie 1``) the embedding is sharded the same way (a lookup of the local rows,
  summed across ranks). The gradient norm for clipping is taken over the whole head (all ranks).

Checkpoints keep the single-process layout (the head gathered whole), so a run can be resumed on any
number of processes, or on one. Rank 0 writes every file (log, summary, checkpoint, sample); the
other ranks print nothing and write into a private temporary folder. Without torchrun (no ``RANK`` /
``WORLD_SIZE`` in the environment) none of this is active and the run is train_lm.py's, in one process.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import datetime
import functools
import inspect
import hashlib
import os
import shutil
import signal
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn

from tilegrad.torch.distributed import run_then_exit

import train_lm

MODES = ("data", "vocab")
DEFAULT_TIMEOUT_S = 300
# train_lm's optimizer (tilegrad's AdamW, max_grad_norm=1.0) clips the gradient norm to 1.0; the
# vocab-parallel mode applies this clip itself over the whole sharded head first
MAX_GRAD_NORM = 1.0
# Options every rank must agree on (checked at start-up, named when they differ); not the paths
# (--text, --resume): they may differ between machines.
AGREED_OPTIONS = ("vocab", "dim", "layers", "heads", "ffn_dim", "context", "tie", "batch_size", "seed", "steps",
                  "lr", "dtype", "param_dtype", "filter", "parallel", "corpus", "eval_interval", "eval_batches")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """train_lm.py's flags for torchrun runs."""
    group = parser.add_argument_group("several processes (under torchrun; see the README)")
    group.add_argument("--parallel", choices=MODES, default="data",
                       help="data: DistributedDataParallel, each rank a slice of every batch (default); "
                            "vocab: every rank the whole batch and 1/N of the LM head's rows")
    group.add_argument("--dist-timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS",
                       help="a rank that waits this long for another one stops with an error "
                            f"(default {DEFAULT_TIMEOUT_S})")


def launched_by_torchrun() -> bool:
    """torchrun (and any launcher using torch.distributed's env:// convention) sets RANK and WORLD_SIZE."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def shard_bounds(vocab: int, world: int, rank: int) -> Tuple[int, int]:
    """Rows [start, end) of a vocab-row matrix held by `rank`: contiguous, sizes differ by at most 1."""
    return vocab * rank // world, vocab * (rank + 1) // world


def start(args: argparse.Namespace):
    """train_lm.main's hooks for this process: train_lm.OneProcess, or (under torchrun) a joined gloo
    process group."""
    args.parallel = getattr(args, "parallel", None) or "data"  # checkpoints written before --parallel
    args.dist_timeout = getattr(args, "dist_timeout", None) or DEFAULT_TIMEOUT_S
    if not launched_by_torchrun():
        if args.parallel != "data" and getattr(args, "resume", None) is not None:
            # checkpoints are single-process files: a run trained on several processes continues on one
            print(f"train_lm: one process: the checkpoint's --parallel {args.parallel} does not apply", flush=True)
            args.parallel = "data"
        if args.parallel != "data":
            raise SystemExit(f"train_lm: --parallel {args.parallel} needs several processes: start it with "
                             f"torchrun --nproc-per-node N {sys.argv[0]} ... (see the README)")
        return train_lm.OneProcess()
    if not args.dist_timeout > 0:
        raise SystemExit(f"train_lm: --dist-timeout must be > 0 seconds, got {args.dist_timeout}")
    if args.parallel == "vocab" and getattr(args, "filter", None) is not None:
        raise SystemExit("train_lm: --filter filters the single-process fused loss; --parallel vocab's LM head "
                         "(vocab_parallel_cross_entropy) has no gradient filtering: use --parallel data")
    return Distributed(args)


# ----------------------------------------------------------------------------------------------------
# Several processes
# ----------------------------------------------------------------------------------------------------

class Distributed:
    """This rank's view of a torchrun job: process group, rank-0 output, model wrapping, agreed stops."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.mode = args.parallel
        self.local_rank = int(os.environ.get("LOCAL_RANK", 0))
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
        if args.threads is None:
            # the cores shared by the ranks on this machine
            args.threads = max(1, len(os.sched_getaffinity(0)) // self.local_world)
        sys.excepthook = _explain_lost_rank
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.dist_timeout))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.model: Optional[nn.Module] = None
        self.opt: Optional[torch.optim.Optimizer] = None
        self.head: Optional[VocabShard] = None
        check_same_options(args, self.rank)
        if self.mode == "data" and args.batch_size % self.world:
            raise SystemExit(f"train_lm: --batch-size must be a multiple of the {self.world} processes with "
                             f"--parallel data (each rank trains an equal slice), got {args.batch_size}")
        if not self.is_main:
            self._silence(args)

    def _silence(self, args: argparse.Namespace) -> None:
        """Ranks other than 0 print nothing (errors still reach stderr) and write into a private folder
        that is removed at exit; they still read --resume's checkpoint."""
        sys.stdout = open(os.devnull, "w")
        import tqdm  # the progress bar goes to stderr, which stays open for errors: switch bars off
        tqdm.tqdm.__init__ = functools.partialmethod(tqdm.tqdm.__init__, disable=True)
        private = tempfile.mkdtemp(prefix=f"train_lm_rank{self.rank}_")
        atexit.register(shutil.rmtree, private, ignore_errors=True)
        args.out = type(args.out)(private)

    @contextlib.contextmanager
    def main_rank_first(self) -> Iterator[None]:
        """Each machine's first rank runs the block (e.g. trains and caches the tokenizer) before the others."""
        if self.local_rank != 0:
            dist.barrier()
        yield
        if self.local_rank == 0:
            dist.barrier()

    def wrap(self, model: nn.Module, opt: torch.optim.Optimizer) -> nn.Module:
        """The model as this mode trains it (the same module, sharded, or inside DDP). Vocab mode: the
        head's rows replace its parameter in `opt` too, and their optimizer state is gathered into /
        sliced from checkpoints."""
        check_same_model(model, self.rank)
        self.model, self.opt = model, opt
        if self.mode == "vocab":
            self.head = VocabShard(model, self.rank, self.world)
            self.head.track_optimizer(opt)
            return model
        return DataParallel(model, self.rank, self.world)

    def agreed(self, stop):
        return AgreedStop(stop)

    def describe(self) -> Dict[str, Any]:
        """summary.json's fields for this job (called on every rank at the same point)."""
        check_replicas_agree(self.model, self.head)
        info: Dict[str, Any] = {"world_size": self.world, "parallel": self.mode,
                                "threads_per_rank": torch.get_num_threads()}
        if self.head is not None:
            info["lm_head_memory"] = self.head.memory(self.opt)
            # train_lm counts this rank's parameters; the model has the whole head
            local = sum(p.numel() for p in self.model.parameters())
            info.update(parameters=local - self.head.weight.numel() + self.head.vocab * self.head.weight.shape[1],
                        parameters_per_rank=local)
        return info


def check_same_options(args: argparse.Namespace, rank: int) -> None:
    """Every rank must run the same training: the first option that differs is named (on every rank)."""
    mine = {k: str(getattr(args, k, None)) for k in AGREED_OPTIONS}
    everyone: List[Dict[str, str]] = [{} for _ in range(dist.get_world_size())]
    dist.all_gather_object(everyone, mine)
    for key in AGREED_OPTIONS:
        values = [options[key] for options in everyone]
        if len(set(values)) > 1:
            other = next(r for r, v in enumerate(values) if v != values[0])
            raise SystemExit(f"train_lm: the ranks disagree on --{key.replace('_', '-')}: {values[0]} on rank 0, "
                             f"{values[other]} on rank {other} (every rank must run the same command; this is "
                             f"rank {rank})")


def check_same_model(model: nn.Module, rank: int) -> None:
    """The same parameter shapes and initial values on every rank (catches a tokenizer that came out
    with another vocabulary on another machine, or another seed)."""
    shapes = ";".join(f"{name}:{tuple(p.shape)}" for name, p in model.named_parameters())
    digest = hashlib.sha256(b"".join(p.detach().float().contiguous().numpy().tobytes() for p in model.parameters()))
    mine = (shapes, digest.hexdigest()[:16])
    everyone: List[Tuple[str, str]] = [("", "") for _ in range(dist.get_world_size())]
    dist.all_gather_object(everyone, mine)
    for other, theirs in enumerate(everyone):
        if theirs[0] != everyone[0][0]:
            raise SystemExit(f"train_lm: rank {other}'s model differs from rank 0's (vocabulary of the tokenizer or "
                             f"model sizes): rank 0 {everyone[0][0]} | rank {other} {theirs[0]} (this is rank {rank})")
        if theirs[1] != everyone[0][1]:
            raise SystemExit(f"train_lm: rank {other}'s initial weights differ from rank 0's (same shapes); "
                             f"check --seed and the torch version on every machine (this is rank {rank})")


def check_replicas_agree(model: Optional[nn.Module], head: Optional["VocabShard"]) -> None:
    """The replicated parameters must still be identical on every rank after training."""
    if model is None:
        return
    sharded = {id(head.weight)} if head is not None else set()
    total = torch.zeros(1, dtype=torch.float64)
    for p in model.parameters():
        if id(p) not in sharded:
            total += p.detach().double().abs().sum()
    everyone = [torch.zeros(1, dtype=torch.float64) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, total)
    if any(not torch.equal(t, everyone[0]) for t in everyone):
        raise RuntimeError(f"train_lm: the replicated weights diverged between ranks: "
                           f"{[float(t) for t in everyone]} (a bug; please report it)")


def _raised_by_a_collective(value: BaseException) -> bool:
    """A torch.distributed error, or gloo's own RuntimeError ("Connection closed by peer", "Connection
    reset by peer", "Timed out waiting ... for recv"), which may surface from a collective or from
    DDP's all-reduce inside backward(); its text names gloo's source."""
    return isinstance(value, dist.DistError) or (isinstance(value, RuntimeError) and "gloo" in str(value))


def _explain_lost_rank(kind, value, tb) -> None:
    """Uncaught errors of the collectives: say what most likely happened before the traceback."""
    if _raised_by_a_collective(value):
        rank = dist.get_rank() if dist.is_initialized() else os.environ.get("RANK", "?")
        print(f"train_lm: rank {rank}: lost contact with the other ranks ({str(value).splitlines()[0][:300]}); "
              f"another rank probably died or was killed, or stayed silent longer than --dist-timeout. "
              f"Stopping; the last checkpoint (if any) is in the --out folder.", file=sys.stderr, flush=True)
    sys.__excepthook__(kind, value, tb)


class AgreedStop:
    """train_lm's StopFlag, agreed by all ranks: Ctrl-C (torchrun forwards it to every rank) on
    any rank stops every rank after the same step, so all of them reach the checkpoint."""

    def __init__(self, stop) -> None:
        self.stop = stop

    def __enter__(self) -> "AgreedStop":
        self.stop.__enter__()
        # A Ctrl-C reaches each rank twice (from the terminal's process group, and forwarded by
        # torchrun): both only ask for the agreed stop. StopFlag's "second Ctrl-C stops at once" would
        # turn the pair into a KeyboardInterrupt mid-step; torchrun escalates a real second Ctrl-C.
        signal.signal(signal.SIGINT, self._request)
        return self

    def _request(self, signum, frame) -> None:
        self.stop.requested = True

    def __exit__(self, *exc) -> None:
        self.stop.__exit__(*exc)

    def should_stop(self, completed: int) -> bool:
        flag = torch.tensor([1 if self.stop.should_stop(completed) else 0], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


# ----------------------------------------------------------------------------------------------------
# Data parallel
# ----------------------------------------------------------------------------------------------------

class DataParallel(nn.Module):
    """DDP around the language model; forward(ids, target) takes the GLOBAL batch and trains on this
    rank's slice. State dicts, parameters and generate() are those of the plain model (checkpoints
    stay single-process files)."""

    def __init__(self, model: nn.Module, rank: int, world: int) -> None:
        super().__init__()
        from torch.nn.parallel import DistributedDataParallel
        # the rotary tables are constant buffers: no need to send them every step (the flag's newer name
        # where torch has it)
        newer = "forward_sync_buffers" in inspect.signature(DistributedDataParallel).parameters
        self.ddp = DistributedDataParallel(model, **{"forward_sync_buffers" if newer else "broadcast_buffers": False})
        self.rank, self.world = rank, world

    @property
    def inner(self) -> nn.Module:
        return self.ddp.module

    @property
    def ops(self):
        """The path's ops (train_lm's optimizer and gradient clipping come from them)."""
        return self.inner.ops

    def forward(self, ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return self._evaluate(ids, target)
        loss = self.ddp(ids.tensor_split(self.world)[self.rank], target.tensor_split(self.world)[self.rank])
        # the value logged is the global batch's mean; the gradient is this rank's (DDP averages them)
        mean = loss.detach().float().clone()
        dist.all_reduce(mean)
        return loss + (mean / self.world - loss.detach()).to(loss.dtype)

    def _evaluate(self, ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean loss over the whole batch, each rank computing a slice (token-weighted, so uneven
        slices of a short last batch give the same mean as one process)."""
        x, y = ids.tensor_split(self.world)[self.rank], target.tensor_split(self.world)[self.rank]
        total = torch.zeros(2, dtype=torch.float64)
        if y.numel():
            total[0] = self.inner(x, y).double() * y.numel()
            total[1] = y.numel()
        dist.all_reduce(total)
        return (total[0] / total[1]).float()

    def state_dict(self, *args, **kwargs):
        return self.inner.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self.inner.load_state_dict(*args, **kwargs)

    def generate(self, *args, **kwargs):
        return self.inner.generate(*args, **kwargs)


# ----------------------------------------------------------------------------------------------------
# Vocabulary-parallel LM head
# ----------------------------------------------------------------------------------------------------

class _SumOverRanks(torch.autograd.Function):
    """Forward: all-reduce SUM of partial results. Backward: identity (the output's gradient is the
    same on every rank, as everything after it is replicated)."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor) -> torch.Tensor:
        total = partial.contiguous().clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad


class ShardedHeadOps:
    """The path's ops with the LM-head loss (and, when tied, the embedding) over vocabulary shards."""

    def __init__(self, ops, start: int, tied: bool) -> None:
        self.inner, self.start, self.tied = ops, start, tied

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def linear_cross_entropy(self, hidden: torch.Tensor, weight_shard: torch.Tensor, target: torch.Tensor,
                             **_options) -> torch.Tensor:
        """The loss over the ranks' shards (--filter is refused in this mode; the loss is float32 as asked)."""
        from tilegrad.torch.distributed import vocab_parallel_cross_entropy
        if hidden.dtype != weight_shard.dtype:  # under bf16 autocast, as F.linear would compute
            weight_shard = weight_shard.to(hidden.dtype)
        return vocab_parallel_cross_entropy(hidden, weight_shard, target, vocab_start_index=self.start)

    def embedding(self, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not self.tied:
            return self.inner.embedding(ids, weight)
        # each rank looks up the ids in its rows (others: row 0, zeroed), the ranks' parts are summed
        local = ids - self.start
        mine = (local >= 0) & (local < weight.shape[0])
        rows = self.inner.embedding(torch.where(mine, local, 0), weight)
        return _SumOverRanks.apply(rows * mine.unsqueeze(-1).to(rows.dtype))


def _gather_rows(shard: torch.Tensor, vocab: int, world: int) -> torch.Tensor:
    """The whole (vocab, ...) tensor from every rank's contiguous rows (shards may differ by one row)."""
    longest = -(-vocab // world)
    padded = shard.new_zeros((longest, *shard.shape[1:]))
    padded[:shard.shape[0]] = shard
    parts = [torch.empty_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    rows = [parts[r][:shard_bounds(vocab, world, r)[1] - shard_bounds(vocab, world, r)[0]] for r in range(world)]
    return torch.cat(rows)


class VocabShard:
    """Turns a LanguageModel's LM head (and its tied embedding) into this rank's rows, in place.

    The shard replaces the parameter at the same place, so the model's parameter order (and with it
    the optimizer's state indices) is the single-process one; state_dict()s gather the rows into the
    whole head, load_state_dict()s take a whole head and keep the rows, for model and optimizer.
    """

    def __init__(self, model: nn.Module, rank: int, world: int) -> None:
        self.model, self.rank, self.world = model, rank, world
        full = model.lm_head.weight
        self.vocab = full.shape[0]
        if self.vocab < world:
            raise SystemExit(f"train_lm: --parallel vocab needs at least one vocabulary row per rank: vocabulary "
                             f"{self.vocab}, {world} ranks")
        self.tied = full is model.tok_emb.weight
        self.start, self.end = shard_bounds(self.vocab, world, rank)
        self.keys = ("lm_head.weight", "tok_emb.weight") if self.tied else ("lm_head.weight",)
        self.full, self.weight = full, nn.Parameter(full.detach()[self.start:self.end].clone())
        model.lm_head.weight = self.weight
        if self.tied:
            model.tok_emb.weight = self.weight
        self.full_ops = model.ops
        model.ops = ShardedHeadOps(model.ops, self.start, self.tied)
        model.generate = self._generate_with_whole_head
        # (torch marks the hook it is given: a bound method cannot be marked, a partial can)
        model.register_state_dict_post_hook(functools.partial(VocabShard._gather_model_state, self))
        model.register_load_state_dict_pre_hook(self._slice_model_state)
        self.weight.register_post_accumulate_grad_hook(self._clip_after_backward)
        self.clip_queued = False

    # --- gradient clipping over the whole head -------------------------------------------------------

    def _clip_after_backward(self, _param: torch.Tensor) -> None:
        """Queued once per backward: runs when every gradient is final."""
        if not self.clip_queued:
            self.clip_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._clip_by_global_norm)

    def _clip_by_global_norm(self) -> None:
        """clip_grad_norm_(all parameters, MAX_GRAD_NORM) with the head's norm summed over the ranks.
        The clip inside tilegrad's AdamW that follows sees a norm <= MAX_GRAD_NORM and
        does nothing; every rank scales by the same factor, so the replicas stay identical."""
        self.clip_queued = False
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        replicated = [g for g in grads if g is not self.weight.grad]
        head_sq = self.weight.grad.double().square().sum().reshape(1) if self.weight.grad is not None \
            else torch.zeros(1, dtype=torch.float64)
        dist.all_reduce(head_sq)
        rest_sq = sum((g.double().square().sum() for g in replicated), torch.zeros((), dtype=torch.float64))
        norm = float((head_sq[0] + rest_sq).sqrt())
        scale = MAX_GRAD_NORM / (norm + 1e-6)
        if scale < 1.0:
            torch._foreach_mul_(grads, scale)

    # --- checkpoints in the single-process layout ---------------------------------------------------

    def _gather_model_state(self, module, state: Dict[str, torch.Tensor], prefix: str, _meta) -> None:
        whole = _gather_rows(self.weight.detach(), self.vocab, self.world)
        for key in self.keys:
            state[prefix + key] = whole

    def _slice_model_state(self, module, state: Dict[str, torch.Tensor], prefix: str, *_rest) -> None:
        for key in self.keys:
            tensor = state.get(prefix + key)
            if tensor is not None and tensor.shape[0] == self.vocab:
                state[prefix + key] = tensor[self.start:self.end]

    def track_optimizer(self, opt: torch.optim.Optimizer) -> None:
        """`opt` was built over the whole head: it steps this rank's rows instead (it holds no state yet)."""
        for group in opt.param_groups:
            group["params"] = [self.weight if p is self.full else p for p in group["params"]]
        self.full = None  # the whole head is no longer held anywhere: freed
        params = [p for group in opt.param_groups for p in group["params"]]
        self.index = next(i for i, p in enumerate(params) if p is self.weight)
        opt.register_state_dict_post_hook(self._gather_optimizer_state)
        opt.register_load_state_dict_pre_hook(self._slice_optimizer_state)

    def _gather_optimizer_state(self, opt, state_dict: Dict) -> Dict:
        own = state_dict["state"].get(self.index)
        if own is not None:  # a copy: the optimizer's own state dict must keep the rows
            state_dict["state"][self.index] = {
                k: _gather_rows(v, self.vocab, self.world) if self._is_rows(v) else v for k, v in own.items()}
        return state_dict

    def _slice_optimizer_state(self, opt, state_dict: Dict) -> Dict:
        own = state_dict["state"].get(self.index)
        if own is not None:
            state_dict = dict(state_dict, state=dict(state_dict["state"]))
            state_dict["state"][self.index] = {
                k: v[self.start:self.end] if torch.is_tensor(v) and v.dim() and v.shape[0] == self.vocab else v
                for k, v in own.items()}
        return state_dict

    def _is_rows(self, value: Any) -> bool:
        return torch.is_tensor(value) and value.dim() > 0 and value.shape[0] == self.weight.shape[0]

    # --- the sample: the whole head on every rank, generated locally --------------------------------

    def _generate_with_whole_head(self, *args, **kwargs):
        whole = nn.Parameter(_gather_rows(self.weight.detach(), self.vocab, self.world), requires_grad=False)
        model = self.model
        model.lm_head.weight = whole
        if self.tied:
            model.tok_emb.weight = whole
        model.ops = self.full_ops
        try:
            return type(model).generate(model, *args, **kwargs)
        finally:
            model.lm_head.weight = self.weight
            if self.tied:
                model.tok_emb.weight = self.weight
            model.ops = ShardedHeadOps(self.full_ops, self.start, self.tied)

    # --- what the report shows ----------------------------------------------------------------------

    def memory(self, opt: Optional[torch.optim.Optimizer]) -> Dict[str, Any]:
        """Bytes of the head's rows, their gradient and their optimizer state on this rank, and what one
        process holds for the whole head (the same tensors times vocab / rows)."""
        weight = self.weight.numel() * self.weight.element_size()
        state = opt.state.get(self.weight, {}) if opt is not None else {}
        optimizer = sum(v.numel() * v.element_size() for v in state.values() if self._is_rows(v))
        per_rank = {"rows": self.end - self.start, "weight_bytes": weight, "grad_bytes": weight,
                    "optimizer_state_bytes": optimizer}
        factor = self.vocab / (self.end - self.start)
        one = {"rows": self.vocab, **{k: round(v * factor) for k, v in per_rank.items() if k != "rows"}}
        return {"tied_to_embedding": self.tied, "per_rank": per_rank, "one_process": one}


def build_parser():
    """train_lm.py's command line with --parallel and --dist-timeout."""
    parser = train_lm.build_parser()
    add_arguments(parser)
    return parser


def main(argv=None) -> Dict[str, Any]:
    """train_lm.main on this rank (or, without torchrun, in this one process); returns the summary."""
    return train_lm.main(argv, parser=build_parser(), start=start)


if __name__ == "__main__":
    if launched_by_torchrun():
        run_then_exit(main)
    else:
        main()
