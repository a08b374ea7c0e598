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

``<!-- crossover-table: pytorch -->`` is replaced by the table of tilegrad.torch's crossovers, read
from the registry itself (``CROSSOVER`` in python/tilegrad/torch/_eager.py, parsed, not imported: the
build needs no torch).
"""

import ast
import json
import operator
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_tables  # noqa: E402  (scripts/ is not a package)

MARKER = re.compile(r"<!-- (operator-readme|operator-table|bench-table|crossover-table): ([\w./-]+) -->")
REGISTRY = ROOT / "cpp" / "ops" / "operators.json"
SPEC_CITATION = re.compile(r"specification section (\d+)")
EAGER = ROOT / "python" / "tilegrad" / "torch" / "_eager.py"
# Each CROSSOVER entry's row: the public functions it routes, and what its size counts.
CROSSOVER_ROWS = {
    "silu": ("`silu`", "input elements"),
    "cross_entropy": ("`cross_entropy`", "logits"),
    "cross_entropy_classes": ("`cross_entropy`", "classes, whatever the rows (torch's kernel vectorises across "
                              "rows, tilegrad's along a row)"),
    "embedding": ("`embedding`", "output elements (16-bit: the composite would widen the whole table)"),
    "binary_cross_entropy_with_logits": ("`binary_cross_entropy_with_logits`", "input elements"),
    "rms_norm": ("`rms_norm`", "input elements"),
    "add_rms_norm": ("`add_rms_norm`", "elements of `x1`"),
    "layer_norm": ("`layer_norm`", "input elements"),
    "silu_mul": ("`silu_mul`", "elements of `gate`"),
    "swiglu": ("`swiglu`", "input elements"),
    "gelu": ("`gelu`", "input elements"),
    "gelu_mul": ("`gelu_mul`, `geglu`", "elements of `gate`"),
    "rope": ("`rotary_position_embedding`, `apply_rotary_pos_emb`", "input elements"),
    "linear_cross_entropy": ("`linear_cross_entropy`", "multiply-adds `rows x H x V`"),
    "linear": ("`linear`", "multiply-adds `rows x in_features x out_features`"),
}
_DTYPE_NAMES = {"_F32": "fp32", "_F16": "fp16", "_BF16": "bf16"}
_OPERATORS = {ast.LShift: operator.lshift, ast.Mult: operator.mul, ast.Pow: operator.pow}


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


def _size(node: ast.expr) -> int:
    """A size in the registry: an integer, or integers combined by <<, * or **."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_size(node.left), _size(node.right))
    raise ValueError(f"docs: crossover-table: {ast.unparse(node)!r} in {EAGER.name} is not a constant size")


def crossovers(source: str) -> dict:
    """``CROSSOVER`` of _eager.py's source as {entry: {"fp32" | "fp16" | "bf16": size}}."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["CROSSOVER"]:
            return {ast.literal_eval(k): {_DTYPE_NAMES[d.id]: _size(v) for d, v in zip(e.keys, e.values)}
                    for k, e in zip(node.value.keys, node.value.values)}
    raise ValueError(f"docs: crossover-table: no CROSSOVER = {{...}} in {EAGER}")


def _short(size: int) -> str:
    """2^20 as 1M, 2^12 as 4K, 2^25 as 2^25; other sizes as they are."""
    if size >= 1 << 24 and size & (size - 1) == 0:
        return f"2^{size.bit_length() - 1}"
    for unit, suffix in ((1 << 20, "M"), (1 << 10, "K")):
        if size >= unit and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def crossover_table(name: str) -> str:
    """The crossovers as a table: per entry its functions, its measure and the size per dtype below
    which torch ops run ("kernel": the kernel at every size)."""
    if name != "pytorch":
        raise ValueError(f"docs: crossover-table: {name!r} is not 'pytorch'")
    rows = ["| functions | size counted | fp32 | fp16 | bf16 |", "|---|---|---|---|---|"]
    for entry, sizes in crossovers(EAGER.read_text()).items():
        if entry not in CROSSOVER_ROWS:
            raise ValueError(f"docs: crossover-table: CROSSOVER[{entry!r}] has no row: add what it routes and "
                             f"counts to CROSSOVER_ROWS in {Path(__file__).relative_to(ROOT)}")
        functions, measure = CROSSOVER_ROWS[entry]
        cells = [_short(sizes[d]) if d in sizes else "kernel" for d in ("fp32", "fp16", "bf16")]
        rows.append(f"| {functions} | {measure} | {' | '.join(cells)} |")
    return "\n".join(rows)


def expand(kind: str, name: str, depth: int) -> str:
    if kind == "operator-readme":
        return linked_citations(demoted(operator_readme(name).read_text()), depth)
    if kind == "operator-table":
        return operator_table(name)
    if kind == "crossover-table":
        return crossover_table(name)
    data = json.loads((ROOT / "docs" / "benchmarks" / "data" / f"{name}.json").read_text())
    return bench_tables.render(data)


def on_page_markdown(markdown, page, **_):
    depth = page.file.src_uri.count("/")
    return MARKER.sub(lambda m: expand(m.group(1), m.group(2), depth), markdown)
