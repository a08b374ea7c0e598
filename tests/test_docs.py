"""The code the README and the documentation show works: every Python snippet runs against the
installed package (a page's snippets in one fresh interpreter, each in a namespace of its own, as a
reader pasting them into one session would), every C++ block is the text of a program ctest compiles
and runs (tests/cpp/docs) or is marked as a fragment, the benchmark tables carry their measuring
conditions, and every "specification section N" cited in the sources names a section of
docs/specification.md.

A snippet is skipped only for a reason stated next to it (``<!-- not run: REASON -->`` on the line
before the fence) or when it imports torch / transformers and they are not installed.
"""

import ast
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^(\s*)```(\w*)")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")
FRAGMENT = "<!-- fragment -->"
OPTIONAL_MODULES = ("torch", "transformers", "tokenizers")
SNIPPET_SECTION = re.compile(r"// --8<-- \[start:(\w+)\]\n(.*?)\n\s*// --8<-- \[end:\1\]", re.S)
SPEC_CITATION = re.compile(r"specification section (\d+)")


def doc_files():
    """README.md, CHANGELOG.md and every page of the site."""
    pages = sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *pages]


def fenced_blocks(path: Path):
    """(language, first line number, code, the line before the fence) of each fenced block in `path`;
    the code is dedented by the fence's own indentation (blocks inside list items)."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, language = len(match.group(1)), match.group(2)
        before = lines[i - 1] if i > 0 else ""
        body, i = [], i + 1
        while i < len(lines) and not lines[i].strip().startswith("```"):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        blocks.append((language, i - len(body), "\n".join(body), before))
        i += 1
    return blocks


def snippet_id(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


PYTHON_SNIPPETS = [pytest.param(path, line, id=snippet_id(path, line))
                   for path in doc_files() for language, line, code, before in fenced_blocks(path)
                   if language in ("python", "py")]

# Runs a page's snippets in one interpreter, each in a namespace of its own (as a reader pasting them
# into one session would), and writes a traceback or None per snippet as JSON to argv[1]; snippets
# print freely to stdout.
RUNNER = """
import json, sys, traceback
results = []
for code in json.load(sys.stdin):
    try:
        exec(compile(code, "<snippet>", "exec"), {"__name__": "__main__"})
        results.append(None)
    except BaseException:
        results.append(traceback.format_exc())
with open(sys.argv[1], "w") as f:
    json.dump(results, f)
"""


def imported_modules(code: str) -> set:
    """Top-level names of the modules `code` imports."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def skip_reason(code: str, before: str):
    """Why a snippet is not run (its not-run marker, or optional modules it imports that are not
    installed), or None."""
    marked = NOT_RUN.search(before)
    if marked:
        return f"marked not run: {marked.group(1)}"
    wanted = imported_modules(code) | ({"torch"} if "tilegrad.torch" in code else set())
    missing = [m for m in OPTIONAL_MODULES if m in wanted and importlib.util.find_spec(m) is None]
    return f"needs {', '.join(missing)}" if missing else None


_page_results = {}


def page_results(path: Path, tmp_dir: Path) -> dict:
    """line -> traceback (None: ran) for every runnable Python snippet of `path`, run once per page."""
    if path not in _page_results:
        runnable = [(line, code) for language, line, code, before in fenced_blocks(path)
                    if language in ("python", "py") and skip_reason(code, before) is None]
        out = tmp_dir / "results.json"
        result = subprocess.run([sys.executable, "-c", RUNNER, str(out)], input=json.dumps([c for _, c in runnable]),
                                cwd=tmp_dir, capture_output=True, text=True, timeout=900)
        if result.returncode != 0 or not out.exists():
            failure = f"the snippet runner died ({result.returncode}):\n{result.stderr[-4000:]}"
            _page_results[path] = {line: failure for line, _ in runnable}
        else:
            _page_results[path] = dict(zip([line for line, _ in runnable], json.loads(out.read_text())))
    return _page_results[path]


@pytest.mark.parametrize("path, line", PYTHON_SNIPPETS)
def test_python_snippet_runs(path, line, tmp_path):
    code, before = next((c, b) for language, first, c, b in fenced_blocks(path) if first == line)
    reason = skip_reason(code, before)
    if reason:
        pytest.skip(reason)
    failure = page_results(path, tmp_path)[line]
    assert failure is None, f"{snippet_id(path, line)} failed:\n{code}\n--- traceback ---\n{failure}"


def test_every_page_and_readme_quick_start_is_collected():
    """The collector finds the README's two Python quick starts and snippets on the site's pages."""
    ids = [p.id for p in PYTHON_SNIPPETS]
    assert sum(i.startswith("README.md:") for i in ids) == 2, ids
    assert sum(i.startswith("docs/") for i in ids) >= 10, ids


def cpp_sections() -> dict:
    """name -> text of every snippet section of the programs under tests/cpp/docs."""
    sections = {}
    for program in sorted((ROOT / "tests" / "cpp" / "docs").glob("*.cpp")):
        for name, text in SNIPPET_SECTION.findall(program.read_text()):
            sections[name] = text
    return sections


def test_readme_cpp_blocks_are_compiled_programs():
    """The README cannot include files, so its C++ blocks must be, verbatim, sections of the programs
    tests/cpp/docs holds (which ctest compiles and runs)."""
    sections = cpp_sections()
    assert {"quickstart", "launch"} <= set(sections)
    blocks = [(line, code) for language, line, code, _ in fenced_blocks(ROOT / "README.md")
              if language in ("cpp", "c", "c++")]
    assert len(blocks) == 2
    for line, code in blocks:
        assert code in sections.values(), f"README.md:{line}: not a section of tests/cpp/docs/*.cpp"


def test_site_cpp_blocks_are_included_or_marked_fragments():
    for path in doc_files()[2:]:
        for language, line, code, before in fenced_blocks(path):
            if language in ("cpp", "c", "c++"):
                assert code.lstrip().startswith("--8<--") or FRAGMENT in before, \
                    f"{snippet_id(path, line)}: include the code from tests/cpp/docs or mark it {FRAGMENT}"


def test_readme_is_short_and_has_no_lab_notebook():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for notebook in (r"load average", r"\bissue \d+", r"\bmissed\b", r"\bcommit [0-9a-f]{7}"):
        assert not re.search(notebook, text, re.I), notebook


def test_readme_headline_matches_its_data_file():
    data = json.loads((DOCS / "benchmarks" / "data" / "models_headline.json").read_text())
    readme = (ROOT / "README.md").read_text()
    for row in data["rows"][:2]:
        assert f"| {' | '.join(row)} |" in readme, row
    # The README shows the command without the repetition counts the data file records.
    assert f"`{data['measured']['command'].split(' --')[0]}`" in readme


def bench_tables():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import bench_tables as module
    finally:
        sys.path.pop(0)
    return module


def test_benchmark_data_files_are_complete_and_each_is_shown():
    module = bench_tables()
    pages = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    shown = set(re.findall(r"<!-- bench-table: ([\w.-]+) -->", pages))
    files = {p.stem: p for p in (DOCS / "benchmarks" / "data").glob("*.json")}
    assert shown == set(files), (shown ^ set(files))
    for name, path in files.items():
        assert module.problems(json.loads(path.read_text())) == [], name


def test_bench_tables_render_and_refuse_incomplete_data():
    module = bench_tables()
    data = {"title": "t", "measured": {"machine": "m", "versions": "v", "load": "l", "command": "c"},
            "columns": ["case", "ms"], "rows": [["a", "1.0"]]}
    text = module.render(data)
    assert "| case | ms |" in text and "| a | 1.0 |" in text and "- load: l" in text
    with pytest.raises(ValueError, match="bench_tables: t: measured has no 'load'"):
        module.render({**data, "measured": {**data["measured"], "load": ""}})


def test_bench_tables_from_run_reads_the_harness_json_lines():
    module = bench_tables()
    line = {"benchmark": "bench_x", "case": "fp32 1M", "times_s": {"torch": 0.002, "tilegrad": 0.001},
            "baseline": "torch", "ratios": {"tilegrad": 2.0}, "tilegrad_version": "0.1.0",
            "torch_version": "2.14.1", "python": "3.11", "git_commit": "abcdef0123", "cpu": "CPU", "threads": 2,
            "isa": "avx512"}
    data = module.from_run([line], title="x", command="python benchmarks/bench_x.py", load="idle")
    assert data["columns"] == ["case", "torch ms", "tilegrad ms", "tilegrad vs torch"]
    assert data["rows"] == [["fp32 1M", "2.000", "1.000", "2.00x"]]
    assert module.problems(data) == []


def test_bench_tables_from_run_keeps_the_extra_columns_in_order():
    module = bench_tables()
    base = {"benchmark": "bench_x", "times_s": {"torch": 0.004, "tgt": 0.002}, "baseline": "torch",
            "ratios": {"tgt": 2.0}}
    lines = [dict(base, case="a", extra={"tgt GFLOP/s": "10.0", "error": "1e-6"}),
             dict(base, case="b", extra={"tgt GFLOP/s": "12.5", "note": "n/a"})]
    data = module.from_run(lines, title="x", command="c", load="idle")
    assert data["columns"] == ["case", "torch ms", "tgt ms", "tgt vs torch", "tgt GFLOP/s", "error", "note"]
    assert data["rows"] == [["a", "4.000", "2.000", "2.00x", "10.0", "1e-6", ""],
                            ["b", "4.000", "2.000", "2.00x", "12.5", "", "n/a"]]


def specification_sections() -> set:
    return set(re.findall(r'<a id="section-(\d+)"></a>', (DOCS / "specification.md").read_text()))


def source_files():
    for folder in ("cpp", "python", "tests", "scripts", "benchmarks", "examples"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in (".cpp", ".h", ".hpp", ".inc", ".c", ".py", ".md", ".txt") \
                    and path != Path(__file__):
                yield path


def test_specification_citations_name_existing_sections():
    """Every 'specification section N' in the sources is a section of docs/specification.md, and no
    source cites a document outside the project (the old SEMANTICS.md and research notes)."""
    sections = specification_sections()
    assert {str(n) for n in range(0, 10)} <= sections
    cited = 0
    for path in source_files():
        text = path.read_text(errors="replace")
        for number in SPEC_CITATION.findall(text):
            assert number in sections, f"{path.relative_to(ROOT)}: specification section {number} does not exist"
            cited += 1
        for outside in ("SEMANTICS", "research/", "ops-nn-wave3", "perf-anchors"):
            assert outside not in text, f"{path.relative_to(ROOT)} cites {outside}: cite docs/specification.md"
    # The C++ and package sources hold most citations; the installed-wheel check copies only tests/,
    # scripts/, benchmarks/ and examples/ beside the docs.
    assert cited >= (30 if (ROOT / "cpp").is_dir() else 10)
