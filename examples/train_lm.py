#!/usr/bin/env python3
"""Train a small language model on the CPU with tilegrad (or, to compare, with plain PyTorch).

    python examples/train_lm.py                 # tilegrad path; 500 steps, ~1.5 minutes on 2 idle cores, no download
    python examples/train_lm.py --baseline      # the same model with PyTorch's own ops
    python examples/train_lm.py --resume runs/train_lm --steps 1000   # continue a run, for longer

Both paths side by side from the same seed (loss.png and a table): benchmarks/bench_train_lm.py.
Several processes (torchrun): train_lm_distributed.py.

The model is a Llama-style decoder-only transformer written once in plain PyTorch (token embedding,
rotary position embedding, RMSNorm, causal attention through ``scaled_dot_product_attention``, SwiGLU
MLP, LM head tied to the token embedding unless --tie 0). The two paths differ only in the five
functions and the optimizer of ``TilegradOps`` vs ``TorchOps`` below:

    embedding  tilegrad.torch.embedding              F.embedding
    RMSNorm    tilegrad.torch.rms_norm               F.rms_norm
    SwiGLU     tilegrad.torch.silu_mul               F.silu(gate) * up
    RoPE       tilegrad.torch.apply_rotary_pos_emb   Hugging Face's rotate-half composite
    loss       tilegrad.torch.linear_cross_entropy   F.cross_entropy(F.linear(hidden, W), target)
               (fused: the batch x time x vocabulary logits never exist during training)
    optimizer  tilegrad.torch.optim.AdamW(           torch.nn.utils.clip_grad_norm_(params, 1.0), then
                 max_grad_norm=1.0)                  torch.optim.AdamW(fused=True)
               (one pass: the clip is fused into the update; with --param-dtype bfloat16 it keeps fp32
               master weights and moments, where torch's bf16 AdamW keeps bf16 moments and no masters)

Data: the Python documentation that ships inside CPython (``pydoc_data.topics``), or ``--text FILE``;
a byte-level BPE tokenizer (``tokenizers``) trained on the training split and cached on disk; every
10th documentation topic (of a single --text file: its last 10%) is held out for validation.

``--filter [TAU]`` trains the tilegrad path with error-bounded gradient filtering in the LM head
(``linear_cross_entropy(..., filter_tolerance=TAU)``, default TAU = 2^-8, bf16's resolution: each
row's ``grad_input`` and each vocabulary row's ``grad_weight`` stay within TAU of their bound sums,
see the README); the log records per step the share of logits-gradient blocks skipped.

``--out DIR`` gets ``log.jsonl`` (one JSON record per step and per validation), ``summary.json`` and
``checkpoint.pt``; ``--resume DIR`` continues from that checkpoint with the same losses as an
uninterrupted run (batches depend only on the seed and the step). Ctrl-C saves a checkpoint first.
A folder that already holds a run is never replaced silently: continue it with ``--resume DIR``, start
over with ``--overwrite``, or pick a new ``--out``. A resumed run keeps the checkpoint's model, data and
path; of the flags typed with ``--resume`` only those in RESUMABLE may differ from the checkpoint's
(--steps and --lr reshape the learning-rate schedule from the next step on), any other that differs
is refused; a text whose tokens changed since is warned about (refused if the model no longer fits). A loss that stops being finite (usually: --lr too high) stops the run without saving.

Mistakes on the command line are refused before anything is written, with one line naming the flag,
its value and what to do, and exit status 2 (as argparse's own errors); a diverged run exits with 1.
"""

import argparse
import contextlib
import hashlib
import json
import math
import os
import signal
import statistics
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

CHECKPOINT = "checkpoint.pt"
LOG = "log.jsonl"
SUMMARY = "summary.json"
FILTER_TAU = 2.0 ** -8  # --filter's default tolerance: bf16's unit roundoff

# Defaults (a flag given on the command line wins).
DEFAULTS = dict(steps=500, batch_size=8, lr=3e-3, context=128, dim=192, layers=4, heads=4, ffn_dim=512,
                vocab=8192, eval_interval=50, eval_batches=6, sample_tokens=120, seed=0, dtype="float32",
                param_dtype="float32", tie=1)
# Options a resumed run may change (how long, how fast, how it reports and where it caches); everything
# else (model, data, batches, dtypes, path) comes from the checkpoint, and a typed value that differs
# from it is refused. --steps and --lr make the schedule follow the new values from the next step on
# (useful after a divergence), so the losses then differ from an uninterrupted run's.
RESUMABLE = ("steps", "lr", "threads", "sample_tokens", "eval_interval", "cache_dir", "parallel",
             "dist_timeout")  # (the last two: train_lm_distributed.py's)
# Typed with --resume, these say how to resume rather than what the run is: never compared.
RESUME_CONTROLS = ("resume", "out")
UNSET = object()  # parse_args: an option the command line did not give
MAX_VOCAB = 2 ** 20


class UsageError(SystemExit):
    """A mistake on the command line: exit status 2 (argparse's), str() is the one-line message, which
    main() prints."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.code = 2


# ----------------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    run = p.add_argument_group("what to run")
    run.add_argument("--baseline", action="store_true", help="PyTorch's own ops instead of tilegrad")
    run.add_argument("--filter", type=float, nargs="?", const=FILTER_TAU, default=None, metavar="TAU",
                     help="tilegrad path: error-bounded gradient filtering in the LM head at tolerance TAU "
                          "(default 2^-8)")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default: runs/train_lm)")
    run.add_argument("--resume", type=Path, default=None, metavar="DIR",
                     help="continue the run saved in DIR (its checkpoint.pt); results go to DIR")
    run.add_argument("--overwrite", action="store_true",
                     help="start over in an --out folder that holds a run (its files are replaced)")
    train = p.add_argument_group("training")
    train.add_argument("--steps", type=int, help=f"optimizer steps (default {DEFAULTS['steps']})")
    train.add_argument("--batch-size", type=int, help=f"sequences per step (default {DEFAULTS['batch_size']})")
    train.add_argument("--lr", type=float, help=f"peak AdamW learning rate (default {DEFAULTS['lr']})")
    train.add_argument("--dtype", choices=("float32", "bfloat16"),
                       help="float32, or bfloat16 through CPU autocast (default float32)")
    train.add_argument("--param-dtype", choices=("float32", "bfloat16"),
                       help="dtype of the parameters themselves (default float32); bfloat16: the tilegrad "
                            "path's AdamW keeps fp32 master weights, the baseline is torch's bf16 AdamW")
    train.add_argument("--threads", type=int,
                       help="torch (and so tilegrad) threads (default: torch's; a tiny model is fastest on 1)")
    train.add_argument("--seed", type=int, help="seed of the initialisation and the batches (default 0)")
    train.add_argument("--eval-interval", type=int, help="steps between validations (default 50)")
    train.add_argument("--eval-batches", type=int, help="validation batches per evaluation (default 6)")
    model = p.add_argument_group("model and data")
    model.add_argument("--context", type=int, help=f"tokens per sequence (default {DEFAULTS['context']})")
    model.add_argument("--dim", type=int, help=f"model width (default {DEFAULTS['dim']})")
    model.add_argument("--layers", type=int, help=f"transformer blocks (default {DEFAULTS['layers']})")
    model.add_argument("--heads", type=int, help=f"attention heads (default {DEFAULTS['heads']})")
    model.add_argument("--ffn-dim", type=int, help=f"SwiGLU hidden width (default {DEFAULTS['ffn_dim']})")
    model.add_argument("--tie", type=int, choices=(0, 1),
                       help="1: the LM head shares the token embedding's weight, 0: its own (default 1)")
    model.add_argument("--vocab", type=int, help=f"BPE vocabulary size (default {DEFAULTS['vocab']})")
    model.add_argument("--text", type=Path, default=None,
                       help="train on this UTF-8 text file (default: CPython's pydoc_data.topics)")
    model.add_argument("--corpus", choices=("pydoc", "stdlib"), default="pydoc",
                       help="built-in text when no --text: the Python documentation (default) or the "
                            "standard library's source (for large vocabularies)")
    model.add_argument("--cache-dir", type=Path, default=None,
                       help="tokenizer cache (default: $XDG_CACHE_HOME or ~/.cache, then tilegrad/train_lm)")
    model.add_argument("--sample-tokens", type=int, help="tokens generated at the end (default 120)")
    return p


def parse_args(argv: Optional[Sequence[str]] = None,
               parser: Optional[argparse.ArgumentParser] = None) -> argparse.Namespace:
    """Parses argv (with build_parser(), or a parser extending it) and fills every option left unset
    from DEFAULTS; args.given lists the options typed on the command line (argparse's defaults are not)."""
    parser = parser or build_parser()
    parser_defaults = vars(parser.parse_args([]))
    # argparse leaves an option the namespace already holds alone unless it is typed
    args = parser.parse_args(argv, argparse.Namespace(**dict.fromkeys(parser_defaults, UNSET)))
    args.given = sorted(k for k, v in vars(args).items() if v is not UNSET)
    for key, value in parser_defaults.items():
        if getattr(args, key) is UNSET:
            setattr(args, key, value)
    for key, value in DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.out is None:
        args.out = args.resume or Path("runs") / "train_lm"
    check_args(args)
    return args


def check_args(args: argparse.Namespace) -> None:
    """Rejects values that cannot work, naming the flag, the value and what to do (UsageError)."""
    positive = ("steps", "batch_size", "context", "dim", "layers", "heads", "ffn_dim", "eval_interval",
                "eval_batches")
    for name in positive:
        if getattr(args, name) < 1:
            raise UsageError(f"train_lm: --{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.dim % args.heads:
        raise UsageError(f"train_lm: --dim must be a multiple of --heads ({args.heads}), got {args.dim}")
    if args.dim // args.heads % 2:
        # the rotary embedding turns pairs of features: each head needs an even width
        raise UsageError(f"train_lm: --dim / --heads must give an even head dimension, got --dim {args.dim} / "
                         f"--heads {args.heads} = {args.dim // args.heads}: make --dim a multiple of "
                         f"{2 * args.heads} (e.g. --dim {(args.dim // (2 * args.heads) + 1) * 2 * args.heads})")
    if args.vocab < 260:
        raise UsageError(f"train_lm: --vocab must be >= 260 (256 bytes + specials), got {args.vocab}")
    if args.vocab > MAX_VOCAB:
        # the BPE trainer reserves memory for the vocabulary asked for (gigabytes near 10^9)
        raise UsageError(f"train_lm: --vocab must be <= {MAX_VOCAB}, got {args.vocab}: a larger vocabulary "
                         "than the text supports only costs memory")
    if not 0 <= args.seed < 2 ** 32:
        raise UsageError(f"train_lm: --seed must be in [0, 2^32), got {args.seed}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        raise UsageError(f"train_lm: --lr must be a finite number > 0, got {args.lr}")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"train_lm: --threads must be >= 1, got {args.threads}")
    if args.filter is not None and not 0.0 < args.filter < 1.0:
        raise UsageError(f"train_lm: --filter TAU must be in (0, 1), got {args.filter}")
    if args.filter is not None and args.baseline:
        raise UsageError("train_lm: --filter applies to the tilegrad path; --baseline trains PyTorch's own ops")
    check_resume_flags(args)
    if args.resume is None:
        check_folder("--out", args.out)
    check_folder("--cache-dir", args.cache_dir or default_cache_dir())
    if args.text is not None:
        read_text_file(args.text)


def check_resume_flags(args: argparse.Namespace) -> None:
    """--resume continues a run in its own folder: --overwrite (start over) and another --out contradict it."""
    if args.resume is None:
        return
    if args.overwrite:
        raise UsageError(f"train_lm: --overwrite starts a new run, --resume {args.resume} continues one: "
                         "give one of them")
    if args.out.resolve() != args.resume.resolve():
        raise UsageError(f"train_lm: --resume {args.resume} writes into {args.resume}, got --out {args.out}: "
                         f"drop --out (or copy the folder to {args.out} and resume that)")


def check_folder(flag: str, folder: Path) -> None:
    """A folder the run creates or writes into: refused when it, or a folder above it, is a file."""
    for part in (folder, *folder.parents):
        if part.exists():
            if not part.is_dir():
                raise UsageError(f"train_lm: {flag} must name a folder, got {folder}, and {part} is a file: "
                                 "name a folder (it is created if missing)")
            return


def read_text_file(path: Path) -> str:
    """--text's contents, decoded as UTF-8; a missing, binary or otherwise encoded file is refused naming
    the file and, for a decoding error, the byte, its offset and its line."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UsageError(f"train_lm: --text must be a readable file, got {path} ({error.strerror})") from None
    nul = data.find(b"\0")
    if nul >= 0:
        raise UsageError(f"train_lm: --text {path} is binary (a NUL byte at offset {nul}), not text: "
                         "give a UTF-8 text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise UsageError(f"train_lm: --text {path} is not UTF-8: byte 0x{data[error.start]:02x} at offset "
                         f"{error.start} (line {line}) is {error.reason}; convert the file to UTF-8, e.g. "
                         f"iconv -f latin1 -t utf-8 {path} > {path}.utf8") from None


# ----------------------------------------------------------------------------------------------------
# Data: text -> cached byte-level BPE -> token ids, a held-out split, batches that depend on (seed, step)
# ----------------------------------------------------------------------------------------------------

def load_documents(path: Optional[Path], corpus: str = "pydoc") -> List[str]:
    """The user's file (one document), or text that ships with CPython, nothing downloaded:
    "pydoc" = the Python documentation (pydoc_data.topics: 79 topics, ~460k characters);
    "stdlib" = the standard library's top-level modules (~170 .py files, ~4.7M characters), large
    enough for a 32k vocabulary."""
    if path is not None:
        return [read_text_file(path)]
    if corpus == "stdlib":
        lib = Path(sysconfig.get_paths()["stdlib"])
        return [f.read_text(encoding="utf-8", errors="replace") for f in sorted(lib.glob("*.py"))]
    from pydoc_data.topics import topics
    return [topics[name].strip() + "\n" for name in sorted(topics)]


def split_documents(docs: List[str]) -> Tuple[str, str]:
    """(train, validation) text: every 10th document held out, or, for a single document, its last
    10% (cut at a line break)."""
    if len(docs) >= 10:
        return "\n".join(d for i, d in enumerate(docs) if i % 10 != 5), "\n".join(docs[5::10])
    text = "\n".join(docs)
    cut = text.find("\n", len(text) * 9 // 10)
    cut = len(text) * 9 // 10 if cut < 0 else cut
    return text[:cut], text[cut:]


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tilegrad" / "train_lm"


@dataclass
class Data:
    train: torch.Tensor  # int64 token ids
    val: torch.Tensor
    tokenizer: "object"  # tokenizers.Tokenizer
    from_cache: bool
    tokenizer_file: Path


def prepare_data(text_path: Optional[Path], vocab: int, cache_dir: Optional[Path], corpus: str = "pydoc") -> Data:
    """Tokenizer and token ids, trained and encoded once per (text, vocabulary) and cached."""
    import tokenizers

    train_text, val_text = split_documents(load_documents(text_path, corpus))
    key = hashlib.sha256(f"bpe-v2|{tokenizers.__version__}|{vocab}|{len(train_text)}|".encode()
                         + train_text.encode() + val_text.encode()).hexdigest()[:16]
    cache = (cache_dir or default_cache_dir()) / key
    tok_file, ids_file = cache / "tokenizer.json", cache / "tokens.npz"
    from_cache = tok_file.is_file() and ids_file.is_file()
    if from_cache:
        tokenizer = tokenizers.Tokenizer.from_file(str(tok_file))
        ids = np.load(ids_file)
        train_ids, val_ids = ids["train"], ids["val"]
    else:
        tokenizer = train_tokenizer(train_text, vocab)
        train_ids = np.asarray(tokenizer.encode(train_text).ids, dtype=np.int32)
        val_ids = np.asarray(tokenizer.encode(val_text).ids, dtype=np.int32)
        cache.mkdir(parents=True, exist_ok=True)
        # write then rename, so a concurrent or interrupted run never sees half a file
        tmp_tok, tmp_ids = cache / f"tokenizer.{os.getpid()}.tmp", cache / f"tokens.{os.getpid()}.tmp.npz"
        tokenizer.save(str(tmp_tok))
        np.savez(tmp_ids, train=train_ids, val=val_ids)
        os.replace(tmp_ids, ids_file)
        os.replace(tmp_tok, tok_file)
    return Data(torch.from_numpy(train_ids.astype(np.int64)), torch.from_numpy(val_ids.astype(np.int64)),
                tokenizer, from_cache, tok_file)


def train_tokenizer(text: str, vocab: int):
    """A byte-level BPE (GPT-2 style) trained on `text`; every byte is in the vocabulary."""
    from tokenizers import ByteLevelBPETokenizer

    bpe = ByteLevelBPETokenizer()
    lines = text.splitlines(keepends=True)
    chunks = ("".join(lines[i:i + 64]) for i in range(0, len(lines), 64))
    bpe.train_from_iterator(chunks, vocab_size=vocab, min_frequency=1, show_progress=False,
                            special_tokens=["<|endoftext|>"])
    return bpe._tokenizer  # the plain tokenizers.Tokenizer (saves, loads and decodes on its own)


def train_batch(tokens: torch.Tensor, step: int, seed: int, batch_size: int,
                context: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """Random windows chosen by (seed, step) alone, so a resumed run sees the same batches."""
    gen = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(tokens) - context - 1, (batch_size,), generator=gen)
    window = tokens[starts[:, None] + torch.arange(context + 1)]
    return window[:, :-1], window[:, 1:]


def val_batches(tokens: torch.Tensor, batch_size: int, context: int,
                max_batches: int) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """Fixed, evenly spread validation windows (the same at every evaluation and in both paths)."""
    windows = max(1, min(max_batches * batch_size, (len(tokens) - 1) // context))
    starts = torch.linspace(0, len(tokens) - context - 1, windows).long()
    window = tokens[starts[:, None] + torch.arange(context + 1)]
    return [(w[:, :-1], w[:, 1:]) for w in window.split(batch_size)]


# ----------------------------------------------------------------------------------------------------
# The two paths: the only five functions that differ
# ----------------------------------------------------------------------------------------------------

class TorchOps:
    """PyTorch's own ops: the baseline."""
    name = "pytorch"

    @staticmethod
    def embedding(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, weight)

    @staticmethod
    def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return F.rms_norm(x, weight.shape, weight, eps)

    @staticmethod
    def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up

    @staticmethod
    def rope(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Hugging Face's apply_rotary_pos_emb (rotate-half), as Llama computes it."""
        def rotate_half(x):
            half = x.shape[-1] // 2
            return torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

    @staticmethod
    def lm_loss(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean cross entropy of the LM head: builds the whole (tokens, vocab) logits, upcast to float32
        as Hugging Face's loss does (a 16-bit loss would be rounded to steps of 1/32 near 6)."""
        return F.cross_entropy(F.linear(hidden, weight).float(), target)

    @staticmethod
    def optimizer(groups: List[Dict], lr: float, betas: Tuple[float, float], max_grad_norm: float,
                  master_weights: bool) -> torch.optim.Optimizer:
        """PyTorch's strongest CPU AdamW (its fused kernel; bf16 params keep bf16 moments, no masters)."""
        return torch.optim.AdamW(groups, lr=lr, betas=betas, fused=True)

    @staticmethod
    def clip_grads(params, max_grad_norm: float) -> None:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)

    @staticmethod
    def step_stats() -> Dict[str, float]:
        return {}


class TilegradOps:
    """tilegrad's kernels through tilegrad.torch; with filter_tolerance, the LM head's gradients are
    filtered within that error bound."""

    def __init__(self, filter_tolerance: Optional[float] = None) -> None:
        import tilegrad
        import tilegrad.torch as tgt
        self.tg, self.tgt = tilegrad, tgt
        self.filter_tolerance = filter_tolerance
        self.name = "filtered" if filter_tolerance else "tilegrad"

    def embedding(self, ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return self.tgt.embedding(ids, weight)

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        return self.tgt.rms_norm(x, weight.shape, weight, eps)

    def silu_mul(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return self.tgt.silu_mul(gate, up)

    def rope(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """cos / sin (t, head_dim) as Hugging Face passes them, (batch=1, t, head_dim)."""
        return self.tgt.apply_rotary_pos_emb(q, k, cos[None], sin[None])

    def lm_loss(self, hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean cross entropy from the hidden states, fused: the logits never exist whole (under
        autocast the projection runs in the autocast dtype, as F.linear's would); the loss is float32
        for 16-bit inputs, unrounded."""
        return self.tgt.linear_cross_entropy(hidden, weight, target, filter_tolerance=self.filter_tolerance,
                                             loss_dtype=torch.float32)

    def step_stats(self) -> Dict[str, float]:
        """The LM head's gradient filtering in this thread's last fused call (the training step's:
        its forward computes the gradients): shares of the 64 x 128 logits-gradient blocks the
        grad_input / grad_weight products skipped, and the largest dropped fraction of a row's bound."""
        if not self.filter_tolerance:
            return {}
        s = self.tg.fused_linear_cross_entropy_filter_stats(detail=True)
        return {"input_skipped": s["input_skipped"], "weight_skipped": s["weight_skipped"],
                "max_row_dropped": s["max_row_dropped"]}

    def optimizer(self, groups: List[Dict], lr: float, betas: Tuple[float, float], max_grad_norm: float,
                  master_weights: bool) -> torch.optim.Optimizer:
        """One fused pass per group: the global gradient norm, the clip and the AdamW update."""
        return self.tgt.optim.AdamW(groups, lr=lr, betas=betas, max_grad_norm=max_grad_norm,
                                    master_weights=master_weights)

    @staticmethod
    def clip_grads(params, max_grad_norm: float) -> None:
        """Nothing to do: the optimizer clips inside its step."""


def make_ops(baseline: bool, filter_tolerance: Optional[float] = None):
    return TorchOps() if baseline else TilegradOps(filter_tolerance)


def path_of(args: argparse.Namespace) -> str:
    """The path one run trains: pytorch (--baseline), filtered (--filter) or tilegrad."""
    return "pytorch" if args.baseline else "filtered" if args.filter else "tilegrad"


def ops_of(path: str, args: argparse.Namespace):
    return make_ops(path == "pytorch", args.filter if path == "filtered" else None)


# ----------------------------------------------------------------------------------------------------
# The model: plain PyTorch, ops injected
# ----------------------------------------------------------------------------------------------------

@dataclass
class ModelConfig:
    vocab: int
    context: int
    dim: int
    layers: int
    heads: int
    ffn_dim: int
    tie: bool = False


class RMSNorm(nn.Module):
    def __init__(self, dim: int, ops, eps: float = 1e-5) -> None:
        super().__init__()
        self.ops = ops
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ops.rms_norm(x, self.weight, self.eps)


def rotary_tables(context: int, head_dim: int, theta: float = 10000.0) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (context, head_dim) of the rotate-half rotary embedding (Llama's frequencies)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(context, dtype=torch.float64), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos().float(), angles.sin().float()


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig, ops) -> None:
        super().__init__()
        self.heads, self.ops = cfg.heads, ops
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        # (t, head_dim) tables broadcast over batch and heads, in the projections' dtype (as Llama's)
        q, k = self.ops.rope(q, k, cos[:t].to(q.dtype), sin[:t].to(q.dtype))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    def __init__(self, cfg: ModelConfig, ops) -> None:
        super().__init__()
        self.ops = ops
        self.gate = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.up = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False)
        self.proj = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.ops.silu_mul(self.gate(x), self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, ops) -> None:
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(cfg.dim, ops), CausalSelfAttention(cfg, ops)
        self.mlp_norm, self.mlp = RMSNorm(cfg.dim, ops), SwiGLU(cfg, ops)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class LanguageModel(nn.Module):
    """Decoder-only transformer. `ops` supplies embedding, RMSNorm, SwiGLU, RoPE and the LM-head loss."""

    def __init__(self, cfg: ModelConfig, ops) -> None:
        super().__init__()
        self.cfg, self.ops = cfg, ops
        self.tok_emb = nn.Embedding(cfg.vocab, cfg.dim)
        cos, sin = rotary_tables(cfg.context, cfg.dim // cfg.heads)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.blocks = nn.ModuleList(Block(cfg, ops) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim, ops)
        self.lm_head = nn.Linear(cfg.dim, cfg.vocab, bias=False)
        self.apply(self._init_weights)
        if cfg.tie:
            self.lm_head.weight = self.tok_emb.weight
        for block in self.blocks:  # residual branches scaled down (GPT-2), so depth starts stable
            for proj in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * cfg.layers))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def hidden(self, ids: torch.Tensor) -> torch.Tensor:
        """(B, T) token ids -> (B, T, dim) final hidden states."""
        x = self.ops.embedding(ids, self.tok_emb.weight)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.norm(x)

    def forward(self, ids: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross entropy."""
        h = self.hidden(ids)
        return self.ops.lm_loss(h.reshape(-1, h.shape[-1]), self.lm_head.weight, target.reshape(-1))

    @torch.no_grad()
    def generate(self, ids: torch.Tensor, new_tokens: int, gen: torch.Generator,
                 temperature: float = 0.8, top_k: int = 40) -> torch.Tensor:
        """Samples `new_tokens` tokens after `ids` (1, T) (logits of the last position only)."""
        for _ in range(new_tokens):
            logits = F.linear(self.hidden(ids[:, -self.cfg.context:])[:, -1], self.lm_head.weight)
            logits = logits.float() / temperature
            kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
            probs = torch.softmax(logits.masked_fill(logits < kth, -float("inf")), dim=-1)
            ids = torch.cat([ids, torch.multinomial(probs, 1, generator=gen)], dim=1)
        return ids


def model_config(args: argparse.Namespace, data: "Data") -> ModelConfig:
    return ModelConfig(vocab=data.tokenizer.get_vocab_size(), context=args.context, dim=args.dim,
                       layers=args.layers, heads=args.heads, ffn_dim=args.ffn_dim, tie=bool(args.tie))


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------

def learning_rate(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


MAX_GRAD_NORM = 1.0


def make_optimizer(model: "LanguageModel", lr: float) -> torch.optim.Optimizer:
    """The path's AdamW; weight decay on matrices only (not on norms); gradients clipped to norm 1.
    bf16 parameters get fp32 master weights where the path has them (tilegrad)."""
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    vectors = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": matrices, "weight_decay": 0.1}, {"params": vectors, "weight_decay": 0.0}]
    low_precision = next(model.parameters()).dtype != torch.float32
    return model.ops.optimizer(groups, lr, (0.9, 0.95), MAX_GRAD_NORM, master_weights=low_precision)


def build_model(cfg: "ModelConfig", ops, param_dtype: str) -> "LanguageModel":
    """The model on the current seed, its parameters cast to --param-dtype."""
    return LanguageModel(cfg, ops).to(getattr(torch, param_dtype))


def autocast(dtype: str):
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16")


@torch.no_grad()
def evaluate(model: LanguageModel, batches, dtype: str) -> float:
    """Mean validation loss over the fixed validation windows (through the path's own loss)."""
    model.eval()
    with autocast(dtype):
        losses = [model(x, y).float().item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)


class PeakMemory:
    """Peak resident memory growth of this process since `start()` (Linux /proc/self/status).

    `start()` resets the kernel's high-water mark (VmHWM) through /proc/self/clear_refs, so the peak
    covers the training loop only: activations, gradients, optimizer state and the loss computation.
    """

    def start(self) -> None:
        try:
            Path("/proc/self/clear_refs").write_text("5")
        except OSError:
            pass  # no reset: the peak then also counts what came before, the growth is an over-estimate
        self.base = self._read("VmRSS")

    def peak_growth_mib(self) -> Optional[float]:
        peak = self._read("VmHWM")
        return None if peak is None or self.base is None else (peak - self.base) / 1024

    @staticmethod
    def _read(field: str) -> Optional[int]:
        try:
            for line in Path("/proc/self/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    return int(line.split()[1])  # kB
        except OSError:
            return None
        return None


class StopFlag:
    """Set by Ctrl-C (SIGINT); the loop checks it between steps, so the checkpoint is always taken
    between two whole optimizer steps. A second Ctrl-C stops at once."""

    def __init__(self) -> None:
        self.requested = False

    def __enter__(self) -> "StopFlag":
        self.previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        signal.signal(signal.SIGINT, self.previous)

    def _handler(self, signum, frame) -> None:
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)

    def should_stop(self, completed: int) -> bool:
        """Whether to stop after `completed` steps."""
        return self.requested


class JsonLog:
    """log.jsonl: {"step", "train_loss", "lr", "ms"} per step, {"step", "val_loss"} per validation.
    "step" counts completed optimizer steps (validation at step 0 is the untrained model)."""

    def __init__(self, path: Path, keep_until: Optional[int]) -> None:
        self.path = path
        # a new run starts an empty log; a resumed one drops what came after its checkpoint, then appends
        records = [] if keep_until is None else [r for r in read_log(path) if r["step"] <= keep_until]
        path.write_text("".join(json.dumps(r) + "\n" for r in records))

    def write(self, record: Dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


def read_log(path: Path) -> List[Dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def save_checkpoint(out: Path, model: nn.Module, opt: torch.optim.Optimizer, completed: int,
                    args: argparse.Namespace, data: Data) -> None:
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "completed": completed,
             "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
             "tokens": token_fingerprint(data)}
    tmp = out / (CHECKPOINT + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, out / CHECKPOINT)  # never a half-written checkpoint


def resume_folder(folder: Path) -> Path:
    """The run folder --resume continues; a folder of benchmarks/bench_train_lm.py holds one per path."""
    if not (folder / CHECKPOINT).is_file():
        inside = sorted(str(f.parent) for f in folder.glob(f"*/{CHECKPOINT}"))
        hint = f": it holds runs in {', '.join(inside)}, resume one of them" if inside else ""
        raise UsageError(f"train_lm: --resume needs a run folder, and {folder / CHECKPOINT} does not exist{hint}")
    return folder


def load_checkpoint(folder: Path) -> Dict:
    """FOLDER/checkpoint.pt as save_checkpoint wrote it; an empty, damaged or foreign file is refused
    (it is never unpickled beyond torch's weights_only loader)."""
    file = folder / CHECKPOINT
    if file.stat().st_size == 0:
        raise unreadable_checkpoint(folder, "an empty file")
    try:
        ckpt = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 (a damaged file fails in many ways, each is the same answer)
        raise unreadable_checkpoint(folder, f"torch.load failed with {type(error).__name__}") from None
    if not isinstance(ckpt, dict) or not {"model", "optimizer", "completed", "args"} <= ckpt.keys():
        raise unreadable_checkpoint(folder, "not a train_lm checkpoint")
    return ckpt


def token_fingerprint(data: Data) -> str:
    """What the model trains and validates on: the token ids (the text through its tokenizer)."""
    return hashlib.sha256(data.train.numpy().tobytes() + data.val.numpy().tobytes()).hexdigest()[:16]


def check_same_tokens(args: argparse.Namespace, ckpt: Dict, data: Data) -> None:
    """--resume on a text (or a tokenizers version, or for the built-in corpus a Python) other than the
    checkpoint's: a warning while the model still fits, else a UsageError (checkpoints from before
    the fingerprint: only the fit is checked)."""
    rows = ckpt["model"]["tok_emb.weight"].shape[0]
    source = f"--text {args.text}" if args.text else f"--corpus {args.corpus}"
    if data.tokenizer.get_vocab_size() != rows:
        raise UsageError(f"train_lm: --resume {args.resume}: the text gives a vocabulary of "
                         f"{data.tokenizer.get_vocab_size()} tokens, the checkpoint's model has {rows} ({source} "
                         "changed since?): restore the text to continue, or start a new run (--out NEW_DIR)")
    if ckpt.get("tokens", token_fingerprint(data)) != token_fingerprint(data):
        print(f"warning: --resume {args.resume}: the text gives other tokens than those the checkpoint was "
              f"trained on ({source} changed since?); continuing on the new tokens, so the losses are not "
              "an uninterrupted run's", file=sys.stderr, flush=True)


def unreadable_checkpoint(folder: Path, why: str) -> UsageError:
    return UsageError(f"train_lm: --resume {folder}: {folder / CHECKPOINT} cannot be resumed ({why}); it is "
                      f"damaged or was not written by train_lm: resume an intact copy, or start over there "
                      f"with --out {folder} --overwrite")


def restore_args(args: argparse.Namespace) -> Tuple[argparse.Namespace, Dict]:
    """For --resume: the checkpoint's options, except those in RESUMABLE given on this command line;
    any other option typed with a value other than the checkpoint's is refused."""
    args.resume = resume_folder(args.resume)
    ckpt = load_checkpoint(args.resume)
    # checkpoints from before those flags
    saved = {"param_dtype": "float32", "filter": None, "corpus": "pydoc", **ckpt["args"]}
    refuse_changed_flags(args, saved)
    for key in RESUMABLE:
        if key in args.given:
            saved[key] = getattr(args, key)
    saved.update(resume=args.resume, out=args.resume, overwrite=False)
    for key in ("text", "cache_dir"):
        saved[key] = Path(saved[key]) if saved.get(key) else None
    restored = argparse.Namespace(**saved)
    restored.out, restored.resume = Path(restored.out), Path(restored.resume)
    if restored.text is not None and not restored.text.is_file():
        raise UsageError(f"train_lm: --resume {args.resume}: the run trains on --text {restored.text}, which is "
                         "no longer a readable file: put it back there to continue")
    return restored, ckpt


def refuse_changed_flags(args: argparse.Namespace, saved: Dict) -> None:
    """Options typed with --resume that the checkpoint fixes (not in RESUMABLE) must keep its values."""
    changed = [key for key in args.given if key not in RESUMABLE + RESUME_CONTROLS
               and not same_value(getattr(args, key), saved.get(key))]
    if changed:
        listed = ", ".join(f"{flag_text(k, getattr(args, k))} (checkpoint: {flag_text(k, saved.get(k))})"
                           for k in changed)
        may = ", ".join("--" + k.replace("_", "-") for k in RESUMABLE)
        raise UsageError(f"train_lm: --resume {args.resume} continues the saved run, and these flags differ from "
                         f"it: {listed}; drop them to continue (only {may} may change), or start a new run "
                         "with them (--out NEW_DIR)")


def same_value(typed, saved) -> bool:
    """A typed option against the checkpoint's (where paths are stored as strings)."""
    if isinstance(typed, Path):
        return saved is not None and typed.resolve() == Path(saved).resolve()
    return typed == saved


def flag_text(key: str, value) -> str:
    """How `value` of option `key` reads on a command line: --dim 64, --baseline, no --filter."""
    flag = "--" + key.replace("_", "-")
    if value is True:
        return flag
    return f"no {flag}" if value is None or value is False else f"{flag} {value}"


def run_files(args: argparse.Namespace) -> List[Path]:
    """The files a run writes into --out."""
    return [args.out / name for name in (CHECKPOINT, LOG, SUMMARY)]


def guard_out_dir(args: argparse.Namespace) -> None:
    """A new run never replaces another run's files unasked: without --overwrite a folder holding any
    is refused, before anything is written."""
    found = [file for file in run_files(args) if file.exists()]
    if found and not args.overwrite:
        names = ", ".join(str(file.relative_to(args.out)) for file in found)
        resume = f"continue it with --resume {args.out}, " if any(f.name == CHECKPOINT for f in found) else ""
        raise UsageError(f"train_lm: --out {args.out} already holds a run ({names}): {resume}start over with "
                         "--overwrite (replaces those files), or give a new --out")


def remove_previous_run(args: argparse.Namespace) -> None:
    """--overwrite: the old run's files go before the new one writes, so the folder never mixes two runs."""
    if args.overwrite:
        for file in run_files(args):
            file.unlink(missing_ok=True)


@contextlib.contextmanager
def num_threads(threads: Optional[int]):
    """torch.set_num_threads for the block (tilegrad.torch follows torch's count), restored after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or previous)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


class OneProcess:
    """The hooks train() calls, with which train_lm_distributed.py spreads a run over several processes;
    in one process they change nothing."""

    is_main = True

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def track_optimizer(self, opt: torch.optim.Optimizer) -> None:
        pass

    def agreed(self, stop: "StopFlag") -> "StopFlag":
        return stop

    def main_rank_first(self):
        return contextlib.nullcontext()

    def describe(self) -> Dict:
        return {}


def train(args: argparse.Namespace, data: Data, ckpt: Optional[Dict] = None, parallel=None) -> Dict:
    """Trains one path; writes log.jsonl, summary.json and checkpoint.pt to args.out; returns the summary.
    `parallel`: the hooks of OneProcess (default), e.g. a rank's under train_lm_distributed.py."""
    with num_threads(args.threads):
        return train_with_current_threads(args, data, ckpt, parallel or OneProcess())


def train_with_current_threads(args: argparse.Namespace, data: Data, ckpt: Optional[Dict], parallel) -> Dict:
    ops = ops_of(path_of(args), args)
    torch.manual_seed(args.seed)  # the same initial weights on both paths
    cfg = model_config(args, data)
    model = parallel.wrap(build_model(cfg, ops, args.param_dtype))
    opt = make_optimizer(model, args.lr)
    parallel.track_optimizer(opt)
    completed = 0
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        completed = ckpt["completed"]
    args.out.mkdir(parents=True, exist_ok=True)
    log = JsonLog(args.out / LOG, keep_until=completed if ckpt is not None else None)
    val = val_batches(data.val, args.batch_size, args.context, args.eval_batches)
    tokens_per_step = args.batch_size * args.context
    print(f"[{ops.name}] {count_parameters(model) / 1e6:.2f}M parameters, vocabulary {cfg.vocab}, "
          f"{len(data.train)} training / {len(data.val)} validation tokens, {tokens_per_step} tokens per "
          f"step, {args.dtype}, {args.param_dtype} parameters, {torch.get_num_threads()} threads", flush=True)

    from tqdm import tqdm
    if completed == 0:
        log.write({"step": 0, "val_loss": evaluate(model, val, args.dtype)})
    step_ms: List[float] = []
    memory = PeakMemory()
    memory.start()
    last_val = None
    with parallel.agreed(StopFlag()) as stop, tqdm(total=args.steps, initial=completed, desc=ops.name,
                                              dynamic_ncols=True, mininterval=0.5) as bar:
        while completed < args.steps and not stop.should_stop(completed):
            lr = learning_rate(completed, args.steps, args.lr)
            loss, ms = train_step(model, opt, train_batch(data.train, completed, args.seed, args.batch_size,
                                                          args.context), lr, args.dtype)
            completed += 1
            if not math.isfinite(loss):
                raise diverged(args, completed, f"the training loss is {loss}")
            step_ms.append(ms)
            filtering = model.ops.step_stats()
            log.write({"step": completed, "train_loss": loss, "lr": lr, "ms": ms, **filtering})
            if completed % args.eval_interval == 0 or completed == args.steps:
                last_val = evaluate(model, val, args.dtype)
                if not math.isfinite(last_val):
                    raise diverged(args, completed, f"the validation loss is {last_val}")
                log.write({"step": completed, "val_loss": last_val})
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", val=f"{last_val:.3f}" if last_val else "-",
                            tok_s=f"{tokens_per_step / (ms / 1e3):,.0f}", refresh=False,
                            **({"skipped": f"{filtering['input_skipped']:.0%}"} if filtering else {}))
        interrupted = completed < args.steps
    peak_mib = memory.peak_growth_mib()
    if not all(torch.isfinite(p).all() for p in model.parameters()):
        raise diverged(args, completed, "the weights are no longer finite")
    save_checkpoint(args.out, model, opt, completed, args, data)
    if interrupted:
        print(f"\n[{ops.name}] stopped after step {completed}; checkpoint saved. Continue with:\n"
              f"    python {sys.argv[0]} --resume {args.out}", flush=True)
    summary = summarize(args, ops.name, count_parameters(model), cfg.vocab, step_ms, tokens_per_step, peak_mib,
                        read_log(args.out / LOG), completed)
    summary.update(parallel.describe())
    (args.out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    if not interrupted and args.sample_tokens > 0:
        print_sample(model, data, args)
    return summary


def diverged(args: argparse.Namespace, step: int, what: str) -> SystemExit:
    """The error that stops a run whose loss or weights stopped being finite: raised before they are
    saved, so checkpoint.pt stays the last good one (or absent); exit status 1."""
    again = (f"continue from the checkpoint with --resume {args.resume} --lr SMALLER" if args.resume
             else "start over with --overwrite --lr SMALLER")
    return SystemExit(f"train_lm: step {step}: {what} (diverged); stopped without saving a checkpoint. "
                      f"--lr {args.lr} is probably too high (default {DEFAULTS['lr']}): {again}")


def train_step(model: LanguageModel, opt: torch.optim.Optimizer, batch, lr: float,
               dtype: str) -> Tuple[float, float]:
    """One optimizer step; returns (loss, milliseconds)."""
    x, y = batch
    start = time.perf_counter()
    for group in opt.param_groups:
        group["lr"] = lr
    with autocast(dtype):
        loss = model(x, y)
    loss.backward()
    model.ops.clip_grads(model.parameters(), MAX_GRAD_NORM)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item(), (time.perf_counter() - start) * 1e3


def summarize(args, path: str, params: int, vocab: int, step_ms: List[float], tokens_per_step: int,
              peak_mib: Optional[float], records: List[Dict], completed: int) -> Dict:
    """ms/step is the median over this session's steps after the first two (warm-up)."""
    timed = step_ms[2:] if len(step_ms) > 4 else step_ms
    ms = statistics.median(timed) if timed else float("nan")
    train_losses = [r["train_loss"] for r in records if "train_loss" in r]
    vals = [r["val_loss"] for r in records if "val_loss" in r]
    tail = train_losses[-10:] or [float("nan")]
    skipped = [r["input_skipped"] for r in records if "input_skipped" in r]
    return {"path": path, "parameters": params, "vocab": vocab, "steps": completed,
            "tokens_per_step": tokens_per_step,
            "dtype": args.dtype, "param_dtype": args.param_dtype, "threads": torch.get_num_threads(), "ms_per_step": ms,
            "tokens_per_s": tokens_per_step / (ms / 1e3), "peak_memory_mib": peak_mib,
            "final_train_loss": sum(tail) / len(tail), "first_val_loss": vals[0] if vals else None,
            "final_val_loss": vals[-1] if vals else None, "filter_tolerance": args.filter,
            "mean_input_skipped": sum(skipped) / len(skipped) if skipped else None}


def print_sample(model: LanguageModel, data: Data, args: argparse.Namespace) -> None:
    prompt = data.tokenizer.encode("The ").ids
    gen = torch.Generator().manual_seed(args.seed)
    out = model.generate(torch.tensor([prompt]), args.sample_tokens, gen)
    print(f"\n--- sample ---\n{data.tokenizer.decode(out[0].tolist())}\n--------------", flush=True)


# ----------------------------------------------------------------------------------------------------

def main(argv: Optional[Sequence[str]] = None, parser: Optional[argparse.ArgumentParser] = None,
         start=None) -> Dict:
    """Runs the command line argv (default: sys.argv's) and returns the summary; a mistake in it is
    printed as one line to stderr and raised as UsageError (exit status 2). train_lm_distributed.py
    passes its `parser` (build_parser()'s with its flags) and `start(args)`, which returns the hooks
    of OneProcess for this process (default: OneProcess itself)."""
    try:
        return run(argv, parser, start)
    except UsageError as error:
        print(error, file=sys.stderr, flush=True)
        raise


def run(argv: Optional[Sequence[str]], parser: Optional[argparse.ArgumentParser], start) -> Dict:
    if start is None and os.environ.get("WORLD_SIZE", "1").strip() not in ("", "1"):
        raise UsageError(f"train_lm: started as rank {os.environ.get('RANK', '?')} of {os.environ['WORLD_SIZE']} "
                         "processes (torchrun): train_lm.py runs in one process; use "
                         "examples/train_lm_distributed.py, with the same flags, to train on several")
    args = parse_args(argv, parser)
    ckpt = None
    if args.resume is not None:
        args, ckpt = restore_args(args)
    else:
        guard_out_dir(args)
    parallel = start(args) if start else OneProcess()
    with parallel.main_rank_first():
        data = prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)
    print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
    shortest = min(len(data.train), len(data.val))
    if shortest <= args.context + 1:
        raise UsageError(f"train_lm: the text is too short for --context {args.context}: its smaller split has "
                         f"{shortest} tokens, it needs more than {args.context + 1}")
    if data.tokenizer.get_vocab_size() < args.vocab:
        print(f"note: the text supports only {data.tokenizer.get_vocab_size()} BPE tokens (--vocab {args.vocab}); "
              "the model uses that many (a larger text: --text FILE or --corpus stdlib)", flush=True)
    if ckpt is not None:
        check_same_tokens(args, ckpt, data)
    remove_previous_run(args)
    return train(args, data, ckpt, parallel)


if __name__ == "__main__":
    main()
