"""MkDocs hook: fills two kinds of marker in the pages, so the site shows the project's own sources of
truth instead of copies that drift.

``<!-- operator-readme: PATH -->`` is replaced by the operator document at cpp/ops/PATH
anywhere under cpp/ (the folders may be regrouped without touching the docs), its headings moved one
level down so that they sit under the page's title.

``<!-- operator-table: families -->`` and ``<!-- operator-table: operators -->`` are replaced by the
table of families (their pages) and of operators (NumPy function, aclnn name, PyTorch equivalent,
dtypes) made from the operator registry, cpp/ops/operators.json.

``<!-- bench-table: NAME -->`` is replaced by the table stored in docs/benchmarks/data/NAME.json,
preceded by the machine, versions, load and command it was measured with (scripts/bench_tables.py
writes and checks these files).
"""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_tables  # noqa: E402  (scripts/ is not a package)

MARKER = re.compile(r"<!-- (operator-readme|operator-table|bench-table): ([\w./-]+) -->")
REGISTRY = ROOT / "cpp" / "ops" / "operators.json"
SPEC_CITATION = re.compile(r"specification section (\d+)")


def operator_readme(name: str) -> Path:
    """The operator document `name` (a path under cpp/ops/, e.g. ``norm/rms_norm/README.md``: each
    family folder holds its README and one page per further operator); ValueError if it is missing."""
    path = ROOT / "cpp" / "ops" / name
    if not path.is_file():
        raise ValueError(f"docs: operator-readme: {name!r} is not a file under cpp/ops/; name an operator "
                         f"document as a path such as 'norm/rms_norm/README.md'")
    return path


def demoted(markdown: str) -> str:
    """`markdown` with every ATX heading one level deeper (code blocks left alone)."""
    lines, in_code = [], False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        lines.append("#" + line if not in_code and line.startswith("#") else line)
    return "\n".join(lines)


def linked_citations(markdown: str, page_url_depth: int) -> str:
    """'specification section N' made into a link to that section of the specification page."""
    up = "../" * page_url_depth
    return SPEC_CITATION.sub(lambda m: f"[specification section {m.group(1)}]({up}specification.md#section-{m.group(1)})",
                             markdown)


def operator_table(name: str) -> str:
    """The registry's families (``families``: title and page) or operators (``operators``) as a table."""
    families = json.loads(REGISTRY.read_text())["families"]
    if name == "families":
        rows = ["| family | page |", "|---|---|"]
        rows += [f"| {f['title']} | [{f['page'][:-3]}]({f['page']}) |" for f in families]
    elif name == "operators":
        rows = ["| tilegrad (NumPy) | aclnn | PyTorch equivalent | dtypes | page |", "|---|---|---|---|---|"]
        for f in families:
            for op in f["operators"]:
                aclnn = f"`{op['aclnn']}`" if op["aclnn"] else "(tilegrad's own)"
                rows.append(f"| `{op.get('python', op['name'])}` | {aclnn} | {op['torch']} | {', '.join(op['dtypes'])} "
                            f"| [{f['page'][:-3]}]({f['page']}) |")
    else:
        raise ValueError(f"docs: operator-table: {name!r} is neither 'families' nor 'operators'")
    return "\n".join(rows)


def expand(kind: str, name: str, depth: int) -> str:
    if kind == "operator-readme":
        return linked_citations(demoted(operator_readme(name).read_text()), depth)
    if kind == "operator-table":
        return operator_table(name)
    data = json.loads((ROOT / "docs" / "benchmarks" / "data" / f"{name}.json").read_text())
    return bench_tables.render(data)


def on_page_markdown(markdown, page, **_):
    depth = page.file.src_uri.count("/")
    return MARKER.sub(lambda m: expand(m.group(1), m.group(2), depth), markdown)
