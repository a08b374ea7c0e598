"""examples/train_lm_distributed.py (train_lm.py's model and data under torch.distributed, in a file of
its own): 2 processes on this machine over loopback (gloo), the tests' small model
(train_lm_flags.QUICK). Data parallel and the vocabulary-parallel LM head against train_lm.py's
single-process run (same global batch, seed and steps), the script alone (a group of one), Ctrl-C on
the launcher then --resume (on 2 processes, and on 1 with train_lm.py), a killed rank, ranks started
with different options. The library functions it uses: tests/torch/test_distributed_training.py."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("tqdm")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPT = EXAMPLES / "train_lm_distributed.py"
sys.path.insert(0, str(EXAMPLES))
import train_lm  # noqa: E402
from train_lm_flags import QUICK, QUICK_VOCAB, quick_value  # noqa: E402

STEPS = 50  # the "over 50 steps"
HANG_GUARD_S = 240  # a launch that takes longer than this is a hang, not a slow machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_thread_env() -> dict:
    return dict(os.environ, OMP_NUM_THREADS="1")


def torchrun_command(*args: str, nproc: int = 2) -> list:
    # `python -m torch.distributed.run` is torchrun, run by this interpreter
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), str(SCRIPT), *args]


def torchrun(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run(torchrun_command(*args), capture_output=True, text=True, timeout=HANG_GUARD_S,
                       env=one_thread_env())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    return r


def losses(folder: Path, kind: str) -> dict:
    """{step: value} of one kind ("train_loss" or "val_loss") from folder/log.jsonl."""
    return {r["step"]: r[kind] for r in train_lm.read_log(folder / train_lm.LOG) if kind in r}


def summary(folder: Path) -> dict:
    return json.loads((folder / train_lm.SUMMARY).read_text())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The single-process run (in this process, it also caches the tokenizer) and its two 2-process
    counterparts, shared by the tests."""
    root = tmp_path_factory.mktemp("train_lm_distributed")
    cache = root / "cache"
    common = [*QUICK, "--steps", str(STEPS), "--cache-dir", str(cache)]
    train_lm.main(common + ["--out", str(root / "single"), "--sample-tokens", "0"])
    data = torchrun(*common, "--out", str(root / "data"))
    vocab = torchrun(*common, "--out", str(root / "vocab"), "--parallel", "vocab", "--sample-tokens", "0")
    return dict(root=root, cache=cache, common=common, data_stdout=data.stdout, vocab_stdout=vocab.stdout)


def test_data_parallel_matches_single_process(runs):
    root = runs["root"]
    single, data = root / "single", root / "data"
    assert summary(data)["final_val_loss"] == pytest.approx(summary(single)["final_val_loss"], rel=5e-3)
    # every logged train loss is the global batch's mean, as one process computes it
    assert list(losses(data, "train_loss")) == list(range(1, STEPS + 1))
    for step, value in losses(single, "train_loss").items():
        assert losses(data, "train_loss")[step] == pytest.approx(value, rel=5e-3), step
    got = summary(data)
    assert (got["world_size"], got["parallel"], got["steps"]) == (2, "data", STEPS)
    assert got["parameters"] == summary(single)["parameters"]


def test_only_rank_0_prints_and_writes(runs):
    root, stdout = runs["root"], runs["data_stdout"]
    assert stdout.count("[tilegrad]") == 1 and stdout.count("tokenizer: cached") == 1
    assert stdout.count("--- sample ---") == 1
    assert sorted(p.name for p in (root / "data").iterdir()) == ["checkpoint.pt", "log.jsonl", "summary.json"]
    # one record per step and per validation: nobody else appended to the log
    records = train_lm.read_log(root / "data" / train_lm.LOG)
    assert len(records) == STEPS + STEPS // quick_value("--eval-interval") + 1


def test_vocab_parallel_losses_equal_single_process(runs):
    root = runs["root"]
    single, vocab = root / "single", root / "vocab"
    for kind in ("train_loss", "val_loss"):
        want, got = losses(single, kind), losses(vocab, kind)
        assert list(got) == list(want)
        assert list(got.values()) == pytest.approx(list(want.values()), rel=1e-4), kind


def test_vocab_parallel_holds_half_the_head_per_rank(runs):
    got = summary(runs["root"] / "vocab")
    assert (got["world_size"], got["parallel"]) == (2, "vocab")
    memory = got["lm_head_memory"]
    vocab, dim = QUICK_VOCAB, quick_value("--dim")
    assert memory["tied_to_embedding"] is True  # QUICK keeps the default --tie 1: the embedding is sharded too
    assert memory["per_rank"] == {"rows": vocab // 2, "weight_bytes": vocab // 2 * dim * 4,
                                  "grad_bytes": vocab // 2 * dim * 4, "optimizer_state_bytes": vocab * dim * 4}
    assert memory["one_process"]["rows"] == vocab
    assert memory["one_process"]["optimizer_state_bytes"] == 2 * memory["per_rank"]["optimizer_state_bytes"]
    # the checkpoint is a single-process file: the whole head and its AdamW moments
    ckpt = torch.load(runs["root"] / "vocab" / train_lm.CHECKPOINT, weights_only=True)
    assert ckpt["model"]["lm_head.weight"].shape == (vocab, dim)
    assert ckpt["optimizer"]["state"][0]["exp_avg"].shape == (vocab, dim)


def wait_for_steps(log_file: Path, steps: int, proc: subprocess.Popen) -> None:
    """Until log_file holds `steps` train records (the training is under way)."""
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"exited early ({proc.returncode}): {proc.communicate()}")
        records = train_lm.read_log(log_file) if log_file.is_file() else []
        if sum("train_loss" in r for r in records if "step" in r) >= steps:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {steps} steps in {log_file} within {HANG_GUARD_S} s")


def test_ctrl_c_saves_a_checkpoint_and_resume_continues(runs, tmp_path):
    """Ctrl-C reaches torchrun (a new session stands for the terminal); it forwards SIGINT to every rank,
    all stop after the same step and rank 0 writes the checkpoint. --resume under torchrun then gives
    the uninterrupted vocab-parallel run's losses, and --resume on one process its single-process
    counterpart's."""
    out = tmp_path / "interrupted"
    # validation at every step slows the run down, so the signal lands well before the end
    cmd = torchrun_command(*runs["common"], "--out", str(out), "--parallel", "vocab", "--eval-interval", "1",
                           "--sample-tokens", "0")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=one_thread_env(),
                            start_new_session=True)
    wait_for_steps(out / train_lm.LOG, 3, proc)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    completed = torch.load(out / train_lm.CHECKPOINT, weights_only=True)["completed"]
    assert 3 <= completed < STEPS, stdout[-2000:] + stderr[-3000:]
    assert f"stopped after step {completed}; checkpoint saved" in stdout

    single_copy = tmp_path / "on_one_process"
    subprocess.run(["cp", "-r", str(out), str(single_copy)], check=True)
    torchrun("--resume", str(out))
    want = losses(runs["root"] / "vocab", "train_loss")
    assert list(losses(out, "train_loss").values()) == pytest.approx(list(want.values()), rel=1e-6)
    assert summary(out)["steps"] == STEPS and summary(out)["world_size"] == 2

    train_lm.main(["--resume", str(single_copy), "--sample-tokens", "0"])
    want = losses(runs["root"] / "single", "train_loss")
    assert list(losses(single_copy, "train_loss").values()) == pytest.approx(list(want.values()), rel=1e-4)


def start_rank(rank: int, port: int, argv: list, env_extra: dict = None) -> subprocess.Popen:
    """One rank started as torchrun starts it (its environment), without torchrun watching over it."""
    env = dict(one_thread_env(), RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **(env_extra or {}))
    return subprocess.Popen([sys.executable, str(SCRIPT), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_a_killed_rank_stops_the_others_with_a_clear_error(runs, tmp_path):
    out = tmp_path / "killed"
    argv = [*QUICK, "--steps", "100000", "--cache-dir", str(runs["cache"]), "--out", str(out),
            "--dist-timeout", "60"]
    port = free_port()
    ranks = [start_rank(r, port, argv) for r in range(2)]
    try:
        wait_for_steps(out / train_lm.LOG, 3, ranks[0])
        ranks[1].kill()
        _, stderr = ranks[0].communicate(timeout=HANG_GUARD_S)  # never a hang
    finally:
        for proc in ranks:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert ranks[0].returncode != 0
    assert "tilegrad.torch.distributed: rank 0 lost contact with the other ranks" in stderr, stderr[-3000:]


def test_ranks_with_different_options_stop_at_start_up(runs, tmp_path):
    port = free_port()
    common = [*QUICK, "--cache-dir", str(runs["cache"]), "--out", str(tmp_path / "mismatch")]
    ranks = [start_rank(0, port, common + ["--vocab", "512"]), start_rank(1, port, common + ["--vocab", "600"])]
    results = [proc.communicate(timeout=HANG_GUARD_S) for proc in ranks]
    for rank, (proc, (_, stderr)) in enumerate(zip(ranks, results)):
        assert proc.returncode != 0
        assert f"train_lm_distributed: the ranks disagree on --vocab: 512 on rank 0, 600 on rank 1 (this is rank " \
               f"{rank}); every rank must run the same command" in stderr, stderr[-3000:]


def test_without_torchrun_the_script_is_a_group_of_one(runs, tmp_path):
    """Started alone, the script trains in one process (a process group of one): train_lm.py's losses."""
    import train_lm_distributed  # examples/ is on the path
    alone = train_lm_distributed.main([*runs["common"], "--out", str(tmp_path), "--sample-tokens", "0"])
    assert (alone["world_size"], alone["parallel"]) == (1, "data")
    assert not torch.distributed.is_initialized()  # left as it was found
    for kind in ("train_loss", "val_loss"):
        want, got = losses(runs["root"] / "single", kind), losses(tmp_path, kind)
        assert list(got) == list(want)
        assert list(got.values()) == pytest.approx(list(want.values()), rel=1e-6), kind


@pytest.mark.parametrize("argv, message", [
    (["--dist-timeout", "0"], "argument --dist-timeout: must be > 0, got 0.0"),
    (["--eval-interval", "0"], "argument --eval-interval: must be > 0, got 0"),
    (["--lr", "inf"], "argument --lr: must be > 0, got inf"),
    (["--steps", "ten"], "argument --steps: invalid int value: 'ten'"),
])
def test_bad_flags_are_refused_naming_the_flag_and_value(argv, message, capsys, tmp_path):
    import train_lm_distributed  # examples/ is on the path
    with pytest.raises(SystemExit) as info:
        train_lm_distributed.parse_args([*argv, "--out", str(tmp_path)])
    assert info.value.code == 2 and message in capsys.readouterr().err


def test_train_lm_under_torchrun_points_to_the_distributed_example(tmp_path):
    """train_lm.py alone knows one process: started as a rank of several it stops before writing,
    naming the script that trains on several (instead of each rank training the whole run alone)."""
    env = dict(one_thread_env(), RANK="0", WORLD_SIZE="2")
    r = subprocess.run([sys.executable, str(EXAMPLES / "train_lm.py"), *QUICK, "--out", str(tmp_path / "run")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "train_lm: started as rank 0 of 2 processes (torchrun): train_lm.py runs in one process; use " \
           "examples/train_lm_distributed.py" in r.stderr, r.stderr
    assert not (tmp_path / "run").exists()
