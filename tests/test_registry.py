"""The operator registry (cpp/ops/operators.json) is complete and exact: every operator that exists in
the family folders (an <op>_api.cpp), in the library's C ABI (an aclnnXxxGetWorkspaceSize / aclnnXxx
pair), in tilegrad.__all__ or in tilegrad._core has an entry, and every entry exists in each of them;
each failure names the operator. The tests that cover every operator read the registry (see
tests/registry.py), so an operator with an entry is in them."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tilegrad
from tilegrad import _core, _paths, _registry, _runtime
from registry import FAMILIES, FLOAT_DTYPES, OPERATORS, SAMPLE, c_abi_tensors

ROOT = Path(__file__).resolve().parents[1]
OPS_DIR = ROOT / "cpp" / "ops"
# cpp/ is absent where tests/ runs against an installed wheel (scripts/check_wheel.sh copies tests/
# without it): the folder checks need the source tree.
needs_source_tree = pytest.mark.skipif(not OPS_DIR.is_dir(), reason="the source tree's cpp/ops is not here")


def _missing(have, want, what):
    """The message naming what `want` holds and `have` does not (empty when nothing is missing)."""
    gone = sorted(set(want) - set(have))
    return f"{what}: {gone}" if gone else ""


def test_entries_are_well_formed():
    names = [op["name"] for op in OPERATORS]
    assert len(names) == len(set(names)), f"operators.json names an operator twice: {names}"
    for op in OPERATORS:
        where = f"operators.json: {op['name']}"
        assert re.fullmatch(r"[a-z][a-z0-9_]*", op["name"]), where
        assert op["aclnn"] is None or re.fullmatch(r"aclnn[A-Z]\w*", op["aclnn"]), where
        assert op["dtypes"] and set(op["dtypes"]) <= set(FLOAT_DTYPES), f"{where}: dtypes {op['dtypes']}"
        assert (op["aclnn"] is None) == ("c_abi" not in op), f"{where}: c_abi goes with an aclnn name"
        assert op.get("torch"), f"{where}: no PyTorch equivalent (torch) for the docs' table"
        if "trace" in op:  # the operator its NumPy function launches: another entry of that function
            launched = {o["aclnn"] for o in OPERATORS if o["python"] == op["python"] and o is not op}
            assert op["trace"] in launched, f"{where}: trace {op['trace']!r} is not in {sorted(launched, key=str)}"
        if "c_abi" in op:
            inputs, outputs, written = c_abi_tensors(op)
            assert inputs and written, f"{where}: c_abi has no input or nothing written"
            for p in op["c_abi"]:
                samples = p.get("sample")
                for s in samples if isinstance(samples, list) else [samples]:
                    assert s is None or SAMPLE.match(s), f"{where}: c_abi sample {s!r}"
    for fam in FAMILIES:
        assert re.fullmatch(r"[a-z]+/[a-z0-9_]+", fam["family"]), fam["family"]


@needs_source_tree
def test_installed_registry_is_the_source_trees():
    source = OPS_DIR / "operators.json"
    assert Path(_registry.registry_file()).read_text() == source.read_text(), \
        "the installed registry is stale: reinstall (pip install --no-deps .)"


@needs_source_tree
def test_every_family_folder_is_registered():
    folders = {f"{p.parent.name}/{p.name}" for p in OPS_DIR.glob("*/*") if p.is_dir()}
    registered = {fam["family"] for fam in FAMILIES}
    assert not _missing(registered, folders, "family folders under cpp/ops without a registry family")
    assert not _missing(folders, registered, "registry families without a folder under cpp/ops")


@needs_source_tree
def test_no_family_includes_another_familys_files():
    # what two families share lives in cpp/core/ (docs/contributing.md), never in one of them
    include = re.compile(r'#include "ops/([^"]+)/[^/"]+"')
    crossings = []
    for fam in FAMILIES:
        for source in sorted((OPS_DIR / fam["family"]).iterdir()):
            if source.suffix in (".h", ".cpp", ".inc"):
                crossings += [f"{fam['family']}/{source.name} includes ops/{m}/"
                              for m in include.findall(source.read_text()) if m != fam["family"]]
    assert not crossings, crossings


@needs_source_tree
def test_every_api_file_is_an_operator_and_every_operator_has_one():
    on_disk = {f"{p.parent.parent.name}/{p.parent.name}/{p.name}" for p in OPS_DIR.glob("*/*/*_api.cpp")}
    registered = {f"{op['family']}/{op['api']}" for op in OPERATORS}
    assert not _missing(registered, on_disk, "operators in cpp/ops (<op>_api.cpp) without a registry entry")
    assert not _missing(on_disk, registered, "registry operators without their api file in their family folder")


def _exported_operators():
    out = subprocess.run(["nm", "-D", "--defined-only", tilegrad.get_library()], capture_output=True, text=True,
                         check=True).stdout
    symbols = {line.split()[-1] for line in out.splitlines() if line.split()}
    return {s[: -len("GetWorkspaceSize")] for s in symbols
            if re.fullmatch(r"aclnn[A-Z]\w*GetWorkspaceSize", s) and s[: -len("GetWorkspaceSize")] in symbols}


@pytest.mark.skipif(not shutil.which("nm"), reason="nm (binutils) not installed")
def test_every_c_abi_operator_is_registered():
    exported = _exported_operators()
    registered = {op["aclnn"] for op in OPERATORS if op["aclnn"]}
    assert not _missing(registered, exported, "C ABI operators (aclnnXxxGetWorkspaceSize + aclnnXxx) not registered")
    assert not _missing(exported, registered, "registered aclnn names libtilegrad.so does not export")


def _public_operator_functions():
    """tilegrad.__all__ without the runtime and install functions (tilegrad._runtime, tilegrad._paths)."""
    utilities = set(dir(_runtime)) | set(dir(_paths)) | {"__version__"}
    return {name for name in tilegrad.__all__ if name not in utilities}


def test_every_public_function_is_a_registered_operator_or_helper():
    public = _public_operator_functions()
    registered = {op["python"] for op in OPERATORS} | {h for fam in FAMILIES for h in fam.get("helpers", [])}
    assert not _missing(registered, public, "tilegrad.__all__ functions neither registered nor a family's helper")
    assert not _missing(public, registered, "registered Python functions missing from tilegrad.__all__")


def test_every_operator_has_its_binding():
    assert not _missing(dir(_core), [op["python"] for op in OPERATORS], "registered operators without tilegrad._core.<python>")


def test_every_c_abi_operator_has_its_cann_sample():
    """tests/cpp/CMakeLists.txt builds one per registered aclnn operator (and refuses to configure
    without it); this names the missing one without a C++ build."""
    cpp = Path(__file__).resolve().parent / "cpp"
    want = {cpp / op.get("cann_sample", f"vendor_style/test_aclnn_{op['name']}.cpp"): op["name"]
            for op in OPERATORS if op["aclnn"]}
    missing = sorted(name for path, name in want.items() if not path.is_file())
    assert not missing, f"registered aclnn operators without a CANN sample under tests/cpp: {missing}"
    strays = sorted(p.name for p in (cpp / "vendor_style").glob("test_aclnn_*.cpp") if p not in want)
    assert not strays, f"CANN samples of no registered operator: {strays}"


def test_every_family_has_its_operator_page():
    docs = Path(__file__).resolve().parents[1] / "docs" / "operators"
    missing = sorted(fam["family"] for fam in FAMILIES if not (docs / fam["page"]).is_file())
    assert not missing, f"families whose docs/operators page is missing: {missing}"


def test_python_m_tilegrad_lists_every_operator():
    out = subprocess.run([sys.executable, "-m", "tilegrad", "--operators"], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0].split() == ["python", "aclnn", "family", "dtypes"]
    rows = [line.split() for line in out[1:]]
    assert [r[0] for r in rows] == [f"tilegrad.{op['python']}" for op in OPERATORS]
    for row, op in zip(rows, OPERATORS):
        assert row[-2:] == [op["family"], ",".join(op["dtypes"])]
        assert (op["aclnn"] or "(tilegrad's own)").split() == row[1:-2]
