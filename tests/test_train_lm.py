"""examples/train_lm.py end to end: --quick --compare (both paths, plot, logs, table), the tokenizer
cache, resume after an interruption (the same losses as the uninterrupted run), the first steps'
losses of tilegrad and PyTorch side by side."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("tqdm")
pytest.importorskip("matplotlib")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import train_lm  # noqa: E402

QUICK_STEPS = train_lm.QUICK["steps"]


def records(log_file: Path, kind: str):
    """(step, value) pairs of one kind ("train_loss" or "val_loss") from a log.jsonl."""
    return [(r["step"], r[kind]) for r in train_lm.read_log(log_file) if kind in r]


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory):
    """One `--quick --compare` run in a fresh process (the command a user types), shared by the tests."""
    root = tmp_path_factory.mktemp("train_lm")
    out, cache = root / "run", root / "cache"
    cmd = [sys.executable, str(EXAMPLES / "train_lm.py"), "--quick", "--compare", "--out", str(out),
           "--cache-dir", str(cache)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, cache, result.stdout


def test_compare_writes_plot_logs_and_table(compare_run):
    out, _, stdout = compare_run
    png = (out / "loss.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    for path in train_lm.PATHS:
        train = records(out / path / train_lm.LOG, "train_loss")
        val = records(out / path / train_lm.LOG, "val_loss")
        assert [s for s, _ in train] == list(range(1, QUICK_STEPS + 1))
        assert val[0][0] == 0 and val[-1][0] == QUICK_STEPS
        assert val[-1][1] < val[0][1] - 0.5  # it learns: ~6.25 -> ~5.3 nats with the quick settings
        summary = json.loads((out / path / train_lm.SUMMARY).read_text())
        assert summary["path"] == path and summary["steps"] == QUICK_STEPS
        assert summary["ms_per_step"] > 0 and summary["peak_memory_mib"] is not None
        assert (out / path / train_lm.CHECKPOINT).is_file()
    table = (out / "summary.md").read_text()
    for row in ("ms per step", "tokens / s", "peak memory", "final train loss", "validation loss"):
        assert row in table and row in stdout
    assert "--- sample ---" in stdout


def test_both_paths_have_the_same_losses(compare_run):
    """Same seed, same batches: the fused tilegrad loss follows PyTorch's step by step."""
    out, _, _ = compare_run
    logs = {p: dict(records(out / p / train_lm.LOG, "train_loss")) for p in train_lm.PATHS}
    for step in range(1, 6):  # the first steps: agree to float32 rounding
        assert logs["tilegrad"][step] == pytest.approx(logs["pytorch"][step], rel=1e-4), step
    vals = {p: records(out / p / train_lm.LOG, "val_loss")[-1][1] for p in train_lm.PATHS}
    assert vals["tilegrad"] == pytest.approx(vals["pytorch"], rel=0.02)


def test_tokenizer_is_trained_once_then_cached(compare_run):
    out, cache, stdout = compare_run
    assert stdout.count("tokenizer: trained") == 1  # the --compare parent
    assert stdout.count("tokenizer: cached") == 2  # both training processes
    data = train_lm.prepare_data(None, train_lm.QUICK["vocab"], cache)
    assert data.from_cache and data.tokenizer.get_vocab_size() == train_lm.QUICK["vocab"]
    assert data.tokenizer_file.parent.parent == cache
    text = "def f(x):\n    return x"
    assert data.tokenizer.decode(data.tokenizer.encode(text).ids) == text  # byte level: lossless


def test_builtin_corpora_split_into_train_and_validation():
    for corpus, least in (("pydoc", 400_000), ("stdlib", 1_000_000)):
        docs = train_lm.load_documents(None, corpus)
        train, val = train_lm.split_documents(docs)
        assert len(docs) >= 50 and len(train) + len(val) >= least
        assert 0.03 < len(val) / (len(train) + len(val)) < 0.2  # every 10th document held out
        assert docs[5] in val and docs[5] not in train


def test_resume_continues_with_the_same_losses(compare_run, tmp_path):
    """Stopped after 10 steps (as Ctrl-C would), resumed: every later loss equals the uninterrupted run's."""
    out, cache, _ = compare_run
    run = tmp_path / "interrupted"
    common = ["--quick", "--cache-dir", str(cache), "--sample-tokens", "0"]
    stopped = train_lm.main(common + ["--out", str(run), "--stop-at", "10"])
    assert stopped["steps"] == 10
    assert torch.load(run / train_lm.CHECKPOINT, weights_only=True)["completed"] == 10
    resumed = train_lm.main(["--resume", str(run), "--sample-tokens", "0"])
    assert resumed["steps"] == QUICK_STEPS
    for kind in ("train_loss", "val_loss"):
        got = records(run / train_lm.LOG, kind)
        want = records(out / "tilegrad" / train_lm.LOG, kind)
        assert [s for s, _ in got] == [s for s, _ in want]  # no step logged twice or lost
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-6)


def test_resume_of_a_compare_folder_continues_its_tilegrad_run(compare_run, tmp_path, capsys):
    """--compare writes one run per path under OUT (OUT/tilegrad, OUT/pytorch, as its children's --out);
    --resume OUT continues the tilegrad one and says so; a folder with neither checkpoint is named."""
    out, cache, _ = compare_run
    folder = tmp_path / "compare"
    common = ["--quick", "--cache-dir", str(cache), "--sample-tokens", "0"]
    train_lm.main(common + ["--out", str(folder / "tilegrad"), "--stop-at", "10"])  # as the child writes it
    resumed = train_lm.main(["--resume", str(folder), "--sample-tokens", "0"])
    assert resumed["steps"] == QUICK_STEPS
    assert "resuming its tilegrad run" in capsys.readouterr().out
    got = records(folder / "tilegrad" / train_lm.LOG, "val_loss")
    want = records(out / "tilegrad" / train_lm.LOG, "val_loss")
    assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-6)
    with pytest.raises(SystemExit, match=r"--resume needs .*checkpoint\.pt \(a run folder\) or .*tilegrad"):
        train_lm.main(["--resume", str(tmp_path / "empty")])


def tiny_model(baseline: bool, param_dtype: str = "float32"):
    cfg = train_lm.ModelConfig(vocab=300, context=16, dim=32, layers=1, heads=2, ffn_dim=64, tie=True)
    torch.manual_seed(0)
    return train_lm.build_model(cfg, train_lm.make_ops(baseline), param_dtype)


@pytest.mark.parametrize("param_dtype", ["float32", "bfloat16"])
def test_each_path_steps_with_its_own_adamw_and_clip(param_dtype):
    """tilegrad: tgt.optim.AdamW with the clip fused in (and fp32 masters for bf16 params); PyTorch:
    clip_grad_norm_ then torch.optim.AdamW(fused=True) (bf16 moments for bf16 params)."""
    import tilegrad.torch as tgt
    ours = train_lm.make_optimizer(tiny_model(False, param_dtype), 1e-3)
    assert isinstance(ours, tgt.optim.AdamW) and ours.max_grad_norm == train_lm.MAX_GRAD_NORM == 1.0
    assert ours.master_weights == (param_dtype == "bfloat16")
    theirs = train_lm.make_optimizer(tiny_model(True, param_dtype), 1e-3)
    assert type(theirs) is torch.optim.AdamW and theirs.defaults["fused"] is True
    assert [g["weight_decay"] for g in ours.param_groups] == [g["weight_decay"] for g in theirs.param_groups]


def test_tilegrad_step_clips_like_clip_grad_norm():
    """The same gradients, their norm far above 1 and different at each step (so that skipping or
    misplacing the clip changes Adam's moments): the tilegrad path's step gives the baseline's."""
    models = {b: tiny_model(b) for b in (False, True)}
    opts = {b: train_lm.make_optimizer(m, 1e-2) for b, m in models.items()}
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        grads = [torch.randn(p.shape, generator=gen) * 10 ** step for p in models[False].parameters()]
        for baseline, model in models.items():
            for p, g in zip(model.parameters(), grads):
                p.grad = g.clone()
            model.ops.clip_grads(model.parameters(), train_lm.MAX_GRAD_NORM)
            opts[baseline].step()
    assert opts[False].last_grad_norm > 100  # the fused norm, before clipping
    ours, theirs = (dict(models[b].named_parameters()) for b in (False, True))
    for name, p in ours.items():
        torch.testing.assert_close(p, theirs[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("flag, value", [("--dtype", "bfloat16"), ("--param-dtype", "bfloat16")])
def test_bfloat16_first_steps_match(compare_run, flag, value):
    """bf16 autocast, or bf16 parameters (tilegrad: fp32 masters; torch: bf16 AdamW): the first
    losses of both paths agree to bf16 rounding."""
    _, cache, _ = compare_run
    args = train_lm.parse_args(["--quick", "--cache-dir", str(cache), flag, value])
    data = train_lm.prepare_data(None, args.vocab, cache)
    cfg = train_lm.model_config(args, data)
    losses = {}
    for baseline in (False, True):
        torch.manual_seed(0)
        model = train_lm.build_model(cfg, train_lm.make_ops(baseline), args.param_dtype)
        opt = train_lm.make_optimizer(model, args.lr)
        batches = [train_lm.train_batch(data.train, s, 0, args.batch_size, args.context) for s in range(3)]
        losses[baseline] = [train_lm.train_step(model, opt, b, args.lr, args.dtype)[0] for b in batches]
    assert losses[False] == pytest.approx(losses[True], rel=2e-2)


def test_bfloat16_parameters_resume_with_their_master_weights(compare_run, tmp_path):
    """--param-dtype bfloat16: the checkpoint holds bf16 params and the optimizer's fp32 masters and
    moments, so a resumed run continues with the uninterrupted run's losses."""
    _, cache, _ = compare_run
    common = ["--quick", "--cache-dir", str(cache), "--sample-tokens", "0", "--param-dtype", "bfloat16",
              "--steps", "12", "--eval-interval", "6"]
    whole = train_lm.main(common + ["--out", str(tmp_path / "whole")])
    assert whole["param_dtype"] == "bfloat16" and whole["final_val_loss"] < whole["first_val_loss"] - 0.3
    train_lm.main(common + ["--out", str(tmp_path / "part"), "--stop-at", "6"])
    ckpt = torch.load(tmp_path / "part" / train_lm.CHECKPOINT, weights_only=True)
    assert {t.dtype for t in ckpt["model"].values() if t.is_floating_point()} == {torch.bfloat16}
    state = next(iter(ckpt["optimizer"]["state"].values()))
    assert state["master_param"].dtype == state["exp_avg"].dtype == torch.float32
    train_lm.main(["--resume", str(tmp_path / "part"), "--sample-tokens", "0"])
    for kind in ("train_loss", "val_loss"):
        got = records(tmp_path / "part" / train_lm.LOG, kind)
        want = records(tmp_path / "whole" / train_lm.LOG, kind)
        assert [s for s, _ in got] == [s for s, _ in want]
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-6)


def test_ctrl_c_requests_a_stop_between_steps():
    """SIGINT only sets the flag (the loop checkpoints between whole steps); a second one interrupts."""
    with train_lm.StopFlag(stop_at=None) as stop:
        assert not stop.should_stop(0)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.should_stop(0)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert train_lm.StopFlag(stop_at=5).should_stop(5)


@pytest.mark.parametrize("argv, message", [
    (["--dim", "100", "--heads", "3"], "--dim must be a multiple of --heads (3), got 100"),
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--vocab", "100"], "--vocab must be >= 260"),
    (["--compare", "--baseline"], "--compare runs both paths itself"),
    (["--text", "/nonexistent/file.txt"], "--text must be a readable file, got /nonexistent/file.txt"),
    (["--filter", "0"], "--filter TAU must be in (0, 1), got 0.0"),
    (["--filter", "1.5"], "--filter TAU must be in (0, 1), got 1.5"),
    (["--filter", "--baseline"], "--filter applies to the tilegrad path"),
])
def test_bad_flags_name_the_flag_and_value(argv, message):
    with pytest.raises(SystemExit, match=message.replace("(", r"\(").replace(")", r"\)")):
        train_lm.parse_args(argv)


def test_text_too_short_for_the_context_is_refused(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("hello world\nthis is short\n")
    with pytest.raises(SystemExit, match="too short for --context 64"):
        train_lm.main(["--quick", "--text", str(short), "--cache-dir", str(tmp_path / "cache"),
                       "--out", str(tmp_path / "out")])


def test_filter_trains_within_the_bound_and_logs_the_skipped_blocks(compare_run, tmp_path, monkeypatch):
    """--filter TAU: the LM head's gradients are filtered within the bound (every skip it allows:
    TILEGRAD_FLCE_FILTER_MIN_SKIP=0), each step's log record carries the skipped shares and the
    largest dropped fraction (<= TAU), the loss of the first step is the exact run's (the forward is
    never filtered) and the run stays close to it; the by-step table renders. The model is wide
    enough (--dim 256) for the LM head to take tilegrad's fused kernel, not the small-size composite."""
    _, cache, _ = compare_run
    monkeypatch.setenv("TILEGRAD_FLCE_FILTER_MIN_SKIP", "0")
    tau = 0.6  # (vocabulary 512: four 128-column blocks, each about a quarter of a row's bound sum)
    common = ["--quick", "--cache-dir", str(cache), "--sample-tokens", "0", "--dim", "256", "--steps", "6",
              "--eval-interval", "3"]
    exact = train_lm.main(common + ["--out", str(tmp_path / "exact")])
    filtered = train_lm.main(common + ["--out", str(tmp_path / "filtered"), "--filter", str(tau)])
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
    table = train_lm.filtering_table(train_lm.read_log(tmp_path / "filtered" / train_lm.LOG), rows=3)
    assert table.count("\n") == 4 and "| 1-2 |" in table and "| 5-6 |" in table


def test_compare_with_filter_pairs_filtered_with_exact_tilegrad():
    args = train_lm.parse_args(["--quick", "--compare", "--filter"])
    assert args.filter == train_lm.FILTER_TAU == 2.0 ** -8
    assert train_lm.compared_paths(args) == ("filtered", "tilegrad")
    assert train_lm.child_command(args, "filtered")[-2:] == ["--filter", repr(2.0 ** -8)]
    assert "--filter" not in train_lm.child_command(args, "tilegrad")
    assert train_lm.compared_paths(train_lm.parse_args(["--quick", "--compare"])) == train_lm.PATHS
