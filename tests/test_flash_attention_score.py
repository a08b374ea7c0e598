"""tilegrad.flash_attention_score / flash_attention_score_grad against the float64 reference written
from the vendor's formula (reference/flash_attention.py): every layout, sparse mode, GQA ratio,
Sq != Skv, lengths off the block grid, fully masked rows, NaN/inf, zero sizes, strides, bad
arguments, thread-count and ISA independence, and PyTorch's SDPA as a cross-check."""

import numpy as np
import pytest

import tilegrad as tg
from reference import flash_attention as ref
from reference.flash_attention import BF16, F16, F32, FLT_MAX

LAYOUTS = ["BSH", "SBH", "BSND", "BNSD"]


def _shape(layout, b, n, s, d):
    return {"BSH": (b, s, n * d), "SBH": (s, b, n * d), "BSND": (b, s, n, d), "BNSD": (b, n, s, d)}[layout]


def _inputs(layout, b=2, n1=4, n2=2, sq=37, skv=53, d=16, dv=16, dtype=F32, seed=0):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(_shape(layout, b, n1, sq, d)).astype(dtype)
    k = rng.standard_normal(_shape(layout, b, n2, skv, d)).astype(dtype)
    v = rng.standard_normal(_shape(layout, b, n2, skv, dv)).astype(dtype)
    dy = rng.standard_normal(_shape(layout, b, n1, sq, dv)).astype(dtype)
    return q, k, v, dy


def _template():
    return np.triu(np.ones((2048, 2048), np.uint8), 1)


def _check_all(q, k, v, dy, n1, layout, scale=0.25, **mask_args):
    """Forward and grad against the reference; returns tilegrad's outputs."""
    dtype = q.dtype
    out, smax, ssum = tg.flash_attention_score(q, k, v, n1, layout, scale_value=scale, **mask_args)
    want = ref.forward(q, k, v, n1, layout, scale, **{k_: v_ for k_, v_ in mask_args.items()})
    assert out.dtype == dtype and out.shape == want["out"].shape
    assert smax.dtype == F32 and smax.shape == want["max"].shape + (8,)
    ref.assert_close(out, want["out"], float(np.abs(v.astype(np.float64)).max()), dtype, "attention_out")
    for lane in range(8):
        np.testing.assert_array_equal(smax[..., lane], smax[..., 0])
        np.testing.assert_array_equal(ssum[..., lane], ssum[..., 0])
    np.testing.assert_allclose(smax[..., 0], want["max"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ssum[..., 0], want["sum"], rtol=1e-4)
    dq, dk, dv = tg.flash_attention_score_grad(q, k, v, dy, n1, layout, softmax_max=smax, softmax_sum=ssum,
                                               attention_out=out, scale_value=scale, **mask_args)
    # The reference grads use tilegrad's rounded output as O (as the vendor's grad reads attentionIn).
    fwd = dict(want, o=ref.to_bnsd(out, layout, n1))
    wants = ref.backward(fwd, dy, layout, scale)
    scales = ref.backward_magnitudes(fwd, dy, layout, scale)
    for name, got, w, like, mag in zip(("dq", "dk", "dv"), (dq, dk, dv), wants, (q, k, v), scales):
        assert got.dtype == dtype and got.shape == like.shape
        ref.assert_close(got, w, mag, dtype, name)
    return out, smax, ssum, dq, dk, dv


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_layouts_and_dtypes(isa, layout, dtype):
    q, k, v, dy = _inputs(layout, dtype=dtype, seed=1)
    _check_all(q, k, v, dy, 4, layout)


@pytest.mark.parametrize("layout", ["BSH", "BNSD"])
def test_value_head_dim_smaller_than_query(layout):
    q, k, v, dy = _inputs(layout, d=24, dv=8, seed=2)
    _check_all(q, k, v, dy, 4, layout)


@pytest.mark.parametrize("n1,n2", [(3, 3), (6, 3), (8, 2), (5, 1)])
def test_gqa_ratios(n1, n2):
    q, k, v, dy = _inputs("BSND", n1=n1, n2=n2, sq=20, skv=29, seed=3)
    _check_all(q, k, v, dy, n1, "BSND")


# Lengths off the 128 / 512 / 256 block grids, both Sq < Skv and Sq > Skv.
@pytest.mark.parametrize("sq,skv", [(130, 600), (300, 140), (1, 1), (129, 513)])
@pytest.mark.parametrize("mode", [2, 3, 4])
def test_causal_and_band_modes(isa, sq, skv, mode):
    q, k, v, dy = _inputs("BNSD", b=1, n1=2, n2=1, sq=sq, skv=skv, d=8, dv=8, seed=4)
    _check_all(q, k, v, dy, 2, "BNSD", atten_mask=_template(), sparse_mode=mode, pre_tokens=70, next_tokens=5)


@pytest.mark.parametrize("shape", ["BNSS", "B1SS", "11SS", "SS"])
@pytest.mark.parametrize("dtype", [np.bool_, np.uint8])
def test_explicit_mask_mode_1(shape, dtype):
    b, n1, sq, skv = 2, 4, 40, 70
    full = {"BNSS": (b, n1, sq, skv), "B1SS": (b, 1, sq, skv), "11SS": (1, 1, sq, skv), "SS": (sq, skv)}[shape]
    mask = (np.random.default_rng(5).random(full) < 0.4).astype(dtype)
    q, k, v, dy = _inputs("BSH", b=b, n1=n1, sq=sq, skv=skv, seed=5)
    _check_all(q, k, v, dy, n1, "BSH", atten_mask=mask, sparse_mode=1, pre_tokens=0, next_tokens=0)


@pytest.mark.parametrize("pre,nxt", [(2147483647, 0), (10, 3), (-3, 7), (9, -3), (2147483647, 2147483647)])
def test_mode_0_mask_and_band(pre, nxt):
    sq, skv = 150, 530
    mask = (np.random.default_rng(6).random((sq, skv)) < 0.2).astype(np.uint8)
    q, k, v, dy = _inputs("SBH", b=1, n1=2, n2=2, sq=sq, skv=skv, d=8, dv=8, seed=6)
    _check_all(q, k, v, dy, 2, "SBH", atten_mask=mask, sparse_mode=0, pre_tokens=pre, next_tokens=nxt)


def test_without_mask_the_mode_is_ignored():
    q, k, v, _ = _inputs("BNSD", seed=7)
    full = tg.flash_attention_score(q, k, v, 4, "BNSD")[0]
    for mode in (0, 1, 2, 3, 4):
        got = tg.flash_attention_score(q, k, v, 4, "BNSD", sparse_mode=mode, pre_tokens=0, next_tokens=0)[0]
        np.testing.assert_array_equal(got, full)


def test_template_contents_are_not_read():
    q, k, v, _ = _inputs("BNSD", seed=8)
    a = tg.flash_attention_score(q, k, v, 4, "BNSD", atten_mask=_template(), sparse_mode=2)[0]
    b = tg.flash_attention_score(q, k, v, 4, "BNSD", atten_mask=np.zeros((2048, 2048), bool), sparse_mode=2)[0]
    np.testing.assert_array_equal(a, b)


def test_fully_masked_rows_give_zero_and_vendor_statistics():
    # Mode 3 with Sq > Skv: rows i < Sq - Skv keep nothing (ops-wave4.md: O = 0, grads 0).
    sq, skv = 40, 25
    q, k, v, dy = _inputs("BNSD", b=1, n1=2, n2=2, sq=sq, skv=skv, seed=9)
    out, smax, ssum, dq, dk, dv = _check_all(q, k, v, dy, 2, "BNSD", atten_mask=_template(), sparse_mode=3)
    dead = sq - skv
    assert np.all(out[:, :, :dead] == 0) and np.all(dq[:, :, :dead] == 0)
    assert np.all(smax[:, :, :dead] == -FLT_MAX) and np.all(ssum[:, :, :dead] == FLT_MAX)
    assert np.all(out[:, :, dead:] != 0)


def test_explicit_mask_masking_a_whole_row():
    q, k, v, dy = _inputs("BSND", b=1, n1=2, n2=1, sq=6, skv=9, seed=10)
    mask = np.zeros((6, 9), bool)
    mask[2] = True
    out, smax, ssum, dq, _, _ = _check_all(q, k, v, dy, 2, "BSND", atten_mask=mask, sparse_mode=1)
    assert np.all(out[:, 2] == 0) and np.all(dq[:, 2] == 0)
    assert np.all(smax[:, :, 2] == -FLT_MAX) and np.all(ssum[:, :, 2] == FLT_MAX)


def test_nan_and_inf_stay_in_their_rows():
    q, k, v, _ = _inputs("BNSD", b=1, n1=1, n2=1, sq=5, skv=7, seed=11)
    q[0, 0, 1, 3] = np.nan
    q[0, 0, 3, 0] = np.inf
    out = tg.flash_attention_score(q, k, v, 1, "BNSD", scale_value=0.5)[0]
    assert np.isnan(out[0, 0, 1]).all() and np.isnan(out[0, 0, 3]).all()
    good = [0, 2, 4]
    want = ref.forward(q[:, :, good], k, v, 1, "BNSD", 0.5)["out"]
    ref.assert_close(out[:, :, good], want, float(np.abs(v).max()), F32, "finite rows")


@pytest.mark.parametrize("b,sq,skv", [(0, 5, 5), (2, 0, 5), (2, 5, 0)])
def test_zero_sizes(b, sq, skv):
    q, k, v, dy = _inputs("BSND", b=b, n1=2, n2=1, sq=sq, skv=skv, seed=12)
    out, smax, ssum = tg.flash_attention_score(q, k, v, 2, "BSND")
    assert out.shape == (b, sq, 2, 16)
    if b and sq:  # no key: every row is fully masked
        assert np.all(out == 0) and np.all(smax == -FLT_MAX) and np.all(ssum == FLT_MAX)
    dq, dk, dv = tg.flash_attention_score_grad(q, k, v, dy, 2, "BSND", softmax_max=smax, softmax_sum=ssum,
                                               attention_out=out)
    assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == v.shape
    assert not dq.any() and not dk.any() and not dv.any()


def test_strided_inputs_and_outputs_match_contiguous():
    q, k, v, dy = _inputs("BSND", seed=13)
    qs = np.repeat(q, 2, axis=3)[..., ::2]
    ks = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    out_buf = np.zeros(q.shape[:3] + (32,), F32)
    out = out_buf[..., ::2]
    smax = np.zeros((2, 4, 37, 8), F32)
    ssum = np.zeros((2, 4, 37, 8), F32)
    tg.flash_attention_score(qs, ks, v, 4, "BSND", out=out, softmax_max_out=smax, softmax_sum_out=ssum)
    want = tg.flash_attention_score(q, k, v, 4, "BSND")
    np.testing.assert_array_equal(out, want[0])
    np.testing.assert_array_equal(smax, want[1])
    dq_buf = np.zeros(q.shape[:3] + (32,), F32)
    dq = tg.flash_attention_score_grad(qs, ks, v, dy, 4, "BSND", softmax_max=smax, softmax_sum=ssum,
                                       attention_out=out, dq_out=dq_buf[..., ::2])[0]
    want_dq = tg.flash_attention_score_grad(q, k, v, dy, 4, "BSND", softmax_max=want[1], softmax_sum=want[2],
                                            attention_out=want[0])[0]
    np.testing.assert_array_equal(dq, want_dq)


def test_thread_count_never_changes_a_bit(threads):
    q, k, v, dy = _inputs("BSH", b=1, n1=4, n2=2, sq=300, skv=700, d=32, dv=32, dtype=BF16, seed=14)
    args = dict(atten_mask=_template(), sparse_mode=3)
    results = []
    for n in (1, 2, 3):
        threads(n)
        out, smax, ssum = tg.flash_attention_score(q, k, v, 4, "BSH", **args)
        grads = tg.flash_attention_score_grad(q, k, v, dy, 4, "BSH", softmax_max=smax, softmax_sum=ssum,
                                              attention_out=out, **args)
        results.append([x.view(np.uint8) for x in (out, smax, ssum) + tuple(grads)])
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def _error(fn, match):
    with pytest.raises(ValueError, match=match) as e:
        fn()
    assert e.value.code == 161002
    assert "aclnnFlashAttentionScore" in str(e.value)


def test_bad_arguments():
    q, k, v, _ = _inputs("BSND", seed=15)
    fa = tg.flash_attention_score
    _error(lambda: fa(q, k, v, 4, "TND"), "varlen")
    _error(lambda: fa(q, k, v, 4, "BHSD"), "inputLayout must be BSH, SBH, BSND or BNSD")
    _error(lambda: fa(q, k, v, 0, "BSND"), "headNum must be > 0")
    _error(lambda: fa(q, k, v, 3, "BSND"), "head axis must equal headNum")
    _error(lambda: fa(q, k.astype(F16), v, 4, "BSND"), "key dtype")
    _error(lambda: fa(q, k, v, 4, "BSND", keep_prob=0.9), "needs dropMaskOptional")
    _error(lambda: fa(q, k, v, 4, "BSND", keep_prob=0.0), r"keepProb must be in \(0, 1\]")
    _error(lambda: fa(q, k, v, 4, "BSND", keep_prob=1.5), r"keepProb must be in \(0, 1\]")
    _error(lambda: fa(q, k, v, 4, "BSND", sparse_mode=5, atten_mask=_template()), "prefix")
    _error(lambda: fa(q, k, v, 4, "BSND", sparse_mode=7), "varlen")
    _error(lambda: fa(q, k, v, 4, "BSND", sparse_mode=9), "sparseMode must be in")
    _error(lambda: fa(q, k, v, 4, "BSND", sparse_mode=2, atten_mask=np.ones((37, 53), bool)), "2048,2048")
    _error(lambda: fa(q, k, v, 4, "BSND", atten_mask=np.ones((36, 53), bool)), "attenMaskOptional shape")
    _error(lambda: fa(q, k, v, 4, "BSND", atten_mask=np.ones((37, 53), np.float32)), "attenMaskOptional dtype")
    _error(lambda: fa(q, k, v, 4, "BSND", atten_mask=np.ones((37, 53), bool), pre_tokens=-5, next_tokens=2),
           "non-empty band")
    _error(lambda: fa(q, k[:, :, :1], v, 4, "BSND"), "key/value heads|value must have key")
    _error(lambda: fa(q, k, np.concatenate([v, v], axis=3), 4, "BSND"), "value head dim must be in")
    _error(lambda: fa(q, k, v[:, :5], 4, "BSND"), "one sequence length")
    _error(lambda: fa(q, k, v, 4, "BSND", out=np.zeros(q.shape, F16)), "attentionOutOut dtype")
    with pytest.raises(TypeError, match="head_num must be an int"):
        fa(q, k, v, 4.0, "BSND")


def test_grad_bad_arguments():
    q, k, v, dy = _inputs("BNSD", seed=16)
    out, smax, ssum = tg.flash_attention_score(q, k, v, 4, "BNSD")
    g = tg.flash_attention_score_grad
    with pytest.raises(ValueError, match="softmaxMaxOptional shape") as e:
        g(q, k, v, dy, 4, "BNSD", softmax_max=smax[..., :4], softmax_sum=ssum, attention_out=out)
    assert e.value.code == 161002
    with pytest.raises(ValueError, match="dy shape"):
        g(q, k, v, dy[:, :, :3], 4, "BNSD", softmax_max=smax, softmax_sum=ssum, attention_out=out)
    with pytest.raises(ValueError, match="dqOut shape"):
        g(q, k, v, dy, 4, "BNSD", softmax_max=smax, softmax_sum=ssum, attention_out=out, dq_out=np.zeros_like(k))
    with pytest.raises(ValueError, match="aclnnFlashAttentionScoreGrad: dqOut .*overlap|dqOut.*query"):
        g(q, k, v, dy, 4, "BNSD", softmax_max=smax, softmax_sum=ssum, attention_out=out, dq_out=q)


def test_matches_torch_sdpa():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    q, k, v, dy = _inputs("BNSD", b=2, n1=6, n2=2, sq=70, skv=70, d=32, dv=32, seed=17)
    scale = 32 ** -0.5
    out, smax, ssum = tg.flash_attention_score(q, k, v, 6, "BNSD", scale_value=scale, atten_mask=_template(),
                                               sparse_mode=2)
    dq, dk, dv = tg.flash_attention_score_grad(q, k, v, dy, 6, "BNSD", softmax_max=smax, softmax_sum=ssum,
                                               attention_out=out, scale_value=scale, atten_mask=_template(),
                                               sparse_mode=2)
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    to = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=scale, enable_gqa=True)
    to.backward(torch.tensor(dy, dtype=torch.float64))
    np.testing.assert_allclose(out, to.detach().numpy(), rtol=1e-4, atol=1e-5)
    for got, t in ((dq, tq), (dk, tk), (dv, tv)):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_bf16_inputs_are_bf16_gemm_operands_and_others_are_widened():
    """The plan's bf16_operands, as TILEGRAD_VERBOSE prints it for each launch: bf16 q, k, v (and dy)
    are the GEMM operands themselves (P and dS rounded to bf16 as operands), fp32 and fp16 inputs
    are widened to fp32 GEMMs."""
    import os
    import re
    import subprocess
    import sys

    code = ("import numpy as np, ml_dtypes, tilegrad as tg\n"
            "for dt in (np.float32, np.float16, ml_dtypes.bfloat16):\n"
            "    q = np.ones((1, 2, 8, 4), dt)\n"
            "    out, m, s = tg.flash_attention_score(q, q, q, 2, 'BNSD', scale_value=0.5)\n"
            "    tg.flash_attention_score_grad(q, q, q, out, 2, 'BNSD', softmax_max=m, softmax_sum=s,\n"
            "                                  attention_out=out, scale_value=0.5)\n")
    env = dict(os.environ, TILEGRAD_VERBOSE="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tilegrad_verbose,aclnnFlashAttention")]
    assert [re.search(r"bf16_operands=(\w+)", line).group(1) for line in lines] == ["false"] * 4 + ["true"] * 2



# GQA stacking: the G query heads of a kv head run as one block of G x positions rows (position-major),
# so a row's head and position come from its place in the stack. Group sizes 1, 2, 3, 8 with lengths off
# the stacked blocks (forward 128 / 128 / 64 / 32 positions, pass B 256 / 256 / 128 / 64) and past one
# 512-column kv block, in each mask kind; a per-head explicit mask (BNSS) catches a row given the wrong head.
GROUPS = [(2, 2), (4, 2), (6, 2), (8, 1)]  # (N1, N2): G = 1, 2, 3, 8


def _gqa_inputs(n1, n2, dtype=F32, sq=150, skv=530, seed=40):
    return _inputs("BNSD", b=2, n1=n1, n2=n2, sq=sq, skv=skv, d=16, dv=16, dtype=dtype, seed=seed)


def _gqa_mask_args(kind, n1, sq=150, skv=530):
    rng = np.random.default_rng(41)
    if kind == "causal":
        return dict(atten_mask=_template(), sparse_mode=3)
    if kind == "band":
        return dict(atten_mask=_template(), sparse_mode=4, pre_tokens=90, next_tokens=20)
    if kind == "explicit_per_head":
        return dict(atten_mask=(rng.random((2, n1, sq, skv)) < 0.3).astype(np.uint8), sparse_mode=1)
    return dict(atten_mask=(rng.random((sq, skv)) < 0.3), sparse_mode=0, pre_tokens=200, next_tokens=-5)


@pytest.mark.parametrize("n1,n2", GROUPS)
@pytest.mark.parametrize("kind", ["causal", "band", "explicit_per_head", "explicit_and_band"])
def test_gqa_groups_with_masks(n1, n2, kind):
    q, k, v, dy = _gqa_inputs(n1, n2)
    _check_all(q, k, v, dy, n1, "BNSD", **_gqa_mask_args(kind, n1))


@pytest.mark.parametrize("n1,n2", [(4, 2), (8, 1)])
@pytest.mark.parametrize("dtype", [F16, BF16])
def test_gqa_groups_low_precision(n1, n2, dtype):
    q, k, v, dy = _gqa_inputs(n1, n2, dtype=dtype, seed=42)
    _check_all(q, k, v, dy, n1, "BNSD", **_gqa_mask_args("causal", n1))


@pytest.mark.parametrize("n1,n2", GROUPS)
def test_gqa_group_equals_each_head_alone(n1, n2):
    # Each query head of a group against its kv head as plain multi-head attention (G = 1): the same
    # values within fp32 rounding, and masked rows exactly alike.
    q, k, v, dy = _gqa_inputs(n1, n2, sq=70, skv=90, seed=43)
    args = _gqa_mask_args("band", n1, 70, 90)
    g = n1 // n2
    out, smax, ssum = tg.flash_attention_score(q, k, v, n1, "BNSD", **args)
    dq, dk, dv = tg.flash_attention_score_grad(q, k, v, dy, n1, "BNSD", softmax_max=smax, softmax_sum=ssum,
                                               attention_out=out, **args)
    dk_sum, dv_sum = np.zeros(k.shape, np.float64), np.zeros(v.shape, np.float64)
    for n in range(n1):
        qn, dyn = q[:, n:n + 1], dy[:, n:n + 1]
        kn, vn = k[:, n // g:n // g + 1], v[:, n // g:n // g + 1]
        o1, m1, s1 = tg.flash_attention_score(qn, kn, vn, 1, "BNSD", **args)
        np.testing.assert_allclose(out[:, n:n + 1], o1, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(smax[:, n:n + 1], m1, rtol=1e-5, atol=1e-6)
        grads = tg.flash_attention_score_grad(qn, kn, vn, dyn, 1, "BNSD", softmax_max=m1, softmax_sum=s1,
                                              attention_out=o1, **args)
        np.testing.assert_allclose(dq[:, n:n + 1], grads[0], rtol=1e-4, atol=1e-5)
        dk_sum[:, n // g:n // g + 1] += grads[1]
        dv_sum[:, n // g:n // g + 1] += grads[2]
    np.testing.assert_allclose(dk, dk_sum, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dv, dv_sum, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n1,n2", GROUPS)
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_gqa_one_and_two_threads_bit_identical(threads, n1, n2, dtype):
    q, k, v, dy = _gqa_inputs(n1, n2, dtype=dtype, sq=300, skv=530, seed=44)
    args = _gqa_mask_args("causal", n1)
    results = []
    for n in (1, 2):
        threads(n)
        out, smax, ssum = tg.flash_attention_score(q, k, v, n1, "BNSD", **args)
        grads = tg.flash_attention_score_grad(q, k, v, dy, n1, "BNSD", softmax_max=smax, softmax_sum=ssum,
                                              attention_out=out, **args)
        results.append([x.view(np.uint8) for x in (out, smax, ssum) + tuple(grads)])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


# The grad runs one task per (batch, kv head, kv group): each (batch, kv head)'s kv blocks of 128 columns
# are dealt round-robin into at most 4 groups, and dQ is the sum of the groups' fp32 slabs in group
# order. Skv = 1100 gives 9 kv blocks (groups of 3, 2, 2, 2 blocks), Sq = 300 several query blocks.
@pytest.mark.parametrize("kind", ["causal", "band", "explicit_per_head", "explicit_and_band"])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_kv_groups_of_several_blocks_match_the_reference(kind, dtype):
    sq, skv = 300, 1100
    q, k, v, dy = _inputs("BSND", b=2, n1=6, n2=2, sq=sq, skv=skv, d=16, dv=16, dtype=dtype, seed=45)
    _check_all(q, k, v, dy, 6, "BSND", **_gqa_mask_args(kind, 6, sq, skv))


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("kind", ["causal", "explicit_per_head"])
def test_batch_elements_alone_give_the_same_bits(dtype, kind):
    # dQ's sums are grouped by the kv block grid of one (batch, kv head), never by B: each batch element
    # run alone gives the batch's bits exactly, the forward's and every gradient's.
    n1, n2, sq, skv = 6, 2, 300, 530
    q, k, v, dy = _inputs("BSND", b=2, n1=n1, n2=n2, sq=sq, skv=skv, d=16, dv=16, dtype=dtype, seed=46)
    args = _gqa_mask_args(kind, n1, sq, skv)
    out, smax, ssum = tg.flash_attention_score(q, k, v, n1, "BSND", **args)
    grads = tg.flash_attention_score_grad(q, k, v, dy, n1, "BSND", softmax_max=smax, softmax_sum=ssum,
                                          attention_out=out, **args)
    for b in range(2):
        one = slice(b, b + 1)
        args_b = dict(args)
        if args["atten_mask"].shape[0] == 2:  # [B, N1, Sq, Skv]: this element's rows
            args_b["atten_mask"] = args["atten_mask"][one]
        fwd = tg.flash_attention_score(q[one], k[one], v[one], n1, "BSND", **args_b)
        for got, want in zip(fwd, (out, smax, ssum)):
            np.testing.assert_array_equal(got.view(np.uint8), want[one].view(np.uint8))
        alone = tg.flash_attention_score_grad(q[one], k[one], v[one], dy[one], n1, "BSND", softmax_max=smax[one],
                                              softmax_sum=ssum[one], attention_out=out[one], **args_b)
        for name, got, want in zip(("dq", "dk", "dv"), alone, grads):
            np.testing.assert_array_equal(got.view(np.uint8), want[one].view(np.uint8), err_msg=name)
