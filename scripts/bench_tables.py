"""The benchmark pages' tables, kept as data (docs/benchmarks/data/NAME.json) and rendered by the
documentation build (docs/_hooks/includes.py), each with the machine, versions, load and command it was
measured with, so a table never appears without the conditions that make it readable.

    python scripts/bench_tables.py check                    # every data file is complete
    python scripts/bench_tables.py from-run RUN.jsonl NAME  # a table from a benchmark's --json output

A data file: {"title", "measured": {"machine", "versions", "load", "command"}, "columns": [...],
"rows": [[...], ...], "notes" (optional)}. ``from-run`` builds one from the JSON lines that
``benchmarks/*.py --json RUN.jsonl`` appends (one line per case: times in seconds, ratios to the
baseline, tilegrad and torch versions, CPU, commit), writing milliseconds and ratios per contender,
then the run's extra columns (GFLOP/s, errors ...) as they were printed.
"""

import json
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "docs" / "benchmarks" / "data"
MEASURED_KEYS = ("machine", "versions", "load", "command")


def problems(data: dict) -> list:
    """What is missing or inconsistent in one data file (empty when it is complete)."""
    found = [f"no {key!r}" for key in ("title", "measured", "columns", "rows") if key not in data]
    measured = data.get("measured", {})
    found += [f"measured has no {key!r}" for key in MEASURED_KEYS if not measured.get(key)]
    width = len(data.get("columns", []))
    found += [f"row {i} has {len(row)} cells for {width} columns"
              for i, row in enumerate(data.get("rows", [])) if len(row) != width]
    return found


def render(data: dict) -> str:
    """Markdown: the conditions as a short list, the table, then the notes."""
    bad = problems(data)
    if bad:
        raise ValueError(f"bench_tables: {data.get('title', '?')}: {'; '.join(bad)}; fix the data file")
    m = data["measured"]
    lines = [f"**{data['title']}**", "",
             f"- command: `{m['command']}`", f"- machine: {m['machine']}", f"- versions: {m['versions']}",
             f"- load: {m['load']}", "",
             "| " + " | ".join(data["columns"]) + " |", "|" + "---|" * len(data["columns"])]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in data["rows"]]
    if data.get("notes"):
        lines += ["", data["notes"]]
    return "\n".join(lines) + "\n"


def from_run(run_lines: list, title: str, command: str, load: str) -> dict:
    """A data file from a benchmark run's JSON lines (benchmarks/_harness.py's format)."""
    if not run_lines:
        raise ValueError("bench_tables: the run has no JSON lines; run the benchmark with --json PATH first")
    contenders = list(dict.fromkeys(name for line in run_lines for name in line["times_s"]))
    baseline = run_lines[0]["baseline"]
    extras = list(dict.fromkeys(key for line in run_lines for key in line.get("extra", {})))
    columns = ["case"] + [f"{name} ms" for name in contenders] + \
              [f"{name} vs {baseline}" for name in contenders if name != baseline] + extras
    rows = []
    for line in run_lines:
        times = [_ms(line["times_s"].get(name)) for name in contenders]
        ratios = [_ratio(line["ratios"].get(name)) for name in contenders if name != baseline]
        rows.append([line["case"], *times, *ratios, *(str(line.get("extra", {}).get(key, "")) for key in extras)])
    first = run_lines[0]
    versions = f"tilegrad {first.get('tilegrad_version')}, torch {first.get('torch_version')}, " \
               f"Python {first.get('python')}, commit {str(first.get('git_commit'))[:9]}"
    machine = f"{first.get('cpu')}, {first.get('threads')} threads, ISA {first.get('isa')}"
    return {"title": title, "measured": {"machine": machine, "versions": versions, "load": load,
                                         "command": command}, "columns": columns, "rows": rows}


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.3f}"


def _ratio(value) -> str:
    return "" if value is None else f"{value:.2f}x"


def main(argv: list) -> int:
    if argv[:1] == ["check"]:
        bad = {p.name: problems(json.loads(p.read_text())) for p in sorted(DATA.glob("*.json"))}
        for name, found in bad.items():
            for problem in found:
                print(f"{name}: {problem}")
        return 1 if any(bad.values()) else 0
    if argv[:1] == ["from-run"] and len(argv) == 3:
        run_lines = [json.loads(line) for line in Path(argv[1]).read_text().splitlines() if line.strip()]
        command = f"python benchmarks/{run_lines[0]['benchmark']}.py" if run_lines else ""
        data = from_run(run_lines, title=argv[2], command=command, load="not recorded by the run; add it")
        (DATA / f"{argv[2]}.json").write_text(json.dumps(data, indent=1) + "\n")
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
