"""The C++ side, as a user gets it: configures tests/cpp as a standalone CMake project against the
INSTALLED package (find_package(tilegrad) with tilegrad_DIR = `python -m tilegrad --cmake-dir`),
builds it with cmake + ninja (installed by the `test` extra), and runs ctest: the vendor document's
unchanged aclnnSiluBackward sample (output checked against double precision), the C ABI runtime and
error-path programs (C), and the native C++ API program."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tilegrad as tg

HERE = Path(__file__).resolve().parent
CPP = HERE / "cpp"


def _tool(name):
    """The venv's tool first (pip install .[test] puts cmake and ninja next to the interpreter)."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    assert found, f"{name} not found: install the test extra (pip install '.[test]')"
    return found


def _run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert res.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{res.stdout}\n{res.stderr}"
    return res.stdout


@pytest.fixture(scope="module")
def cpp_build(tmp_path_factory):
    build = tmp_path_factory.mktemp("cpp-build")
    cmake, ninja = _tool("cmake"), _tool("ninja")
    cmake_dir = subprocess.run([sys.executable, "-m", "tilegrad", "--cmake-dir"], capture_output=True, text=True,
                               check=True).stdout.strip()
    env = dict(os.environ)
    env.pop("TILEGRAD_MAX_ISA", None)
    _run([cmake, "-S", str(CPP), "-B", str(build), "-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}",
          f"-Dtilegrad_DIR={cmake_dir}"], env=env)
    _run([cmake, "--build", str(build), "--parallel", "2"], env=env)
    return build, env


def test_configure_uses_the_installed_package(cpp_build):
    build, _ = cpp_build
    cache = (build / "CMakeCache.txt").read_text()
    assert f"tilegrad_DIR:UNINITIALIZED={tg.get_cmake_dir()}" in cache or f"tilegrad_DIR:PATH={tg.get_cmake_dir()}" in cache
    # the programs link the wheel's library, not a build tree's
    import re
    linked = set(re.findall(r"(/\S*libtilegrad\.so\S*)", (build / "build.ninja").read_text()))
    assert linked and {os.path.realpath(p) for p in linked} == {os.path.realpath(tg.get_library())}


def test_ctest_passes(cpp_build):
    build, env = cpp_build
    out = _run([_tool("ctest"), "--test-dir", str(build), "--output-on-failure"], env=env)
    # every program ctest lists ran and passed
    listed = _run([_tool("ctest"), "--test-dir", str(build), "-N"], env=env)
    registered = int(re.search(r"Total Tests: (\d+)", listed).group(1))
    assert registered >= 10 and f"100% tests passed out of {registered}" in out, out


def test_vendor_sample_output(cpp_build):
    """The sample prints gradInput for gradOutput = 1, self = 1..6 (checked exactly by ctest's
    checker too); also run it directly under every ISA cap."""
    build, env = cpp_build
    for cap in ("scalar", "avx2", "avx512"):
        out = _run([str(build / "vendor_sample_silu_backward")], env={**env, "TILEGRAD_MAX_ISA": cap})
        values = [float(line.split("is:")[1]) for line in out.splitlines() if line.startswith("out result[")]
        assert values == pytest.approx([0.927671, 1.090784, 1.088104, 1.052665, 1.026547, 1.012326], abs=1.5e-6)


def test_vendor_sample_is_the_documents_code():
    """Compiled unchanged: it includes only the vendor headers and knows nothing of tilegrad."""
    src = (CPP / "vendor_sample_silu_backward.cpp").read_text()
    assert "tilegrad" not in src.lower()
    includes = [line for line in src.splitlines() if line.startswith("#include")]
    assert includes == ['#include <iostream>', '#include <vector>', '#include "acl/acl.h"',
                        '#include "aclnnop/aclnn_silu_backward.h"']
    assert "aclnnSiluBackwardGetWorkspaceSize(gradOut, self, gradInput, &workspaceSize, &executor)" in src
