"""Issue 14: no crash, hang, overflow or silent truncation from any input. One test (or a table of
cases) per defect, each failing before its fix: thread-count bounds, overflow-checked workspace
sizes, embedding memory proportional to the indices (with bit-identical results), exact argument
types with messages naming the argument and value, MemoryError naming the operator, scalars where
0-d arrays are accepted, cache detection, and the TILEGRAD_MAX_ISA warning."""

import ctypes
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import ACLNN_ERR_PARAM_INVALID, ACLNN_SUCCESS, AclTensors, get_workspace_size, last_error
from acl_ctypes import lib as acl_lib
from reference.embedding import embedding_backward_ref

EMB = "aclnnEmbeddingDenseBackward"
F32 = np.float32
BF16 = ml_dtypes.bfloat16


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """Runs code in a fresh interpreter (process-wide settings such as OMP_NUM_THREADS)."""
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)


# ---- defect 1: thread count -------------------------------------------------------------------

@pytest.mark.parametrize("n", [1025, 50000, 100000, 2**31 - 1])
def test_set_num_threads_above_maximum_is_value_error(threads, n):
    threads(3)
    with pytest.raises(ValueError, match=rf"set_num_threads: n must be <= 1024, got {n}"):
        tg.set_num_threads(n)
    assert tg.get_num_threads() == 3


def test_set_num_threads_maximum_runs(threads):
    threads(1024)
    assert tg.get_num_threads() == 1024
    x = np.linspace(-3, 3, 4096, dtype=F32)
    np.testing.assert_array_equal(tg.silu_backward(np.ones_like(x), x),
                                  (tg.set_num_threads(1), tg.silu_backward(np.ones_like(x), x))[1])


def test_omp_num_threads_huge_is_capped_and_safe():
    code = (
        "import numpy as np, tilegrad as tg\n"
        "assert tg.get_num_threads() == 1024, tg.get_num_threads()\n"
        "x = np.random.default_rng(0).standard_normal((512, 4096)).astype(np.float32)\n"
        "t = np.zeros(512, np.int64)\n"
        "loss = tg.cross_entropy_loss(x, t)[0]\n"
        "r = tg.fused_linear_cross_entropy(np.ones((64, 32), np.float32), np.ones((100, 32), np.float32),"
        " np.zeros(64, np.int64))\n"
        "print('ok', float(loss), float(r[0]))\n")
    r = run_python(code, OMP_NUM_THREADS="100000")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("ok")


# ---- defect 2: workspace sizes overflow-checked -------------------------------------------------

def test_embedding_tiling_workspace_overflow_is_value_error():
    with pytest.raises(ValueError, match="aclnnEmbeddingDenseBackward: workspace .* overflows 64-bit sizes"):
        tg._core._embedding_dense_backward_tiling(2**57, 2**60, 1, 4, 4, True, 2)


def _huge_embedding(t, num_indices, num_weights):
    """Phase 1 of embedding backward over zero-stride indices/grad and a huge out (never launched)."""
    buf = np.zeros(16, np.int64)
    g = np.zeros(16, F32)
    idx = t.new(buf[:1], shape=[num_indices], strides=[0], offset=0, storage=[1])
    grad = t.new(g[:1], shape=[num_indices, 1], strides=[0, 1], offset=0, storage=[1])
    # out's described storage (4 * num_weights bytes) must not overlap the inputs: it starts above
    # both. Phase 1 never touches it.
    above = max(buf.ctypes.data, g.ctypes.data) + 4096
    shape, strides, storage = (ctypes.c_int64 * 2)(num_weights, 1), (ctypes.c_int64 * 2)(1, 1), (ctypes.c_int64 * 1)(num_weights)
    out = acl_lib.aclCreateTensor(shape, 2, 0, strides, 0, 2, storage, 1, ctypes.c_void_p(above))
    assert out, last_error()
    t._ptrs.append(out)
    return get_workspace_size(EMB, [grad, idx, ctypes.c_uint64(num_weights), ctypes.c_uint64(2**64 - 1),
                                    ctypes.c_bool(False), out])


def test_embedding_c_abi_workspace_overflow_is_161002():
    with AclTensors() as t:
        status, ws, ex = _huge_embedding(t, 2**57, 2**60)
        assert status == ACLNN_ERR_PARAM_INVALID, (status, ws)
        msg = last_error()  # aclGetRecentErrMsg clears the message when read: read it once
        assert "overflows 64-bit sizes" in msg and EMB in msg


def test_embedding_c_abi_huge_vocabulary_workspace_is_proportional_to_indices():
    # The case: numWeights = 2^60, 10 indices. The workspace must cover the launch's needs
    # (keys, offsets, sort pairs: 32 bytes per index plus scratch), not a wrapped size.
    with AclTensors() as t:
        status, ws, ex = _huge_embedding(t, 10, 2**60)
        assert status == ACLNN_SUCCESS, last_error()
        acl_lib.aclDestroyAclOpExecutor(ctypes.c_void_p(ex))
    tiling = tg._core._embedding_dense_backward_tiling(10, 2**60, 1, 4, 4, True, 2)
    assert tiling["sparse"] and ws == tiling["workspace_bytes"]
    assert 32 * 10 <= ws <= 1024


def test_cross_entropy_workspace_overflow_is_161002():
    rows = 2**59  # (rows, 0) logits and zero-stride targets: a per-row workspace of 24 * rows bytes
    x = np.zeros(1, F32)
    tgt = np.zeros(1, np.int64)
    loss = np.zeros((), F32)
    with AclTensors() as t:
        args = [t.new(x[:1], shape=[rows, 0], strides=[0, 1], offset=0, storage=[1]),
                t.new(tgt, shape=[rows], strides=[0], offset=0, storage=[1]), None, ctypes.c_char_p(b"mean"),
                ctypes.c_int64(-100), ctypes.c_double(0.0), ctypes.c_double(0.0), ctypes.c_bool(False),
                t.new(loss), t.new(x[:1], shape=[rows, 0], strides=[0, 1], offset=0, storage=[1]), None, None]
        status, ws, ex = get_workspace_size("aclnnCrossEntropyLoss", args)
        assert status == ACLNN_ERR_PARAM_INVALID, (status, ws)
        assert "aclnnCrossEntropyLoss: workspace per-row sums overflows 64-bit sizes" in last_error()


# ---- defect 4: embedding memory proportional to the indices, bit-identical ----------------------

def test_embedding_huge_vocabulary_workspace_is_small():
    t = tg._core._embedding_dense_backward_tiling(10, 2**26, 1, 4, 4, True, 2)
    assert t["sparse"] and t["workspace_bytes"] <= 1024
    dense = tg._core._embedding_dense_backward_tiling(10, 160, 1, 4, 4, True, 2)
    assert not dense["sparse"]


@pytest.mark.parametrize("dtype,out_dtype", [(F32, F32), (BF16, F32), (np.float16, BF16)])
@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_embedding_sparse_path_bit_identical_to_counting_sort(threads, dtype, out_dtype, scale, nthreads):
    threads(nthreads)
    rng = np.random.default_rng(7)
    L, D = 40, 37
    dense_rows = 16 * L  # the largest vocabulary still on the counting-sort path
    idx = rng.integers(0, 12, size=(5, 8)) * 53 % dense_rows  # repeats, spread over the rows
    idx.flat[3] = 0
    grad = rng.standard_normal((5, 8, D)).astype(dtype)
    for padding in (-1, int(idx.flat[0])):
        dense = tg.embedding_dense_backward(grad, idx, dense_rows, padding, scale,
                                            out=np.full((dense_rows, D), np.nan, out_dtype))
        sparse_out = np.full((dense_rows * 8, 2 * D), np.nan, out_dtype)[::-2, ::2]  # reversed, stepped
        sparse = tg.embedding_dense_backward(grad, idx, dense_rows * 4, padding, scale, out=sparse_out)
        assert tg._core._embedding_dense_backward_tiling(L, dense_rows * 4, D, 4, 4, False, nthreads)["sparse"]
        np.testing.assert_array_equal(np.ascontiguousarray(sparse[:dense_rows]).view(np.uint8), dense.view(np.uint8))
        assert not np.any(sparse[dense_rows:].astype(F32))
        # and both match the float64 definition
        ref, _ = embedding_backward_ref(grad, idx, dense_rows, padding, scale)
        np.testing.assert_allclose(dense.astype(np.float64), ref, rtol=2e-2, atol=1e-2)


def test_embedding_sparse_path_reports_lowest_bad_index():
    idx = np.array([3, 10**6, 5, -1])
    with pytest.raises(IndexError, match=r"indices\[1\] must be in \[0, numWeights\) = \[0, 100000\), got 1000000"):
        tg.embedding_dense_backward(np.ones((4, 2), F32), idx, 100000)


def test_embedding_huge_vocabulary_peak_memory():
    # 2^24 rows of one float: a 64 MiB output. The counting sort needed ~16 bytes per row more.
    code = (
        "import resource, numpy as np, tilegrad as tg\n"
        "tg.set_num_threads(1)\n"
        "out = np.empty((2**24, 1), np.float32)\n"
        "out[:] = 1\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "tg.embedding_dense_backward(np.ones((10, 1), 'f4'), np.arange(10), 2**24, out=out)\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "assert out[:10].sum() == 10 and out[10:].sum() == 0\n"
        "print((after - before) // 1024)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr[-2000:]
    assert int(r.stdout.split()[-1]) < 32, r.stdout  # MiB of growth (was > 256)


# ---- defects 5 and 6: exact argument types, clear exceptions -------------------------------------

G, I = np.ones((10, 1), F32), np.arange(10)
X, T = np.ones((2, 3), F32), np.zeros(2, np.int64)

BAD_ARGUMENTS = [
    # (call, exception, text the message must contain)
    (lambda: tg.embedding_dense_backward(G, I, 4.7), TypeError, "num_weights must be an int, got 4.7"),
    (lambda: tg.embedding_dense_backward(G, I, 10, padding_idx=2.5), TypeError, "padding_idx must be an int, got 2.5"),
    (lambda: tg.embedding_dense_backward(G, I, 10, scale_grad_by_freq="no"), TypeError,
     "scale_grad_by_freq must be a bool, got 'no'"),
    (lambda: tg.embedding_dense_backward(G, I, 10, scale_grad_by_freq=1), TypeError, "scale_grad_by_freq must be a bool"),
    (lambda: tg.embedding_dense_backward(G, I, "10"), TypeError, "num_weights must be an int, got '10'"),
    (lambda: tg.embedding_dense_backward(G, I, True), TypeError, "num_weights must be an int, got True"),
    (lambda: tg.embedding_dense_backward(G, I, -2**63 - 1), ValueError, "num_weights must be in"),
    (lambda: tg.embedding_dense_backward(G, I, 2**64), ValueError, "got 18446744073709551616"),
    (lambda: tg.embedding_dense_backward(G, I, 10, padding_idx=2**63), ValueError, "padding_idx must be in"),
    (lambda: tg.cross_entropy_loss(X, T, ignore_index=1.5), TypeError, "ignore_index must be an int, got 1.5"),
    (lambda: tg.cross_entropy_loss(X, T, ignore_index=2**63), ValueError,
     "ignore_index must be in [-9223372036854775808, 9223372036854775807], got 9223372036854775808"),
    (lambda: tg.cross_entropy_loss(X, T, reduction="mean\0x"), ValueError, "reduction must not contain NUL"),
    (lambda: tg.cross_entropy_loss(X, T, reduction=None), TypeError, "reduction must be a str, got None"),
    (lambda: tg.cross_entropy_loss(X, T, reduction=b"mean"), TypeError, "reduction must be a str"),
    (lambda: tg.cross_entropy_loss(X, T, label_smoothing="0.1"), TypeError, "label_smoothing must be a float, got '0.1'"),
    (lambda: tg.cross_entropy_loss(X, T, lse_square_scale_for_zloss=None), TypeError, "lse_square_scale_for_zloss"),
    (lambda: tg.cross_entropy_loss(X, T, return_zloss="yes"), TypeError, "return_zloss must be a bool"),
    (lambda: tg.cross_entropy_loss(X, T, label_smoothing=float("nan")), ValueError, "labelSmoothing must be in [0, 1]"),
    (lambda: tg.cross_entropy_loss_grad(np.float32(1), X, T, reduction="sum\0"), ValueError, "NUL"),
    (lambda: tg.cross_entropy_loss_grad(np.float32(1), X, T, ignore_index=np.float64(1)), TypeError, "ignore_index"),
    (lambda: tg.cross_entropy_loss_grad(np.float32(1), X, T, ignore_index=-2**63 - 1), ValueError, "ignore_index"),
    (lambda: tg.binary_cross_entropy_with_logits_backward(X, X, X, reduction="mean\0"), ValueError, "NUL"),
    (lambda: tg.binary_cross_entropy_with_logits_backward(X, X, X, reduction=2**63), ValueError, "reduction"),
    (lambda: tg.binary_cross_entropy_with_logits_backward(X, X, X, reduction=None), TypeError, "reduction"),
    (lambda: tg.set_num_threads(2.5), TypeError, "set_num_threads: n must be an int, got 2.5"),
    (lambda: tg.set_num_threads("3"), TypeError, "set_num_threads: n must be an int, got '3'"),
    (lambda: tg.set_num_threads(2**31), ValueError, "set_num_threads: n must be <= 1024, got 2147483648"),
    (lambda: tg.set_num_threads(-2**70), ValueError, "set_num_threads: n must be >= 1, got -1180591620717411303424"),
    (lambda: tg.set_num_threads(2**70), ValueError, "got 1180591620717411303424"),
    (lambda: tg.set_max_isa(None), TypeError, "set_max_isa: isa must be a str"),
    (lambda: tg.set_max_isa("avx2\0"), ValueError, "NUL"),
]


@pytest.mark.parametrize("case", range(len(BAD_ARGUMENTS)))
def test_bad_argument_is_named(threads, case):
    threads(2)
    call, exc, text = BAD_ARGUMENTS[case]
    with pytest.raises(exc) as info:
        call()
    assert text in str(info.value)
    assert "incompatible function arguments" not in str(info.value)
    assert tg.get_num_threads() == 2 and tg.max_isa() in ("scalar", "avx2", "avx512")


def test_numpy_integers_and_bools_accepted():
    a = tg.embedding_dense_backward(G, I, np.int32(10), np.int64(-1), np.bool_(True))
    b = tg.embedding_dense_backward(G, I, 10, -1, True)
    np.testing.assert_array_equal(a, b)
    a = tg.cross_entropy_loss(X, T, ignore_index=np.int16(-100), label_smoothing=np.float32(0.25), return_zloss=np.bool_(False))
    b = tg.cross_entropy_loss(X, T, ignore_index=-100, label_smoothing=0.25)
    np.testing.assert_array_equal(a[0], b[0])


# ---- MemoryError naming the operator and the size ----------------------------------------------

def test_impossible_output_allocation_names_operator_and_size():
    with pytest.raises(MemoryError, match=r"aclnnEmbeddingDenseBackward: out of memory: out of shape "
                                          r"\[4398046511104,1048576\] \(1\.8446744073709552e\+19 bytes\)"):
        tg.embedding_dense_backward(np.ones((1, 2**20), F32), np.zeros(1, np.int64), 2**42)
    with pytest.raises(MemoryError, match=r"aclnnEmbeddingDenseBackward: out of memory: out of shape \[1099511627776,1048576\]"):
        tg.embedding_dense_backward(np.ones((1, 2**20), F32), np.zeros(1, np.int64), 2**40)


def test_impossible_workspace_allocation_names_operator_and_size():
    # 2^40 zero-stride indices into one row: a 16 TiB counting-sort workspace that cannot exist.
    n = 2**40
    grad = np.broadcast_to(np.ones((1, 1), F32), (n, 1))
    idx = np.broadcast_to(np.zeros(1, np.int64), (n,))
    with pytest.raises(MemoryError, match=r"aclnnEmbeddingDenseBackward: out of memory \(workspace of "
                                          r"\d+ bytes could not be allocated\)") as info:
        tg.embedding_dense_backward(grad, idx, 1)
    assert info.value.code == 561000


# ---- defect 7: scalars wherever a 0-d array is accepted -----------------------------------------

def test_bce_backward_accepts_scalar_operands():
    x = np.linspace(-2, 2, 6, dtype=F32).reshape(2, 3)
    t = np.full((2, 3), 0.25, F32)
    ref = tg.binary_cross_entropy_with_logits_backward(np.array(1.5, F32), x, t, np.array(0.5, F32), np.array(2.0, F32))
    for g, w, pw in [(np.float32(1.5), 0.5, 2.0), (1.5, np.float16(0.5), np.float64(2.0)), (np.float64(1.5), 0.5, 2)]:
        np.testing.assert_array_equal(tg.binary_cross_entropy_with_logits_backward(g, x, t, w, pw), ref)
    # 0-d input and target as scalars too
    np.testing.assert_array_equal(tg.binary_cross_entropy_with_logits_backward(1.0, np.float32(0.5), np.float32(1.0)),
                                  tg.binary_cross_entropy_with_logits_backward(np.array(1.0, F32), np.array(0.5, F32),
                                                                               np.array(1.0, F32)))


def test_silu_backward_accepts_scalar_operands():
    x = np.linspace(-2, 2, 5).astype(BF16)
    np.testing.assert_array_equal(tg.silu_backward(2.0, x), tg.silu_backward(np.array(2.0, BF16), x))
    np.testing.assert_array_equal(tg.silu_backward(x, np.float32(0.5)), tg.silu_backward(x, np.array(0.5, BF16)))
    r = tg.silu_backward(1.0, 0.0)
    assert r.shape == () and r.dtype == F32 and float(r) == 0.5


def test_scalars_are_not_booleans_or_strings():
    x = np.zeros(3, F32)
    with pytest.raises(TypeError, match="grad_output must be a numpy.ndarray, got bool"):
        tg.binary_cross_entropy_with_logits_backward(True, x, x)
    with pytest.raises(TypeError, match="grad_output must be a numpy.ndarray, got str"):
        tg.silu_backward("1", x)


# ---- defect 8: cache detection ------------------------------------------------------------------

def _sysfs_cache(level):
    base = "/sys/devices/system/cpu/cpu0/cache"
    if not os.path.isdir(base):
        return None
    for entry in sorted(os.listdir(base)):
        d = os.path.join(base, entry)
        try:
            lv = int(open(os.path.join(d, "level")).read())
            ty = open(os.path.join(d, "type")).read().strip()
            size = open(os.path.join(d, "size")).read().strip()
        except (OSError, ValueError):
            continue
        if lv == level and ty != "Instruction":
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1], 1)
            return int(size.rstrip("KMG")) * mult
    return None


def test_platform_caches_never_exceed_sysfs():
    p = tg._core.platform()
    for level, key in ((1, "l1_bytes"), (2, "l2_bytes"), (3, "l3_bytes")):
        sysfs = _sysfs_cache(level)
        if sysfs:
            # cpuid and sysfs agree on an honest machine; where they differ, the smaller one wins.
            assert 0 < p[key] <= sysfs, (key, p[key], sysfs)
    l3 = _sysfs_cache(3)
    if l3:
        assert p["l3_bytes"] >= l3 // 2  # the one shared L3, not a fallback


def test_main_reports_detected_l3():
    r = subprocess.run([sys.executable, "-m", "tilegrad"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0
    l3 = _sysfs_cache(3)
    if l3 and "L3" in r.stdout:
        assert f"{l3 >> 20} MiB" in r.stdout or str(l3) in r.stdout, r.stdout


# ---- TILEGRAD_MAX_ISA=bogus ---------------------------------------------------------------------

def test_bogus_max_isa_environment_warns_naming_it():
    r = run_python("import warnings\nwarnings.simplefilter('error')\nimport tilegrad", TILEGRAD_MAX_ISA="bogus")
    assert r.returncode != 0
    assert "RuntimeWarning" in r.stderr and "TILEGRAD_MAX_ISA='bogus'" in r.stderr
    r = run_python("import tilegrad as tg; print(tg.max_isa())", TILEGRAD_MAX_ISA="bogus")
    assert r.returncode == 0 and r.stdout.strip() == "avx512"
    assert r.stderr.count("TILEGRAD_MAX_ISA='bogus'") == 1  # once, as a Python warning
    r = run_python("import tilegrad as tg; print(tg.max_isa())", TILEGRAD_MAX_ISA="avx2")
    assert r.returncode == 0 and r.stdout.strip() == "avx2" and "TILEGRAD_MAX_ISA" not in r.stderr
