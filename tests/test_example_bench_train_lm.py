"""benchmarks/bench_train_lm.py: examples/train_lm.py's model trained by tilegrad and by PyTorch from
the same seed, each in its own process (benchmarks/_train_lm_runs.py), then timed alternately;
loss.png, summary.md and the harness's JSON line (no timing is asserted, only that it is reported);
the PyTorch baseline's ops and optimizer against tilegrad's, and the filtered path's statistics."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "bench_train_lm.py"
sys.path.insert(0, str(ROOT / "benchmarks"))
import _train_lm_runs as runs  # noqa: E402
import bench_train_lm  # noqa: E402
import train_lm  # noqa: E402 (_train_lm_runs put examples/ on the path)
from train_lm_flags import QUICK, QUICK_STEPS  # noqa: E402



def records(log_file: Path, kind: str):
    return [(r["step"], r[kind]) for r in train_lm.read_log(log_file) if kind in r]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    """One benchmark of the tests' small model in a fresh process, as a user types it, shared by the tests."""
    root = tmp_path_factory.mktemp("bench_train_lm")
    out, cache, results = root / "run", root / "cache", root / "results.jsonl"
    cmd = [sys.executable, str(BENCH), *QUICK, "--out", str(out), "--cache-dir", str(cache),
           "--timing-rounds", "2", "--json", str(results)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, cache, results, result.stdout


def test_writes_plot_table_json_and_both_runs(bench_run):
    out, _, results, stdout = bench_run
    png = (out / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    for path in bench_train_lm.PATHS:
        assert [s for s, _ in records(out / path / train_lm.LOG, "train_loss")] == list(range(1, QUICK_STEPS + 1))
        summary = json.loads((out / path / train_lm.SUMMARY).read_text())
        assert summary["path"] == path and summary["steps"] == QUICK_STEPS
        assert summary["peak_memory_mib"] is not None
    both = json.loads((out / "summary.json").read_text())
    assert set(both) == set(bench_train_lm.PATHS)
    assert all(both[p]["interleaved"]["min_ms"] <= both[p]["interleaved"]["median_ms"] for p in both)
    table = (out / "summary.md").read_text()
    for row in ("ms per step", "tokens / s", "peak memory", "final train loss", "validation loss"):
        assert row in table and row in stdout
    (line,) = [json.loads(text) for text in results.read_text().splitlines()]
    assert line["benchmark"] == "train_lm" and line["case"] == "train step"
    assert set(line["times_s"]) == set(bench_train_lm.PATHS) and line["reps"] == 2
    assert line["times_s"]["tilegrad"] == pytest.approx(both["tilegrad"]["interleaved"]["median_ms"] / 1e3)


def test_both_paths_have_the_same_losses(bench_run):
    """Same seed, same batches: the fused tilegrad loss follows PyTorch's step by step."""
    out = bench_run[0]
    logs = {p: dict(records(out / p / train_lm.LOG, "train_loss")) for p in bench_train_lm.PATHS}
    for step in range(1, 6):  # the first steps: agree to float32 rounding
        assert logs["tilegrad"][step] == pytest.approx(logs["pytorch"][step], rel=1e-4), step
    vals = {p: records(out / p / train_lm.LOG, "val_loss")[-1][1] for p in bench_train_lm.PATHS}
    assert vals["tilegrad"] == pytest.approx(vals["pytorch"], rel=0.02)


def test_tokenizer_is_trained_once_for_both_runs(bench_run):
    stdout = bench_run[3]
    assert stdout.count("tokenizer: trained") == 1  # the benchmark itself
    assert stdout.count("tokenizer: cached") == 2  # both training processes


def test_filter_pairs_filtered_with_exact_tilegrad(tmp_path):
    args = bench_train_lm.parse_args([*QUICK, "--filter", "--out", str(tmp_path)])
    assert args.filter == 2.0 ** -8
    assert bench_train_lm.compared_paths(args) == ("filtered", "tilegrad")
    assert bench_train_lm.child_command(args, "filtered")[-2:] == ["--filter", repr(2.0 ** -8)]
    assert "--filter" not in bench_train_lm.child_command(args, "tilegrad")
    plain = bench_train_lm.parse_args([*QUICK, "--out", str(tmp_path)])
    assert bench_train_lm.compared_paths(plain) == bench_train_lm.PATHS
    cmd = bench_train_lm.child_command(plain, "pytorch")
    assert cmd[1:3] == [str(bench_train_lm.RUNNER), "pytorch"]
    assert cmd[cmd.index("--dim") + 1] == "64" and cmd[cmd.index("--threads") + 1] == "1"  # the flags given here


def test_quick_is_a_small_model_whose_flags_can_be_overridden(tmp_path):
    args = bench_train_lm.parse_args(["--quick", "--dim", "96", "--out", str(tmp_path)])
    assert (args.dim, args.layers, args.steps, args.threads, args.timing_rounds) == (96, 2, 30, 1, 3)
    cmd = bench_train_lm.child_command(args, "tilegrad")
    assert cmd[cmd.index("--dim") + 1] == "96" and cmd[cmd.index("--vocab") + 1] == "512"


def test_filtering_table_groups_the_steps():
    """Six steps in rows of two: means of the skipped shares and of the loss, maximum of the dropped fraction."""
    steps = [{"step": k, "input_skipped": k / 10, "weight_skipped": 0.5, "max_row_dropped": k * 1e-3,
              "train_loss": 7.0 - k} for k in range(1, 7)]
    table = bench_train_lm.filtering_table([{"step": 0, "val_loss": 6.0}] + steps, rows=3).splitlines()
    assert len(table) == 5
    assert table[2] == "| 1-2 | 15.0% | 50.0% | 2.0e-03 | 5.500 |"
    assert table[4] == "| 5-6 | 55.0% | 50.0% | 6.0e-03 | 1.500 |"
    assert bench_train_lm.filtering_table([{"step": 0, "val_loss": 6.0}]) == "(no filtered steps logged)"


def refusal(argv):
    with pytest.raises(SystemExit) as info:
        bench_train_lm.main([str(a) for a in argv])
    assert info.value.code == 2, info.value
    message = str(info.value)
    assert "\n" not in message
    return message


def test_resume_and_unknown_flags_are_refused(tmp_path):
    message = refusal([*QUICK, "--resume", tmp_path])
    assert message.startswith("bench_train_lm: --resume does not apply: a benchmark runs both paths afresh")
    assert "unrecognized arguments: --baseline" in refusal([*QUICK, "--out", tmp_path, "--baseline"])
    assert "--timing-rounds must be in [1, inf), got 0" in refusal([*QUICK, "--out", tmp_path, "--timing-rounds", "0"])


def test_a_folder_holding_results_is_refused_until_overwrite(tmp_path):
    (tmp_path / "tilegrad").mkdir()
    (tmp_path / "tilegrad" / train_lm.LOG).write_text('{"step": 0, "val_loss": 6.2}\n')
    message = refusal([*QUICK, "--out", tmp_path])
    assert f"--out {tmp_path} already holds results (tilegrad/log.jsonl)" in message
    assert (tmp_path / "tilegrad" / train_lm.LOG).read_text() == '{"step": 0, "val_loss": 6.2}\n'
    args = bench_train_lm.parse_args([*QUICK, "--out", str(tmp_path), "--overwrite"])
    bench_train_lm.guard_out_dir(args)
    assert not (tmp_path / "tilegrad" / train_lm.LOG).exists()  # each run then starts in an empty folder


def test_ctrl_c_stops_the_benchmark_in_one_line(bench_run, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): the training process and the
    benchmark stop with status 130 and one line, no traceback, and the second run never starts."""
    cache = bench_run[1]
    out = tmp_path / "bench"
    cmd = [sys.executable, str(BENCH), *QUICK, "--out", str(out), "--cache-dir", str(cache), "--steps", "100000"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    log = out / "tilegrad" / train_lm.LOG
    try:
        deadline = time.monotonic() + 120
        while len(records(log, "train_loss") if log.is_file() else []) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no 2 steps logged"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "bench_train_lm: stopped by Ctrl-C during the tilegrad run; nothing reported" in stderr
    assert not (out / "pytorch").exists()


# ----------------------------------------------------------------------------------------------------
# The paths compared: PyTorch's own ops and optimizer against the example's tilegrad ones
# ----------------------------------------------------------------------------------------------------

def ops_of(path: str):
    import tilegrad.torch as tgt
    return runs.TorchOps if path == "pytorch" else tgt


def tiny_model(path: str, param_dtype: str = "float32", lr: float = 1e-3):
    """(model, optimizer) of one path: a 300-token vocabulary, one block, seed 0."""
    args = argparse.Namespace(context=16, dim=32, layers=1, heads=2, ffn_dim=64, tie=1, filter=None, seed=0,
                              param_dtype=param_dtype, lr=lr)
    return runs.build_model(args, 300, path)


@pytest.mark.parametrize("param_dtype", ["float32", "bfloat16"])
def test_each_path_steps_with_its_own_adamw_and_clip(param_dtype):
    """tilegrad: tgt.optim.AdamW with the clip fused in (and fp32 masters for bf16 params); PyTorch:
    clip_grad_norm_ then torch.optim.AdamW(fused=True) (bf16 moments for bf16 params)."""
    import tilegrad.torch as tgt
    ours = tiny_model("tilegrad", param_dtype)[1]
    assert isinstance(ours, tgt.optim.AdamW) and ours.max_grad_norm == runs.MAX_GRAD_NORM == 1.0
    assert ours.master_weights == (param_dtype == "bfloat16")
    theirs = tiny_model("pytorch", param_dtype)[1]
    assert type(theirs) is runs.ClippedAdamW and isinstance(theirs, torch.optim.AdamW)
    assert theirs.defaults["fused"] is True
    assert [g["weight_decay"] for g in ours.param_groups] == [g["weight_decay"] for g in theirs.param_groups]


def test_tilegrad_step_clips_like_clip_grad_norm():
    """The same gradients, their norm far above 1 and different at each step (so that skipping or
    misplacing the clip changes Adam's moments): tilegrad's fused step gives clip_grad_norm_ + torch's."""
    built = {path: tiny_model(path, lr=1e-2) for path in ("tilegrad", "pytorch")}
    models, opts = ({path: pair[i] for path, pair in built.items()} for i in (0, 1))
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        grads = [torch.randn(p.shape, generator=gen) * 10 ** step for p in models["tilegrad"].parameters()]
        for path, model in models.items():
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            opts[path].step()
    assert opts["tilegrad"].last_grad_norm > 100  # the fused norm, before clipping
    ours, theirs = (dict(models[path].named_parameters()) for path in ("tilegrad", "pytorch"))
    for name, p in ours.items():
        torch.testing.assert_close(p, theirs[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("flag, value", [("--dtype", "bfloat16"), ("--param-dtype", "bfloat16")])
def test_bfloat16_first_steps_match(bench_run, flag, value):
    """bf16 autocast, or bf16 parameters (tilegrad: fp32 masters; torch: bf16 AdamW): the first
    losses of both paths agree to bf16 rounding."""
    cache = bench_run[1]
    args, _ = train_lm.parse_args([*QUICK, "--cache-dir", str(cache), flag, value])
    data = train_lm.prepare_data(None, args.vocab, cache)
    batches = [train_lm.train_batch(data.train, s, 0, args.batch_size, args.context) for s in range(3)]
    losses = {}
    for path in ("tilegrad", "pytorch"):
        model, opt = runs.build(args, data, path)
        losses[path] = [train_lm.train_step(model, opt, b, args.lr, args.dtype) for b in batches]
    assert losses["tilegrad"] == pytest.approx(losses["pytorch"], rel=2e-2)


@pytest.mark.parametrize("path", ["tilegrad", "pytorch"])
def test_bf16_loss_is_float32_unrounded_on_both_paths(path):
    """--param-dtype bfloat16 logs float32 losses: the LM head's loss of bf16 hidden states and weights
    equals the float64 cross entropy of the same values, not its bf16 rounding (steps of 1/32 near 6)."""
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(64, 32, generator=gen).to(torch.bfloat16)
    weight = (torch.randn(500, 32, generator=gen) * 0.3).to(torch.bfloat16)
    target = torch.randint(0, 500, (64,), generator=gen)
    loss = ops_of(path).linear_cross_entropy(hidden, weight, target, loss_dtype=torch.float32)
    logits = hidden.double() @ weight.double().T
    expected = float(torch.nn.functional.cross_entropy(logits, target))
    assert loss.dtype == torch.float32
    assert abs(float(loss) - expected) <= 2e-3 * expected  # bf16 logits of the baseline: one rounding
    assert float(loss) != float(torch.tensor(expected).to(torch.bfloat16))


def test_filter_trains_within_the_bound_and_logs_the_skipped_blocks(bench_run, tmp_path, monkeypatch):
    """The filtered path: the LM head's gradients are filtered within the bound (every skip it allows:
    TILEGRAD_FLCE_FILTER_MIN_SKIP=0), each step's log record carries the skipped shares and the
    largest dropped fraction (<= TAU), the loss of the first step is the exact run's (the forward is
    never filtered) and the run stays close to it. The model is wide enough (--dim 256) for the LM
    head to take tilegrad's fused kernel, not the small-size composite."""
    cache = bench_run[1]
    monkeypatch.setenv("TILEGRAD_FLCE_FILTER_MIN_SKIP", "0")
    tau = 0.6  # (vocabulary 512: four 128-column blocks, each about a quarter of a row's bound sum)
    common = [*QUICK, "--cache-dir", str(cache), "--dim", "256", "--steps", "6", "--eval-interval", "3",
              "--filter", str(tau)]
    exact = runs.run(train_lm.parse_args(common + ["--out", str(tmp_path / "exact")])[0], "tilegrad")
    filtered = runs.run(train_lm.parse_args(common + ["--out", str(tmp_path / "filtered")])[0], "filtered")
    assert filtered["path"] == "filtered" and filtered["filter_tolerance"] == tau
    assert exact["filter_tolerance"] is None and exact["mean_input_skipped"] is None
    steps = [r for r in train_lm.read_log(tmp_path / "filtered" / train_lm.LOG) if "train_loss" in r]
    assert len(steps) == 6
    for r in steps:
        assert 0.0 <= r["weight_skipped"] <= 1.0 and 0.0 <= r["max_row_dropped"] <= tau
    assert max(r["input_skipped"] for r in steps) > 0.0  # near-uniform early softmax: blocks to drop
    assert filtered["mean_input_skipped"] == pytest.approx(sum(r["input_skipped"] for r in steps) / 6)
    exact_losses = records(tmp_path / "exact" / train_lm.LOG, "train_loss")
    filtered_losses = records(tmp_path / "filtered" / train_lm.LOG, "train_loss")
    assert filtered_losses[0] == exact_losses[0]
    assert [v for _, v in filtered_losses] == pytest.approx([v for _, v in exact_losses], rel=0.05)


def test_the_example_trains_the_filtered_path_too(bench_run, tmp_path, monkeypatch):
    """train_lm.py --filter TAU: the same losses as the benchmark's filtered run (the same model, data,
    schedule and step)."""
    cache = bench_run[1]
    monkeypatch.setenv("TILEGRAD_FLCE_FILTER_MIN_SKIP", "0")
    common = [*QUICK, "--cache-dir", str(cache), "--dim", "256", "--steps", "4", "--eval-interval", "2",
              "--filter", "0.6", "--sample-tokens", "0"]
    bench = runs.run(train_lm.parse_args(common + ["--out", str(tmp_path / "bench")])[0], "filtered")
    example = train_lm.main(common + ["--out", str(tmp_path / "example")])
    for kind in ("train_loss", "val_loss"):
        assert records(tmp_path / "example" / train_lm.LOG, kind) == records(tmp_path / "bench" / train_lm.LOG, kind)
    assert example["final_val_loss"] == bench["final_val_loss"]
