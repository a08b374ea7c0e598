#!/usr/bin/env python3
"""Train a Hugging Face model with tilegrad's kernels: one call, ``tgt.patch(model)``.

    pip install "tilegrad[torch]" transformers
    python examples/patch_hf_model.py                 # a small Llama, random weights, nothing downloaded
    python examples/patch_hf_model.py --steps 20 --hidden 256

``tgt.patch`` switches the model's RMSNorm, SwiGLU MLP, rotary embedding, embedding and the training
loss (a fused linear cross entropy: the logits are never built) to tilegrad, in place, and returns a
summary of what it replaced. ``tgt.optim.AdamW`` is a drop-in for ``torch.optim.AdamW`` that clips the
gradient norm inside its one fused step. With a real checkpoint, use ``from_pretrained`` instead of
``from_config``: nothing else changes.
"""

import argparse

import torch
import transformers

import tilegrad.torch as tgt


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=5, help="optimizer steps (default 5)")
    p.add_argument("--hidden", type=int, default=128, help="model width (default 128)")
    p.add_argument("--vocab", type=int, default=1000, help="vocabulary size (default 1000)")
    args = p.parse_args()

    torch.manual_seed(0)
    config = transformers.LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=2 * args.hidden,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
    model = transformers.LlamaForCausalLM(config)  # random weights from the config
    print(tgt.patch(model))

    opt = tgt.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, max_grad_norm=1.0)
    tokens = torch.randint(0, args.vocab, (4, 64))  # stand-in data: learn to repeat one fixed batch
    model.train()
    for step in range(1, args.steps + 1):
        loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"step {step}: loss {loss.item():.4f}, gradient norm {opt.last_grad_norm:.3f}")


if __name__ == "__main__":
    main()
