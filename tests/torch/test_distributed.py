"""tilegrad.torch.distributed.vocab_parallel_cross_entropy: 1, 2 and 3 gloo ranks on localhost give the
loss and gradients of single-process torch cross entropy (float64 on the same rounded inputs), for
float32 and bfloat16, every reduction, ignore_index, label smoothing and uneven shards; the torchrun
example trains in step with single-process torch; run_then_exit (the gloo work-around every rank ends
through) gives main's exit status after the exit handlers. Skipped only when torch is not installed."""

import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tilegrad.torch.distributed import vocab_parallel_cross_entropy  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_vocab_parallel.py")
H, V, ROWS = 24, 101, (3, 13)  # V = 101 splits unevenly over 2 and 3 ranks

# (name, dtype, reduction, label_smoothing); float64 takes the torch fallback path
CASES = [
    ("f32-mean", torch.float32, "mean", 0.0),
    ("f32-sum-smooth", torch.float32, "sum", 0.1),
    ("f32-none", torch.float32, "none", 0.0),
    ("f32-mean-smooth", torch.float32, "mean", 0.25),
    ("bf16-mean", torch.bfloat16, "mean", 0.0),
    ("bf16-none-smooth", torch.bfloat16, "none", 0.1),
    ("f16-sum", torch.float16, "sum", 0.0),
    ("f64-mean-smooth", torch.float64, "mean", 0.1),
]
TOLERANCES = {torch.float32: 2e-5, torch.float64: 1e-10, torch.bfloat16: 2e-2, torch.float16: 4e-3}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py


def make_problem(dtype, seed=0):
    """hidden (3, 13, H), full weight (V, H) rounded to dtype; targets with ignored entries."""
    g = torch.Generator().manual_seed(seed)
    hidden = (torch.randn(*ROWS, H, generator=g, dtype=torch.float64) * 0.7).to(dtype)
    weight = (torch.randn(V, H, generator=g, dtype=torch.float64) * 0.3).to(dtype)
    target = torch.randint(0, V, ROWS, generator=g)
    target[0, ::4] = -100
    target[2, 5] = V - 1
    target[1, 2] = 0
    return hidden, weight, target


def shard_bounds(world):
    return [round(r * V / world) for r in range(world + 1)]


def run_cases(rank, world, group=None):
    """This rank's (loss, grad_hidden, grad_weight_shard) for every case."""
    bounds = shard_bounds(world)
    start, end = bounds[rank], bounds[rank + 1]
    results = {}
    for name, dtype, reduction, eps in CASES:
        hidden, weight, target = make_problem(dtype)
        hidden.requires_grad_()
        shard = weight[start:end].clone().requires_grad_()
        loss = vocab_parallel_cross_entropy(hidden, shard, target, vocab_start_index=start, group=group,
                                            label_smoothing=eps, reduction=reduction)
        upstream = torch.linspace(0.5, 1.5, loss.numel()).reshape(loss.shape).to(loss.dtype)
        loss.backward(upstream)
        results[name] = (loss.detach(), hidden.grad, shard.grad)
    return results


def reference(name):
    """Single-process torch cross entropy in float64 on the same rounded inputs."""
    _, dtype, reduction, eps = next(c for c in CASES if c[0] == name)
    hidden, weight, target = make_problem(dtype)
    hidden = hidden.double().requires_grad_()
    weight = weight.double().requires_grad_()
    logits = hidden @ weight.T
    loss = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1), reduction=reduction, label_smoothing=eps)
    if reduction == "none":
        loss = loss.reshape(ROWS)
    loss.backward(torch.linspace(0.5, 1.5, loss.numel(), dtype=torch.float64).reshape(loss.shape))
    return loss.detach(), hidden.grad, weight.grad


def assert_close(name, what, got, want, dtype):
    tol = TOLERANCES[dtype]
    scale = max(1.0, float(want.abs().max()))
    err = float((got.double() - want).abs().max())
    assert err <= tol * scale, f"{name}: {what} max |diff| {err:.3e} > {tol * scale:.3e}"


def check_against_reference(per_rank, world):
    bounds = shard_bounds(world)
    for name, dtype, _, _ in CASES:
        ref_loss, ref_gh, ref_gw = reference(name)
        losses = [per_rank[r][name][0] for r in range(world)]
        grads_hidden = [per_rank[r][name][1] for r in range(world)]
        assert all(loss.dtype == dtype for loss in losses), name
        for r in range(world):
            # every rank returns the same loss and the same all-reduced grad_hidden
            assert torch.equal(losses[r], losses[0]), f"{name}: rank {r} loss differs from rank 0"
            assert torch.equal(grads_hidden[r], grads_hidden[0]), f"{name}: rank {r} grad_hidden differs"
        assert losses[0].shape == ref_loss.shape, name
        assert_close(name, "loss", losses[0], ref_loss, dtype)
        assert_close(name, "grad_hidden", grads_hidden[0], ref_gh, dtype)
        grad_weight = torch.cat([per_rank[r][name][2] for r in range(world)])
        assert grad_weight.shape == (V, H) and grad_weight.dtype == dtype, name
        assert_close(name, "grad_weight", grad_weight, ref_gw, dtype)
        ignored = make_problem(dtype)[2] == -100
        assert not grads_hidden[0][ignored].any(), f"{name}: ignored rows must get zero gradient"
        assert [per_rank[r][name][2].shape[0] for r in range(world)] == [
            bounds[r + 1] - bounds[r] for r in range(world)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(rank, world, port, out_dir):
    """One gloo rank: runs every case, then checks that a target held by no shard raises everywhere."""
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        results = run_cases(rank, world)
        bounds = shard_bounds(world)
        hidden, weight, target = make_problem(torch.float32)
        target[1, 1] = V + 5  # outside the global vocabulary: every rank must raise, none may hang
        try:
            vocab_parallel_cross_entropy(hidden, weight[bounds[rank]:bounds[rank + 1]], target,
                                         vocab_start_index=bounds[rank])
            results["bad-target"] = "no error"
        except IndexError as e:
            results["bad-target"] = str(e)
        dist.barrier()
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_match_single_process_torch(world, tmp_path):
    import torch.multiprocessing as mp

    mp.spawn(worker, args=(world, free_port(), str(tmp_path)), nprocs=world, join=True)
    per_rank = [torch.load(tmp_path / f"rank{r}.pt") for r in range(world)]
    check_against_reference(per_rank, world)
    for r in range(world):
        message = per_rank[r]["bad-target"]
        assert "target[" in message and str(V + 5) in message, f"rank {r}: {message}"


def test_without_process_group_is_single_process():
    results = run_cases(0, 1)
    check_against_reference([results], 1)


def test_reduction_none_keeps_target_shape_and_zero_for_ignored():
    hidden, weight, target = make_problem(torch.float32)
    loss = vocab_parallel_cross_entropy(hidden, weight, target, vocab_start_index=0, reduction="none")
    assert loss.shape == target.shape and loss.dtype == torch.float32
    assert not loss[target == -100].any()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_strided_inputs_are_taken_as_they_are(dtype):
    """A transposed weight and a permuted hidden go to the operators as views and give torch's result."""
    hidden, weight, target = make_problem(dtype)
    hidden_t = hidden.permute(2, 0, 1).contiguous().permute(1, 2, 0).requires_grad_()  # same values, odd strides
    weight_t = weight.T.contiguous().T.requires_grad_()
    assert not hidden_t.is_contiguous() and not weight_t.is_contiguous()
    loss = vocab_parallel_cross_entropy(hidden_t, weight_t, target, vocab_start_index=0, label_smoothing=0.1)
    loss.backward()
    h64, w64 = hidden.double().requires_grad_(), weight.double().requires_grad_()
    want = F.cross_entropy((h64 @ w64.T).reshape(-1, V), target.reshape(-1), label_smoothing=0.1)
    want.backward()
    assert_close("strided", "loss", loss.detach(), want.detach(), dtype)
    assert_close("strided", "grad_hidden", hidden_t.grad, h64.grad, dtype)
    assert_close("strided", "grad_weight", weight_t.grad, w64.grad, dtype)


def test_all_rows_ignored_mean_is_nan_with_zero_gradients():
    hidden, weight, target = make_problem(torch.float32)
    hidden.requires_grad_()
    target.fill_(-100)
    loss = vocab_parallel_cross_entropy(hidden, weight, target, vocab_start_index=0)
    want = F.cross_entropy((hidden.detach() @ weight.T).reshape(-1, V), target.reshape(-1))
    assert torch.isnan(want) and torch.isnan(loss)
    loss.backward()
    assert not hidden.grad.any()


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(reduction="avg"), ValueError, ["reduction", "avg"]),
    (dict(label_smoothing=1.5), ValueError, ["label_smoothing", "1.5"]),
    (dict(vocab_start_index=-1), ValueError, ["vocab_start_index", "-1"]),
    (dict(ignore_index=1.0), TypeError, ["ignore_index", "1.0"]),
])
def test_bad_options_name_the_argument(kwargs, error, words):
    hidden, weight, target = make_problem(torch.float32)
    args = dict(vocab_start_index=0)
    args.update(kwargs)
    with pytest.raises(error) as info:
        vocab_parallel_cross_entropy(hidden, weight, target, **args)
    for word in words:
        assert word in str(info.value)


def test_bad_tensors_name_the_argument():
    hidden, weight, target = make_problem(torch.float32)
    with pytest.raises(ValueError, match="weight_shard"):
        vocab_parallel_cross_entropy(hidden, weight[:, :5], target, vocab_start_index=0)
    with pytest.raises(TypeError, match="weight_shard"):
        vocab_parallel_cross_entropy(hidden, weight.double(), target, vocab_start_index=0)
    with pytest.raises(ValueError, match="target"):
        vocab_parallel_cross_entropy(hidden, weight, target[:, :3], vocab_start_index=0)
    with pytest.raises(TypeError, match="target"):
        vocab_parallel_cross_entropy(hidden, weight, target.float(), vocab_start_index=0)
    with pytest.raises(IndexError, match=r"target\[0\] = 101"):
        vocab_parallel_cross_entropy(hidden, weight, torch.full_like(target, V), vocab_start_index=0)


def test_torchrun_example_trains_like_single_process_torch():
    # `python -m torch.distributed.run` is the torchrun entry point, run by this interpreter (a venv's
    # PATH may hold a torchrun script bound to another one)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", str(free_port()), EXAMPLE, "--steps", "5"]
    r = subprocess.run(command, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK" in r.stdout.splitlines()[-1], r.stdout


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_empty_batch_matches_torch(reduction):
    hidden = torch.zeros(0, H, requires_grad=True)
    weight = torch.randn(V, H, requires_grad=True)
    target = torch.zeros(0, dtype=torch.int64)
    loss = vocab_parallel_cross_entropy(hidden, weight, target, vocab_start_index=0, reduction=reduction,
                                        label_smoothing=0.1)
    want = F.cross_entropy(hidden.detach() @ weight.detach().T, target, reduction=reduction, label_smoothing=0.1)
    assert loss.shape == want.shape and torch.equal(torch.isnan(loss), torch.isnan(want))
    assert torch.equal(torch.nan_to_num(loss.detach()), torch.nan_to_num(want))
    loss.sum().backward()
    assert weight.grad is not None and not weight.grad.any()


# ----------------------------------------------------------------------------------------------------
# run_then_exit: the gloo work-around, the entry point of every rank of examples/train_lm_distributed.py
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("body, status, stderr_has", [
    ("pass", 0, None),
    ("raise SystemExit(3)", 3, None),
    ("raise SystemExit('example: bad flag')", 1, "example: bad flag"),
    ("raise ValueError('boom')", 1, "ValueError: boom"),
])
def test_run_then_exit_gives_the_status_of_main_after_the_exit_handlers(body, status, stderr_has):
    """The status the interpreter would give (0, the SystemExit code, 1 after a printed message or a
    traceback); the atexit handlers have run and the output is flushed before os._exit."""
    code = ("import atexit, sys\n"
            "from tilegrad.torch.distributed import run_then_exit\n"
            "atexit.register(lambda: print('handler ran', flush=True))\n"
            "def main():\n"
            "    print('main ran', end='')\n"  # unflushed: run_then_exit must flush it
            f"    {body}\n"
            "run_then_exit(main)\n"
            "print('never reached')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == status, r.stderr
    assert r.stdout == "main ranhandler ran\n"
    if stderr_has is not None:
        assert stderr_has in r.stderr


def test_run_then_exit_refuses_a_non_callable():
    from tilegrad.torch.distributed import run_then_exit
    with pytest.raises(TypeError, match=r"tilegrad\.torch\.distributed\.run_then_exit: main must be callable, got int"):
        run_then_exit(3)
