"""tilegrad.embedding_dense_backward through Python: accuracy against the float64 NumPy reference
(reference/embedding.py, written from specification section 4), determinism, strides, errors, and a torch
cross-check. The C ABI: test_embedding_dense_backward_c_abi.py; the tiling: ..._tiling.py."""

import re

import numpy as np
import pytest

import tilegrad as tg
from reference.embedding import BF16
from reference.embedding import assert_embedding_close as check

OP = "aclnnEmbeddingDenseBackward"
FLOATS = [np.dtype(np.float32), np.dtype(np.float16), BF16]
INDEX_DTYPES = [np.int64, np.int32, np.int16, np.int8, np.uint8, np.bool_]
# The C ABI truncates float indices (the vendor contract, tests/test_embedding_dense_backward_c_abi.py);
# from Python they are refused, as torch refuses them.
FLOAT_INDEX_DTYPES = [np.float32, np.float16, np.float64, BF16]


def rand_grad(rng, shape, dtype):
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.itemsize == 4 else np.uint16)


# ---------------------------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gdt", FLOATS, ids=str)
@pytest.mark.parametrize("odt", FLOATS, ids=str)
@pytest.mark.parametrize("scale", [False, True])
def test_dtypes_match_reference(isa, gdt, odt, scale):
    rng = np.random.default_rng(1)
    v, d = 37, 53
    idx = rng.integers(0, v, size=(6, 25))
    grad = rand_grad(rng, (6, 25, d), gdt)
    out = np.full((v, d), np.nan, odt)
    res = tg.embedding_dense_backward(grad, idx, v, 5, scale, out=out)
    assert res is out
    check(out, grad, idx, v, 5, scale)


@pytest.mark.parametrize("d", [1, 3, 15, 16, 17, 64, 100, 129, 300, 1030])
@pytest.mark.parametrize("gdt", FLOATS, ids=str)
def test_dims(isa, d, gdt):
    rng = np.random.default_rng(d)
    v = 23
    idx = rng.integers(0, v, size=90)
    grad = rand_grad(rng, (90, d), gdt)
    check(tg.embedding_dense_backward(grad, idx, v, scale_grad_by_freq=True), grad, idx, v, -1, True)
    check(tg.embedding_dense_backward(grad, idx, v), grad, idx, v)


@pytest.mark.parametrize("idt", INDEX_DTYPES, ids=lambda t: np.dtype(t).name)
def test_index_dtypes(idt):
    rng = np.random.default_rng(2)
    v, d = 2 if idt is np.bool_ else 40, 19
    kind = np.dtype(idt).kind
    if kind == "b":
        idx = rng.integers(0, 2, size=64).astype(bool)
    else:
        idx = rng.integers(0, v, size=64).astype(idt)
    grad = rand_grad(rng, (idx.size, d), np.float32)
    for scale in (False, True):
        check(tg.embedding_dense_backward(grad, idx, v, 1, scale), grad, idx, v, 1, scale)


@pytest.mark.parametrize("idt", FLOAT_INDEX_DTYPES, ids=lambda t: np.dtype(t).name)
def test_float_indices_are_refused_not_truncated(idt):
    grad = np.ones((3, 4), np.float32)
    with pytest.raises(TypeError, match=f"indices must be an integer or bool array .*got {np.dtype(idt).name}"):
        tg.embedding_dense_backward(grad, np.array([0.7, 1.0, 2.0]).astype(idt), 5)


@pytest.mark.parametrize("grad_rank", range(2, 9))
def test_grad_ranks(grad_rank):
    rng = np.random.default_rng(grad_rank)
    lead = [2, 3, 1, 2, 1, 2, 1][: grad_rank - 1]
    d, v = 7, 9
    grad = rand_grad(rng, lead + [d], np.float32)
    n = int(np.prod(lead))
    # indices of the same leading shape, flat, and of another shape with the same count
    for ishape in (lead, [n], [n, 1], [1] * 7 + [n]):
        idx = rng.integers(0, v, size=ishape)
        check(tg.embedding_dense_backward(grad, idx, v, 0, True), grad, idx, v, 0, True)


@pytest.mark.parametrize("padding", [0, 3, 9, -1, -5, 10, 11, 2**40, -(2**62), None])
def test_padding(padding):
    rng = np.random.default_rng(3)
    v = 10
    idx = np.array([3, 0, 9, 3, 3, 5, 0, 9])
    grad = rand_grad(rng, (idx.size, 12), np.float32)
    out = tg.embedding_dense_backward(grad, idx, v, padding)
    effective = padding if padding is not None and 0 <= padding < v else -1
    check(out, grad, idx, v, effective)
    if effective >= 0:
        assert np.all(out[effective] == 0)
    untouched = np.setdiff1d(np.arange(v), idx)
    assert np.all(out[untouched] == 0)


def skewed(rng, n, v):
    return np.minimum(rng.zipf(1.3, size=n) - 1, v - 1)


@pytest.mark.parametrize("pattern", ["same", "distinct", "skewed", "two"])
@pytest.mark.parametrize("scale", [False, True])
def test_duplicates(threads, pattern, scale):
    threads(2)
    rng = np.random.default_rng(4)
    v, n, d = 3000, 20000, 24   # n large enough for two sort tiles
    idx = {"same": np.full(n, 7), "distinct": rng.permutation(v)[: min(n, v)],
           "skewed": skewed(rng, n, v), "two": np.tile([v - 1, 0], n // 2)}[pattern]
    for gdt in (np.float32, BF16):
        grad = rand_grad(rng, (idx.size, d), gdt)
        out = tg.embedding_dense_backward(grad, idx, v, 0, scale)
        check(out, grad, idx, v, 0, scale)


def test_bf16_accumulates_in_fp32():
    """4096 repeats of one row: one rounding (fp32 sum) vs rounding after every addition."""
    rng = np.random.default_rng(5)
    n, d = 4096, 64
    grad = rng.uniform(0.5, 1.5, size=(n, d)).astype(BF16)
    out = tg.embedding_dense_backward(grad, np.zeros(n, np.int64), 1)
    exact = grad.astype(np.float64).sum(0)
    rel = np.max(np.abs(out.astype(np.float64)[0] - exact) / np.abs(exact))
    assert rel <= 2.0**-8  # one bf16 rounding of a sum that fp32 holds to ~1e-4
    # Accumulating in bf16 loses far more (what rounding after every add gives).
    acc = np.zeros(d, BF16)
    for i in range(n):
        acc = (acc.astype(np.float32) + grad[i].astype(np.float32)).astype(BF16)
    assert np.max(np.abs(acc.astype(np.float64) - exact) / np.abs(exact)) > 10 * rel


def test_in_order_fp32_sum_bit_exact(isa):
    """Each row is the fp32 sum in index order from +0, divided in fp32, rounded once."""
    rng = np.random.default_rng(6)
    v, d, n = 50, 33, 700
    idx = skewed(rng, n, v)
    grad = (rng.standard_normal((n, d)) * np.exp(rng.uniform(-8, 8, size=(n, 1)))).astype(np.float32)
    acc = np.zeros((v, d), np.float32)
    np.add.at(acc, idx, grad)  # unbuffered, in index order, in float32
    counts = np.bincount(idx, minlength=v).astype(np.float32)
    scaled = acc.copy()
    hit = counts > 0
    scaled[hit] = acc[hit] / counts[hit, None]
    for scale, expect in ((False, acc), (True, scaled)):
        for odt in FLOATS:
            out = tg.embedding_dense_backward(grad, idx, v, -1, scale, out=np.empty((v, d), odt))
            np.testing.assert_array_equal(bits(out), bits(expect.astype(odt)))


def test_isa_levels_bit_identical():
    rng = np.random.default_rng(7)
    v, d, n = 200, 77, 3000
    idx = skewed(rng, n, v)
    grad = rand_grad(rng, (n, d), np.float16)
    prev = tg.max_isa()
    results = []
    try:
        for level in ("scalar", "avx2", "avx512"):
            tg.set_max_isa(level)
            results.append(tg.embedding_dense_backward(grad, idx, v, 3, True, out=np.empty((v, d), BF16)))
    finally:
        tg.set_max_isa(prev)
    for r in results[1:]:
        np.testing.assert_array_equal(bits(r), bits(results[0]))


@pytest.mark.parametrize("d", [130, 1000])
@pytest.mark.parametrize("out_kind", ["contiguous", "offset", "inner stride 2"])
def test_dominant_row_column_stripes(threads, d, out_kind):
    """One row with most of the indices: the threads split its columns; same bits as one thread."""
    rng = np.random.default_rng(13)
    v, n = 400, 3000
    idx = np.where(rng.random(n) < 0.8, 7, rng.integers(0, v, size=n))
    grad = rand_grad(rng, (n, d), np.float32)
    res = []
    for t in (1, 2, 3):
        threads(t)
        if out_kind == "contiguous":
            out = np.empty((v, d), BF16)
        elif out_kind == "offset":
            out = np.empty(v * d + 3, BF16)[3:].reshape(v, d)
        else:
            out = np.empty((v, 2 * d), BF16)[:, ::2]
        res.append(tg.embedding_dense_backward(grad, idx, v, 3, True, out=out))
    for r in res[1:]:
        np.testing.assert_array_equal(bits(r), bits(res[0]))
    check(res[0], grad, idx, v, 3, True)


@pytest.mark.parametrize("gdt", [np.float32, BF16], ids=str)
def test_thread_count_bit_identical(threads, gdt):
    rng = np.random.default_rng(8)
    v, d, n = 5000, 70, 50000
    idx = skewed(rng, n, v)
    grad = rand_grad(rng, (n, d), gdt)
    res = []
    for t in (1, 2):
        threads(t)
        res.append(tg.embedding_dense_backward(grad, idx, v, 2, True))
    np.testing.assert_array_equal(bits(res[0]), bits(res[1]))
    check(res[0], grad, idx, v, 2, True)


# ---------------------------------------------------------------------------------------------
# Strides
# ---------------------------------------------------------------------------------------------

def test_strided_inputs_and_outputs(isa):
    rng = np.random.default_rng(9)
    v, d = 31, 40
    base_idx = rng.integers(0, v, size=(12, 10))
    base_grad = rand_grad(rng, (12, 10, 2 * d), np.float32)
    cases = {
        "grad inner stride 2": (base_grad[:, :, ::2], base_idx),
        "grad negative": (base_grad[::-1, :, d:], base_idx),
        "grad last dim reversed": (base_grad[:, :, ::-1][:, :, 3:d + 3], base_idx),
        "grad leading not collapsible": (base_grad[:, ::2, :d], base_idx[:, ::2]),
        "grad transposed": (np.transpose(base_grad[:, :, :d], (1, 0, 2)), base_idx.T),
        "indices strided": (base_grad[::3, :, :d], base_idx[::3, ::-1].copy()[:, ::-1]),
        "indices stride 0": (base_grad[:1, :, :d], np.broadcast_to(base_idx[:1, :1], (1, 10))),
    }
    outs = {
        "contiguous": lambda dt: np.empty((v, d), dt),
        "row gap": lambda dt: np.empty((2 * v, d), dt)[::2],
        "inner stride 2": lambda dt: np.empty((v, 2 * d), dt)[:, ::2],
        "rows reversed": lambda dt: np.empty((v, d), dt)[::-1],
        "transposed": lambda dt: np.empty((d, v), dt).T,
    }
    for name, (grad, idx) in cases.items():
        for oname, make in outs.items():
            for odt in (np.dtype(np.float32), BF16):
                out = make(odt)
                out[...] = np.array(np.nan).astype(odt)
                tg.embedding_dense_backward(grad, idx, v, 4, True, out=out)
                check(out, grad, idx, v, 4, True)


@pytest.mark.parametrize("odt,v,offset", [(np.float32, 140000, 0), (np.float32, 140000, 1), (np.float32, 140000, 3),
                                          (BF16, 270000, 0), (BF16, 270000, 5)], ids=str)
def test_large_output_streaming_alignment(odt, v, offset):
    """Outputs larger than any last-level cache use non-temporal stores on whole lines only; rows at
    every alignment must still get exactly the in-order fp32 sum."""
    rng = np.random.default_rng(12)
    d, n = 136, 3000
    idx = np.concatenate([rng.integers(0, v, size=n - 40), np.arange(40) % 3])
    grad = rand_grad(rng, (n, d), np.float32)
    buf = np.empty(v * d + offset, odt)
    out = buf[offset:].reshape(v, d)
    tg.embedding_dense_backward(grad, idx, v, out=out)
    hit = np.unique(idx)
    acc = np.zeros((hit.size, d), np.float32)
    np.add.at(acc, np.searchsorted(hit, idx), grad)
    np.testing.assert_array_equal(bits(out[hit]), bits(acc.astype(odt)))
    mask = np.ones(v, bool)
    mask[hit] = False
    assert not np.any(out[mask].view(np.uint16 if out.itemsize == 2 else np.uint32))


# ---------------------------------------------------------------------------------------------
# Empty tensors
# ---------------------------------------------------------------------------------------------

def test_empty():
    # No indices: every row zero (output written).
    out = np.full((6, 4), 7.0, np.float32)
    tg.embedding_dense_backward(np.zeros((0, 4), np.float32), np.zeros(0, np.int64), 6, out=out)
    assert np.all(out == 0)
    out = np.full((6, 4), 7.0, np.float32)
    tg.embedding_dense_backward(np.zeros((3, 0, 4), np.float32), np.zeros((3, 0), np.int64), 6, out=out)
    assert np.all(out == 0)
    # No columns / no rows: nothing to write; indices still checked.
    assert tg.embedding_dense_backward(np.zeros((3, 0), np.float32), np.array([0, 1, 2]), 3).shape == (3, 0)
    assert tg.embedding_dense_backward(np.zeros((0, 5), np.float32), np.zeros(0, np.int32), 0).shape == (0, 5)
    with pytest.raises(IndexError, match=r"indices\[1\] must be in \[0, numWeights\) = \[0, 3\), got 3"):
        tg.embedding_dense_backward(np.zeros((2, 0), np.float32), np.array([0, 3]), 3)
    with pytest.raises(IndexError, match=r"= \[0, 0\), got 0"):
        tg.embedding_dense_backward(np.zeros((1, 5), np.float32), np.array([0]), 0)


# ---------------------------------------------------------------------------------------------
# Errors through Python
# ---------------------------------------------------------------------------------------------

def test_index_errors_python(threads):
    g = np.ones((4, 3), np.float32)
    with pytest.raises(IndexError) as e:
        tg.embedding_dense_backward(g, np.array([1, -2, 5, 0]), 5)
    assert str(e.value) == f"{OP}: indices[1] must be in [0, numWeights) = [0, 5), got -2"
    assert e.value.code == 161002
    with pytest.raises(IndexError, match=r"indices\[1,0\] \(flat position 2\) must be in \[0, numWeights\) = "
                                         r"\[0, 5\), got 5"):
        tg.embedding_dense_backward(g, np.array([[1, 4], [5, 0]], np.int8), 5)
    for bad in (np.nan, np.inf, -1.0, 5.0, -1e30):  # float indices are refused before any is looked at
        with pytest.raises(TypeError, match="indices must be an integer or bool array"):
            tg.embedding_dense_backward(g, np.array([0, 1, bad, 1]), 5)
    # Lowest bad position wins whatever thread found which.
    threads(2)
    n = 60000
    idx = np.zeros(n, np.int64)
    idx[[n - 3, 40000, 20001]] = [-1, 99, 7]
    with pytest.raises(IndexError, match=r"indices\[20001\] must be .*, got 7$"):
        tg.embedding_dense_backward(np.zeros((n, 2), np.float32), idx, 5)


def test_validation_errors_python():
    g = np.ones((4, 3), np.float32)
    i = np.arange(4)
    cases = [
        (dict(grad=g.astype(np.float64)), r"grad dtype must be one of \{float32, float16, bfloat16\}, got float64"),
        (dict(grad=g.astype(np.int32)), r"grad dtype must be one of"),
        (dict(indices=i.astype(np.uint16)), r"indices dtype must be one of \{int64, int32, int16, int8, uint8, bool, "
                                            r"float32, float16, float64\}, got uint16"),
        (dict(out=np.zeros((5, 3), np.float64)), r"out dtype must be one of"),
        (dict(grad=np.ones(4, np.float32), indices=np.arange(4)), r"grad rank must be in \[2, 8\], got 1"),
        (dict(grad=np.ones([1] * 8 + [4], np.float32), indices=np.arange(1)), r"grad rank must be in \[2, 8\], got 9"),
        (dict(indices=np.array(2)), r"indices rank must be in \[1, 8\], got 0"),
        (dict(indices=np.arange(3)), r"grad shape \[4,3\] must have leading dims whose product equals numel\(indices\)"
                                     r" = 3 \(indices shape \[3\]\), got 4"),
        (dict(out=np.zeros((5, 3, 1), np.float32)), r"out must have rank 2, got rank 3"),
        (dict(out=np.zeros((6, 3), np.float32)), r"out shape \[6,3\] != \[numWeights, grad last dim\] = \[5,3\]"),
        (dict(out=np.zeros((5, 4), np.float32)), r"out shape \[5,4\] != \[numWeights, grad last dim\] = \[5,3\]"),
        (dict(out=np.broadcast_to(np.zeros(3, np.float32), (5, 3))), r"out is not writeable|overlapping elements"),
        (dict(num_weights=-1), r"numWeights must be >= 0, got -1"),
    ]
    for over, msg in cases:
        kw = dict(grad=g, indices=i, num_weights=5, out=None)
        kw.update(over)
        with pytest.raises(ValueError, match=msg) as e:
            tg.embedding_dense_backward(kw["grad"], kw["indices"], kw["num_weights"], out=kw["out"])
        assert e.value.code == 161002
    # out overlapping grad
    buf = np.zeros(40, np.float32)
    with pytest.raises(ValueError, match="out overlaps grad"):
        tg.embedding_dense_backward(buf[:12].reshape(4, 3), i, 5, out=buf[3:18].reshape(5, 3))
    with pytest.raises(TypeError):
        tg.embedding_dense_backward([[1.0]], np.arange(1), 2)
    with pytest.raises(TypeError):
        tg.embedding_dense_backward(g, [0, 1, 2, 3], 5)


# ---------------------------------------------------------------------------------------------
# torch cross-check
# ---------------------------------------------------------------------------------------------

def test_torch_cross_check():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(11)
    v, d = 300, 48
    idx = skewed(rng, 4000, v).reshape(40, 100)
    grad = rand_grad(rng, (40, 100, d), np.float32)
    for padding in (-1, 0, 5):
        for scale in (False, True):
            ours = tg.embedding_dense_backward(grad, idx, v, padding, scale)
            theirs = torch.ops.aten.embedding_dense_backward(torch.from_numpy(grad), torch.from_numpy(idx), v,
                                                             padding, scale).numpy()
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)
    # bf16: ours rounds once; torch accumulates in bf16 and is much further from the exact sum.
    n = 4096
    gb = rng.uniform(0.5, 1.5, size=(n, 32)).astype(BF16)
    ib = np.zeros(n, np.int64)
    exact = gb.astype(np.float64).sum(0)
    ours = tg.embedding_dense_backward(gb, ib, 2)[0].astype(np.float64)
    theirs = torch.ops.aten.embedding_dense_backward(torch.from_numpy(gb.astype(np.float32)).bfloat16(),
                                                     torch.from_numpy(ib), 2, -1, False)[0].float().numpy()
    err_ours = np.max(np.abs(ours - exact) / exact)
    err_torch = np.max(np.abs(theirs - exact) / exact)
    assert err_ours <= 2.0**-8 and err_torch > 5 * err_ours
