"""Vocabulary-parallel cross entropy on N processes of one machine with torch.distributed (gloo).

Each rank holds a slice [start, end) of the output projection's rows (the vocabulary). The three
aclnn-compatible operators do the work; torch.distributed only moves three (BT,) vectors per step
plus the gradients:

    1. tg.fused_linear_online_max_sum        -> this rank's max, sum-exp, target logit, mask
    2. all-reduce: max (MAX), rescaled sum-exp (SUM), target logit (SUM)
    3. tg.fused_cross_entropy_loss_with_max_sum -> per-row loss (the same on every rank)
    4. tg.fused_linear_cross_entropy_loss_grad (memory-saving mode) -> this rank's grad_weight slice
       and its part of grad_input, all-reduced (SUM)

Rank 0 then checks the result against the single-process tg.fused_linear_cross_entropy.

    python examples/vocab_parallel_cross_entropy.py --world-size 2
"""

import argparse
import os
import socket
import sys

import numpy as np


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_problem(bt, h, v, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((bt, h)) * 0.5).astype(np.float32)
    w = (rng.standard_normal((v, h)) * 0.1).astype(np.float32)
    t = rng.integers(0, v, bt).astype(np.int64)
    t[::7] = -100  # ignored rows
    return x, w, t


def vocab_parallel_loss_and_grads(x, w_shard, target, start, end, dist, torch):
    """Mean cross entropy over non-ignored rows; returns (loss, grad_input, grad_weight_shard)."""
    import tilegrad as tg

    ignored = target == -100
    tgt = np.where(ignored, -1, target)  # -1 is outside every shard: masked on all ranks
    mx, sum_exp, pred, mask, masked, _ = tg.fused_linear_online_max_sum(x, w_shard, tgt, start, end)

    # all-reduce the three statistics
    gmax = torch.from_numpy(mx.copy())
    dist.all_reduce(gmax, op=dist.ReduceOp.MAX)
    gmax = gmax.numpy()
    in_shard = ~np.unpackbits(mask, bitorder="little")[: len(target)].astype(bool)
    gsum = torch.from_numpy((sum_exp * np.exp(mx - gmax)).astype(np.float32))
    gpred = torch.from_numpy(np.where(in_shard, pred + mx - gmax, 0.0).astype(np.float32))
    dist.all_reduce(gsum, op=dist.ReduceOp.SUM)
    dist.all_reduce(gpred, op=dist.ReduceOp.SUM)
    gsum, gpred = gsum.numpy(), gpred.numpy()

    loss_rows, _ = tg.fused_cross_entropy_loss_with_max_sum(gmax, gsum, gpred)
    valid = ~ignored
    loss = float(loss_rows[valid].sum() / max(valid.sum(), 1))

    grad = np.where(valid, 1.0 / max(valid.sum(), 1), 0.0).astype(np.float32)
    grad_input, grad_weight = tg.fused_linear_cross_entropy_loss_grad(
        grad, x, w_shard, mask, masked, logits_max=gmax, sum_exp_logits=gsum)
    gi = torch.from_numpy(grad_input.copy())
    dist.all_reduce(gi, op=dist.ReduceOp.SUM)
    return loss, gi.numpy(), grad_weight


def worker(rank, world, port, shape, result_path):
    import torch
    import torch.distributed as dist

    import tilegrad as tg

    tg.set_num_threads(1)
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        bt, h, v = shape
        x, w, t = make_problem(bt, h, v)
        bounds = np.linspace(0, v, world + 1).astype(int)
        start, end = int(bounds[rank]), int(bounds[rank + 1])
        loss, grad_input, grad_weight = vocab_parallel_loss_and_grads(x, w[start:end], t, start, end, dist, torch)

        # collect the grad_weight slices (gloo's all_gather wants equal sizes: pad to the largest)
        rows = int(np.max(np.diff(bounds)))
        mine = torch.zeros((rows, h))
        mine[: end - start] = torch.from_numpy(grad_weight)
        pieces = [torch.zeros((rows, h)) for _ in range(world)]
        dist.all_gather(pieces, mine)
        if rank == 0:
            full_gw = torch.cat([p[: int(bounds[r + 1] - bounds[r])] for r, p in enumerate(pieces)]).numpy()
            ref_loss, ref_gi, ref_gw = tg.fused_linear_cross_entropy(x, w, t, ignore_index=-100, reduction="mean")
            errs = (abs(loss - float(ref_loss)), float(np.abs(grad_input - ref_gi).max()),
                    float(np.abs(full_gw - ref_gw).max()))
            ok = errs[0] <= 1e-5 * max(1.0, abs(float(ref_loss))) and errs[1] <= 1e-5 and errs[2] <= 1e-5
            msg = (f"world={world} BT={bt} H={h} V={v}: loss {loss:.6f} (single process {float(ref_loss):.6f}); "
                   f"max |diff| loss {errs[0]:.2e}, grad_input {errs[1]:.2e}, grad_weight {errs[2]:.2e} -> "
                   f"{'OK' if ok else 'MISMATCH'}")
            with open(result_path, "w") as f:
                f.write(msg + "\n")
    finally:
        dist.destroy_process_group()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--shape", type=int, nargs=3, default=[96, 64, 1000], metavar=("BT", "H", "V"))
    args = ap.parse_args(argv)
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.txt")
        mp.spawn(worker, args=(args.world_size, free_port(), tuple(args.shape), result), nprocs=args.world_size,
                 join=True)
        with open(result) as f:
            msg = f.read().strip()
    print(msg)
    return 0 if msg.endswith("OK") else 1


if __name__ == "__main__":
    sys.exit(main())
