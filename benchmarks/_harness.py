"""Side-by-side benchmark harness: every contender runs in one process on the same inputs; each
time is the minimum of several repetitions; results print as a table with ratios to a baseline.

    rows = []
    rows.append(compare("silu fp32 16M", {"torch": f1, "tilegrad": f2}, baseline="torch"))
    print_table(rows)
"""

import gc
import time
from typing import Callable, Dict, List, Optional

import numpy as np


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
            extra: Optional[Dict[str, str]] = None) -> dict:
    """Times each contender (interleaved per repetition round to share the machine's noise)."""
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
    return row


def print_table(rows: List[dict], title: str = "") -> str:
    """Markdown table: case, each contender's ms, and speedup of every non-baseline contender."""
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


def rel_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """max |approx - exact| / max |exact| in float64."""
    a = np.asarray(approx, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    return float(np.max(np.abs(a - e)) / max(np.max(np.abs(e)), 1e-300))
