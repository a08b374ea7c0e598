#!/usr/bin/env python3
"""Where one training step of ``bench_models.py`` goes: the step under the torch profiler, split into
categories, with the per-step op counts and the code that issues each copy, cast and allocation.

    python benchmarks/profile_step.py                              # SmolLM2-135M, tilegrad's bf16 recipe
    python benchmarks/profile_step.py --mode fp32 --paths tilegrad,pytorch
    python benchmarks/profile_step.py --layers 2 --counts-only     # op counts alone (deterministic)
    python benchmarks/profile_step.py --fingerprint step.pt        # the step's loss and gradients, bitwise
    python benchmarks/profile_step.py --trace step.json            # also a Chrome trace of the step
    python benchmarks/profile_step.py --quick                      # tiny-llama: a smoke run

A path and a mode are ``bench_models.py``'s (``tilegrad``: ``tgt.patch`` + ``tgt.optim.AdamW``;
``pytorch``: the model as built, ``clip_grad_norm_`` + fused ``torch.optim.AdamW``; modes ``fp32``,
``autocast``, ``bf16``). After ``--warmup`` steps and one profiled step that is dropped (the first
under the profiler runs slow), one step runs under the profiler; every function of
``tilegrad._core`` is wrapped in a ``record_function`` named ``core: <function>`` for that step, so the
self time of a tilegrad autograd node is its Python alone and the kernel's time is its own row.

The step's self CPU time is split into:

- ``GEMMs``: torch's matrix products (the linear layers in 16 bits, all of PyTorch's) and tilegrad's
  ``linear`` kernels (float32 layers);
- ``LM head + loss``: the fused linear cross entropy's kernels (tilegrad), torch's loss ops;
- ``attention``: tilegrad's flash attention kernels, or torch's SDPA kernels;
- ``optimizer``: the fused AdamW kernel and gradient norm (tilegrad), torch's fused AdamW and clipping;
- ``tilegrad kernels: <op>``: every other tilegrad kernel, by operator (forward and backward);
- ``torch compute``: torch's other arithmetic (residual adds, the embedding, what is not patched);
- and the **overhead**: ``autograd`` (the engine, torch's nodes, gradient accumulation), ``Python in
  tilegrad nodes`` (a tilegrad node's self time: its Python around the kernel), ``Python in the
  optimizer``, ``views``, ``copies and casts``, ``allocation``, and ``Python between ops`` (the step's
  wall time not inside any profiled op).

Then the per-step counts of the ops dispatched (a ``TorchDispatchMode`` over a separate, untimed
step: deterministic, the same on any machine), and for every copy, cast, clone, concatenation and
allocation the Python line or autograd node that issued it. ``--counts-only`` prints the counts alone
(no profiler, no timing). The profiler's own cost inflates small ops: read the categories as shares.
"""

import argparse
import collections
import contextlib
import functools
import os
import sys
import time
import traceback
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_models  # noqa: E402

import tilegrad  # noqa: E402
from tilegrad import _core  # noqa: E402

# ---------------------------------------------------------------------------------------------------
# the step


def build_path(args) -> Tuple[bench_models.Path, List[torch.Tensor]]:
    """``bench_models``' path ``args.path`` in ``args.mode`` (``--layers``: the model cut to that many
    layers) and the batches of the warmup, profiled and counted steps."""
    spec = dict(bench_models.MODELS[args.model])
    if args.layers:
        spec["num_hidden_layers"] = args.layers
    name = f"{args.model}-{args.layers}l" if args.layers else args.model
    bench_models.MODELS.setdefault(name, spec)
    base = bench_models.build_model(name)
    path = bench_models.make_path(args.path, base, args.mode, args.lora)
    batches = bench_models.random_batches(spec["vocab_size"], args.batch, args.seq, args.warmup + 2)
    return path, batches


# ---------------------------------------------------------------------------------------------------
# per-step op counts and who issues them

# Ops that copy, cast, concatenate or allocate: each one's issuer is recorded.
WATCHED = ("aten::_to_copy", "aten::copy_", "aten::clone", "aten::cat", "aten::contiguous", "aten::empty",
           "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::zeros", "aten::zeros_like",
           "aten::full", "aten::constant_pad_nd", "aten::stack")
# Frames of torch itself and of this script are the machinery between the issuing code and the op.
_MACHINERY = (os.path.dirname(torch.__file__) + os.sep, os.path.abspath(__file__), os.sep + "contextlib.py")
# The autograd engine's entry: in the backward, only frames past it run inside a node.
_ENGINE_ENTRY = os.path.join(os.path.dirname(torch.__file__), "autograd") + os.sep


def _op_name(func) -> str:
    """``aten::_to_copy`` for ``aten._to_copy.default`` (the overload dropped)."""
    return func.name().split(".")[0]


def _short(frame: traceback.FrameSummary) -> str:
    parts = frame.filename.split(os.sep)
    packages = [i for i, part in enumerate(parts) if part in ("tilegrad", "transformers", "peft")]
    kept = parts[packages[0]:] if packages else parts[-2:]
    return f"{os.sep.join(kept)}:{frame.lineno} {frame.name}"


def issuer() -> str:
    """The two innermost Python lines outside torch that led to the op (the line, and the one that
    called it), and in the backward the autograd node running it (torch's own nodes issue ops with
    no Python line of theirs)."""
    stack = traceback.extract_stack()[:-2]
    node = torch._C._current_autograd_node()
    if node is not None:
        entries = [i for i, f in enumerate(stack) if f.filename.startswith(_ENGINE_ENTRY)]
        stack = stack[entries[-1] + 1:] if entries else stack
    frames = [f for f in stack if not f.filename.startswith(_MACHINERY[:2]) and not f.filename.endswith(_MACHINERY[2])]
    where = " < ".join(_short(f) for f in reversed(frames[-2:]))
    if node is not None:
        return f"[{node.name()}] {where}".strip()
    return where or "?"


class OpCounter(TorchDispatchMode):
    """Counts every op dispatched while active (what Python and autograd issue, not the ops those run
    inside), and the issuer of each ``WATCHED`` op."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter = collections.Counter()
        self.issuers: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = _op_name(func)
        self.counts[name] += 1
        if name in WATCHED:
            self.issuers[(name, issuer())] += 1
        return func(*args, **(kwargs or {}))


def count_step(path: bench_models.Path, batch: torch.Tensor) -> OpCounter:
    counter = OpCounter()
    with counter:
        path.step(batch)
    return counter


def print_counts(counter: OpCounter, top: int) -> None:
    print(f"\n### ops dispatched per step ({sum(counter.counts.values()):,} in all)\n")
    print("| op | calls |\n|---|---:|")
    for name, calls in counter.counts.most_common(top):
        print(f"| `{name}` | {calls:,} |")
    print("\n### who issues the copies, casts and allocations\n")
    print("| op | calls | issued by |\n|---|---:|---|")
    for (name, where), calls in sorted(counter.issuers.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"| `{name}` | {calls:,} | {where} |")


# ---------------------------------------------------------------------------------------------------
# the profiled step

CORE_PREFIX = "core: "
# _core functions not wrapped: the thread-count calls every tilegrad call makes (nothing to see).
_NOT_WRAPPED = ("get_num_threads", "set_num_threads")


@contextlib.contextmanager
def core_calls_recorded() -> Iterator[None]:
    """Every function of ``tilegrad._core`` wrapped in a ``record_function("core: <name>")`` while
    active (tilegrad's modules call ``_core.<name>`` by attribute, so they see the wrappers)."""
    originals: Dict[str, Callable] = {}
    for name in dir(_core):
        fn = getattr(_core, name)
        if name.startswith("_") or name in _NOT_WRAPPED or not callable(fn) or isinstance(fn, type):
            continue
        originals[name] = fn
        setattr(_core, name, _recorded(CORE_PREFIX + name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(_core, name, fn)


def _recorded(label: str, fn: Callable) -> Callable:
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)
    return call


def profile_step(path: bench_models.Path, batch: torch.Tensor, trace: Optional[str]):
    """One step under the profiler: ``(its events, the step's wall time in seconds)``."""
    from torch.profiler import ProfilerActivity, profile

    with core_calls_recorded(), profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        path.step(batch)
        wall = time.perf_counter() - start
    if trace:
        prof.export_chrome_trace(trace)
    return prof.events(), wall


# ---------------------------------------------------------------------------------------------------
# categories

GEMM_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
            "aten::_addmm_activation", "aten::mkldnn_linear"}
VIEW_OPS = {"aten::view", "aten::_unsafe_view", "aten::reshape", "aten::transpose", "aten::t", "aten::permute",
            "aten::as_strided", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::select", "aten::slice",
            "aten::narrow", "aten::split", "aten::chunk", "aten::unflatten", "aten::flatten", "aten::detach",
            "detach", "aten::detach_", "detach_", "aten::alias", "aten::resolve_conj", "aten::resolve_neg",
            "aten::lift_fresh", "aten::view_as_real", "aten::numpy_T", "aten::expand_as", "aten::unbind"}
COPY_OPS = {"aten::copy_", "aten::_to_copy", "aten::to", "aten::clone", "aten::contiguous", "aten::cat",
            "aten::stack", "aten::constant_pad_nd", "aten::pad", "aten::_copy_from", "aten::index_select"}
ALLOCATION_OPS = {"aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::zeros",
                  "aten::zeros_like", "aten::zero_", "aten::fill_", "aten::full", "aten::new_zeros", "aten::ones",
                  "aten::ones_like", "aten::new_ones", "aten::arange", "aten::scalar_tensor", "aten::resize_"}
# torch's SDPA, its loss and its optimizer, by name fragments (their kernels, as tilegrad's are)
ATTENTION_FRAGMENTS = ("scaled_dot_product", "flash_attention", "_efficient_attention")
LOSS_FRAGMENTS = ("log_softmax", "nll_loss", "cross_entropy")
OPTIMIZER_FRAGMENTS = ("_fused_adamw", "_foreach_", "linalg_vector_norm", "norm")
OVERHEAD = ("autograd", "Python in tilegrad nodes", "Python in the optimizer", "views", "copies and casts",
            "allocation", "Python between ops")


def core_category(function: str) -> str:
    """The category of a ``tilegrad._core`` function's time."""
    if "attention" in function:
        return "attention"
    if "adamw" in function:
        return "optimizer"
    if function.startswith("linear"):
        return "GEMMs"
    if "cross_entropy" in function or "online_max_sum" in function:
        return "LM head + loss"
    base = function
    for suffix in ("_backward", "_grad"):
        base = base[:-len(suffix)] if base.endswith(suffix) else base
    return f"tilegrad kernels: {base}"


def category(name: str) -> str:
    """The category of a profiler event's self time (see the module docstring)."""
    if name.startswith(CORE_PREFIX):
        return core_category(name[len(CORE_PREFIX):])
    if name in GEMM_OPS:
        return "GEMMs"
    if any(f in name for f in ATTENTION_FRAGMENTS):
        return "attention"
    if name.startswith("Optimizer.") or "clip_grad" in name:
        return "Python in the optimizer"
    if any(f in name for f in OPTIMIZER_FRAGMENTS):
        return "optimizer"
    if any(f in name for f in LOSS_FRAGMENTS):
        return "LM head + loss"
    if name.startswith(("Tilegrad", "LinearCrossEntropyFunction")):
        return "Python in tilegrad nodes"
    if name.startswith("autograd::") or name.endswith("Backward0") or name.endswith("Backward1") \
            or "AccumulateGrad" in name:
        return "autograd"
    if name in VIEW_OPS:
        return "views"
    if name in COPY_OPS:
        return "copies and casts"
    if name in ALLOCATION_OPS:
        return "allocation"
    return "torch compute"


def categories(events, wall: float) -> Dict[str, Tuple[float, int]]:
    """category -> (self CPU seconds, calls); ``Python between ops``: the wall time outside every
    top-level event of the step's thread."""
    totals: Dict[str, List[float]] = collections.defaultdict(lambda: [0.0, 0])
    inside = 0.0
    thread = None
    for e in events:
        if e.cpu_parent is None and thread is None:
            thread = e.thread
        entry = totals[category(e.name)]
        entry[0] += e.self_cpu_time_total / 1e6
        entry[1] += 1
        if e.cpu_parent is None and e.thread == thread:
            inside += e.cpu_time_total / 1e6
    totals["Python between ops"] = [max(0.0, wall - inside), 0]
    return {k: (v[0], int(v[1])) for k, v in totals.items()}


def print_categories(split: Dict[str, Tuple[float, int]], wall: float, title: str) -> None:
    total = sum(seconds for seconds, _ in split.values())
    overhead = sum(split.get(k, (0.0, 0))[0] for k in OVERHEAD)
    print(f"\n### {title}: step {1e3 * wall:,.1f} ms wall, {1e3 * total:,.1f} ms self CPU in all; "
          f"overhead {1e3 * overhead:,.1f} ms ({overhead / total:.1%})\n")
    print("| category | self CPU (ms) | share | events |\n|---|---:|---:|---:|")
    kernels = sorted((k for k in split if k not in OVERHEAD), key=lambda k: -split[k][0])
    for key in kernels + [k for k in OVERHEAD if k in split]:
        seconds, calls = split[key]
        label = f"overhead: {key}" if key in OVERHEAD else key
        print(f"| {label} | {1e3 * seconds:,.1f} | {seconds / total:.1%} | {calls:,} |")


def print_top_events(events, top: int) -> None:
    """The ops with the most self time, with their calls."""
    rows: Dict[str, List[float]] = collections.defaultdict(lambda: [0.0, 0])
    for e in events:
        rows[e.name][0] += e.self_cpu_time_total / 1e3
        rows[e.name][1] += 1
    print("\n| event | category | self CPU (ms) | calls |\n|---|---|---:|---:|")
    for name, (ms, calls) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| `{name}` | {category(name)} | {ms:,.2f} | {int(calls):,} |")


# ---------------------------------------------------------------------------------------------------
# the step's loss and gradients, bitwise


def step_fingerprint(path: bench_models.Path, batch: torch.Tensor) -> Dict[str, torch.Tensor]:
    """One step's loss, every parameter's gradient and every parameter after the optimizer's update."""
    loss = path.model(input_ids=batch, labels=batch).loss
    loss.backward()
    found = {"loss": loss.detach().clone()}
    named = list(path.model.named_parameters())
    found.update({f"grad {n}": p.grad.detach().clone() for n, p in named if p.grad is not None})
    if path.clip:
        torch.nn.utils.clip_grad_norm_([p for _, p in named if p.requires_grad], 1.0)
    path.optimizer.step()
    path.optimizer.zero_grad(set_to_none=True)
    found.update({f"param {n}": p.detach().clone() for n, p in named})
    return found


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def check_fingerprint(found: Dict[str, torch.Tensor], file: str) -> bool:
    """Saves ``found`` to ``file`` where there is none yet; else compares them bit for bit."""
    if not os.path.exists(file):
        torch.save(found, file)
        print(f"\nfingerprint: loss, gradients and updated parameters ({len(found)} tensors) saved to {file}")
        return True
    saved = torch.load(file)
    differing = sorted(k for k in saved.keys() | found.keys()
                       if k not in saved or k not in found or not _same_bits(saved[k], found[k]))
    if differing:
        print(f"\nfingerprint: {len(differing)} of {len(saved)} tensors differ from {file}: {', '.join(differing[:8])}")
        return False
    print(f"\nfingerprint: loss, gradients and updated parameters bit-identical to {file}")
    return True


# ---------------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(bench_models.MODELS), default="smollm2-135m")
    parser.add_argument("--layers", type=int, default=0, help="cut the model to this many layers (0: all)")
    parser.add_argument("--mode", choices=bench_models.MODES, default="bf16")
    parser.add_argument("--paths", default="tilegrad", help="comma-separated: tilegrad, pytorch")
    parser.add_argument("--lora", action="store_true", help="PEFT LoRA r=16 on every block linear")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--warmup", type=int, default=2, help="steps before the profiled one")
    parser.add_argument("--top", type=int, default=30, help="rows of the event and count tables")
    parser.add_argument("--counts-only", action="store_true", help="the op counts alone (no profiler)")
    parser.add_argument("--fingerprint", metavar="FILE",
                        help="save the first path's loss, gradients and updated parameters of one step, or "
                             "compare them bit for bit with a saved file")
    parser.add_argument("--trace", metavar="FILE", help="also write a Chrome trace of the (last) profiled step")
    parser.add_argument("--quick", action="store_true", help="tiny-llama, 2 x 32 tokens, one warmup step")
    parser.add_argument("--threads", type=int, default=0, help="threads for both (default: tilegrad's default)")
    args = parser.parse_args()
    if args.quick:
        args.model, args.layers, args.seq, args.warmup = "tiny-llama", 0, 32, 1
    threads = args.threads or tilegrad.get_num_threads()
    tilegrad.set_num_threads(threads)
    torch.set_num_threads(threads)
    print(f"# {args.model}{f' cut to {args.layers} layers' if args.layers else ''}, mode {args.mode}"
          f"{', LoRA' if args.lora else ''}, {args.batch} x {args.seq} tokens, {threads} threads, "
          f"torch {torch.__version__}, load average {os.getloadavg()[0]:.2f}")
    ok = True
    for index, args.path in enumerate(args.paths.split(",")):
        path, batches = build_path(args)
        for batch in batches[:args.warmup]:
            path.step(batch)
        print(f"\n## {args.path}")
        if index == 0 and args.fingerprint:
            ok = check_fingerprint(step_fingerprint(path, batches[-1]), args.fingerprint) and ok
        if not args.counts_only:
            # the first step under the profiler in a process runs far slower (the profiler's own
            # start-up): one is profiled and dropped, the next one is shown
            profile_step(path, batches[-2], None)
            events, wall = profile_step(path, batches[-2], args.trace)
            print_categories(categories(events, wall), wall, f"{args.path}, {args.mode}")
            print_top_events(events, args.top)
        print_counts(count_step(path, batches[-1]), args.top)
        del path
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
