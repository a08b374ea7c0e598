"""Independent float64 reference for flash attention forward and backward, written from the vendor's
documents (aclnnFlashAttentionScore.md, aclnnFlashAttentionScoreGrad.md, sparse_mode_introduction.md)
and ops-wave4.md sections 1-2 (the REC choices), never from tilegrad's code:

    S = scale * Q K^T (per batch b and query head n; kv head n // G, G = N1 // N2)
    masked(i, j): attenMask[.., i, j] == 1 (modes 0, 1) or outside the mode's band (modes 0, 2, 3, 4)
    P = softmax(S over kept j) per row, O = P V; max = max_j S, sum = sum_j exp(S - max)
    a row with nothing kept: O = 0, max = -FLT_MAX, sum = +FLT_MAX, gradients 0
    dV = P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ = scale dS K, dK = scale dS^T Q

The bands (row i, column j, delta = Skv - Sq; pre / next = preTokens / nextTokens):
mode 0: i - pre <= j <= i + next; mode 2: j <= i; mode 3: j <= i + delta;
mode 4: i + delta - pre <= j <= i + delta + next; mode 1 and no mask at all: every j.

Tolerances: float32 arithmetic against float64 gives errors of a few ulps of the magnitudes of the
terms: |O - ref| <= ATOL_F32 * max|V| (+ the same relative), grads relative to the largest gradient
entry of the tensor. For 16-bit outputs add one ulp of the dtype (the single rounding).
"""

from typing import Dict, Optional, Tuple

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
FLT_MAX = float(np.finfo(np.float32).max)

# Relative to the scale of the output (max |V| for O, max |grad| for gradients).
TOL = {F32: 2e-5, F16: 2e-3, BF16: 1.6e-2}


def to_bnsd(x: np.ndarray, layout: str, heads: int) -> np.ndarray:
    """A tensor of the layout as float64 [B, N, S, D]."""
    x = np.asarray(x).astype(np.float64)
    if layout == "BSH":
        b, s, h = x.shape
        return x.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)
    if layout == "SBH":
        s, b, h = x.shape
        return x.reshape(s, b, heads, h // heads).transpose(1, 2, 0, 3)
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    assert layout == "BNSD"
    return x


def from_bnsd(x: np.ndarray, layout: str) -> np.ndarray:
    """Inverse of :func:`to_bnsd`."""
    b, n, s, d = x.shape
    if layout == "BSH":
        return x.transpose(0, 2, 1, 3).reshape(b, s, n * d)
    if layout == "SBH":
        return x.transpose(2, 0, 1, 3).reshape(s, b, n * d)
    if layout == "BSND":
        return x.transpose(0, 2, 1, 3)
    return x


def keep_matrix(b: int, n: int, sq: int, skv: int, atten_mask: Optional[np.ndarray], sparse_mode: int,
                pre_tokens: int, next_tokens: int) -> np.ndarray:
    """Bool [B, N, Sq, Skv]: True where position (i, j) takes part."""
    keep = np.ones((b, n, sq, skv), dtype=bool)
    if atten_mask is None:
        return keep  # the vendor ignores the mode and the band without a mask
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    delta = skv - sq
    if sparse_mode in (0, 1):
        m = np.asarray(atten_mask).astype(bool)
        m = m.reshape((1, 1) + m.shape) if m.ndim == 2 else m
        keep &= ~np.broadcast_to(m, keep.shape)
    if sparse_mode == 0:
        keep &= (j >= i - pre_tokens) & (j <= i + next_tokens)
    elif sparse_mode == 2:
        keep &= j <= i
    elif sparse_mode == 3:
        keep &= j <= i + delta
    elif sparse_mode == 4:
        keep &= (j >= i + delta - pre_tokens) & (j <= i + delta + next_tokens)
    return keep


def _expand_kv(x: np.ndarray, heads: int) -> np.ndarray:
    return np.repeat(x, heads // x.shape[1], axis=1)


def forward(q: np.ndarray, k: np.ndarray, v: np.ndarray, head_num: int, layout: str, scale: float,
            atten_mask: Optional[np.ndarray] = None, sparse_mode: int = 0, pre_tokens: int = 2147483647,
            next_tokens: int = 2147483647) -> Dict[str, np.ndarray]:
    """float64 out (in the layout), max and sum ([B, N1, Sq]) and the BNSD intermediates for the grad."""
    qb = to_bnsd(q, layout, head_num)
    d = qb.shape[3]
    kv_heads = (k.shape[-1] // d) if layout in ("BSH", "SBH") else (k.shape[2] if layout == "BSND" else k.shape[1])
    kb = _expand_kv(to_bnsd(k, layout, kv_heads), head_num)
    vb = _expand_kv(to_bnsd(v, layout, kv_heads), head_num)
    b, n, sq, _ = qb.shape
    skv = kb.shape[2]
    keep = keep_matrix(b, n, sq, skv, atten_mask, sparse_mode, pre_tokens, next_tokens)
    s = scale * np.einsum("bnid,bnjd->bnij", qb, kb)
    s_kept = np.where(keep, s, -np.inf)
    any_kept = keep.any(axis=-1)
    mx = np.where(any_kept, s_kept.max(axis=-1, initial=-np.inf), 0.0)
    e = np.where(keep, np.exp(s_kept - mx[..., None]), 0.0)
    sm = e.sum(axis=-1)
    p = np.where(any_kept[..., None], e / np.where(any_kept, sm, 1.0)[..., None], 0.0)
    o = np.einsum("bnij,bnjd->bnid", p, vb)
    return {
        "out": from_bnsd(o, layout),
        "max": np.where(any_kept, mx, -FLT_MAX),
        "sum": np.where(any_kept, sm, FLT_MAX),
        "p": p, "q": qb, "k": kb, "v": vb, "o": o, "kv_heads": kv_heads,
    }


def backward(fwd: Dict[str, np.ndarray], dy: np.ndarray, layout: str, scale: float) -> Tuple[np.ndarray, ...]:
    """float64 (dq, dk, dv) in the layout, from :func:`forward`'s intermediates."""
    p, qb, kb, vb, o = fwd["p"], fwd["q"], fwd["k"], fwd["v"], fwd["o"]
    n = qb.shape[1]
    dyb = to_bnsd(dy, layout, n)
    dv = np.einsum("bnij,bnid->bnjd", p, dyb)
    dp = np.einsum("bnid,bnjd->bnij", dyb, vb)
    rowdot = (dyb * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - rowdot)
    dq = scale * np.einsum("bnij,bnjd->bnid", ds, kb)
    dk = scale * np.einsum("bnij,bnid->bnjd", ds, qb)
    g = n // fwd["kv_heads"]

    def group_sum(x):
        b, _, s, d = x.shape
        return x.reshape(b, fwd["kv_heads"], g, s, d).sum(axis=2)

    return from_bnsd(dq, layout), from_bnsd(group_sum(dk), layout), from_bnsd(group_sum(dv), layout)


def backward_magnitudes(fwd: Dict[str, np.ndarray], dy: np.ndarray, layout: str, scale: float) -> Tuple[float, ...]:
    """The largest |term| sums of dq, dk, dv (the same products on absolute values): the scale of the
    float32 rounding error, which does not shrink when dS = P * (dP - rowdot) cancels."""
    a = {key: np.abs(fwd[key]) for key in ("p", "q", "k", "v", "o")}
    n = a["q"].shape[1]
    dyb = np.abs(to_bnsd(dy, layout, n))
    dv = np.einsum("bnij,bnid->bnjd", a["p"], dyb)
    ds = a["p"] * (np.einsum("bnid,bnjd->bnij", dyb, a["v"]) + (dyb * a["o"]).sum(axis=-1, keepdims=True))
    dq = abs(scale) * np.einsum("bnij,bnjd->bnid", ds, a["k"])
    dk = abs(scale) * np.einsum("bnij,bnid->bnjd", ds, a["q"])
    return tuple(float(x.max(initial=0.0)) for x in (dq, dk, dv))


def assert_close(got: np.ndarray, ref: np.ndarray, scale: float, dtype: np.dtype, what: str) -> None:
    """|got - ref| <= TOL[dtype] * scale + one ulp of dtype at |ref| (16-bit outputs)."""
    got64 = np.asarray(got).astype(np.float64)
    tol = TOL[np.dtype(dtype)] * max(scale, 1e-30)
    if np.dtype(dtype) != F32:
        tol = tol + np.abs(ref) * float(ml_dtypes.finfo(dtype).eps)
    err = np.abs(got64 - ref)
    bad = ~(err <= tol)
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} off, worst {float(np.nanmax(err))} "
                           f"(tolerance {float(np.max(tol))})")
