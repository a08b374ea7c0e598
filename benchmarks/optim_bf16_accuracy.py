"""bf16 parameters: does training follow the fp32 run? A small character-level language model
(embedding, 2 residual MLP blocks with RMSNorm, head; text from the stdlib's pydoc_data) trained
three ways from the same initialisation and batches:

  fp32                 float32 params, torch.optim.AdamW
  bf16 torch           bfloat16 params, torch.optim.AdamW(fused=True) (bf16 moments, updates rounded)
  bf16 tilegrad        bfloat16 params, tilegrad.torch.optim.AdamW(master_weights=True)

and prints the validation loss of each at intervals (a Markdown table).

    python benchmarks/optim_bf16_accuracy.py [--steps 600] [--lr 1e-3]
"""

import argparse
import math

import torch
from torch import nn

import tilegrad.torch as tgt


def corpus():
    from pydoc_data import topics
    text = "".join(topics.topics.values())
    data = torch.tensor(list(text.encode("latin-1", "replace")), dtype=torch.long)
    cut = int(len(data) * 0.9)
    return data[:cut], data[cut:]


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.RMSNorm(dim)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        return x + self.down(torch.nn.functional.silu(self.up(self.norm(x))))


class CharModel(nn.Module):
    def __init__(self, context=16, dim=128):
        super().__init__()
        self.context = context
        self.embed = nn.Embedding(256, dim)
        self.mix = nn.Linear(context * dim, dim, bias=False)
        self.blocks = nn.Sequential(Block(dim), Block(dim))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, 256, bias=False)

    def forward(self, x):
        h = self.mix(self.embed(x).flatten(1))
        return self.head(self.norm(self.blocks(h)))


def batches(data, step, batch, context, seed):
    g = torch.Generator().manual_seed(seed * 100003 + step)
    idx = torch.randint(0, len(data) - context - 1, (batch,), generator=g)
    x = torch.stack([data[i:i + context] for i in idx.tolist()])
    y = data[idx + context]
    return x, y


@torch.no_grad()
def validate(model, val, context, dtype):
    losses = []
    for k in range(8):
        x, y = batches(val, k, 256, context, seed=999)
        losses.append(float(nn.functional.cross_entropy(model(x).float(), y)))
    return sum(losses) / len(losses)


def run(kind, args, train, val):
    torch.manual_seed(0)
    model = CharModel()
    dtype = torch.float32 if kind == "fp32" else torch.bfloat16
    model = model.to(dtype)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}]
    if kind == "bf16 tilegrad":
        opt = tgt.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), master_weights=True)
    elif kind == "bf16 torch":
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95), fused=True)
    else:
        opt = torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, 0.95))
    curve = {}
    for step in range(args.steps + 1):
        if step % args.eval_every == 0:
            curve[step] = validate(model, val, model.context, dtype)
        if step == args.steps:
            break
        for g in opt.param_groups:  # cosine decay to 10%, as examples/train_lm.py
            g["lr"] = args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / args.steps)))
        x, y = batches(train, step, args.batch, model.context, seed=0)
        loss = nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return curve


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--eval-every", type=int, default=100)
    args = parser.parse_args()
    train, val = corpus()
    kinds = ["fp32", "bf16 torch", "bf16 tilegrad"]
    curves = {k: run(k, args, train, val) for k in kinds}
    print("| step | " + " | ".join(f"{k} val loss" for k in kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for step in curves["fp32"]:
        print(f"| {step} | " + " | ".join(f"{curves[k][step]:.4f}" for k in kinds) + " |")


if __name__ == "__main__":
    main()
