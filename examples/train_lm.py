#!/usr/bin/env python3
"""Train a small Llama-style language model on the CPU with tilegrad's kernels.

    pip install "tilegrad[torch]" tokenizers tqdm
    python examples/train_lm.py                          # 500 steps, about 1.5 minutes on 2 cores
    python examples/train_lm.py --text my.txt --steps 2000 --out runs/mine
    python examples/train_lm.py --resume runs/train_lm --steps 1000     # continue a run, for longer

The model is plain PyTorch whose layers call five tilegrad.torch functions: embedding, RMSNorm, SwiGLU,
the rotary embedding and the fused LM-head loss (the batch x time x vocabulary logits never exist);
tgt.optim.AdamW clips the gradient norm inside its one-pass update. The text is CPython's own
documentation (nothing downloaded) or --text FILE, through a byte-level BPE tokenizer, cached.
--out DIR receives log.jsonl, summary.json and checkpoint.pt (also on Ctrl-C); --resume DIR continues
with the losses of an uninterrupted run. A run is never replaced without --overwrite, a diverged one
is never saved, and a mistake on the command line is refused in one line (exit status 2).
"""

import argparse
import contextlib
import hashlib
import json
import math
import os
import re
import signal
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import tilegrad.torch as tgt

CHECKPOINT, LOG, SUMMARY = "checkpoint.pt", "log.jsonl", "summary.json"
# What a resumed run may change; the rest (model, data, dtypes) is the checkpoint's. --steps and --lr
# reshape the schedule from the next step on. (--parallel, --dist-timeout: train_lm_distributed.py's.)
RESUMABLE = ("steps", "lr", "threads", "sample_tokens", "eval_interval", "cache_dir", "parallel", "dist_timeout")
UNSET = object()  # parse_args: an option not typed on the command line


class UsageError(SystemExit):
    """A mistake on the command line: exit status 2, as argparse's; main() prints the one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = 2


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line naming the flag and the value, instead of usage + message
        raise UsageError("train_lm: " + re.sub(r"^argument ([^:]+): ", r"\1 ", message))


def checked(kind, ok, what: str):
    """An argparse type: text -> kind, refused unless ok(value), the message saying what it must be."""
    def parse(text):
        value = kind(text)
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {what}, got {value}")
        return value
    parse.__name__ = kind.__name__  # argparse names it in "invalid int value: 'x'"
    return parse


POSITIVE = checked(int, lambda v: v >= 1, ">= 1")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, help="run folder (default: runs/train_lm, or --resume's)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run saved in DIR")
    p.add_argument("--overwrite", action="store_true", help="start over in an --out folder holding a run")
    p.add_argument("--steps", type=POSITIVE, default=500, help="optimizer steps")
    p.add_argument("--batch-size", type=POSITIVE, default=8, help="sequences per step")
    p.add_argument("--lr", type=checked(float, lambda v: 0 < v < math.inf, "a finite number > 0"), default=3e-3,
                   help="peak AdamW learning rate")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="bfloat16: CPU autocast")
    p.add_argument("--param-dtype", choices=("float32", "bfloat16"), default="float32",
                   help="dtype of the parameters (bfloat16: AdamW keeps float32 master weights)")
    p.add_argument("--threads", type=POSITIVE, help="torch threads (default: torch's)")
    p.add_argument("--seed", type=checked(int, lambda v: 0 <= v < 2 ** 32, "in [0, 2^32)"), default=0)
    p.add_argument("--eval-interval", type=POSITIVE, default=50, help="steps between validations")
    p.add_argument("--eval-batches", type=POSITIVE, default=6, help="batches per validation")
    p.add_argument("--context", type=POSITIVE, default=128, help="tokens per sequence")
    p.add_argument("--dim", type=POSITIVE, default=192, help="model width")
    p.add_argument("--layers", type=POSITIVE, default=4, help="transformer blocks")
    p.add_argument("--heads", type=POSITIVE, default=4, help="attention heads")
    p.add_argument("--ffn-dim", type=POSITIVE, default=512, help="SwiGLU hidden width")
    p.add_argument("--tie", type=int, choices=(0, 1), default=1, help="1: the LM head is the embedding's weight")
    p.add_argument("--vocab", type=checked(int, lambda v: 260 <= v <= 2 ** 20, "in [260, 2^20]"), default=8192,
                   help="BPE vocabulary size (256 bytes and a special token at least)")
    p.add_argument("--text", type=Path, help="a UTF-8 text file to train on (default: the Python documentation)")
    p.add_argument("--corpus", choices=("pydoc", "stdlib"), default="pydoc",
                   help="built-in text without --text: the documentation, or the standard library's source")
    p.add_argument("--cache-dir", type=Path, help="tokenizer cache (default: ~/.cache/tilegrad/train_lm)")
    p.add_argument("--sample-tokens", type=checked(int, lambda v: v >= 0, ">= 0"), default=120,
                   help="tokens generated at the end")
    p.add_argument("--filter", type=checked(float, lambda v: 0 < v < 1, "in (0, 1)"), nargs="?", const=2.0 ** -8,
                   metavar="TAU", help="skip LM-head gradient blocks within the error bound TAU (bare: 2^-8)")
    return p


def parse_args(argv=None, parser=None) -> argparse.Namespace:
    """The options (args.given: those typed), checked; `parser`: build_parser()'s, possibly extended."""
    parser = parser or build_parser()
    defaults = vars(parser.parse_args([]))
    # argparse leaves an attribute the namespace already holds alone unless the option is typed
    args = parser.parse_args(argv, argparse.Namespace(**dict.fromkeys(defaults, UNSET)))
    args.given = sorted(k for k, v in vars(args).items() if v is not UNSET)
    vars(args).update({k: v for k, v in defaults.items() if getattr(args, k) is UNSET})
    args.out = args.out or args.resume or Path("runs") / "train_lm"
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    """What no single flag shows: the flags together, and the folders and file they name."""
    if args.dim % (2 * args.heads):  # each head's width must be even: the rotary embedding turns pairs
        suggestion = (args.dim // (2 * args.heads) + 1) * 2 * args.heads
        raise UsageError(f"train_lm: --dim must be a multiple of 2 x --heads ({2 * args.heads}) for an even head "
                         f"dimension, got --dim {args.dim} (e.g. --dim {suggestion})")
    if args.resume and (args.overwrite or args.out.resolve() != args.resume.resolve()):
        raise UsageError(f"train_lm: --resume {args.resume} continues the run in {args.resume}: drop "
                         f"{'--overwrite' if args.overwrite else f'--out {args.out}'}")
    for flag, folder in (("--out", args.out), ("--cache-dir", args.cache_dir or default_cache_dir())):
        file = next((p for p in (folder, *folder.parents) if p.exists()), Path("."))
        if not file.is_dir():
            raise UsageError(f"train_lm: {flag} must name a folder, got {folder}, and {file} is a file")
    if args.text is not None:
        read_text(args.text)


# ---- Data: text -> cached byte-level BPE -> token ids; batches that depend on (seed, step) only ----

def read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
        return data.decode("utf-8")
    except OSError as error:
        raise UsageError(f"train_lm: --text must be a readable file, got {path} ({error.strerror})") from None
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UsageError(f"train_lm: --text {path} is not UTF-8 text: byte 0x{data[error.start]:02x} at offset "
                         f"{error.start} (line {line}); convert it, e.g. "
                         f"iconv -f latin1 -t utf-8 {path} > {path}.utf8") from None


def load_documents(path=None, corpus: str = "pydoc") -> list:
    """--text's one document, or text that ships with CPython: the Python documentation (~460k
    characters), or the standard library's modules (~4.7M characters, enough for a 32k vocabulary)."""
    if path is not None:
        return [read_text(path)]
    if corpus == "stdlib":
        lib = Path(sysconfig.get_paths()["stdlib"])
        return [f.read_text(encoding="utf-8", errors="replace") for f in sorted(lib.glob("*.py"))]
    from pydoc_data.topics import topics
    return [topics[name].strip() + "\n" for name in sorted(topics)]


def split_documents(docs: list):
    """(train, validation) text: every 10th document, or a single document's last 10%, held out."""
    if len(docs) >= 10:
        return "\n".join(d for i, d in enumerate(docs) if i % 10 != 5), "\n".join(docs[5::10])
    text = "\n".join(docs)
    cut = max(text.find("\n", len(text) * 9 // 10), len(text) * 9 // 10)
    return text[:cut], text[cut:]


def default_cache_dir() -> Path:  # $XDG_CACHE_HOME or ~/.cache, then tilegrad/train_lm
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilegrad" / "train_lm"


@dataclass
class Data:
    train: torch.Tensor  # int64 token ids
    val: torch.Tensor
    tokenizer: object  # tokenizers.Tokenizer
    from_cache: bool
    tokenizer_file: Path


def prepare_data(text=None, vocab: int = 8192, cache_dir=None, corpus: str = "pydoc") -> Data:
    """Tokenizer and token ids, trained and encoded once per (text, vocabulary), then cached."""
    import tokenizers

    train_text, val_text = split_documents(load_documents(text, corpus))
    key = hashlib.sha256(f"bpe-v2|{tokenizers.__version__}|{vocab}|{len(train_text)}|{train_text}{val_text}"
                         .encode()).hexdigest()[:16]
    cache = (cache_dir or default_cache_dir()) / key
    tok_file, ids_file = cache / "tokenizer.json", cache / "tokens.npz"
    from_cache = tok_file.is_file() and ids_file.is_file()
    if from_cache:
        tokenizer, ids = tokenizers.Tokenizer.from_file(str(tok_file)), dict(np.load(ids_file))
    else:
        bpe = tokenizers.ByteLevelBPETokenizer()
        lines = train_text.splitlines(keepends=True)
        bpe.train_from_iterator(("".join(lines[i:i + 64]) for i in range(0, len(lines), 64)), vocab_size=vocab,
                                min_frequency=1, show_progress=False, special_tokens=["<|endoftext|>"])
        tokenizer = bpe._tokenizer  # the plain tokenizers.Tokenizer: saves, loads and decodes alone
        ids = {k: np.asarray(tokenizer.encode(t).ids, np.int32) for k, t in (("train", train_text), ("val", val_text))}
        cache.mkdir(parents=True, exist_ok=True)  # write, then rename: never half a file for another run
        tmp_tok, tmp_ids = cache / f"tokenizer.{os.getpid()}.tmp", cache / f"tokens.{os.getpid()}.tmp.npz"
        tokenizer.save(str(tmp_tok))
        np.savez(tmp_ids, **ids)
        os.replace(tmp_ids, ids_file)
        os.replace(tmp_tok, tok_file)
    as_tensor = lambda a: torch.from_numpy(a.astype(np.int64))  # noqa: E731
    return Data(as_tensor(ids["train"]), as_tensor(ids["val"]), tokenizer, from_cache, tok_file)


def train_batch(tokens, step: int, seed: int, batch_size: int, context: int):
    """Random windows chosen by (seed, step) alone, so that a resumed run sees the same batches."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    window = tokens[torch.randint(0, len(tokens) - context - 1, (batch_size, 1), generator=gen)
                    + torch.arange(context + 1)]
    return window[:, :-1], window[:, 1:]


def val_batches(tokens, batch_size: int, context: int, max_batches: int) -> list:
    """Fixed, evenly spread validation windows: the same at every evaluation."""
    count = max(1, min(max_batches * batch_size, (len(tokens) - 1) // context))
    window = tokens[torch.linspace(0, len(tokens) - context - 1, count).long()[:, None] + torch.arange(context + 1)]
    return [(w[:, :-1], w[:, 1:]) for w in window.split(batch_size)]


# ---- The model: plain PyTorch; its layers call tilegrad through `ops` -----------------------------

class TilegradOps:
    """The functions tilegrad computes for the model (benchmarks/bench_train_lm.py swaps in PyTorch's)."""
    name = "tilegrad"

    def __init__(self, filter_tolerance=None) -> None:
        self.filter_tolerance = filter_tolerance

    embedding, silu_mul = staticmethod(tgt.embedding), staticmethod(tgt.silu_mul)

    def rms_norm(self, x, weight, eps):
        return tgt.rms_norm(x, weight.shape, weight, eps)

    def rope(self, q, k, cos, sin):  # cos, sin: (t, head_dim), as Hugging Face's Llama passes them
        return tgt.apply_rotary_pos_emb(q, k, cos[None], sin[None])

    def lm_loss(self, hidden, weight, target):
        """Mean cross entropy of hidden @ weight.T, fused; a float32 loss for bfloat16 inputs (unrounded)."""
        return tgt.linear_cross_entropy(hidden, weight, target, filter_tolerance=self.filter_tolerance,
                                        loss_dtype=torch.float32)

    def optimizer(self, groups, lr, master_weights):
        """One fused pass: the global gradient norm, the clip to 1.0 and the AdamW update."""
        return tgt.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), max_grad_norm=1.0, master_weights=master_weights)


@dataclass
class ModelConfig:
    vocab: int
    context: int
    dim: int
    layers: int
    heads: int
    ffn_dim: int
    tie: bool = True


class RMSNorm(nn.Module):
    """x / rms(x) * weight, through ops.rms_norm."""

    def __init__(self, dim, ops, eps=1e-5):
        super().__init__()
        self.ops, self.eps, self.weight = ops, eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.ops.rms_norm(x, self.weight, self.eps)


class Block(nn.Module):
    """x + attention(norm(x)), then x + SwiGLU(norm(x))."""

    def __init__(self, cfg: ModelConfig, ops):
        super().__init__()
        self.ops, self.heads = ops, cfg.heads
        self.attn_norm, self.mlp_norm = RMSNorm(cfg.dim, ops), RMSNorm(cfg.dim, ops)
        self.qkv, self.attn_proj = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False), nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.gate, self.up = (nn.Linear(cfg.dim, cfg.ffn_dim, bias=False) for _ in range(2))
        self.mlp_proj = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k = self.ops.rope(q, k, cos[:t].to(q.dtype), sin[:t].to(q.dtype))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(b, t, d))
        h = self.mlp_norm(x)
        return x + self.mlp_proj(self.ops.silu_mul(self.gate(h), self.up(h)))


class LanguageModel(nn.Module):
    """Decoder-only transformer; `ops` supplies embedding, RMSNorm, RoPE, SwiGLU and the LM-head loss."""

    def __init__(self, cfg: ModelConfig, ops):
        super().__init__()
        self.cfg, self.ops = cfg, ops
        self.tok_emb = nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = nn.ModuleList(Block(cfg, ops) for _ in range(cfg.layers))
        self.norm, self.lm_head = RMSNorm(cfg.dim, ops), nn.Linear(cfg.dim, cfg.vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        for block in self.blocks:  # residual branches scaled down (GPT-2), so that depth starts stable
            for proj in (block.attn_proj, block.mlp_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * cfg.layers))
        if cfg.tie:
            self.lm_head.weight = self.tok_emb.weight
        head_dim = cfg.dim // cfg.heads  # rotary tables, Llama's frequencies, rotate-half layout
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(cfg.context, dtype=torch.float64), inv_freq).repeat(1, 2)
        self.register_buffer("rope_cos", angles.cos().float(), persistent=False)
        self.register_buffer("rope_sin", angles.sin().float(), persistent=False)

    def hidden(self, ids):
        """(B, T) token ids -> (B, T, dim) final hidden states."""
        x = self.ops.embedding(ids, self.tok_emb.weight)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.norm(x)

    def forward(self, ids, target):
        """Mean next-token cross entropy of (B, T) ids against (B, T) targets."""
        h = self.hidden(ids)
        return self.ops.lm_loss(h.reshape(-1, h.shape[-1]), self.lm_head.weight, target.reshape(-1))

    @torch.no_grad()
    def generate(self, ids, new_tokens: int, gen, temperature=0.8, top_k=40):
        """`new_tokens` tokens sampled after the (1, T) ids, from the top_k most likely each time."""
        for _ in range(new_tokens):
            logits = F.linear(self.hidden(ids[:, -self.cfg.context:])[:, -1], self.lm_head.weight).float()
            logits = logits / temperature
            logits[logits < torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]] = -math.inf
            ids = torch.cat([ids, torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)], dim=1)
        return ids


def build_model(args, data: Data, ops) -> LanguageModel:
    """The model of args' sizes on data's vocabulary, initialised from args.seed, in --param-dtype."""
    cfg = ModelConfig(data.tokenizer.get_vocab_size(), args.context, args.dim, args.layers, args.heads,
                      args.ffn_dim, bool(args.tie))
    torch.manual_seed(args.seed)
    return LanguageModel(cfg, ops).to(getattr(torch, args.param_dtype))


def make_optimizer(model, lr: float):
    """Weight decay on the matrices only; float32 master weights for bfloat16 parameters."""
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return model.ops.optimizer(groups, lr, master_weights=params[0].dtype != torch.float32)


# ---- Training ------------------------------------------------------------------------------------

def learning_rate(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * progress)))


def autocast(dtype: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16")


def train_step(model, opt, batch, lr: float, dtype: str) -> float:
    """One optimizer step on an (inputs, targets) batch; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    with autocast(dtype):
        loss = model(*batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


@torch.no_grad()
def evaluate(model, batches, dtype: str) -> float:
    """The mean loss over the validation batches."""
    model.eval()
    with autocast(dtype):
        losses = [model(x, y).float().item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)


class StopFlag:
    """Set by Ctrl-C: the loop stops between two whole steps and saves; a second Ctrl-C stops at once."""

    def __enter__(self):
        self.requested, self.previous = False, signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)

    def _handler(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def should_stop(self, completed: int) -> bool:
        return self.requested


class OneProcess:
    """The hooks through which train_lm_distributed.py spreads train() over processes; here, none."""
    wrap = staticmethod(lambda model: model)
    track_optimizer = staticmethod(lambda opt: None)
    agreed = staticmethod(lambda stop: stop)
    main_rank_first = staticmethod(contextlib.nullcontext)
    describe = staticmethod(dict)


def read_log(path: Path) -> list:
    """log.jsonl's records: {"step", "train_loss", "lr", "time"} per step, {"step", "val_loss"} per validation."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def diverged(args, step: int, what: str) -> SystemExit:
    """Raised before anything non-finite is saved: checkpoint.pt stays the last good one; exit status 1."""
    again = f"--resume {args.resume} --lr SMALLER" if args.resume else "start over with --overwrite --lr SMALLER"
    return SystemExit(f"train_lm: step {step}: {what} (diverged); stopped without saving a checkpoint. "
                      f"--lr {args.lr} is probably too high: {again}")


def train(args, data: Data, ckpt=None, parallel=None) -> dict:
    """Trains, writing log.jsonl, summary.json and checkpoint.pt into args.out; returns the summary."""
    parallel, threads = parallel or OneProcess(), torch.get_num_threads()
    torch.set_num_threads(args.threads or threads)
    try:
        model = parallel.wrap(build_model(args, data, TilegradOps(args.filter)))
        opt = make_optimizer(model, args.lr)
        parallel.track_optimizer(opt)
        completed = 0 if ckpt is None else ckpt["completed"]
        if ckpt is not None:
            model.load_state_dict(ckpt["model"])
            opt.load_state_dict(ckpt["optimizer"])
        args.out.mkdir(parents=True, exist_ok=True)  # a resumed log loses the steps after its checkpoint
        kept = [r for r in read_log(args.out / LOG) if r["step"] <= completed] if ckpt else []
        with (args.out / LOG).open("w") as log:
            log.writelines(json.dumps(r) + "\n" for r in kept)
            write = lambda record: (log.write(json.dumps(record) + "\n"), log.flush())  # noqa: E731
            return train_loop(args, data, model, opt, completed, write, parallel)
    finally:
        torch.set_num_threads(threads)


def train_loop(args, data, model, opt, completed, write, parallel) -> dict:
    from tqdm import tqdm

    val = val_batches(data.val, args.batch_size, args.context, args.eval_batches)
    params = sum(p.numel() for p in model.parameters())
    print(f"[tilegrad] {params / 1e6:.2f}M parameters, vocabulary {data.tokenizer.get_vocab_size()}, "
          f"{len(data.train)} training tokens, {args.dtype}, {torch.get_num_threads()} threads", flush=True)
    val_loss = evaluate(model, val, args.dtype) if completed == 0 else None
    if completed == 0:
        write({"step": 0, "val_loss": val_loss})
    with parallel.agreed(StopFlag()) as stop, tqdm(total=args.steps, initial=completed, mininterval=0.5) as bar:
        while completed < args.steps and not stop.should_stop(completed):
            lr = learning_rate(completed, args.steps, args.lr)
            loss = train_step(model, opt, train_batch(data.train, completed, args.seed, args.batch_size,
                                                      args.context), lr, args.dtype)
            completed += 1
            if not math.isfinite(loss):
                raise diverged(args, completed, f"the training loss is {loss}")
            write({"step": completed, "train_loss": loss, "lr": lr, "time": time.time()})
            if completed % args.eval_interval == 0 or completed == args.steps:
                val_loss = evaluate(model, val, args.dtype)
                if not math.isfinite(val_loss):
                    raise diverged(args, completed, f"the validation loss is {val_loss}")
                write({"step": completed, "val_loss": val_loss})
            bar.set_postfix(loss=f"{loss:.3f}", val="-" if val_loss is None else f"{val_loss:.3f}", refresh=False)
            bar.update(1)
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise diverged(args, completed, "the weights are no longer finite")
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "completed": completed,
             "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
             "tokens": fingerprint(data)}
    torch.save(state, args.out / (CHECKPOINT + ".tmp"))
    os.replace(args.out / (CHECKPOINT + ".tmp"), args.out / CHECKPOINT)  # never half a checkpoint
    records = read_log(args.out / LOG)
    vals, tail = [r["val_loss"] for r in records if "val_loss" in r], [r["train_loss"] for r in records[-20:]
                                                                      if "train_loss" in r][-10:]
    summary = {"parameters": params, "vocab": data.tokenizer.get_vocab_size(), "steps": completed,
               "tokens_per_step": args.batch_size * args.context, "dtype": args.dtype,
               "param_dtype": args.param_dtype, "final_train_loss": sum(tail) / len(tail) if tail else None,
               "first_val_loss": vals[0], "final_val_loss": vals[-1], **parallel.describe()}
    (args.out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    if completed < args.steps:
        print(f"\nstopped after step {completed}; checkpoint saved. Continue with:\n"
              f"    python {sys.argv[0]} --resume {args.out}", flush=True)
    elif args.sample_tokens:
        prompt = torch.tensor([data.tokenizer.encode("The ").ids])
        out = model.generate(prompt, args.sample_tokens, torch.Generator().manual_seed(args.seed))
        print(f"\n--- sample ---\n{data.tokenizer.decode(out[0].tolist())}\n--------------", flush=True)
    return summary


# ---- Resuming ------------------------------------------------------------------------------------

def flag_text(key: str, value) -> str:
    """How an option reads on a command line: --dim 64, --overwrite, no --filter."""
    flag = "--" + key.replace("_", "-")
    return f"no {flag}" if value is None or value is False else flag if value is True else f"{flag} {value}"


def fingerprint(data: Data) -> str:
    """What the model trains on: the token ids (the text through its tokenizer)."""
    return hashlib.sha256(data.train.numpy().tobytes() + data.val.numpy().tobytes()).hexdigest()[:16]


def restore_args(args: argparse.Namespace):
    """For --resume: the checkpoint's options, with those in RESUMABLE typed now; any other option
    typed with another value than the checkpoint's is refused."""
    file = args.resume / CHECKPOINT
    if not file.is_file():
        raise UsageError(f"train_lm: --resume needs a run folder, and {file} does not exist")
    try:  # weights_only: a damaged or foreign file is refused, never unpickled
        ckpt = torch.load(file, map_location="cpu", weights_only=True)
        why = None if isinstance(ckpt, dict) and {"model", "optimizer", "completed", "args"} <= ckpt.keys() \
            else "not a train_lm checkpoint"
    except Exception as error:  # noqa: BLE001 (a damaged file fails in many ways: one answer)
        why = "an empty file" if file.stat().st_size == 0 else f"torch.load failed with {type(error).__name__}"
    if why:
        raise UsageError(f"train_lm: --resume {args.resume}: {file} cannot be resumed ({why}); resume an intact "
                         f"copy, or start over with --out {args.resume} --overwrite")
    saved = dict(ckpt["args"], resume=args.resume, out=args.resume, overwrite=False, given=args.given)
    changed = [f"{flag_text(k, getattr(args, k))} (checkpoint: {flag_text(k, saved.get(k))})" for k in args.given
               if k not in RESUMABLE + ("resume", "out") and str(getattr(args, k)) != str(saved.get(k))]
    if changed:
        raise UsageError(f"train_lm: --resume {args.resume} continues the saved run, and these flags differ from it: "
                         f"{', '.join(changed)}; drop them (only --steps, --lr and how it reports may change), "
                         "or start a new run with them (--out NEW_DIR)")
    saved.update({k: getattr(args, k) for k in RESUMABLE if k in args.given})
    restored = argparse.Namespace(**saved)
    restored.text, restored.cache_dir = (Path(p) if p else None for p in (restored.text, restored.cache_dir))
    return restored, ckpt


def check_same_tokens(args, ckpt: dict, data: Data) -> None:
    """A text changed since the checkpoint: warned about while the model fits, refused once it does not."""
    rows, vocab = ckpt["model"]["tok_emb.weight"].shape[0], data.tokenizer.get_vocab_size()
    if vocab != rows:
        raise UsageError(f"train_lm: --resume {args.resume}: the text gives a vocabulary of {vocab} tokens, the "
                         f"checkpoint's model has {rows} (the text changed?): restore it, or start a new run")
    if ckpt.get("tokens") != fingerprint(data):
        print(f"warning: --resume {args.resume}: the text gives other tokens than those the checkpoint was trained "
              "on; continuing on the new tokens, so the losses are not an uninterrupted run's", file=sys.stderr)


def main(argv=None, parser=None, start=None) -> dict:
    """Runs a command line; returns the summary. train_lm_distributed.py passes its `parser` and
    `start(args)`, which returns this process's hooks (OneProcess's)."""
    try:
        if start is None and os.environ.get("WORLD_SIZE", "1") not in ("", "1"):
            raise UsageError(f"train_lm: started as rank {os.environ.get('RANK', '?')} of {os.environ['WORLD_SIZE']} "
                             "processes (torchrun): train_lm.py runs in one process; use "
                             "examples/train_lm_distributed.py, with the same flags, to train on several")
        args, ckpt = parse_args(argv, parser), None
        if args.resume:
            args, ckpt = restore_args(args)
        found = [f.name for f in (args.out / CHECKPOINT, args.out / LOG, args.out / SUMMARY) if f.exists()]
        if found and not args.resume and not args.overwrite:
            raise UsageError(f"train_lm: --out {args.out} already holds a run ({', '.join(found)}): continue it "
                             f"with --resume {args.out}, start over with --overwrite, or give a new --out")
        parallel = start(args) if start else OneProcess()
        with parallel.main_rank_first():
            data = prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)
        print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
        if min(len(data.train), len(data.val)) <= args.context + 1:
            raise UsageError(f"train_lm: the text is too short for --context {args.context}: its smaller split has "
                             f"{min(len(data.train), len(data.val))} tokens")
        if ckpt is not None:
            check_same_tokens(args, ckpt, data)
        for name in found if args.overwrite else ():  # the old run goes first: a folder never mixes two
            (args.out / name).unlink()
        return train(args, data, ckpt, parallel)
    except UsageError as error:
        print(error, file=sys.stderr, flush=True)
        raise


if __name__ == "__main__":
    main()
