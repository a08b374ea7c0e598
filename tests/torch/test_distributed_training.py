"""tilegrad.torch.distributed's training helpers on 2 gloo ranks over localhost, against what one
process computes with torch on the whole tensors: vocabulary shards and their gather, the sharded
embedding (value and gradient of F.embedding), clip_grad_norm_ over replicated + sharded parameters
(torch.nn.utils.clip_grad_norm_ on the whole model), the agreement checks, local_main_rank_first's
order, start_process_group (torchrun's environment, a group of one without it, the lost-rank message)
and every argument refused with its name and value. Skipped only when torch is not installed."""

import os
import socket
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tilegrad.torch import distributed  # noqa: E402

V, H, WORLD = 11, 6, 2  # 11 rows split 5 + 6: uneven shards
MAX_NORM = 0.5

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/torch/conftest.py


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def problem():
    """The whole embedding, ids (with the first and last rows), an upstream gradient, and the
    replicated parameter's and whole head's gradients for the clipping cases."""
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(V, H, generator=g, dtype=torch.float64).float()
    ids = torch.randint(0, V, (3, 5), generator=g)
    ids[0, 0], ids[2, 4] = 0, V - 1
    upstream = torch.randn(3, 5, H, generator=g)
    replicated_grad, head_grad = torch.randn(4, H, generator=g), torch.randn(V, H, generator=g)
    return weight, ids, upstream, replicated_grad, head_grad


def clipped(grads_scale, rank):
    """This rank's (norm, replicated grad, head shard grad) after the helper's clip."""
    _, _, _, replicated_grad, head_grad = problem()
    start, end = distributed.vocab_shard_bounds(V, WORLD, rank)
    replicated = torch.nn.Parameter(torch.zeros(4, H))
    shard = torch.nn.Parameter(torch.zeros(end - start, H))
    no_grad = torch.nn.Parameter(torch.zeros(2))  # skipped, as torch skips it
    replicated.grad, shard.grad = replicated_grad * grads_scale, head_grad[start:end] * grads_scale
    norm = distributed.clip_grad_norm_([replicated, no_grad], [shard], MAX_NORM)
    return norm, replicated.grad, shard.grad


def worker(rank, port, out_dir):
    """One rank: each helper once, the results saved for the test process to compare."""
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.set_num_threads(1)
    results = {"group": distributed.start_process_group(60)}
    try:
        weight, ids, upstream, _, _ = problem()
        start, end = distributed.vocab_shard_bounds(V, WORLD, rank)
        results["gathered"] = distributed.gather_vocab_shards(weight[start:end], V)
        results["gathered_1d"] = distributed.gather_vocab_shards(torch.arange(V)[start:end], V)
        shard = weight[start:end].clone().requires_grad_()
        out = distributed.vocab_parallel_embedding(ids, shard, vocab_start_index=start)
        (out * upstream).sum().backward()
        results["embedding"], results["embedding_grad"] = out.detach(), shard.grad
        results["bad_id"] = raised(lambda: distributed.vocab_parallel_embedding(
            torch.full((2,), V + 3), weight[start:end], vocab_start_index=start))
        results["clip_large"], results["clip_small"] = clipped(10.0, rank), clipped(1e-3, rank)
        results["disagree"] = raised(lambda: distributed.check_same_on_all_ranks({"--dim": 64, "--vocab": 512 + rank}))
        results["agree"] = raised(lambda: distributed.check_same_on_all_ranks({"--dim": 64}))
        results["any"] = (distributed.any_rank(rank == 1), distributed.any_rank(False))
        marker = os.path.join(out_dir, "first.txt")
        with distributed.local_main_rank_first():
            results["saw_marker"] = os.path.exists(marker)
            if rank == 0:
                with open(marker, "w") as file:
                    file.write("rank 0 was here")
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


def raised(call):
    """The message of the error `call` raised, or None."""
    try:
        call()
    except (ValueError, IndexError, TypeError) as error:
        return f"{type(error).__name__}: {error}"
    return None


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    import torch.multiprocessing as mp

    out = tmp_path_factory.mktemp("distributed_training")
    mp.spawn(worker, args=(free_port(), str(out)), nprocs=WORLD, join=True)
    return [torch.load(out / f"rank{r}.pt") for r in range(WORLD)]


def test_start_process_group_joins_torchruns_job(ranks):
    assert [r["group"] for r in ranks] == [(0, 2), (1, 2)]


def test_gather_returns_the_whole_tensor_on_every_rank(ranks):
    weight = problem()[0]
    for r in ranks:
        assert torch.equal(r["gathered"], weight)
        assert torch.equal(r["gathered_1d"], torch.arange(V))


def test_sharded_embedding_is_torchs_embedding_of_the_whole_weight(ranks):
    weight, ids, upstream, _, _ = problem()
    whole = weight.clone().requires_grad_()
    want = F.embedding(ids, whole)
    (want * upstream).sum().backward()
    for rank, r in enumerate(ranks):
        torch.testing.assert_close(r["embedding"], want.detach(), rtol=0, atol=0)
        start, end = distributed.vocab_shard_bounds(V, WORLD, rank)
        torch.testing.assert_close(r["embedding_grad"], whole.grad[start:end], rtol=1e-6, atol=1e-6)


def test_sharded_embedding_refuses_an_id_no_rank_holds_on_every_rank(ranks):
    for r in ranks:
        assert r["bad_id"] == f"IndexError: tilegrad.torch.distributed.vocab_parallel_embedding: ids[0] = {V + 3} " \
                              "is in 0 ranks' shards, must be in exactly one"


@pytest.mark.parametrize("case, scale", [("clip_large", 10.0), ("clip_small", 1e-3)])
def test_clip_grad_norm_is_torchs_over_the_whole_model(ranks, case, scale):
    _, _, _, replicated_grad, head_grad = problem()
    replicated, head = torch.nn.Parameter(torch.zeros(4, H)), torch.nn.Parameter(torch.zeros(V, H))
    replicated.grad, head.grad = replicated_grad * scale, head_grad * scale
    want_norm = torch.nn.utils.clip_grad_norm_([replicated, head], MAX_NORM)
    assert (float(want_norm) > MAX_NORM) == (case == "clip_large")  # both branches are exercised
    for rank, r in enumerate(ranks):
        norm, replicated_got, shard_got = r[case]
        start, end = distributed.vocab_shard_bounds(V, WORLD, rank)
        assert float(norm) == pytest.approx(float(want_norm), rel=1e-6)
        torch.testing.assert_close(replicated_got, replicated.grad, rtol=1e-6, atol=0)
        torch.testing.assert_close(shard_got, head.grad[start:end], rtol=1e-6, atol=0)


def test_ranks_that_disagree_are_named_on_every_rank(ranks):
    for rank, r in enumerate(ranks):
        assert r["disagree"] == ("ValueError: tilegrad.torch.distributed.check_same_on_all_ranks: the ranks "
                                 f"disagree on --vocab: 512 on rank 0, 513 on rank 1 (this is rank {rank})")
        assert r["agree"] is None


def test_any_rank_is_true_everywhere_when_one_rank_says_so(ranks):
    assert [r["any"] for r in ranks] == [(True, False), (True, False)]


def test_local_main_rank_runs_the_block_first(ranks):
    assert [r["saw_marker"] for r in ranks] == [False, True]


def test_without_torchrun_a_group_of_one():
    """No RANK / WORLD_SIZE: this process alone, the collectives are local; vocab_parallel_embedding is
    then F.embedding."""
    code = ("import torch, torch.nn.functional as F\n"
            "from tilegrad.torch import distributed\n"
            "print(distributed.start_process_group(30))\n"
            "w, ids = torch.randn(7, 4), torch.tensor([[0, 6, 3]])\n"
            "got = distributed.vocab_parallel_embedding(ids, w, vocab_start_index=0)\n"
            "assert torch.equal(got, F.embedding(ids, w))\n"
            "print(distributed.any_rank(True), distributed.gather_vocab_shards(w, 7) is w)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["(0, 1)", "True True"]


def test_a_lost_rank_is_explained_before_the_traceback(tmp_path):
    """Rank 1 leaves after the first barrier; rank 0's next all-reduce fails, and says why first."""
    code = ("import os, torch, torch.distributed as dist\n"
            "from tilegrad.torch import distributed\n"
            "rank, world = distributed.start_process_group(20)\n"
            "dist.barrier()\n"
            "if rank == 1:\n"
            "    os._exit(0)\n"
            "dist.all_reduce(torch.ones(1))\n"
            "dist.barrier()\n")
    port = free_port()
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port), OMP_NUM_THREADS="1")) for r in range(2)]
    stderr = [proc.communicate(timeout=120)[1] for proc in procs]
    assert procs[1].returncode == 0 and procs[0].returncode != 0
    assert "tilegrad.torch.distributed: rank 0 lost contact with the other ranks (" in stderr[0], stderr[0][-2000:]
    assert "stayed silent longer than the timeout (20 s)" in stderr[0]


@pytest.mark.parametrize("vocab, world", [(512, 2), (513, 2), (1000, 3), (7, 7)])
def test_vocabulary_shards_cover_every_row_once(vocab, world):
    bounds = [distributed.vocab_shard_bounds(vocab, world, r) for r in range(world)]
    assert bounds[0][0] == 0 and bounds[-1][1] == vocab
    assert all(bounds[r][1] == bounds[r + 1][0] for r in range(world - 1))
    sizes = [end - start for start, end in bounds]
    assert max(sizes) - min(sizes) <= 1 and min(sizes) >= 1


@pytest.mark.parametrize("call, message", [
    (lambda: distributed.vocab_shard_bounds(3, 4, 0), "vocab_shard_bounds: vocab_size must be an int >= 4, got 3"),
    (lambda: distributed.vocab_shard_bounds(8, 2, 2), "vocab_shard_bounds: rank must be < world_size 2, got 2"),
    (lambda: distributed.vocab_shard_bounds(8, 0, 0), "vocab_shard_bounds: world_size must be an int >= 1, got 0"),
    (lambda: distributed.vocab_shard_bounds(8, 2, True), "vocab_shard_bounds: rank must be an int >= 0, got True"),
    (lambda: distributed.gather_vocab_shards(torch.zeros(5, 2), 6),
     "gather_vocab_shards: rank 0 of 1 holds rows [0, 6) of vocab_size 6: shard must have 6 rows, got 5"),
    (lambda: distributed.gather_vocab_shards([1, 2], 2), "gather_vocab_shards: shard must be a torch.Tensor of rows, "
                                                         "got list"),
    (lambda: distributed.vocab_parallel_embedding(torch.zeros(2), torch.zeros(3, 2), vocab_start_index=0),
     "vocab_parallel_embedding: ids must be an int32 or int64 tensor, got torch.float32"),
    (lambda: distributed.vocab_parallel_embedding(torch.zeros(2, dtype=torch.long), torch.zeros(3),
                                                  vocab_start_index=0),
     "vocab_parallel_embedding: weight_shard must be a floating-point (V_shard, H) tensor, got torch.float32 (3,)"),
    (lambda: distributed.vocab_parallel_embedding(torch.zeros(2, dtype=torch.long), torch.zeros(3, 2),
                                                  vocab_start_index=-1),
     "vocab_parallel_embedding: vocab_start_index must be an int >= 0, got -1"),
    (lambda: distributed.vocab_parallel_embedding(torch.tensor([3]), torch.zeros(3, 2), vocab_start_index=0),
     "vocab_parallel_embedding: ids[0] = 3 is in 0 ranks' shards, must be in exactly one"),
    (lambda: distributed.clip_grad_norm_([], [], 0.0), "clip_grad_norm_: max_norm must be a positive finite number, "
                                                       "got 0.0"),
    (lambda: distributed.clip_grad_norm_([], [], float("nan")), "max_norm must be a positive finite number, got nan"),
    (lambda: distributed.start_process_group(0), "start_process_group: timeout_s must be a positive finite number "
                                                 "of seconds, got 0"),
    (lambda: distributed.check_same_on_all_ranks([("a", 1)]), "check_same_on_all_ranks: values must be a dict, "
                                                              "got list"),
])
def test_bad_arguments_are_named_with_their_value(call, message):
    with pytest.raises((ValueError, TypeError, IndexError)) as info:
        call()
    assert str(info.value).startswith("tilegrad.torch.distributed.") and message in str(info.value)
