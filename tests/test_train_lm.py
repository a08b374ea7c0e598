"""examples/train_lm.py end to end: a short run (logs, summary, checkpoint, sample), the tokenizer
cache, resume after an interruption (the same losses as the uninterrupted run), and every mistake
refused in one line. The PyTorch baseline, the comparison of both paths (plot, table, timing) and the
filtering statistics are benchmarks/bench_train_lm.py's: tests/test_example_bench_train_lm.py."""

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("tqdm")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
sys.path.insert(0, str(EXAMPLES))
import train_lm  # noqa: E402
from train_lm_flags import QUICK, QUICK_STEPS, QUICK_VOCAB  # noqa: E402



def main_stopped(argv):
    """train_lm.main(argv) where `--stop-at STEP` in argv (the tests' own, not a flag of train_lm) sends
    this process a Ctrl-C (SIGINT) during step STEP of the run: it stops after that step, as a user's would."""
    at = argv.index("--stop-at")
    step, argv = int(argv[at + 1]), argv[:at] + argv[at + 2:]
    schedule = train_lm.learning_rate  # called with each step's index, just before the step

    def ctrl_c_during(index, *rest):
        if index == step - 1:
            os.kill(os.getpid(), signal.SIGINT)
        return schedule(index, *rest)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(train_lm, "learning_rate", ctrl_c_during)
        return train_lm.main(argv)


def records(log_file: Path, kind: str):
    """(step, value) pairs of one kind ("train_loss" or "val_loss") from a log.jsonl."""
    return [(r["step"], r[kind]) for r in train_lm.read_log(log_file) if kind in r]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One short run of a small model in a fresh process (the command a user types), shared by the tests."""
    root = tmp_path_factory.mktemp("train_lm")
    out, cache = root / "run", root / "cache"
    result = subprocess.run([sys.executable, str(EXAMPLES / "train_lm.py"), *QUICK, "--out", str(out),
                             "--cache-dir", str(cache)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, cache, result.stdout


def test_a_run_writes_its_log_summary_checkpoint_and_sample(quick_run):
    out, _, stdout = quick_run
    train = records(out / train_lm.LOG, "train_loss")
    val = records(out / train_lm.LOG, "val_loss")
    assert [s for s, _ in train] == list(range(1, QUICK_STEPS + 1))
    assert val[0][0] == 0 and val[-1][0] == QUICK_STEPS
    assert val[-1][1] < val[0][1] - 0.5  # it learns: ~6.25 -> ~5.3 nats with the quick settings
    summary = json.loads((out / train_lm.SUMMARY).read_text())
    assert summary["steps"] == QUICK_STEPS and summary["tokens_per_step"] == 8 * 64
    assert summary["final_val_loss"] == val[-1][1] and summary["first_val_loss"] == val[0][1]
    assert summary["final_train_loss"] == pytest.approx(sum(v for _, v in train[-10:]) / 10)
    times = [r["time"] for r in train_lm.read_log(out / train_lm.LOG) if "time" in r]
    assert len(times) == QUICK_STEPS and times == sorted(times)  # a timestamp per step, in order
    assert torch.load(out / train_lm.CHECKPOINT, weights_only=True)["completed"] == QUICK_STEPS
    sample = stdout.split("--- sample ---\n")[1].split("\n--------------")[0]
    assert sample.startswith("The ") and len(sample) > len("The ")  # the prompt, then the generated tokens


def test_tokenizer_is_trained_once_then_cached(quick_run):
    out, cache, stdout = quick_run
    assert stdout.count("tokenizer: trained") == 1
    data = train_lm.prepare_data(None, QUICK_VOCAB, cache)
    assert data.from_cache and data.tokenizer.get_vocab_size() == QUICK_VOCAB
    assert data.tokenizer_file.parent.parent == cache
    text = "def f(x):\n    return x"
    assert data.tokenizer.decode(data.tokenizer.encode(text).ids) == text  # byte level: lossless


def pydoc_topics():
    """The Python documentation's topics, in the example's order (its built-in corpus)."""
    from pydoc_data.topics import topics
    return [topics[name].strip() + "\n" for name in sorted(topics)]


def test_builtin_corpora_split_into_train_and_validation(tmp_path):
    for corpus, least in (("pydoc", 400_000), ("stdlib", 1_000_000)):
        train, val = train_lm.load_text(None, corpus)
        assert len(train) + len(val) >= least
        assert 0.03 < len(val) / (len(train) + len(val)) < 0.2  # every 10th document held out
    docs = pydoc_topics()
    train, val = train_lm.load_text(None, "pydoc")
    assert val.startswith(docs[5]) and docs[5] not in train and docs[4] in train
    text = tmp_path / "one.txt"  # a single document: its last 10%, cut at a line end
    text.write_text("".join(f"line {i}\n" for i in range(1000)))
    train, val = train_lm.load_text(text)
    assert train + val == text.read_text() and val.startswith("\n") and 0.09 < len(val) / len(train + val) < 0.11


def test_resume_continues_with_the_same_losses(quick_run, tmp_path):
    """Stopped after 10 steps (as Ctrl-C would), resumed: every later loss equals the uninterrupted run's."""
    out, cache, _ = quick_run
    run = tmp_path / "interrupted"
    common = [*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0"]
    stopped = main_stopped(common + ["--out", str(run), "--stop-at", "10"])
    assert stopped["steps"] == 10
    assert torch.load(run / train_lm.CHECKPOINT, weights_only=True)["completed"] == 10
    resumed = train_lm.main(["--resume", str(run), "--sample-tokens", "0"])
    assert resumed["steps"] == QUICK_STEPS
    for kind in ("train_loss", "val_loss"):
        got = records(run / train_lm.LOG, kind)
        want = records(out / train_lm.LOG, kind)
        assert [s for s, _ in got] == [s for s, _ in want]  # no step logged twice or lost
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6, abs=1e-6)


def test_resume_of_a_folder_without_a_checkpoint_is_refused(tmp_path):
    message = refusal(["--resume", tmp_path / "empty"], main=True)
    assert f"--resume {tmp_path / 'empty'}: {tmp_path / 'empty' / train_lm.CHECKPOINT} does not exist" in message


def test_bfloat16_parameters_resume_with_their_master_weights(quick_run, tmp_path):
    """--param-dtype bfloat16: the checkpoint holds bf16 params and the optimizer's fp32 masters and
    moments, so a resumed run continues with the uninterrupted run's losses."""
    _, cache, _ = quick_run
    common = [*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0", "--param-dtype", "bfloat16",
              "--steps", "12", "--eval-interval", "6"]
    whole = train_lm.main(common + ["--out", str(tmp_path / "whole")])
    assert whole["param_dtype"] == "bfloat16" and whole["final_val_loss"] < whole["first_val_loss"] - 0.3
    main_stopped(common + ["--out", str(tmp_path / "part"), "--stop-at", "6"])
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
    with train_lm.StopFlag() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("argv, message", [
    (["--dim", "100", "--heads", "3"], "--dim must be a multiple of 2 x --heads (6) for an even head dimension, "
                                       "got --dim 100"),
    (["--steps", "0"], "--steps must be in [1, inf), got 0"),
    (["--steps", "ten"], "--steps invalid int value: 'ten'"),
    (["--vocab", "100"], "--vocab must be in [260, 1048576), got 100"),
    (["--filter", "0"], "--filter must be in [1e-09, 1), got 0.0"),
    (["--filter", "1.5"], "--filter must be in [1e-09, 1), got 1.5"),
    (["--dtype", "float16"], "--dtype invalid choice: 'float16'"),
    (["--baseline"], "unrecognized arguments: --baseline"),
])
def test_bad_flags_name_the_flag_and_value(argv, message):
    with pytest.raises(SystemExit, match=re.escape(message)) as info:
        train_lm.parse_args(argv)
    assert info.value.code == 2  # argparse's status for a command-line mistake


def test_text_too_short_for_the_context_is_refused(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("hello world\nthis is short\n")
    with pytest.raises(SystemExit, match="too short for --context 64"):
        train_lm.main([*QUICK, "--text", str(short), "--cache-dir", str(tmp_path / "cache"),
                       "--out", str(tmp_path / "out")])


# ----------------------------------------------------------------------------------------------------
# Never losing a run, never answering with a traceback (issue 29)
# ----------------------------------------------------------------------------------------------------

def cli(*argv, cwd=None):
    """The example run as a user runs it: (exit status, stdout, stderr)."""
    result = subprocess.run([sys.executable, str(EXAMPLES / "train_lm.py"), *map(str, argv)], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    return result.returncode, result.stdout, result.stderr


def folder_bytes(folder: Path):
    """Every file under folder with its contents (to show that nothing was touched)."""
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def refusal(argv, main=False):
    """The one-line message and exit status 2 of a command line train_lm refuses (in this process)."""
    with pytest.raises(SystemExit) as info:
        (train_lm.main if main else train_lm.parse_args)([str(a) for a in argv])
    assert info.value.code == 2, info.value
    message = str(info.value)
    assert message.startswith("train_lm: ") and "\n" not in message
    return message


def test_a_new_run_into_a_folder_holding_a_run_is_refused_until_overwrite(quick_run, tmp_path):
    """The same command retyped (or the default --out) must not silently replace a saved run: exit 2
    with one line naming the folder and the ways on, nothing touched; --overwrite then starts over."""
    _, cache, _ = quick_run
    run = tmp_path / "run"
    common = [*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0", "--out", str(run)]
    main_stopped(common + ["--stop-at", "6"])
    before = folder_bytes(run)
    assert sorted(before) == [train_lm.CHECKPOINT, train_lm.LOG, train_lm.SUMMARY]
    status, stdout, stderr = cli(*common)
    assert status == 2 and "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    for part in (f"--out {run} already holds a run", train_lm.CHECKPOINT, f"--resume {run}", "--overwrite",
                 "new --out"):
        assert part in stderr, (part, stderr)
    assert folder_bytes(run) == before
    main_stopped(common + ["--stop-at", "2", "--overwrite"])
    assert torch.load(run / train_lm.CHECKPOINT, weights_only=True)["completed"] == 2
    assert [s for s, _ in records(run / train_lm.LOG, "train_loss")] == [1, 2]  # a fresh log


def test_the_default_out_folder_is_guarded_too(tmp_path):
    """No --out: runs/train_lm under the working directory, refused when it holds a checkpoint."""
    default = tmp_path / "runs" / "train_lm"
    default.mkdir(parents=True)
    (default / train_lm.CHECKPOINT).write_bytes(b"a run of 40 steps")
    status, _, stderr = cli(*QUICK, cwd=tmp_path)
    assert status == 2 and "Traceback" not in stderr
    assert "--out runs/train_lm already holds a run (checkpoint.pt)" in stderr, stderr
    assert (default / train_lm.CHECKPOINT).read_bytes() == b"a run of 40 steps"


def test_missing_binary_and_non_utf8_text_is_refused_naming_the_file_and_the_byte(tmp_path):
    out = ["--out", tmp_path / "run", "--cache-dir", tmp_path / "cache"]
    message = refusal(["--text", "/nonexistent/file.txt", *out], main=True)
    assert "--text /nonexistent/file.txt must be a readable UTF-8 file ([Errno 2] No such file" in message
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"PK\x03\x04" + bytes(range(256)))
    message = refusal(["--text", binary, *out], main=True)
    assert f"--text {binary} must be a readable UTF-8 file ('utf-8' codec can't decode byte 0x80 in position " \
           f"{4 + 0x80}" in message
    latin1 = tmp_path / "latin1.txt"
    text = "first line\nsecond line\nthe caf\u00e9 on the third line\n"
    latin1.write_bytes(text.encode("latin-1"))
    offset = text.index("\u00e9")  # one byte per character in Latin-1
    assert f"can't decode byte 0xe9 in position {offset}" in refusal(["--text", latin1, *out], main=True)
    assert not (tmp_path / "run").exists()


def test_out_and_cache_dir_naming_a_file_are_refused(tmp_path):
    file = tmp_path / "notes.txt"
    file.write_text("not a folder")
    assert f"--out must name a folder, got {file}, and part of it is a file" in refusal(["--out", file])
    assert f"--out must name a folder, got {file / 'run'}, and part of it" in refusal(["--out", file / "run"])
    assert f"--cache-dir must name a folder, got {file}" in refusal(["--cache-dir", file])
    assert file.read_text() == "not a folder"


@pytest.mark.parametrize("contents, why", [
    (b"", "cannot be read (an empty file"),
    (b"\x80\x02garbage that is no zip archive", "cannot be read (torch.load failed"),
    ("truncated", "cannot be read (torch.load failed"),
    ("foreign", "is not the checkpoint expected (no 'model', 'optimizer', 'completed', 'args'"),
])
def test_resume_of_an_unreadable_checkpoint_is_refused(tmp_path, contents, why):
    """An empty, damaged or foreign checkpoint.pt: one line naming it, never torch's advice to unpickle
    it with weights_only=False."""
    file = tmp_path / train_lm.CHECKPOINT
    if contents == "foreign":
        torch.save({"weights": torch.ones(3)}, file)
    elif contents == "truncated":
        torch.save({"model": {"w": torch.ones(1000)}, "optimizer": {}, "completed": 3, "args": {}}, file)
        file.write_bytes(file.read_bytes()[:-200])
    else:
        file.write_bytes(contents)
    before = file.read_bytes()
    message = refusal(["--resume", tmp_path], main=True)
    assert f"--resume {tmp_path}: {file} {why}" in message
    assert "weights_only" not in message and f"--out {tmp_path} --overwrite" in message
    assert file.read_bytes() == before


def test_an_odd_head_dimension_is_refused_with_a_working_suggestion():
    message = refusal(["--dim", "66", "--heads", "2"])
    assert "--dim must be a multiple of 2 x --heads (4) for an even head dimension, got --dim 66" in message
    suggested = int(message.split("e.g. --dim ")[1].rstrip(")"))
    args, _ = train_lm.parse_args(["--dim", str(suggested), "--heads", "2"])
    assert args.dim // args.heads % 2 == 0


def test_resume_refuses_typed_flags_that_differ_from_the_checkpoint(quick_run, tmp_path):
    """Only typed flags count: --resume DIR --dim 128 --tie 0 names both with the saved values and
    touches nothing; flags typed with the checkpoint's own values, and --steps / --lr, are accepted."""
    _, cache, _ = quick_run
    run = tmp_path / "run"
    main_stopped([*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0", "--out", str(run),
                   "--stop-at", "4", "--steps", "6"])
    before = folder_bytes(run)
    message = refusal(["--resume", run, "--dim", "128", "--tie", "0", "--filter", "--corpus", "pydoc"], main=True)
    assert "--dim 128 (checkpoint: --dim 64)" in message and "--tie 0 (checkpoint: --tie 1)" in message
    assert f"--filter {2.0 ** -8} (checkpoint: no --filter)" in message
    assert "--corpus" not in message.split("drop them")[0]  # the saved value, typed: no conflict
    assert "--vocab" not in message  # not typed: never compared
    assert folder_bytes(run) == before
    resumed = train_lm.main(["--resume", str(run), *QUICK, "--dim", "64", "--steps", "8", "--lr", "1e-3",
                             "--sample-tokens", "0"])
    assert resumed["steps"] == 8
    lrs = {r["step"]: r["lr"] for r in train_lm.read_log(run / train_lm.LOG) if "lr" in r}
    assert lrs[5] == pytest.approx(train_lm.learning_rate(4, 8, 1e-3))  # the new schedule from step 5 on
    assert lrs[4] == pytest.approx(train_lm.learning_rate(3, 6, train_lm.build_parser().get_default("lr")))


@pytest.mark.parametrize("argv, message", [
    (["--resume", "RUN", "--overwrite"], "--resume RUN continues the run in RUN: drop --overwrite"),
    (["--resume", "RUN", "--out", "OTHER"], "--resume RUN continues the run in RUN: drop --out OTHER"),
    (["--lr", "inf"], "--lr must be in [1e-09, inf), got inf"),
    (["--lr", "nan"], "--lr must be in [1e-09, inf), got nan"),
    (["--seed", str(2 ** 70)], f"--seed must be in [0, 4294967296), got {2 ** 70}"),
    (["--vocab", "1000000000"], "--vocab must be in [260, 1048576), got 1000000000"),
])
def test_more_bad_flags_are_refused(argv, message):
    assert message in refusal(argv)


def test_a_diverging_run_stops_without_saving_and_keeps_the_good_checkpoint(quick_run, tmp_path):
    """--lr 30: the loss becomes NaN; the run stops naming the step and the loss and advising a lower
    --lr, without a NaN checkpoint over the good one, a NaN in the log or a crash in sampling."""
    _, cache, _ = quick_run
    run = tmp_path / "run"
    main_stopped([*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0", "--out", str(run),
                   "--stop-at", "3"])
    good = (run / train_lm.CHECKPOINT).read_bytes()
    with pytest.raises(SystemExit) as info:
        train_lm.main(["--resume", str(run), "--lr", "30"])
    message = str(info.value)
    assert info.value.code == message and "\n" not in message  # printed as the one line, exit status 1
    step = int(message.split("step ")[1].split(":")[0])
    assert f"train_lm: step {step}: the train loss is nan" in message or \
        f"train_lm: step {step}: the val loss is nan" in message, message
    for part in ("stopped without saving a checkpoint", "--lr 30.0 is probably too high",
                 f"--resume {run} --lr SMALLER"):
        assert part in message, (part, message)
    assert (run / train_lm.CHECKPOINT).read_bytes() == good
    logged = train_lm.read_log(run / train_lm.LOG)
    assert all(math.isfinite(v) for r in logged for k, v in r.items() if k.endswith("loss"))
    assert max(r["step"] for r in logged) in (step - 1, step)
    fresh = tmp_path / "fresh"  # a new run: nothing saved at all, the way on is to start over
    with pytest.raises(SystemExit, match=r"the train loss is nan .*start over with --overwrite --lr SMALLER"):
        train_lm.main([*QUICK, "--cache-dir", str(cache), "--out", str(fresh), "--lr", "30"])
    assert not (fresh / train_lm.CHECKPOINT).exists() and not (fresh / train_lm.SUMMARY).exists()


def test_weights_gone_non_finite_are_never_saved(quick_run, tmp_path, monkeypatch):
    """A step whose update leaves an infinite weight behind a finite loss, then a stop (as
    Ctrl-C) before any validation: the run refuses to save, the good checkpoint stays."""
    _, cache, _ = quick_run
    run = tmp_path / "run"
    common = [*QUICK, "--cache-dir", str(cache), "--sample-tokens", "0", "--eval-interval", "20"]
    main_stopped(common + ["--out", str(run), "--stop-at", "2"])
    good = (run / train_lm.CHECKPOINT).read_bytes()
    real_step = train_lm.train_step

    def step_then_break_a_weight(model, *args):
        loss = real_step(model, *args)
        with torch.no_grad():
            next(model.parameters())[0, 0] = float("inf")
        return loss

    monkeypatch.setattr(train_lm, "train_step", step_then_break_a_weight)
    with pytest.raises(SystemExit, match=r"step 3: the weights are no longer finite \(diverged\): .*non-finite"):
        main_stopped(["--resume", str(run), "--stop-at", "3"])
    assert (run / train_lm.CHECKPOINT).read_bytes() == good


def test_resume_on_a_text_changed_since_warns_or_refuses(tmp_path, capfd):
    """--text edited after the checkpoint: other tokens, so the run is not the one saved: a loud
    warning; a vocabulary the checkpoint's model cannot take: one line, exit 2, instead of
    load_state_dict's traceback."""
    docs = pydoc_topics()
    text = tmp_path / "corpus.txt"
    text.write_text("".join(docs[:30]))
    run = tmp_path / "run"
    main_stopped([*QUICK, "--text", str(text), "--cache-dir", str(tmp_path / "cache"), "--out", str(run),
                   "--stop-at", "2"])
    text.write_text("".join(docs[30:60]))
    resumed = main_stopped(["--resume", str(run), "--stop-at", "3"])
    assert resumed["steps"] == 3
    assert f"warning: --resume {run}: the text is not the one the checkpoint was trained on" in capfd.readouterr().err
    text.write_text("ab\n" * 20_000)  # a handful of BPE tokens: fewer rows than the checkpoint's embedding
    before = folder_bytes(run)
    message = refusal(["--resume", run], main=True)
    assert f"--resume {run}: the text gives a vocabulary of" in message and "the checkpoint's model has 512" in message
    assert folder_bytes(run) == before
