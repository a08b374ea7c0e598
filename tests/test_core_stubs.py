"""python/tilegrad/_core.pyi against the compiled module: every function the stub declares exists in
tilegrad._core with the same parameter names, in the same order, the same ones optional (the bindings'
py::arg names: keyword calls work), and every public function of the module has a stub."""

import ast
import pathlib

import pytest

import tilegrad
from tilegrad import _core

STUB = pathlib.Path(tilegrad.__file__).with_name("_core.pyi")


def _stub_signatures():
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            args = node.args.args
            n_defaults = len(node.args.defaults)
            out[node.name] = [(a.arg, i >= len(args) - n_defaults) for i, a in enumerate(args)]
    return out


def _split_top_level(text):
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def _binding_signature(fn):
    """(name, optional) per parameter, from pybind11's signature line `name(a: T, b: U = d) -> R`."""
    first = fn.__doc__.splitlines()[0]
    start = first.index("(")
    depth = 0
    for end in range(start, len(first)):
        depth += first[end] in "([{"
        depth -= first[end] in ")]}"
        if depth == 0:
            break
    params = _split_top_level(first[start + 1:end])
    return [(p.split(":")[0].strip(), "=" in p) for p in params]


STUBS = _stub_signatures()


@pytest.mark.parametrize("name", sorted(STUBS))
def test_stub_matches_binding(name):
    assert hasattr(_core, name), f"_core.pyi declares {name}, which tilegrad._core does not have"
    assert _binding_signature(getattr(_core, name)) == STUBS[name]


def test_every_function_has_a_stub():
    functions = {n for n in dir(_core) if not n.startswith("__") and callable(getattr(_core, n))
                 and type(getattr(_core, n)).__name__ == "builtin_function_or_method"}
    assert functions - set(STUBS) == set()
