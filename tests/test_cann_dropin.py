"""CANN drop-in: programs written for the vendor's toolkit build unchanged against tilegrad, by the three
routes CANN users take (issue 13), and their numbers are right:

1. CMake ``find_package(tilegrad)`` + ``tilegrad::tilegrad`` (tests/cpp through test_cpp.py builds the
   same vendor-style programs that way, with include/aclnnop and include/aclnn on the include path);
2. the vendor repository's example line with ``ASCEND_HOME_PATH`` at ``python -m tilegrad --ascend-home``:
   ``g++ app.cpp -I $H/include -I $H/include/aclnnop -I $H/include/aclnn -L $H/lib64 -lopapi
   -lascendcl -lnnopbase``; the binary runs with no LD_LIBRARY_PATH;
3. the vendor's sample-project layout (tests/cpp/sample_project: run.sh + a C++11 CMakeLists using
   DDK_PATH / NPU_HOST_LIB and the stub folders).

The programs (tests/cpp/vendor_style) print their results; these are compared with SiLU backward in
float64 (NumPy) from the inputs as the program holds them (rounded to float16 / bfloat16). Also: the
headers compile as C99 and C++11, and op::fp16_t / op::bfloat16 / aclFloatToFloat16 round to nearest
even (against NumPy's float64 -> float16 and an exact bfloat16 rounding written here)."""

import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tilegrad
from reference.silu import silu_backward_f64

HERE = Path(__file__).resolve().parent
VENDOR_STYLE = HERE / "cpp" / "vendor_style"
SAMPLE_PROJECT = HERE / "cpp" / "sample_project"
LIBRARY_NAMES = ["ascendcl", "opapi", "nnopbase", "opapi_nn", "opapi_math", "cust_opapi", "acl_op_compiler"]
LIBRARY_DIRS = ["lib64", "runtime/lib64", "runtime/lib64/stub", "acllib/lib64", "acllib/lib64/stub", "atc/lib64",
                "atc/lib64/stub", "opp/vendors/customize/op_api/lib"]


def _run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert res.returncode == 0, f"{cmd} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    return res.stdout


def _clean_env(**extra):
    """The environment of a fresh shell: no library path, no toolkit variables (only what is passed)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "LIBRARY_PATH", "ASCEND_HOME_PATH", "ASCEND_INSTALL_PATH", "DDK_PATH",
                        "NPU_HOST_LIB", "TILEGRAD_MAX_ISA", "CPATH", "CPLUS_INCLUDE_PATH")}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def home() -> Path:
    out = _run([sys.executable, "-m", "tilegrad", "--ascend-home"])
    return Path(out.strip())


# ---- bfloat16 rounding of printed results --------------------------------------------------------

def bf16_round(x: float) -> float:
    """x (a float64) rounded to bfloat16, nearest-even, directly from the double (no float step):
    bfloat16 values and the midpoints between them are exact doubles, so comparisons are exact."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    a = abs(x)
    ulp = 2.0 ** (math.frexp(a)[1] - 1 - 7) if a >= 2.0 ** -126 else 2.0 ** -133
    lo = math.floor(a / ulp) * ulp
    mid = lo + ulp / 2
    r = lo if a < mid else lo + ulp if a > mid else (lo if (lo / ulp) % 2 == 0 else lo + ulp)
    if r >= 2.0 ** 128 - 2.0 ** 119:  # past the largest bfloat16's rounding range
        r = math.inf
    return math.copysign(r, x)


def bf16_bits(x: float) -> int:
    if math.isnan(x):
        return 0x7FC0
    with np.errstate(over="ignore"):
        return int(np.array(x, np.float32).view(np.uint32)) >> 16


def _results(out: str, prefix: str = ""):
    return [float(m.group(1)) for m in re.finditer(prefix + r"result\[\d+\] is: (\S+)", out)]


# ---- the toolkit prefix ------------------------------------------------------------------------------

def test_ascend_home_is_a_toolkit_inside_the_package(home):
    package = Path(tilegrad.get_library()).resolve().parent.parent
    assert home.is_dir() and package in home.resolve().parents
    for d in ("include/acl", "include/aclnn/opdev", "include/aclnnop", "runtime/include/acl", "atc/include",
              "opp/vendors/customize/op_api/include", "bin"):
        assert (home / d).is_dir(), d
    assert (home / "include/aclnnop/aclnn_silu_backward.h").is_file()
    assert (home / "opp/vendors/customize/op_api/include/aclnn_silu_backward.h").is_file()
    assert (home / "include/aclnn/opdev/fp16_t.h").is_file() and (home / "include/aclnn/opdev/bfloat16.h").is_file()


@pytest.mark.parametrize("folder", LIBRARY_DIRS)
def test_every_library_name_resolves_to_libtilegrad(home, folder):
    """Each is a linker script (a wheel cannot hold symlinks) naming the installed libtilegrad.so."""
    library = os.path.realpath(tilegrad.get_library())
    for name in LIBRARY_NAMES:
        text = (home / folder / f"lib{name}.so").read_text()
        assert re.search(r"INPUT\(\"?" + re.escape(library) + r"\"?\)", text), (folder, name, text)


def test_setenv_bash_exports_home_and_library_path(home):
    out = _run(["bash", "-c", f'source "{home}/bin/setenv.bash" && echo "$ASCEND_HOME_PATH" && '
                              'echo "$ASCEND_TOOLKIT_HOME" && echo "$LD_LIBRARY_PATH"'],
               env=_clean_env(LD_LIBRARY_PATH="/opt/keep"))
    ascend_home, toolkit_home, ld_path = out.splitlines()
    assert Path(ascend_home).resolve() == home.resolve() == Path(toolkit_home).resolve()
    dirs = ld_path.split(":")
    assert Path(dirs[0]).resolve() == Path(tilegrad.get_library()).resolve().parent and dirs[-1] == "/opt/keep"


def test_ascend_home_is_idempotent(home):
    again = _run([sys.executable, "-m", "tilegrad", "--ascend-home"]).strip()
    assert Path(again) == home


# ---- route 2: the vendor repository's g++ line --------------------------------------------------

def _gxx_vendor_line(home: Path, source: Path, exe: Path, extra_libs=(), std=None):
    """g++ app.cpp -I $H/include -I $H/include/aclnnop -I $H/include/aclnn -L $H/lib64 -lopapi -lascendcl -lnnopbase"""
    cmd = ["g++", str(source), "-I", f"{home}/include", "-I", f"{home}/include/aclnnop", "-I",
           f"{home}/include/aclnn", "-L", f"{home}/lib64", *[f"-l{n}" for n in extra_libs], "-lopapi", "-lascendcl",
           "-lnnopbase", "-o", str(exe)]
    if std:
        cmd.insert(1, f"-std={std}")
    _run(cmd, env=_clean_env(ASCEND_HOME_PATH=str(home)))


FP16_DY = [1, 1, 1, 1, 0.5, -2, 3.25, 1e-3]
FP16_SELF = [[1, 2, 3, 4, -1.5, 0.25, -6, 10], [0.5, -0.5, 7, -3, 2.5, 0, 1.75, -0.125]]


def check_fp16_program_output(out: str):
    """Three launches of one repeatable executor: original addresses, new input/output, originals again."""
    dy = np.array(FP16_DY, np.float16).astype(np.float64)
    for round_, self_values in ((0, FP16_SELF[0]), (1, FP16_SELF[1]), (2, FP16_SELF[0])):
        got = np.array(_results(out, prefix=f"round {round_} "))
        x = np.array(self_values, np.float16).astype(np.float64)
        want = silu_backward_f64(dy, x)
        assert got.shape == (8,), out
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-7, err_msg=f"round {round_}")
        # the output is float16: every printed value (9 significant digits) is one
        np.testing.assert_allclose(np.array(got, np.float16).astype(np.float64), got, rtol=1e-8, atol=0)


@pytest.mark.parametrize("std", [None, "c++11"])
def test_vendor_line_fp16_repeatable_executor(home, tmp_path, std):
    exe = tmp_path / "silu_backward_fp16"
    _gxx_vendor_line(home, VENDOR_STYLE / "silu_backward_fp16.cpp", exe, std=std)
    needed = _run(["readelf", "-d", str(exe)]) if shutil.which("readelf") else ""
    if needed:
        assert os.path.realpath(tilegrad.get_library()) in needed  # recorded by path: no LD_LIBRARY_PATH needed
    check_fp16_program_output(_run([str(exe)], env=_clean_env(), cwd=tmp_path))


def test_vendor_line_bf16_wider_runtime(home, tmp_path):
    """Also links opapi_nn and opapi_math, as some of the vendor's examples do."""
    exe = tmp_path / "runtime_bf16"
    _gxx_vendor_line(home, VENDOR_STYLE / "runtime_bf16.cpp", exe, extra_libs=("opapi_nn", "opapi_math"))
    out = _run([str(exe)], env=_clean_env(), cwd=tmp_path)
    dy = np.array([bf16_round(v) for v in [1, 1, 1, -1, 0.5, 2]])
    x = np.array([bf16_round(v) for v in [1, 2, 3, -0.75, 5, -2.5]])
    got = np.array(_results(out))
    np.testing.assert_allclose(got, silu_backward_f64(dy, x), rtol=8e-3, atol=1e-7)
    np.testing.assert_allclose([bf16_round(v) for v in got], got, rtol=1e-8, atol=0)  # bfloat16 outputs


# ---- route 3: the sample-project layout --------------------------------------------------------

@pytest.mark.parametrize("variable", ["ASCEND_INSTALL_PATH", "ASCEND_HOME_PATH"])
def test_sample_project_run_sh(home, tmp_path, variable):
    project = tmp_path / "project"
    shutil.copytree(SAMPLE_PROJECT, project)
    shutil.copy(VENDOR_STYLE / "silu_backward_fp16.cpp", project / "src" / "main.cpp")
    cmake_dir = str(Path(shutil.which("cmake") or "cmake").parent)
    env = _clean_env(**{variable: str(home)})
    env["PATH"] = cmake_dir + os.pathsep + env.get("PATH", "")
    out = _run(["bash", "run.sh"], cwd=project, env=env)
    flags = (project / "build" / "CMakeFiles" / "opapi_test.dir" / "flags.make").read_text()
    assert "-std=c++11" in flags
    check_fp16_program_output(out)


# ---- headers -----------------------------------------------------------------------------------

def all_headers(home: Path):
    """Every C header of the prefix: acl/*.h, aclnn/aclnn_base.h and each operator's aclnnop/*.h."""
    ops = sorted((home / "include" / "aclnnop").glob("*.h"))
    assert len(ops) >= 8
    return ["acl/acl.h", "acl/acl_base.h", "acl/acl_rt.h", "aclnn/aclnn_base.h"] + [f"aclnnop/{p.name}" for p in ops]


def test_headers_compile_as_c99(home, tmp_path):
    """The program includes the headers it knows; every operator header is compiled as C99 as well."""
    src = tmp_path / "all.c"
    src.write_text("".join(f'#include "{h}"\n' for h in all_headers(home)) + "int main(void) { return 0; }\n")
    _run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", str(src),
          "-I", f"{home}/include"])
    exe = tmp_path / "c99"
    _run(["gcc", "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", str(VENDOR_STYLE / "c_headers_c99.c"),
          "-I", f"{home}/include", "-L", f"{home}/lib64", "-lascendcl", "-o", str(exe)])
    assert _run([str(exe)], env=_clean_env()).strip() == "c_headers_c99: ok"


@pytest.mark.parametrize("std", ["c++11", "c++14", "c++17", "c++20"])
def test_headers_compile_as_cxx(home, tmp_path, std):
    src = tmp_path / "all.cpp"
    headers = all_headers(home) + ["aclnn/opdev/fp16_t.h", "aclnn/opdev/bfloat16.h"]
    src.write_text("".join(f'#include "{h}"\n' for h in headers)
                   + '#include "aclnn_silu_backward.h"\n#include "opdev/fp16_t.h"\nint main() { return 0; }\n')
    _run(["g++", f"-std={std}", "-pedantic", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", str(src),
          "-I", f"{home}/include", "-I", f"{home}/include/aclnnop", "-I", f"{home}/include/aclnn"])


# ---- fp16_t / bfloat16 / aclFloatToFloat16 rounding ----------------------------------------------------

def _rounding_inputs():
    rng = np.random.default_rng(13)
    edge = [0.0, -0.0, 1.0, -1.0, 0.1, 1 / 3, 65504.0, 65519.99, 65520.0, 1e6, -1e6, 2.0 ** -14, 2.0 ** -24,
            2.0 ** -25, 2.0 ** -25 * (1 + 2 ** -30), 3 * 2.0 ** -26, 1e-8, 2.0 ** -126, 2.0 ** -133, 2.0 ** -134,
            3.3895313892515355e38, 3.3961e38, 1e39, float("inf"), float("-inf"), float("nan"),
            1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
            # double-rounding traps: a float step would land exactly on a tie
            1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -8 + 2.0 ** -40, -(1 + 2.0 ** -11 + 2.0 ** -40)]
    spread = (rng.standard_normal(300) * 10.0 ** rng.integers(-9, 6, 300)).tolist()
    halfway = [(k + 0.5) * 2.0 ** -10 + 1 for k in range(0, 64)] + [(k + 0.5) * 2.0 ** -7 + 1 for k in range(0, 64)]
    return edge + spread + halfway


@pytest.fixture(scope="module")
def rounding_program(home, tmp_path_factory):
    exe = tmp_path_factory.mktemp("rounding") / "opdev_rounding"
    _gxx_vendor_line(home, VENDOR_STYLE / "opdev_rounding.cpp", exe, std="c++11")
    return exe


def test_fp16_t_bfloat16_and_aclFloatToFloat16_round_to_nearest_even(rounding_program):
    values = _rounding_inputs()
    out = _run([str(rounding_program)], input="".join(f"{float(v).hex()}\n" for v in values), env=_clean_env())
    lines = out.splitlines()
    assert len(lines) == len(values) + 1
    with np.errstate(over="ignore", invalid="ignore"):
        for v, line in zip(values, lines):
            h, b, hf, bf, h_back, b_back, acl_h = line.split()
            f = np.float32(v)
            want_h = int(np.array(v, np.float64).astype(np.float16).view(np.uint16))
            want_hf = int(np.array(f).astype(np.float16).view(np.uint16))
            if math.isnan(v):  # any quiet NaN
                assert int(h, 16) & 0x7E00 == 0x7E00 and int(hf, 16) & 0x7E00 == 0x7E00 and int(acl_h, 16) & 0x7E00 == 0x7E00
                assert int(b, 16) & 0x7FC0 == 0x7FC0 and int(bf, 16) & 0x7FC0 == 0x7FC0
                continue
            assert int(h, 16) == want_h, (v, line)
            assert int(hf, 16) == want_hf == int(acl_h, 16), (v, line)
            assert int(b, 16) == bf16_bits(bf16_round(v)), (v, line)
            assert int(bf, 16) == bf16_bits(bf16_round(float(f))), (v, line)
            assert float.fromhex(h_back) == float(np.array(want_h, np.uint16).view(np.float16)), (v, line)
            assert float.fromhex(b_back) == bf16_round(v), (v, line)
    ints = lines[-1].split()
    assert ints[0] == "ints"
    assert [int(x, 16) for x in ints[1:]] == [0x4200, 0x7C00, 0xC000, 0x4300, 0x40E0]


def test_read_only_package_gets_a_prefix_in_the_user_cache(tmp_path, monkeypatch):
    """When the installed package cannot be written, --ascend-home hands out a copy in the user's cache
    whose libraries name the same libtilegrad.so and whose setenv.bash finds it."""
    from tilegrad import _paths

    real = _paths._point_prefix_libraries_at
    installed = os.path.join(_paths._HERE, "ascend")

    def refuse_inside_package(home, library):
        if os.path.realpath(home) == os.path.realpath(installed):
            raise PermissionError(13, "read-only", home)
        real(home, library)

    monkeypatch.setattr(_paths, "_point_prefix_libraries_at", refuse_inside_package)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = Path(_paths.get_ascend_home())
    assert tmp_path in home.parents
    library = os.path.realpath(tilegrad.get_library())
    assert library in (home / "lib64" / "libascendcl.so").read_text()
    out = _run(["bash", "-c", f'source "{home}/bin/setenv.bash" && echo "$LD_LIBRARY_PATH"'], env=_clean_env())
    assert Path(out.strip()).resolve() == Path(library).parent
    assert Path(_paths.get_ascend_home()) == home  # reused, not copied again


def test_vendor_line_repeatable_executor_over_tensors_without_data(home, tmp_path):
    """The vendor's aclSetInputTensorAddr sample flow: tensors created with nullptr data, addresses
    given before each launch of one repeatable executor."""
    exe = tmp_path / "repeatable_without_data"
    _gxx_vendor_line(home, VENDOR_STYLE / "repeatable_without_data.cpp", exe, std="c++11")
    out = _run([str(exe)], env=_clean_env(), cwd=tmp_path)
    for step in range(2):
        got = np.array(_results(out, prefix=f"step {step} "))
        i = np.arange(6)
        dy = (0.5 * (i + 1) * (step + 1)).astype(np.float32).astype(np.float64)
        x = (-2.5 + i + 0.25 * step).astype(np.float32).astype(np.float64)
        np.testing.assert_allclose(got, silu_backward_f64(dy, x), rtol=2e-6, atol=1e-7)


# ---- the docs' list of exported symbols (docs/cann.md) -------------------------------------------------------

def test_docs_list_every_exported_acl_symbol_with_its_status():
    """docs/cann.md's symbol table is what scripts/cann_symbols.py makes from nm -D of the installed
    library: every acl* / aclnn* export is listed once, with a status, and nothing else is."""
    if not shutil.which("nm"):
        pytest.skip("nm (binutils) not installed")
    sys.path.insert(0, str(HERE.parent / "scripts"))
    try:
        import cann_symbols
    finally:
        sys.path.pop(0)
    exported = cann_symbols.exported_acl_symbols(tilegrad.get_library())
    assert len(exported) >= 100 and "aclrtLaunchCallback" in exported and "aclSetDynamicTensorAddr" in exported
    readme = cann_symbols.readme_table((HERE.parent / "docs" / "cann.md").read_text())
    listed = re.findall(r"`(acl\w+)`", readme)
    assert sorted(listed) == exported, "docs/cann.md out of date: python scripts/cann_symbols.py --write docs/cann.md"
    for row in [line for line in readme.splitlines() if line.startswith("| ") and "`acl" in line]:
        area, status, symbols = [cell.strip() for cell in row.strip("|").split("|")]
        assert status.startswith(("implemented", "not supported: ACL_ERROR")), row
    assert readme == cann_symbols.table(exported)
