#!/usr/bin/env python3
"""Train a small Llama-style language model on several processes or machines: torchrun, gloo, tilegrad.

    torchrun --nproc-per-node 2 examples/train_lm_distributed.py                     # data parallel
    torchrun --nproc-per-node 2 examples/train_lm_distributed.py --parallel vocab    # LM head split over the ranks
    torchrun --nnodes 2 --node-rank R --rdzv-endpoint HOST:29500 --nproc-per-node 2 examples/train_lm_distributed.py
    python examples/train_lm_distributed.py                                          # one process: a group of one

The model, data and schedule are examples/train_lm.py's, repeated here so that this file stands alone;
the checkpoints of either script continue under the other.

--parallel data: DistributedDataParallel. Every rank holds the whole model and trains on its slice of
each global batch (--batch-size); DDP averages the gradients, so every rank applies the same update.
--parallel vocab: every rank sees the whole batch and holds the same transformer, but only rows
[V*r/N, V*(r+1)/N) of the LM head (and of the embedding tied to it), with their gradient and AdamW
state. The loss is tilegrad.torch.distributed.vocab_parallel_cross_entropy, which all-reduces the
hidden states' gradient, so the replicated layers stay identical without DDP.

Rank 0 prints and writes --out's log.jsonl, summary.json and checkpoint.pt (also on Ctrl-C). The
checkpoint has the single-process layout (the head gathered whole): --resume works on any number of
processes.
"""

import argparse
import hashlib
import json
import math
import os
import signal
import sys
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import tilegrad.torch as tgt
from tilegrad.torch import checkpoint, distributed

CHECKPOINT, LOG, SUMMARY = "checkpoint.pt", "log.jsonl", "summary.json"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilegrad" / "train_lm"
MAX_GRAD_NORM = 1.0
# Every rank must run the same training (checked at start-up); not the paths: they may differ between machines
AGREED = ("vocab", "dim", "layers", "heads", "ffn_dim", "context", "tie", "batch_size", "seed", "steps", "lr",
          "dtype", "param_dtype", "parallel", "corpus", "eval_interval", "eval_batches")


# ---- Data (as in train_lm.py): text -> byte-level BPE tokens, cached; batches chosen by (seed, step) ----

def load_text(path=None, corpus="pydoc"):
    """(train, validation) text: --text's last 10%, or every 10th document of CPython's own text."""
    if path is not None:
        text = path.read_bytes().decode("utf-8")
        cut = max(text.find("\n", len(text) * 9 // 10), len(text) * 9 // 10)
        return text[:cut], text[cut:]
    if corpus == "stdlib":
        docs = [f.read_text("utf-8", "replace") for f in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))]
    else:
        from pydoc_data.topics import topics
        docs = [topics[name].strip() + "\n" for name in sorted(topics)]
    return "\n".join(d for i, d in enumerate(docs) if i % 10 != 5), "\n".join(docs[5::10])


def prepare_data(text_file, vocab, cache_dir, corpus):
    """Tokenizer and token ids, trained and encoded once per (text, vocabulary), then cached."""
    import tokenizers

    train_text, val_text = load_text(text_file, corpus)
    key = hashlib.sha256(f"{tokenizers.__version__}|{vocab}|{len(train_text)}|{train_text}{val_text}".encode())
    cache = cache_dir / key.hexdigest()[:16]
    tok_file, ids_file = cache / "tokenizer.json", cache / "tokens.pt"
    from_cache = tok_file.is_file() and ids_file.is_file()
    if from_cache:
        tokenizer, ids = tokenizers.Tokenizer.from_file(str(tok_file)), checkpoint.load(ids_file)
    else:
        bpe = tokenizers.ByteLevelBPETokenizer()
        lines = train_text.splitlines(keepends=True)
        bpe.train_from_iterator(("".join(lines[i:i + 64]) for i in range(0, len(lines), 64)), vocab_size=vocab,
                                min_frequency=1, show_progress=False, special_tokens=["<|endoftext|>"])
        tokenizer = bpe._tokenizer
        ids = {k: torch.tensor(tokenizer.encode(t).ids) for k, t in (("train", train_text), ("val", val_text))}
        cache.mkdir(parents=True, exist_ok=True)
        checkpoint.save(ids, ids_file)
        tokenizer.save(str(cache / f"{os.getpid()}.tmp"))
        os.replace(cache / f"{os.getpid()}.tmp", tok_file)
    return SimpleNamespace(train=ids["train"], val=ids["val"], tokenizer=tokenizer, key=cache.name,
                           from_cache=from_cache, tokenizer_file=tok_file)


def train_batch(tokens, step, seed, batch_size, context):
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    window = tokens[torch.randint(0, len(tokens) - context - 1, (batch_size, 1), generator=gen)
                    + torch.arange(context + 1)]
    return window[:, :-1], window[:, 1:]


def val_batches(tokens, batch_size, context, max_batches):
    count = max(1, min(max_batches * batch_size, (len(tokens) - 1) // context))
    window = tokens[torch.linspace(0, len(tokens) - context - 1, count).long()[:, None] + torch.arange(context + 1)]
    return [(w[:, :-1], w[:, 1:]) for w in window.split(batch_size)]


def learning_rate(step, steps, peak):
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, steps - warmup)))))


# ---- The model (as in train_lm.py), whose LM head can hold only this rank's vocabulary rows ---------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return tgt.rms_norm(x, self.weight.shape, self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, args):
        super().__init__()
        self.heads = args.heads
        self.attn_norm, self.mlp_norm = RMSNorm(args.dim), RMSNorm(args.dim)
        self.qkv, self.attn_proj = (nn.Linear(args.dim, n * args.dim, bias=False) for n in (3, 1))
        self.gate, self.up = (nn.Linear(args.dim, args.ffn_dim, bias=False) for _ in range(2))
        self.mlp_proj = nn.Linear(args.ffn_dim, args.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = tgt.apply_rotary_pos_emb(q, k, cos[None, :t].to(q.dtype), sin[None, :t].to(q.dtype))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.mlp_proj(tgt.silu_mul(self.gate(h), self.up(h)))


class LanguageModel(nn.Module):
    def __init__(self, args, vocab):
        super().__init__()
        self.context, self.vocab, self.vocab_start = args.context, vocab, None  # None: the whole head
        self.tok_emb = nn.Embedding(vocab, args.dim)
        self.blocks = nn.ModuleList(Block(args) for _ in range(args.layers))
        self.norm, self.lm_head = RMSNorm(args.dim), nn.Linear(args.dim, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        for block in self.blocks:
            for proj in (block.attn_proj, block.mlp_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * args.layers))
        self.tied = bool(args.tie)
        if self.tied:
            self.lm_head.weight = self.tok_emb.weight
        head_dim = args.dim // args.heads
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(args.context, dtype=torch.float64), inv_freq).repeat(1, 2)
        # plain attributes, not buffers: constants that DDP has no need to broadcast
        self.rope_cos, self.rope_sin = angles.cos().float(), angles.sin().float()

    def keep_vocab_rows(self, start, end):
        """From now on this rank holds rows [start, end) of the head (and of the embedding, when tied)."""
        rows = nn.Parameter(self.lm_head.weight.detach()[start:end].clone())
        self.lm_head.weight, self.vocab_start = rows, start
        if self.tied:
            self.tok_emb.weight = rows

    def hidden(self, ids):
        if self.vocab_start is not None and self.tied:
            x = distributed.vocab_parallel_embedding(ids, self.tok_emb.weight, vocab_start_index=self.vocab_start)
        else:
            x = tgt.embedding(ids, self.tok_emb.weight)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.norm(x)

    def forward(self, ids, target):
        h = self.hidden(ids)
        h, target, w = h.reshape(-1, h.shape[-1]), target.reshape(-1), self.lm_head.weight
        if self.vocab_start is None:
            return tgt.linear_cross_entropy(h, w, target, loss_dtype=torch.float32)
        loss = distributed.vocab_parallel_cross_entropy(h, w.to(h.dtype), target, vocab_start_index=self.vocab_start)
        return loss.float()

    @torch.no_grad()
    def generate(self, ids, new_tokens, gen, temperature=0.8, top_k=40):
        """Every rank calls it (the head is gathered whole) and gets the same tokens."""
        head = self.lm_head.weight
        if self.vocab_start is not None:
            head = distributed.gather_vocab_shards(head.detach(), self.vocab)
        for _ in range(new_tokens):
            logits = F.linear(self.hidden(ids[:, -self.context:])[:, -1], head).float() / temperature
            logits[logits < torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]] = -math.inf
            ids = torch.cat([ids, torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)], dim=1)
        return ids


def digest(params):
    return hashlib.sha256(b"".join(p.detach().float().contiguous().numpy().tobytes() for p in params)).hexdigest()


def build(args, vocab, job):
    """(model, optimizer), the same on every rank: checked, then (vocab mode) this rank's head rows kept."""
    torch.manual_seed(args.seed)
    model = LanguageModel(args, vocab).to(getattr(torch, args.param_dtype))
    agree({"the model's shapes": [tuple(p.shape) for p in model.parameters()],
           "the initial weights (check --seed and the torch version)": digest(model.parameters())})
    if job.mode == "vocab":
        model.keep_vocab_rows(*distributed.vocab_shard_bounds(vocab, job.world, job.rank))
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return model, tgt.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), max_grad_norm=MAX_GRAD_NORM,
                                  master_weights=args.param_dtype != "float32")


def agree(values):
    """Every rank stops, naming the first difference, when the ranks' values differ."""
    try:
        distributed.check_same_on_all_ranks(values)
    except ValueError as error:
        raise SystemExit(f"train_lm_distributed: {str(error).split(': ', 1)[1]}; every rank must run the same "
                         "command") from None


# ---- Checkpoints in the single-process layout: the head's rows (and their AdamW state) gathered -----

def is_rows(state, rows):
    """Whether an optimizer state entry has one row per head row (the moments, the master weights)."""
    return torch.is_tensor(state) and state.dim() > 0 and len(state) == rows


def head_index(model, opt):
    """The head's position among the optimizer's parameters (its key in the optimizer's state dict)."""
    return next(i for i, p in enumerate(p for g in opt.param_groups for p in g["params"]) if p is model.lm_head.weight)


def whole_state(model, opt):
    """(model, optimizer) state dicts as one process holding the whole head would save them."""
    state, opt_state = model.state_dict(), opt.state_dict()
    if model.vocab_start is not None:
        rows = len(model.lm_head.weight)
        whole = lambda t: distributed.gather_vocab_shards(t, model.vocab) if is_rows(t, rows) else t  # noqa: E731
        for key in ("lm_head.weight", "tok_emb.weight") if model.tied else ("lm_head.weight",):
            state[key] = whole(state[key])
        index = head_index(model, opt)
        opt_state["state"][index] = {k: whole(v) for k, v in opt_state["state"][index].items()}
    return state, opt_state


def load_whole_state(model, opt, ckpt):
    """whole_state()'s inverse: this rank keeps its rows of the head and of the head's AdamW state."""
    state, opt_state = dict(ckpt["model"]), dict(ckpt["optimizer"], state=dict(ckpt["optimizer"]["state"]))
    if model.vocab_start is not None:
        start, end = model.vocab_start, model.vocab_start + len(model.lm_head.weight)
        mine = lambda t: t[start:end] if is_rows(t, model.vocab) else t  # noqa: E731
        for key in ("lm_head.weight", "tok_emb.weight") if model.tied else ("lm_head.weight",):
            state[key] = mine(state[key])
        index = head_index(model, opt)
        if index in opt_state["state"]:
            opt_state["state"][index] = {k: mine(v) for k, v in opt_state["state"][index].items()}
    model.load_state_dict(state)
    opt.load_state_dict(opt_state)


def head_memory(model, opt):
    """Bytes of the head's rows, gradient and AdamW state on this rank, and for one process (whole head)."""
    head = model.lm_head.weight
    state = opt.state.get(head, {}).values()
    per_rank = {"rows": len(head), "weight_bytes": head.numel() * head.element_size(),
                "grad_bytes": head.numel() * head.element_size(),
                "optimizer_state_bytes": sum(v.numel() * v.element_size() for v in state if is_rows(v, len(head)))}
    one = {"rows": model.vocab, **{k: round(v * model.vocab / len(head)) for k, v in per_rank.items() if k != "rows"}}
    return {"tied_to_embedding": model.tied, "per_rank": per_rank, "one_process": one}


# ---- Training -------------------------------------------------------------------------------------

def train_step(net, model, opt, batch, lr, args, job):
    """One step on this rank's part of the global batch; returns the global batch's mean loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    x, y = batch
    if job.mode == "data":
        x, y = x.tensor_split(job.world)[job.rank], y.tensor_split(job.world)[job.rank]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16"):
        loss = net(x, y)
    loss.backward()
    if job.mode == "vocab":  # the norm over the whole head; AdamW's own clip then finds nothing to do
        head = model.lm_head.weight
        distributed.clip_grad_norm_([p for p in model.parameters() if p is not head], [head], MAX_GRAD_NORM)
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss = loss.detach().float()
    if job.mode == "data":
        dist.all_reduce(loss)
        loss /= job.world
    return loss.item()


@torch.no_grad()
def evaluate(model, batches, args, job):
    """The mean loss over the validation batches (data mode: each rank a slice of every batch)."""
    model.eval()
    losses = []
    for x, y in batches:
        if job.mode == "data":
            x, y = x.tensor_split(job.world)[job.rank], y.tensor_split(job.world)[job.rank]
        total = torch.zeros(2, dtype=torch.float64)  # token-weighted: uneven slices give one process's mean
        if y.numel():
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.dtype == "bfloat16"):
                total[0], total[1] = model(x, y).double() * y.numel(), y.numel()
        if job.mode == "data":
            dist.all_reduce(total)
        losses.append(float(total[0] / total[1]))
    model.train()
    return sum(losses) / len(losses)


class StopRequest:
    """Ctrl-C asks for a stop between two steps. torchrun forwards it to every rank, which may then see
    it twice (from the terminal too): both only ask; torchrun itself escalates a real second Ctrl-C."""

    def __enter__(self):
        self.requested, self.previous = False, signal.signal(signal.SIGINT, self.request)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)

    def request(self, signum, frame):
        self.requested = True


def train(args, ckpt, job):
    from tqdm import tqdm

    with distributed.local_main_rank_first():  # one rank per machine trains the tokenizer, the others read it
        data = prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)
    print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
    vocab = data.tokenizer.get_vocab_size()
    if min(len(data.train), len(data.val)) <= args.context + 1:
        raise SystemExit(f"train_lm_distributed: the text is too short for --context {args.context}")
    model, opt = build(args, vocab, job)
    net = DistributedDataParallel(model) if job.mode == "data" else model
    if ckpt:
        load_whole_state(model, opt, ckpt)
    completed = ckpt["completed"] if ckpt else 0
    log = [r for r in read_log(args.out / LOG) if r["step"] <= completed] if ckpt and job.rank == 0 else []
    val = val_batches(data.val, args.batch_size, args.context, args.eval_batches)
    print(f"[tilegrad] vocabulary {vocab}, {job.world} processes x {torch.get_num_threads()} threads, --parallel "
          f"{job.mode}", flush=True)
    with StopRequest() as stop, tqdm(total=args.steps, initial=completed, disable=job.rank != 0) as bar, \
            open(args.out / LOG if job.rank == 0 else os.devnull, "w") as file:
        def write(record):
            if not all(math.isfinite(v) for k, v in record.items() if k.endswith("loss")):
                raise SystemExit(f"train_lm_distributed: step {record['step']}: the loss diverged ({record}); "
                                 f"nothing saved: lower --lr")
            log.append(record)
            print(json.dumps(record), file=file, flush=True)

        file.writelines(json.dumps(r) + "\n" for r in log)
        if not completed:
            write({"step": 0, "val_loss": evaluate(model, val, args, job)})
        while completed < args.steps and not distributed.any_rank(stop.requested):
            lr = learning_rate(completed, args.steps, args.lr)
            batch = train_batch(data.train, completed, args.seed, args.batch_size, args.context)
            loss = train_step(net, model, opt, batch, lr, args, job)
            completed += 1
            write({"step": completed, "train_loss": loss, "lr": lr, "time": time.time()})
            if completed % args.eval_interval == 0 or completed == args.steps:
                write({"step": completed, "val_loss": evaluate(model, val, args, job)})
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
            bar.update(1)
    head = model.lm_head.weight
    agree({"the replicated weights after training (a bug: please report it)":
           digest(p for p in model.parameters() if p is not head or job.mode == "data")})
    model_state, opt_state = whole_state(model, opt)  # a collective: on every rank
    saved = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
             if k not in ("out", "resume", "overwrite")}
    if job.rank == 0:
        checkpoint.save({"model": model_state, "optimizer": opt_state, "completed": completed, "args": saved,
                         "tokens": data.key}, args.out / CHECKPOINT)
    return finish(args, data, model, opt, job, log, completed)


def finish(args, data, model, opt, job, log, completed):
    """summary.json (rank 0), then a sample generated on every rank (printed by rank 0) or how to go on."""
    vals, tail = [r["val_loss"] for r in log if "val_loss" in r], [r["train_loss"] for r in log if "train_loss" in r]
    local = sum(p.numel() for p in model.parameters())
    summary = {"parameters": local - model.lm_head.weight.numel() + model.lm_head.weight[0].numel() * model.vocab,
               "vocab": model.vocab, "steps": completed, "tokens_per_step": args.batch_size * args.context,
               "dtype": args.dtype, "param_dtype": args.param_dtype, "world_size": job.world, "parallel": job.mode,
               "threads_per_rank": torch.get_num_threads()}
    if job.mode == "vocab":
        summary.update(parameters_per_rank=local, lm_head_memory=head_memory(model, opt))
    if job.rank == 0:
        summary.update(final_train_loss=sum(tail[-10:]) / len(tail[-10:]) if tail else None,
                       first_val_loss=vals[0], final_val_loss=vals[-1])
        (args.out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    if completed < args.steps:
        print(f"\nstopped after step {completed}; checkpoint saved. Continue with:\n"
              f"    torchrun --nproc-per-node N {sys.argv[0]} --resume {args.out}", flush=True)
    elif args.sample_tokens:
        out = model.generate(torch.tensor([data.tokenizer.encode("The ").ids]), args.sample_tokens,
                             torch.Generator().manual_seed(args.seed))
        print(f"\n--- sample ---\n{data.tokenizer.decode(out[0].tolist())}\n--------------", flush=True)
    return summary


def read_log(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


# ---- The command line ------------------------------------------------------------------------------

def positive(kind):
    """An argparse type: a finite `kind` > 0 (a mistake is refused naming the flag and the value)."""
    def parse(text):
        if not 0 < (value := kind(text)) < math.inf:
            raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
        return value
    parse.__name__ = kind.__name__
    return parse


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--parallel", choices=("data", "vocab"), default="data",
                   help="data: each rank a slice of every batch; vocab: each rank 1/N of the LM head's rows")
    p.add_argument("--dist-timeout", type=positive(float), default=300.0, help="seconds a rank waits for another")
    p.add_argument("--out", type=Path, help="run folder (default: runs/train_lm_distributed, or --resume's)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run saved in DIR")
    p.add_argument("--overwrite", action="store_true", help="start over in an --out folder holding a run")
    for name, default in (("steps", 500), ("batch-size", 8), ("context", 128), ("dim", 192), ("layers", 4),
                          ("heads", 4), ("ffn-dim", 512), ("eval-interval", 50), ("eval-batches", 6)):
        p.add_argument(f"--{name}", type=positive(int), default=default)
    p.add_argument("--threads", type=positive(int), help="torch threads per rank (default: the cores / the ranks here)")
    p.add_argument("--lr", type=positive(float), default=3e-3)
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--param-dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tie", type=int, choices=(0, 1), default=1)
    p.add_argument("--vocab", type=positive(int), default=8192)
    p.add_argument("--text", type=Path)
    p.add_argument("--corpus", choices=("pydoc", "stdlib"), default="pydoc")
    p.add_argument("--cache-dir", type=Path, default=CACHE)
    p.add_argument("--sample-tokens", type=int, default=120)
    return p


RESUMABLE = ("steps", "lr", "threads", "sample_tokens", "eval_interval", "cache_dir", "parallel", "dist_timeout")


def parse_args(argv=None):
    """(options, checkpoint or None); with --resume the checkpoint's options, RESUMABLE ones typed again."""
    parser, ckpt = build_parser(), None
    args = parser.parse_args(argv)
    if args.resume:
        try:
            ckpt = checkpoint.load(args.resume / CHECKPOINT, required=("model", "optimizer", "completed", "args"))
        except ValueError as error:
            raise SystemExit(f"train_lm_distributed: --resume {args.resume}: {error}") from None
        parser.set_defaults(**ckpt["args"])
        args = parser.parse_args(argv)
        changed = [f"--{k.replace('_', '-')} {getattr(args, k)} (checkpoint: {v})" for k, v in ckpt["args"].items()
                   if k not in RESUMABLE and str(getattr(args, k, v)) != str(v)]
        if changed:
            raise SystemExit(f"train_lm_distributed: --resume {args.resume}: flags differ from the saved run: "
                             f"{', '.join(changed)}")
    args.out = args.out or args.resume or Path("runs") / "train_lm_distributed"
    if not args.resume and not args.overwrite and any((args.out / f).exists() for f in (CHECKPOINT, LOG, SUMMARY)):
        raise SystemExit(f"train_lm_distributed: --out {args.out} already holds a run: --resume {args.out}, "
                         "--overwrite, or a new --out")
    if args.dim % (2 * args.heads):
        raise SystemExit(f"train_lm_distributed: --dim must be a multiple of 2 x --heads, got --dim {args.dim}")
    return args, ckpt


def main(argv=None):
    """Runs a command line on this rank (alone without torchrun); returns the summary."""
    args, ckpt = parse_args(argv)
    rank, world = distributed.start_process_group(args.dist_timeout)
    job = SimpleNamespace(rank=rank, world=world, mode=args.parallel)
    threads, stdout = torch.get_num_threads(), sys.stdout
    try:
        if rank != 0:  # rank 0 alone prints; errors still reach stderr
            sys.stdout = open(os.devnull, "w")
        local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # the cores are shared by this machine's ranks
        torch.set_num_threads(args.threads or max(1, len(os.sched_getaffinity(0)) // local_ranks))
        agree({f"--{k.replace('_', '-')}": getattr(args, k) for k in AGREED})
        if job.mode == "data" and args.batch_size % world:
            raise SystemExit(f"train_lm_distributed: --batch-size must be a multiple of the {world} processes with "
                             f"--parallel data, got {args.batch_size}")
        if rank == 0:
            args.out.mkdir(parents=True, exist_ok=True)
            for name in (CHECKPOINT, LOG, SUMMARY) if args.overwrite else ():
                (args.out / name).unlink(missing_ok=True)
        return train(args, ckpt, job)
    finally:
        sys.stdout = stdout
        torch.set_num_threads(threads)
        if world == 1:  # this process's own group, left as it was found (a torchrun rank ends here)
            dist.destroy_process_group()


if __name__ == "__main__":
    distributed.run_then_exit(main)  # gloo's destructors can abort a finished rank at exit: leave through it
