"""Side-by-side benchmark harness: every contender runs in one process on the same inputs; each
time is the minimum of several repetitions; results print as a table with ratios to a baseline.

    rows = []
    rows.append(compare("silu fp32 16M", {"torch": f1, "tilegrad": f2}, baseline="torch"))
    print_table(rows)

Machine-readable results: a benchmark parses its options with ``parse_args(parser)`` (which adds
``--json PATH``); from then on every case it times (``compare``, or ``record`` for its own timings) is appended to that
file as one JSON line: benchmark, case, params (shapes, dtype, mode), times in seconds, ratios to the
baseline, the row's extra columns, and the run's context (tilegrad version, ISA, threads, CPU model,
torch version, git commit, UTC timestamp), so runs of different commits and machines can be compared.
``--json PATH`` defaults to the environment variable TILEGRAD_BENCH_JSON.
"""

import argparse
import atexit
import datetime
import gc
import json
import math
import os
import platform
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional

import numpy as np

from tilegrad import _core

JSON_ENV = "TILEGRAD_BENCH_JSON"


def time_min(fn: Callable[[], object], reps: int = 7, warmup: int = 2, min_time: float = 0.0) -> float:
    """Minimum wall time of fn() in seconds over `reps` runs after `warmup` runs."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return best


def compare(label: str, contenders: Dict[str, Callable[[], object]], baseline: str, reps: int = 7,
            extra: Optional[Dict[str, str]] = None, params: Optional[dict] = None) -> dict:
    """Times each contender (interleaved per repetition round to share the machine's noise).

    ``params`` (shapes, dtype, mode ...) describe the case in the JSON results (see ``start_json``); the
    row is written there when it is printed (``print_table``) or at exit, so columns added to
    ``row["extra"]`` after this call are included."""
    times = {name: float("inf") for name in contenders}
    for fn in contenders.values():  # warm up all first
        fn()
        fn()
    gc.disable()
    try:
        for _ in range(reps):
            for name, fn in contenders.items():
                t0 = time.perf_counter()
                fn()
                times[name] = min(times[name], time.perf_counter() - t0)
    finally:
        gc.enable()
    row = {"case": label, "times": times, "baseline": baseline}
    if extra:
        row["extra"] = extra
    if _json["path"]:
        _json["pending"].append((row, dict(params or {}), reps, _context_now()))
    return row


def print_table(rows: List[dict], title: str = "") -> str:
    """Markdown table: case, each contender's ms, and speedup of every non-baseline contender."""
    _flush_json()
    if not rows:
        return ""
    names = list(rows[0]["times"].keys())
    extras = list(rows[0].get("extra", {}).keys())
    header = ["case"] + [f"{n} ms" for n in names]
    header += [f"{n} vs {rows[0]['baseline']}" for n in names if n != rows[0]["baseline"]] + extras
    lines = []
    if title:
        lines.append(f"### {title}")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for r in rows:
        t = r["times"]
        base = t[r["baseline"]]
        cells = [r["case"]] + [f"{t[n] * 1e3:.3f}" for n in names]
        cells += [f"{base / t[n]:.2f}x" for n in names if n != r["baseline"]]
        cells += [r.get("extra", {}).get(e, "") for e in extras]
        lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def gemm_ceiling(torch, dtype, n: int = 2048, reps: int = 5) -> float:
    """FLOP/s of the faster square n x n GEMM in ``dtype`` on this machine now, torch's ``mm`` or oneDNN's
    own multi-threaded matmul (the one tilegrad links): the ceiling a GEMM-bound step can reach (measure
    it in the same run as what it is compared with). Both, because torch's float32 ``mm`` is MKL's,
    which on AMD CPUs runs a narrower code path at about half of oneDNN's float32 rate."""
    from tilegrad.torch._tensor import as_numpy

    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch_seconds = time_min(lambda: torch.mm(a, b), reps=reps)
    x, y, out = as_numpy(a), as_numpy(b), np.empty((n, n), np.float32)
    threads = torch.get_num_threads()
    onednn_seconds = time_min(lambda: _core._onednn_matmul(x, y, out, threads), reps=reps)
    return 2 * n ** 3 / min(torch_seconds, onednn_seconds)


def rel_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """max |approx - exact| / max |exact| in float64."""
    a = np.asarray(approx, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    return float(np.max(np.abs(a - e)) / max(np.max(np.abs(e)), 1e-300))


# ---- tilegrad.torch functions through autograd (bench_decoder.py, bench_layer_norm.py) --------------


class BandwidthProbe:
    """out = a + b over three 64 MiB float32 arrays: the machine's DRAM read+write bandwidth."""

    ELEMENTS = 16 << 20

    def __init__(self) -> None:
        self.a, self.b, self.out = (np.full(self.ELEMENTS, v, dtype=np.float32) for v in (1.0, 2.0, 0.0))

    def __call__(self) -> None:
        _core._bandwidth_probe(self.out, self.a, self.b, True)

    def gbps(self, seconds: float) -> float:
        return 12 * self.ELEMENTS / seconds / 1e9


def grad_run(fn, inputs, upstream):
    """A contender: outputs of fn(*inputs), then autograd's gradients of every leaf input."""
    import torch

    leaves = [t for t in inputs if t.requires_grad]

    def run():
        out = fn(*inputs)
        outs = out if isinstance(out, tuple) else (out,)
        return torch.autograd.grad(outs, leaves, upstream)
    return run


def saved_bytes(fn, inputs) -> int:
    """The bytes autograd saves for the backward of fn(*inputs)."""
    import torch

    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        fn(*inputs)
    seen, total = set(), 0
    for t in saved:  # a tensor saved twice (or a view of a saved one) is stored once
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key not in seen:
            seen.add(key)
            total += t.numel() * t.element_size()
    return total


def cpu_time_us(fn, reps: int) -> float:
    """Minimum over 3 rounds of the process CPU time per call (robust on a shared machine)."""
    for _ in range(5):
        fn()
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, (time.process_time() - t0) / reps)
    return best * 1e6


def _dtypes(torch):
    """The dtypes the autograd benchmarks run, with their names in ``--dtypes`` and the tables."""
    return ((torch.float32, "fp32"), (torch.bfloat16, "bf16"))


class AutogradBenchmark:
    """tilegrad.torch functions through autograd against PyTorch eager and ``torch.compile`` of the same
    PyTorch code, forward + backward on the same inputs, contenders interleaved with the bandwidth probe.

    ``parser`` holds the options they share (``--quick --reps --no-compile --crossover --dtypes
    --threads``; add a script's own before :meth:`start`); :meth:`start` parses them (``--json``
    included) and gives torch and tilegrad the same threads; :meth:`case` times one row; :meth:`run`
    collects the rows of each dtype ``--dtypes`` lists and prints the table."""

    def __init__(self, description: str, crossover_help: str) -> None:
        self.parser = argparse.ArgumentParser(description=description,
                                              formatter_class=argparse.RawDescriptionHelpFormatter)
        self.parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
        self.parser.add_argument("--reps", type=int, default=5)
        self.parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile contender")
        self.parser.add_argument("--crossover", action="store_true", help=crossover_help)
        self.parser.add_argument("--dtypes", default="fp32,bf16", help="comma-separated subset of fp32,bf16")
        self.parser.add_argument("--threads", type=int, default=None,
                                 help="torch and tilegrad threads, the bandwidth probe's too (default: torch's)")
        self.args = None
        self._probe = None

    def start(self, benchmark: str):
        """The parsed options; torch on ``--threads`` and tilegrad on torch's count (the probe calls the
        core directly)."""
        import torch
        import tilegrad

        self.args = parse_args(self.parser, benchmark=benchmark)
        if self.args.threads:
            torch.set_num_threads(self.args.threads)
        tilegrad.set_num_threads(torch.get_num_threads())
        return self.args

    def case(self, label: str, params: dict, ours, theirs, inputs, upstream, target: str, traffic: int) -> dict:
        """One row: ``ours`` (tilegrad), ``theirs`` (PyTorch eager, and compiled unless --no-compile)
        and the bandwidth probe interleaved; ``traffic``: the case's compulsory bytes for forward +
        backward; ``target``: the issue's target, printed beside the ratios."""
        import torch

        contenders = {"torch": grad_run(theirs, inputs, upstream), "tilegrad": grad_run(ours, inputs, upstream)}
        use_compile = not self.args.no_compile
        if use_compile:
            contenders["torch.compile"] = grad_run(torch.compile(theirs, dynamic=False), inputs, upstream)
        contenders["bandwidth probe"] = self._probe
        row = compare(label, contenders, baseline="torch", reps=self.args.reps, params=params)
        t = row["times"]
        dram = self._probe.gbps(t.pop("bandwidth probe"))
        ours_gbps = traffic / t["tilegrad"] / 1e9
        ours_saved, theirs_saved = saved_bytes(ours, inputs), saved_bytes(theirs, inputs)
        row["extra"] = {"target": target}
        if use_compile:
            row["extra"]["tilegrad vs compile"] = f"{t['torch.compile'] / t['tilegrad']:.2f}x"
        row["extra"]["saved MiB tilegrad / torch"] = f"{ours_saved / 2**20:.1f} / {theirs_saved / 2**20:.1f}"
        row["extra"]["tilegrad GB/s (% of DRAM)"] = f"{ours_gbps:.1f} ({100 * ours_gbps / dram:.0f}% of {dram:.1f})"
        return row

    def run(self, dtype_cases, title: str) -> None:
        """``dtype_cases(dtype, name)``: the rows (:meth:`case`) of one dtype; the table of them all."""
        import torch

        self._probe = BandwidthProbe()
        wanted = self.args.dtypes.split(",")
        rows = [row for dtype, name in _dtypes(torch) if name in wanted for row in dtype_cases(dtype, name)]
        print_table(rows, title=f"{title}, {torch.get_num_threads()} threads")


def crossover_table(functions: List[str], sizes: List[int], contenders_at, quick: bool = False) -> None:
    """tilegrad's node (its kernels, whatever the size) vs the composite the router takes below the
    crossover (the formula in torch ops on float32, rounded once) and vs torch's formula in the input's
    dtype, forward + backward, 1 thread, fp32 and bf16 at ``sizes`` elements. ``contenders_at(dtype,
    n)``: one ``(node, composite, torch)`` triple of calls per function. Each cell: composite / node (> 1:
    the node faster; where it passes 1 is the function's CROSSOVER entry, tilegrad.torch._eager), then
    torch / node in parentheses. ``quick``: the two smallest sizes, few calls (a smoke run)."""
    import torch

    torch.set_num_threads(1)
    print("composite / node (torch / node)\n")
    print("| dtype | elements | " + " | ".join(functions) + " |\n|---|---|" + "---|" * len(functions))
    for dtype, name in _dtypes(torch):
        for n in sizes[:2] if quick else sizes:
            reps = 2 if quick else max(20, 200000 // n)
            cells = []
            for node, composite, theirs in contenders_at(dtype, n):
                node_us = cpu_time_us(node, reps)
                composite_us, torch_us = cpu_time_us(composite, reps), cpu_time_us(theirs, reps)
                cells.append(f"{composite_us / node_us:.2f}x ({torch_us / node_us:.2f}x)")
            print(f"| {name} | {n} | " + " | ".join(cells) + " |", flush=True)


# ---- machine-readable results (JSON lines) ---------------------------------------------------------

_json = {"path": None, "benchmark": None, "static": None, "pending": []}


def parse_args(parser, benchmark: Optional[str] = None):
    """parser.parse_args() with ``--json PATH`` added; starts the JSON results when a path is given
    (the parsed options, but the path, go into each line as ``settings``)."""
    add_json_option(parser)
    args = parser.parse_args()
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "mem_probe")}
    start_json(args.json, benchmark, **settings)
    return args


def add_run_options(parser) -> None:
    """``--quick`` (small shapes, few repetitions) and ``--threads`` (tilegrad's and torch's), the
    options the operator benchmarks against torch share; see :func:`set_threads`."""
    parser.add_argument("--quick", action="store_true", help="small shapes, few repetitions (smoke run)")
    parser.add_argument("--threads", type=int, default=0, help="threads for both (default: tilegrad's default)")


def start_kernel_benchmark(description: str, quick_help: str, title: str):
    """A benchmark of tilegrad's NumPy kernels against torch's (bench_gelu.py, bench_silu_backward.py):
    parses ``--quick`` (3 repetitions), ``--reps`` (default 15) and ``--json``, runs torch on tilegrad's
    thread count and prints the run's header line. Returns ``(args, torch, repetitions)``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--reps", type=int, default=15)
    args = parse_args(parser)
    import tilegrad as tg
    import torch

    threads = tg.get_num_threads()
    torch.set_num_threads(threads)
    reps = 3 if args.quick else args.reps
    print(f"# {title}: tilegrad {tg.__version__} ({tg.active_isa()}) vs torch {torch.__version__}, "
          f"{threads} threads, min of {reps}")
    return args, torch, reps


def set_threads(args, torch) -> int:
    """Runs tilegrad and torch on ``args.threads`` threads (0: tilegrad's default); returns the count."""
    import tilegrad as tg

    threads = args.threads or tg.get_num_threads()
    tg.set_num_threads(threads)
    torch.set_num_threads(threads)
    return threads


def add_json_option(parser) -> None:
    """``--json PATH``: append the results as JSON lines (default: $TILEGRAD_BENCH_JSON)."""
    parser.add_argument("--json", metavar="PATH", default=os.environ.get(JSON_ENV) or None,
                        help=f"append one JSON line per measured case to PATH (default: ${JSON_ENV})")


def start_json(path: Optional[str], benchmark: Optional[str] = None, **settings) -> None:
    """Sends every case timed from now on to ``path`` (nothing when it is empty). ``benchmark``
    defaults to the script's name without ``bench_``; ``settings`` (quick, reps ...) go into each line."""
    if not path:
        return
    name = benchmark or os.path.splitext(os.path.basename(sys.argv[0]))[0].replace("bench_", "", 1)
    _json.update(path=path, benchmark=name, static=dict(_static_context(), settings=settings))
    atexit.register(_flush_json)


def record(case: str, times: Dict[str, float], baseline: str, params: Optional[dict] = None,
           extra: Optional[Dict[str, str]] = None, clock: str = "wall", reps: Optional[int] = None) -> None:
    """Writes one case timed by the benchmark itself (``compare`` rows are written automatically).
    ``times`` in seconds; ``clock`` says what they measure ("wall", or "cpu" for process CPU time)."""
    if _json["path"]:
        row = {"case": case, "times": dict(times), "baseline": baseline, "extra": dict(extra or {}), "clock": clock}
        _json["pending"].append((row, dict(params or {}), reps, _context_now()))
        _flush_json()


def _flush_json() -> None:
    if not _json["path"] or not _json["pending"]:
        return
    lines = [json.dumps(_json_line(*entry), allow_nan=False, default=str) for entry in _json["pending"]]
    _json["pending"].clear()
    with open(_json["path"], "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _json_line(row: dict, params: dict, reps: Optional[int], context: dict) -> dict:
    """One case: a time that was not measured (NaN, inf) is null, and has no ratio (strict JSON)."""
    times = {n: (t if math.isfinite(t) else None) for n, t in row["times"].items()}
    base = times[row["baseline"]]
    ratios = {n: base / t for n, t in times.items() if n != row["baseline"] and base and t}
    return {"benchmark": _json["benchmark"], "case": row["case"], "params": params,
            "times_s": times, "baseline": row["baseline"], "ratios": ratios,
            "extra": dict(row.get("extra", {})), "clock": row.get("clock", "wall"), "reps": reps,
            **context, **_json["static"]}


def _context_now() -> dict:
    """What may change during a run: the threads and ISA in use, and the time."""
    import tilegrad as tg
    context = {"isa": tg.active_isa(), "threads": tg.get_num_threads(),
               "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    torch = sys.modules.get("torch")
    if torch is not None:
        context["torch_threads"] = torch.get_num_threads()
    return context


def _static_context() -> dict:
    import tilegrad as tg
    return {"tilegrad_version": tg.__version__, "cpu": _cpu_model(), "torch_version": _torch_version(),
            "python": platform.python_version(), "env": _settings_from_environment(), **_git_state()}


def _settings_from_environment() -> dict:
    """The environment variables that change what is measured, where set."""
    names = ("TILEGRAD_MAX_ISA", "TILEGRAD_FLCE_BUDGET", "TILEGRAD_VERBOSE", "ONEDNN_MAX_CPU_ISA", "OMP_NUM_THREADS",
             "THP_MEM_ALLOC_ENABLE")
    return {name: os.environ[name] for name in names if name in os.environ}


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _torch_version() -> Optional[str]:
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.__version__
    try:
        from importlib.metadata import version
        return version("torch")
    except Exception:  # noqa: BLE001 (not installed, or no metadata)
        return None


def _git_state() -> dict:
    """The commit of the source tree these benchmarks sit in (None outside a git checkout), and whether
    tracked files differ from it."""
    here = os.path.dirname(os.path.abspath(__file__))

    def git(*args):
        return subprocess.run(["git", "-C", here, *args], capture_output=True, text=True, timeout=30,
                              check=True).stdout.strip()
    try:
        return {"git_commit": git("rev-parse", "HEAD"),
                "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "git_dirty": None}
