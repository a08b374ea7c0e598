"""Runtime settings and packaging: threads, the ISA cap (set_max_isa and TILEGRAD_MAX_ISA),
`python -m tilegrad`, installed paths, one library instance per process, concurrent calls from
Python threads, thread-count determinism."""

import ctypes
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import tilegrad as tg
from reference.silu import BF16, F16, F32, assert_silu_close

ISAS = ["scalar", "avx2", "avx512"]
AVAILABLE = ISAS[: ISAS.index(tg.detected_isa()) + 1]


def _pyproject_version() -> str:
    """The version as written in pyproject.toml, its one source (the build, the metadata and the
    library all report it)."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python < 3.11: the line CMakeLists.txt reads
        return re.search(r'^version = "([^"]+)"$', text, re.MULTILINE).group(1)
    return tomllib.loads(text)["project"]["version"]


VERSION = _pyproject_version()


def _python(code, env_extra=None, args=None):
    env = dict(os.environ)
    env.pop("TILEGRAD_MAX_ISA", None)
    env.update(env_extra or {})
    cmd = [sys.executable] + (args if args is not None else ["-c", code])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout


# ---- threads -----------------------------------------------------------------------------------

def test_num_threads_roundtrip(threads):
    for n in (1, 2, 3, 16):
        threads(n)
        assert tg.get_num_threads() == n
    with pytest.raises(ValueError) as info:
        tg.set_num_threads(0)
    assert str(info.value) == "set_num_threads: n must be >= 1, got 0" and info.value.code == 161002
    with pytest.raises(ValueError):
        tg.set_num_threads(-4)
    assert tg.get_num_threads() == 16  # a failed call changes nothing


def test_default_threads_follow_omp_num_threads():
    assert _python("import tilegrad as tg; print(tg.get_num_threads())", {"OMP_NUM_THREADS": "1"}).strip() == "1"
    assert _python("import tilegrad as tg; print(tg.get_num_threads())", {"OMP_NUM_THREADS": "3"}).strip() == "3"


@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["fp32", "fp16", "bf16"])
def test_bit_identical_across_thread_counts(isa, threads, dtype):
    rng = np.random.default_rng(5)
    n = 3 * 65536 + 77
    dy = rng.uniform(-2, 2, n).astype(dtype)
    x = (rng.standard_normal(n) * 5).astype(dtype)
    results = []
    for t in (1, 2, 3, 8):
        threads(t)
        results.append(tg.silu_backward(dy, x))
        # strided and broadcast variants exercise the packed path under several tiles
        results.append(tg.silu_backward(dy[::-2], x[::2]))
        results.append(tg.silu_backward(dy[:4096].reshape(64, 64)[:, :1], x[:4096].reshape(64, 64)))
    for k in range(3):
        for r in results[k::3][1:]:
            np.testing.assert_array_equal(r.view(np.uint16), results[k].view(np.uint16))


# ---- ISA cap -------------------------------------------------------------------------------------

def test_set_max_isa_and_active_isa():
    previous = tg.max_isa()
    try:
        for cap in ISAS:
            tg.set_max_isa(cap)
            assert tg.max_isa() == cap
            assert tg.active_isa() == ISAS[min(ISAS.index(cap), ISAS.index(tg.detected_isa()))]
        with pytest.raises(ValueError) as info:
            tg.set_max_isa("sse4")
        assert "set_max_isa: isa must be one of {scalar, avx2, avx512}, got 'sse4'" in str(info.value)
        assert info.value.code == 161002
        assert tg.max_isa() == "avx512"
    finally:
        tg.set_max_isa(previous)


def test_detected_isa_is_known():
    assert tg.detected_isa() in ISAS
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if " avx512f" in flags and " avx512bw" in flags:
        assert tg.detected_isa() == "avx512"
    elif " avx2" in flags and " fma" in flags:
        assert tg.detected_isa() == "avx2"


_ENV_PROBE = """
import numpy as np, sys, tilegrad as tg
x = np.linspace(-30, 30, 10007, dtype=np.float32)
dy = np.cos(x).astype(np.float32)
np.save(sys.argv[1], tg.silu_backward(dy, x))
print(tg.max_isa(), tg.active_isa())
"""


@pytest.mark.parametrize("cap", ["scalar", "avx2", "avx512", "bogus", ""])
def test_tilegrad_max_isa_environment(tmp_path, cap):
    """TILEGRAD_MAX_ISA caps the kernels in a fresh process; its results equal set_max_isa's here."""
    path = tmp_path / "r.npy"
    script = tmp_path / "probe.py"
    script.write_text(_ENV_PROBE)
    out = _python(None, {"TILEGRAD_MAX_ISA": cap}, [str(script), str(path)]).split()
    expect_cap = cap if cap in ISAS else "avx512"  # unknown or empty: no cap
    expect_active = ISAS[min(ISAS.index(expect_cap), ISAS.index(tg.detected_isa()))]
    assert out == [expect_cap, expect_active]
    previous = tg.max_isa()
    try:
        tg.set_max_isa(expect_cap)
        x = np.linspace(-30, 30, 10007, dtype=np.float32)
        here = tg.silu_backward(np.cos(x).astype(np.float32), x)
    finally:
        tg.set_max_isa(previous)
    np.testing.assert_array_equal(np.load(path).view(np.uint32), here.view(np.uint32))


def test_python_m_tilegrad_reports_env_cap():
    out = _python(None, {"TILEGRAD_MAX_ISA": "scalar"}, ["-m", "tilegrad"])
    assert "active ISA:   scalar (cap scalar" in out
    out = _python(None, {"TILEGRAD_MAX_ISA": "avx2"}, ["-m", "tilegrad"])
    assert f"active ISA:   {'avx2' if tg.detected_isa() != 'scalar' else 'scalar'} (cap avx2" in out


# ---- python -m tilegrad and installed paths ---------------------------------------------------------

def test_python_m_tilegrad_summary():
    out = _python(None, {"OMP_NUM_THREADS": "2"}, ["-m", "tilegrad"])
    lines = out.splitlines()
    assert lines[0] == f"tilegrad {tg.__version__}"
    assert f"detected ISA: {tg.detected_isa()}" in out
    assert "threads:      2" in out
    assert f"build:        tilegrad {VERSION}; compiler" in out and "no -ffast-math" in out
    assert f"cmake dir:    {tg.get_cmake_dir()}" in out
    assert "caches:       L1" in out


def test_python_m_tilegrad_paths():
    cmake_dir = _python(None, None, ["-m", "tilegrad", "--cmake-dir"]).strip()
    include = _python(None, None, ["-m", "tilegrad", "--include"]).strip()
    library = _python(None, None, ["-m", "tilegrad", "--library"]).strip()
    assert cmake_dir == tg.get_cmake_dir() and include == tg.get_include() and library == tg.get_library()
    assert os.path.isfile(os.path.join(cmake_dir, "tilegradConfig.cmake"))
    assert os.path.isfile(os.path.join(cmake_dir, "tilegradConfigVersion.cmake"))
    assert os.path.isfile(os.path.join(cmake_dir, "tilegradTargets.cmake"))
    for header in ("acl/acl.h", "acl/acl_base.h", "acl/acl_rt.h", "aclnn/aclnn_base.h",
                   "aclnnop/aclnn_silu_backward.h", "tilegrad/tilegrad.hpp", "tilegrad/silu_backward.hpp",
                   "tilegrad/tensor_view.hpp", "tilegrad/status.hpp", "tilegrad/runtime.hpp", "tilegrad/export.h"):
        assert os.path.isfile(os.path.join(include, header)), header
    assert os.path.isfile(library)
    res = subprocess.run([sys.executable, "-m", "tilegrad", "--include", "--library"], capture_output=True, text=True)
    assert res.returncode != 0 and "not allowed with argument" in res.stderr


def test_one_library_file_and_one_instance():
    """The wheel holds a single libtilegrad (no SOVERSION copies), and the Python module and a
    ctypes/dlopen user of get_library() share one loaded instance (one ISA cap, one set of executors)."""
    libdir = os.path.dirname(tg.get_library())
    assert sorted(f for f in os.listdir(libdir) if f.startswith("libtilegrad")) == ["libtilegrad.so"]
    ctypes.CDLL(tg.get_library())
    with open("/proc/self/maps") as f:
        mapped = {line.split()[-1] for line in f if "libtilegrad" in line}
    assert len(mapped) == 1 and os.path.realpath(next(iter(mapped))) == os.path.realpath(tg.get_library())


def test_build_info_and_version():
    info = tg.build_info()
    assert info.startswith(f"tilegrad {VERSION};") and "no -ffast-math" in info and "OpenMP" in info
    assert tg.__version__ == VERSION
    from tilegrad import _core
    p = _core.platform()
    assert set(p) == {"threads", "l1_bytes", "l2_bytes", "l3_bytes", "isa"}
    assert p["threads"] == tg.get_num_threads() and p["isa"] == tg.active_isa()
    assert p["l1_bytes"] > 0 and p["l2_bytes"] > 0 and 0 < p["l3_bytes"] <= 64 << 20
    for name in tg.__all__:
        assert hasattr(tg, name), name


# ---- concurrency ---------------------------------------------------------------------------------

def test_eight_python_threads_at_once(threads):
    """8 Python threads call silu_backward simultaneously (the GIL is released while kernels run,
    each call also running its own OpenMP tiles); every result equals the single-threaded one."""
    threads(2)
    rng = np.random.default_rng(8)
    jobs = []
    for k in range(8):
        dtype = [F32, F16, BF16][k % 3]
        n = 150000 + 977 * k
        dy = rng.uniform(-2, 2, n).astype(dtype)
        x = (rng.standard_normal(n) * 6).astype(dtype)
        if k % 2:
            dy, x = dy[::-1], x[::-1]
        jobs.append((dy, x, tg.silu_backward(dy, x)))
    barrier = threading.Barrier(8)
    results = [None] * 8
    errors = []

    def work(k):
        try:
            dy, x, _ = jobs[k]
            barrier.wait()
            out = None
            for _ in range(5):
                out = tg.silu_backward(dy, x)
                if k == 3:  # errors raised concurrently stay in their own thread
                    with pytest.raises(ValueError, match="do not broadcast"):
                        tg.silu_backward(dy[:10], x[:11])
            results[k] = out
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    for k, (dy, x, expected) in enumerate(jobs):
        np.testing.assert_array_equal(results[k].view(np.uint16), expected.view(np.uint16))
        assert_silu_close(results[k], dy, x)
