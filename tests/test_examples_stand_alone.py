"""Every example can be copied alone: none imports another example (or anything else of the
repository's but the installed package), so a reader who takes one file takes all it needs."""

import ast
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = sorted(EXAMPLES.glob("*.py"))
REPOSITORY_FOLDERS = ("benchmarks", "tests", "scripts", "examples")


def imported_modules(path: Path):
    """The top-level names of every module `path` imports (anywhere in the file)."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_the_examples_are_found():
    assert {"train_lm.py", "train_lm_distributed.py", "torch_vocab_parallel.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_an_example_imports_no_sibling(script):
    siblings = {p.stem for p in SCRIPTS} | set(REPOSITORY_FOLDERS)
    assert not siblings & set(imported_modules(script)), script.name
    assert "sys.path.insert" not in script.read_text() and "sys.path.append" not in script.read_text()
