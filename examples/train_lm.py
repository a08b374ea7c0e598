#!/usr/bin/env python3
"""Train a small Llama-style language model on the CPU with tilegrad's kernels.

    pip install "tilegrad[torch]" tokenizers tqdm
    python examples/train_lm.py                          # 500 steps, about 1.5 minutes on 2 cores
    python examples/train_lm.py --text my.txt --steps 2000 --out runs/mine
    python examples/train_lm.py --resume runs/train_lm --steps 1000     # continue a run, for longer

The model is plain PyTorch whose layers call five tilegrad.torch functions (embedding, RMSNorm, SwiGLU,
rotary embedding, and the LM-head loss fused so that the logits never exist) and tilegrad's AdamW.
It learns CPython's own documentation (nothing downloaded) or --text FILE. --out DIR receives
log.jsonl, summary.json and checkpoint.pt (also on Ctrl-C); --resume DIR continues the run.
"""

import argparse
import hashlib
import json
import math
import os
import re
import signal
import sys
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

import tilegrad.torch as tgt
from tilegrad.torch import checkpoint

CHECKPOINT, LOG, SUMMARY = "checkpoint.pt", "log.jsonl", "summary.json"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tilegrad" / "train_lm"


# ---- Data: text -> byte-level BPE tokens (cached); batches that depend on (seed, step) only --------

def load_text(path=None, corpus="pydoc"):
    """(train, validation) text: --text's last 10% held out, or every 10th document of text that ships
    with CPython: its documentation (~460k characters) or its standard library (~4.7M)."""
    if path is not None:
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise UsageError(f"--text {path} must be a readable UTF-8 file ({error})") from None
        cut = max(text.find("\n", len(text) * 9 // 10), len(text) * 9 // 10)
        return text[:cut], text[cut:]
    if corpus == "stdlib":
        docs = [f.read_text("utf-8", "replace") for f in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))]
    else:
        from pydoc_data.topics import topics
        docs = [topics[name].strip() + "\n" for name in sorted(topics)]
    return "\n".join(d for i, d in enumerate(docs) if i % 10 != 5), "\n".join(docs[5::10])


def prepare_data(text_file=None, vocab=8192, cache_dir=None, corpus="pydoc"):
    """Tokenizer and token ids, trained and encoded once per (text, vocabulary), then cached."""
    import tokenizers

    train_text, val_text = load_text(text_file, corpus)
    key = hashlib.sha256(f"{tokenizers.__version__}|{vocab}|{len(train_text)}|{train_text}{val_text}".encode())
    cache = (cache_dir or CACHE) / key.hexdigest()[:16]
    tok_file, ids_file = cache / "tokenizer.json", cache / "tokens.pt"
    from_cache = tok_file.is_file() and ids_file.is_file()
    if from_cache:
        tokenizer, ids = tokenizers.Tokenizer.from_file(str(tok_file)), checkpoint.load(ids_file)
    else:
        bpe = tokenizers.ByteLevelBPETokenizer()
        lines = train_text.splitlines(keepends=True)
        bpe.train_from_iterator(("".join(lines[i:i + 64]) for i in range(0, len(lines), 64)), vocab_size=vocab,
                                min_frequency=1, show_progress=False, special_tokens=["<|endoftext|>"])
        tokenizer = bpe._tokenizer  # the plain tokenizers.Tokenizer: saves, loads and decodes alone
        ids = {k: torch.tensor(tokenizer.encode(t).ids) for k, t in (("train", train_text), ("val", val_text))}
        cache.mkdir(parents=True, exist_ok=True)  # both files written whole, then renamed: never half a file
        checkpoint.save(ids, ids_file)
        tokenizer.save(str(cache / f"{os.getpid()}.tmp"))
        os.replace(cache / f"{os.getpid()}.tmp", tok_file)
    return SimpleNamespace(train=ids["train"], val=ids["val"], tokenizer=tokenizer, key=cache.name,
                           from_cache=from_cache, tokenizer_file=tok_file)


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


# ---- The model: plain PyTorch whose layers call tilegrad.torch (tgt) ---------------------------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return tgt.rms_norm(x, self.weight.shape, self.weight, self.eps)


class Block(nn.Module):
    """x + attention(norm(x)), then x + SwiGLU(norm(x))."""

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
    """Decoder-only transformer of args' sizes on a `vocab`-token vocabulary."""

    def __init__(self, args, vocab: int):
        super().__init__()
        self.context, self.filter = args.context, args.filter
        self.tok_emb = nn.Embedding(vocab, args.dim)
        self.blocks = nn.ModuleList(Block(args) for _ in range(args.layers))
        self.norm, self.lm_head = RMSNorm(args.dim), nn.Linear(args.dim, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
        for block in self.blocks:  # residual branches scaled down (GPT-2), so that depth starts stable
            for proj in (block.attn_proj, block.mlp_proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * args.layers))
        if args.tie:
            self.lm_head.weight = self.tok_emb.weight
        head_dim = args.dim // args.heads  # rotary tables, Llama's frequencies, rotate-half layout
        inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(args.context, dtype=torch.float64), inv_freq).repeat(1, 2)
        self.register_buffer("rope_cos", angles.cos().float(), persistent=False)
        self.register_buffer("rope_sin", angles.sin().float(), persistent=False)

    def hidden(self, ids):
        """(B, T) token ids -> (B, T, dim) final hidden states."""
        x = tgt.embedding(ids, self.tok_emb.weight)
        for block in self.blocks:
            x = block(x, self.rope_cos, self.rope_sin)
        return self.norm(x)

    def forward(self, ids, target):
        """Mean next-token cross entropy, fused with the LM head; float32 even for bfloat16 inputs."""
        h = self.hidden(ids)
        return tgt.linear_cross_entropy(h.reshape(-1, h.shape[-1]), self.lm_head.weight, target.reshape(-1),
                                        filter_tolerance=self.filter, loss_dtype=torch.float32)

    @torch.no_grad()
    def generate(self, ids, new_tokens: int, gen, temperature=0.8, top_k=40):
        """`new_tokens` tokens sampled after the (1, T) ids, from the top_k most likely each time."""
        for _ in range(new_tokens):
            logits = F.linear(self.hidden(ids[:, -self.context:])[:, -1], self.lm_head.weight).float() / temperature
            logits[logits < torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]] = -math.inf
            ids = torch.cat([ids, torch.multinomial(torch.softmax(logits, -1), 1, generator=gen)], dim=1)
        return ids


def build(args, vocab: int):
    """(model, optimizer) from args.seed: weight decay on the matrices only, float32 master weights for
    bfloat16 parameters, the gradient norm clipped to 1 inside AdamW's one pass."""
    torch.manual_seed(args.seed)
    model = LanguageModel(args, vocab).to(getattr(torch, args.param_dtype))
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return model, tgt.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), max_grad_norm=1.0,
                                  master_weights=args.param_dtype != "float32")


# ---- Training ------------------------------------------------------------------------------------

def learning_rate(step: int, steps: int, peak: float) -> float:
    """Linear warm-up over the first 5% of the steps, then cosine decay to 10% of the peak."""
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, steps - warmup)))))


def train_step(model, opt, batch, lr: float, dtype: str) -> float:
    """One optimizer step on an (inputs, targets) batch; returns the loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
        loss = model(*batch)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


@torch.no_grad()
def evaluate(model, batches, dtype: str) -> float:
    """The mean loss over the validation batches."""
    model.eval()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
        losses = [model(x, y).float().item() for x, y in batches]
    model.train()
    return sum(losses) / len(losses)


class StopFlag:
    """Set by Ctrl-C: the loop stops between two whole steps and saves; a second Ctrl-C stops at once."""

    def __enter__(self):
        self.requested, self.previous = False, signal.signal(signal.SIGINT, self.request)
        return self

    def __exit__(self, *exc):
        signal.signal(signal.SIGINT, self.previous)

    def request(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)


def read_log(path: Path) -> list:
    """log.jsonl's records: {"step", "train_loss", "lr", "time"} per step, {"step", "val_loss"} per validation."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def train(args, data, ckpt=None) -> dict:
    """Trains, writing log.jsonl, summary.json and checkpoint.pt into args.out, then a sample (or how to
    continue a stopped run); returns the summary."""
    from tqdm import tqdm

    torch.set_num_threads(args.threads or torch.get_num_threads())
    model, opt = build(args, data.tokenizer.get_vocab_size())
    if ckpt:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
    completed, val_loss = ckpt["completed"] if ckpt else 0, None
    args.out.mkdir(parents=True, exist_ok=True)  # a resumed log loses the steps after its checkpoint
    log = [r for r in read_log(args.out / LOG) if r["step"] <= completed] if ckpt else []
    val = val_batches(data.val, args.batch_size, args.context, args.eval_batches)
    print(f"[tilegrad] {sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, vocabulary "
          f"{data.tokenizer.get_vocab_size()}, {len(data.train)} training tokens, {args.dtype}, "
          f"{torch.get_num_threads()} threads", flush=True)
    with (args.out / LOG).open("w") as file, StopFlag() as stop, \
            tqdm(total=args.steps, initial=completed, mininterval=0.5) as bar:
        def write(record):  # a diverged run stops before anything non-finite is logged or saved
            for key in [k for k, v in record.items() if k.endswith("loss") and not math.isfinite(v)]:
                again = f"--resume {args.resume}" if args.resume else "start over with --overwrite"
                raise SystemExit(f"train_lm: step {record['step']}: the {key.replace('_', ' ')} is {record[key]} "
                                 f"(diverged); stopped without saving a checkpoint. --lr {args.lr} is probably "
                                 f"too high: {again} --lr SMALLER")
            log.append(record)
            print(json.dumps(record), file=file, flush=True)

        file.writelines(json.dumps(r) + "\n" for r in log)
        if not completed:
            write({"step": 0, "val_loss": evaluate(model, val, args.dtype)})
        while completed < args.steps and not stop.requested:
            lr = learning_rate(completed, args.steps, args.lr)
            batch = train_batch(data.train, completed, args.seed, args.batch_size, args.context)
            loss = train_step(model, opt, batch, lr, args.dtype)
            completed += 1
            write({"step": completed, "train_loss": loss, "lr": lr, "time": time.time()})
            if completed % args.eval_interval == 0 or completed == args.steps:
                val_loss = evaluate(model, val, args.dtype)
                write({"step": completed, "val_loss": val_loss})
            bar.set_postfix(loss=f"{loss:.3f}", val=f"{val_loss:.3f}" if val_loss else "-", refresh=False)
            bar.update(1)
    saved = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
             if k not in ("out", "resume", "overwrite")}
    try:  # refused when a weight is no longer finite: the last good checkpoint stays
        checkpoint.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "completed": completed,
                         "args": saved, "tokens": data.key}, args.out / CHECKPOINT)
    except ValueError as error:
        raise SystemExit(f"train_lm: step {completed}: the weights are no longer finite (diverged): {error}") from None
    vals, tail = [r["val_loss"] for r in log if "val_loss" in r], [r["train_loss"] for r in log if "train_loss" in r]
    summary = {"parameters": sum(p.numel() for p in model.parameters()), "vocab": data.tokenizer.get_vocab_size(),
               "steps": completed, "tokens_per_step": args.batch_size * args.context, "dtype": args.dtype,
               "param_dtype": args.param_dtype, "final_train_loss": sum(tail[-10:]) / len(tail[-10:]) if tail else None,
               "first_val_loss": vals[0], "final_val_loss": vals[-1]}
    (args.out / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    if completed < args.steps:
        print(f"\nstopped after step {completed}; checkpoint saved. Continue with:\n"
              f"    python {sys.argv[0]} --resume {args.out}", flush=True)
    elif args.sample_tokens:
        out = model.generate(torch.tensor([data.tokenizer.encode("The ").ids]), args.sample_tokens,
                             torch.Generator().manual_seed(args.seed))
        print(f"\n--- sample ---\n{data.tokenizer.decode(out[0].tolist())}\n--------------", flush=True)
    return summary


# ---- The command line: a mistake is refused in one line naming the flag and the value (exit 2) ----

class UsageError(SystemExit):
    def __init__(self, message: str, program: str = "train_lm") -> None:
        super().__init__(f"{program}: {message}")
        self.code = 2


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, instead of usage + message
        raise UsageError(re.sub(r"^argument ([^:]+): ", r"\1 ", message))


def within(low, kind=int, high=math.inf):
    """An argparse type: a `kind` in [low, high)."""
    def parse(text):
        if not low <= (value := kind(text)) < high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}), got {value}")
        return value
    parse.__name__ = kind.__name__  # argparse says "invalid int value: 'x'"
    return parse


def build_parser() -> argparse.ArgumentParser:
    p = Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--out", type=Path, help="run folder (default: runs/train_lm, or --resume's)")
    p.add_argument("--resume", type=Path, metavar="DIR", help="continue the run saved in DIR")
    p.add_argument("--overwrite", action="store_true", help="start over in an --out folder holding a run")
    for name, default, text in (("steps", 500, "optimizer steps"), ("batch-size", 8, "sequences per step"),
                                ("context", 128, "tokens per sequence"), ("dim", 192, "model width"),
                                ("layers", 4, "transformer blocks"), ("heads", 4, "attention heads"),
                                ("ffn-dim", 512, "SwiGLU width"), ("eval-interval", 50, "steps between validations"),
                                ("eval-batches", 6, "batches per validation"), ("threads", None, "torch threads")):
        p.add_argument(f"--{name}", type=within(1), default=default, help=text)
    p.add_argument("--lr", type=within(1e-9, float), default=3e-3, help="peak AdamW learning rate")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="bfloat16: CPU autocast")
    p.add_argument("--param-dtype", choices=("float32", "bfloat16"), default="float32",
                   help="dtype of the parameters (bfloat16: AdamW keeps float32 master weights)")
    p.add_argument("--seed", type=within(0, int, 2 ** 32), default=0)
    p.add_argument("--tie", type=int, choices=(0, 1), default=1, help="1: the LM head is the embedding's weight")
    p.add_argument("--vocab", type=within(260, int, 2 ** 20), default=8192, help="BPE vocabulary size")
    p.add_argument("--text", type=Path, help="a UTF-8 text file to train on (default: the Python documentation)")
    p.add_argument("--corpus", choices=("pydoc", "stdlib"), default="pydoc", help="without --text: the "
                   "documentation, or the standard library's source")
    p.add_argument("--cache-dir", type=Path, default=CACHE, help="tokenizer cache")
    p.add_argument("--sample-tokens", type=within(0), default=120, help="tokens generated at the end")
    p.add_argument("--filter", type=within(1e-9, float, 1), nargs="?", const=2.0 ** -8, metavar="TAU",
                   help="skip LM-head gradient blocks within the error bound TAU (bare: 2^-8)")
    return p


RESUMABLE = ("steps", "lr", "threads", "sample_tokens", "eval_interval", "cache_dir")  # the rest is the checkpoint's


def parse_args(argv=None, parser=None):
    """(options, checkpoint or None); with --resume the checkpoint's options, RESUMABLE ones typed
    again. `parser`: build_parser()'s, possibly extended (the benchmark's)."""
    parser = parser or build_parser()
    args, ckpt = parser.parse_args(argv), None
    if args.resume and (args.overwrite or args.out not in (None, args.resume)):
        raise UsageError(f"--resume {args.resume} continues the run in {args.resume}: drop "
                         f"{'--overwrite' if args.overwrite else f'--out {args.out}'}")
    if args.resume:
        try:
            ckpt = checkpoint.load(args.resume / CHECKPOINT, required=("model", "optimizer", "completed", "args"))
        except ValueError as error:
            raise UsageError(f"--resume {args.resume}: {str(error).split(': ', 1)[1]}; resume an intact copy, "
                             f"or start over with --out {args.resume} --overwrite") from None
        parser.set_defaults(**ckpt["args"])  # parsed again: a flag typed with another value than saved shows
        args = parser.parse_args(argv)
        flag = lambda k, v: f"no --{k}" if v is None else f"--{k} {v}"  # noqa: E731
        changed = [f"{flag(k.replace('_', '-'), getattr(args, k))} (checkpoint: {flag(k.replace('_', '-'), v)})"
                   for k, v in ckpt["args"].items() if k not in RESUMABLE and str(getattr(args, k)) != str(v)]
        if changed:
            raise UsageError(f"--resume {args.resume} continues the saved run, and flags differ from it: "
                             f"{', '.join(changed)}; drop them, or start a new run with them (--out NEW_DIR)")
    args.out = args.out or args.resume or Path("runs") / "train_lm"
    if args.dim % (2 * args.heads):  # the rotary embedding turns pairs: each head's width must be even
        raise UsageError(f"--dim must be a multiple of 2 x --heads ({2 * args.heads}) for an even head dimension, "
                         f"got --dim {args.dim} (e.g. --dim {(args.dim // (2 * args.heads) + 1) * 2 * args.heads})")
    for name, folder in (("--out", args.out), ("--cache-dir", args.cache_dir)):
        if any(p.is_file() for p in (folder, *folder.parents)):
            raise UsageError(f"{name} must name a folder, got {folder}, and part of it is a file")
    return args, ckpt


def main(argv=None) -> dict:
    """Runs a command line; returns the summary."""
    threads = torch.get_num_threads()
    try:
        if os.environ.get("WORLD_SIZE", "1") not in ("", "1"):
            raise UsageError(f"started as rank {os.environ.get('RANK', '?')} of {os.environ['WORLD_SIZE']} processes "
                             "(torchrun): train_lm.py runs in one process; use examples/train_lm_distributed.py")
        args, ckpt = parse_args(argv)
        found = [f.name for f in (args.out / CHECKPOINT, args.out / LOG, args.out / SUMMARY) if f.exists()]
        if found and not args.resume and not args.overwrite:
            raise UsageError(f"--out {args.out} already holds a run ({', '.join(found)}): continue it with "
                             f"--resume {args.out}, start over with --overwrite, or give a new --out")
        data = prepare_data(args.text, args.vocab, args.cache_dir, args.corpus)
        print(f"tokenizer: {'cached' if data.from_cache else 'trained'} {data.tokenizer_file}", flush=True)
        vocab, shortest = data.tokenizer.get_vocab_size(), min(len(data.train), len(data.val))
        if shortest <= args.context + 1:
            raise UsageError(f"the text is too short for --context {args.context}: its smaller split has {shortest} tokens")
        if ckpt and len(ckpt["model"]["tok_emb.weight"]) != vocab:
            raise UsageError(f"--resume {args.resume}: the text gives a vocabulary of {vocab} tokens, the checkpoint's "
                             f"model has {len(ckpt['model']['tok_emb.weight'])} (the text changed?)")
        if ckpt and ckpt.get("tokens") != data.key:
            print(f"warning: --resume {args.resume}: the text is not the one the checkpoint was trained on; the "
                  "losses will not be an uninterrupted run's", file=sys.stderr)
        for name in found if args.overwrite else ():  # the old run goes first: a folder never mixes two
            (args.out / name).unlink()
        return train(args, data, ckpt)
    except UsageError as error:
        print(error, file=sys.stderr, flush=True)
        raise
    finally:
        torch.set_num_threads(threads)  # --threads applies to this run only


if __name__ == "__main__":
    main()
