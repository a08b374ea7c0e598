"""Train a tiny language model with a vocabulary-parallel output layer on torch.distributed.

Every rank holds the same embedding and hidden layer (replicated) and one slice of the output
projection's rows (the vocabulary). tilegrad.torch.distributed.vocab_parallel_cross_entropy computes
the loss without any rank holding the whole (tokens, vocabulary) logits; the gradient w.r.t. the
hidden states is all-reduced inside it, so the replicated layers stay identical on every rank without
any further communication, and each rank updates only its own vocabulary slice.

Rank 0 trains the same model on one process with plain torch (full output layer, F.cross_entropy)
alongside and checks that the losses agree at every step.

    torchrun --nproc-per-node 2 examples/torch_vocab_parallel.py
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

from tilegrad.torch.distributed import run_then_exit, vocab_parallel_cross_entropy, vocab_shard_bounds


class TinyLM(torch.nn.Module):
    """Embedding -> Linear + SiLU; the output projection is kept outside (it is sharded)."""

    def __init__(self, vocab, hidden):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.proj = torch.nn.Linear(hidden, hidden)

    def forward(self, tokens):
        return F.silu(self.proj(self.embed(tokens)))


def build(vocab, hidden, seed):
    """The same initial model and output weight on every rank (same seed)."""
    torch.manual_seed(seed)
    model = TinyLM(vocab, hidden)
    lm_head = torch.randn(vocab, hidden) * hidden ** -0.5
    return model, lm_head


def batches(vocab, batch, seq, steps, seed):
    """Random tokens whose next token follows a fixed rule (learnable, so the loss goes down)."""
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        tokens = torch.randint(0, vocab, (batch, seq), generator=g)
        target = (7 * tokens + 3) % vocab
        target[:, :2] = -100  # e.g. prompt tokens that are not trained on
        yield tokens, target


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=2.0)
    args = ap.parse_args(argv)

    dist.init_process_group("gloo")  # torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        model, lm_head = build(args.vocab, args.hidden, seed=0)
        start, end = vocab_shard_bounds(args.vocab, world, rank)
        shard = torch.nn.Parameter(lm_head[start:end].clone())
        opt = torch.optim.SGD(list(model.parameters()) + [shard], lr=args.lr)

        if rank == 0:  # the single-process reference, trained alongside
            ref_model, ref_head = build(args.vocab, args.hidden, seed=0)
            ref_head = torch.nn.Parameter(ref_head)
            ref_opt = torch.optim.SGD(list(ref_model.parameters()) + [ref_head], lr=args.lr)

        worst = 0.0
        for step, (tokens, target) in enumerate(batches(args.vocab, args.batch, args.seq, args.steps, seed=0)):
            loss = vocab_parallel_cross_entropy(model(tokens), shard, target, vocab_start_index=start)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0:
                ref_loss = F.cross_entropy((ref_model(tokens) @ ref_head.T).flatten(0, 1), target.flatten())
                ref_opt.zero_grad()
                ref_loss.backward()
                ref_opt.step()
                diff = abs(loss.item() - ref_loss.item())
                worst = max(worst, diff / max(1.0, abs(ref_loss.item())))
                print(f"step {step:2d}  loss {loss.item():.6f}  (single-process torch {ref_loss.item():.6f})")
        ok = torch.tensor([1.0 if worst <= 1e-4 else 0.0])
        dist.broadcast(ok, src=0)
        if rank == 0:
            print(f"world={world} vocab={args.vocab} hidden={args.hidden}: max relative loss difference "
                  f"{worst:.2e} -> {'OK' if ok.item() else 'MISMATCH'}")
        return 0 if ok.item() else 1
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    # gloo's static destructors can end a finished rank in std::terminate: leave with os._exit once
    # the exit handlers have run
    run_then_exit(lambda: sys.exit(main()))
