"""benchmarks/bench_train_lm.py: examples/train_lm.py's model trained by tilegrad and by PyTorch from
the same seed, each in its own process, then timed alternately; loss.png, summary.md and the
harness's JSON line (no timing is asserted, only that it is reported)."""

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
import bench_train_lm  # noqa: E402
import train_lm  # noqa: E402 (bench_train_lm put examples/ on the path)
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
    assert args.filter == train_lm.FILTER_TAU == 2.0 ** -8
    assert bench_train_lm.compared_paths(args) == ("filtered", "tilegrad")
    assert bench_train_lm.child_command(args, "filtered")[-2:] == ["--filter", repr(2.0 ** -8)]
    assert "--filter" not in bench_train_lm.child_command(args, "tilegrad")
    plain = bench_train_lm.parse_args([*QUICK, "--out", str(tmp_path)])
    assert bench_train_lm.compared_paths(plain) == bench_train_lm.PATHS
    assert bench_train_lm.child_command(plain, "pytorch")[-1] == "--baseline"
    cmd = bench_train_lm.child_command(plain, "pytorch")
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


@pytest.mark.parametrize("flag", [["--baseline"], ["--resume", "RUN"]])
def test_baseline_and_resume_are_refused(tmp_path, flag):
    message = refusal([*QUICK, "--out", tmp_path, *flag])
    assert message.startswith("bench_train_lm: runs both paths itself") and "--resume OUT/tilegrad" in message


def test_a_folder_holding_results_is_refused_until_overwrite(tmp_path):
    (tmp_path / "tilegrad").mkdir()
    (tmp_path / "tilegrad" / train_lm.LOG).write_text('{"step": 0, "val_loss": 6.2}\n')
    message = refusal([*QUICK, "--out", tmp_path])
    assert f"--out {tmp_path} already holds results (tilegrad/log.jsonl)" in message
    assert (tmp_path / "tilegrad" / train_lm.LOG).read_text() == '{"step": 0, "val_loss": 6.2}\n'
    args = bench_train_lm.parse_args([*QUICK, "--out", str(tmp_path), "--overwrite"])
    bench_train_lm.guard_out_dir(args)
    assert not (tmp_path / "tilegrad" / train_lm.LOG).exists()  # each run then starts in an empty folder


def test_ctrl_c_lets_the_run_save_its_checkpoint(bench_run, tmp_path):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it): the training process finishes
    its step and saves, however long that takes (here: a validation at every step), and the benchmark
    stops with one line, no traceback."""
    cache = bench_run[1]
    out = tmp_path / "bench"
    cmd = [sys.executable, str(BENCH), *QUICK, "--out", str(out), "--cache-dir", str(cache),
           "--eval-interval", "1", "--eval-batches", "64"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    log = out / "tilegrad" / train_lm.LOG
    try:
        deadline = time.monotonic() + 120
        while len(records(log, "train_loss") if log.is_file() else []) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no 2 steps logged"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    completed = torch.load(out / "tilegrad" / train_lm.CHECKPOINT, weights_only=True)["completed"]
    assert completed >= 2 and f"stopped after step {completed}; checkpoint saved" in stdout
    assert f"bench_train_lm: stopped by Ctrl-C in the run in {out / 'tilegrad'}: continue it with python " \
           f"{ROOT / 'examples' / 'train_lm.py'} --resume {out / 'tilegrad'}" in stderr
    assert not (out / "pytorch").exists()  # the second run never started
