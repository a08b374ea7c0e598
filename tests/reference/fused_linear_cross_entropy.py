"""Float64 NumPy references of the fused linear cross entropy family (specification section 5), written from
the spec:

- ``online_max_sum``: aclnnFusedLinearOnlineMaxSum on one vocabulary shard [start, end) (L = x @ w^T,
  row max, sum of exp(L - max), the target's logit minus max, the mask of rows whose target is outside
  the shard and the shard-local target);
- ``loss_grad``: aclnnFusedLinearCrossEntropyLossGrad (G = softmax, or exp(L - max) / sum; G[i, t_i] -= 1
  where the row is not masked; G *= grad; grad_input = G @ w, grad_weight = G^T @ x);
- ``linear_cross_entropy``: the single-process tg.fused_linear_cross_entropy with every option, as the
  composite logits = softcap(x @ w^T + bias) followed by reference.cross_entropy (class weights,
  ignore_index, label smoothing, z-loss) and the chain rule back through softcap and the linear layer;
- ``zero_width_loss``: the closed form of the loss for H = 0 (every logit 0) at any vocabulary size;
- ``softmax_grad``, ``block_maxima``, ``filtered_reference``: the gradients with filter_eps (blocks of
  FILTER_ROWS x FILTER_COLS of the unscaled p - onehot whose entries are all below eps dropped).
"""

from typing import Optional

import numpy as np

from .cross_entropy import cross_entropy_with_zloss

FILTER_ROWS, FILTER_COLS = 64, 128  # the gradient-filtering block


def f64(a):
    return np.asarray(a).astype(np.float64)


def pack_lsb_first(bits, padding=False):
    """A bool per row packed 8 to a byte, row i in bit i % 8 of byte i // 8; the padding bits of the
    last byte are ``padding`` (OnlineMaxSum: those of a target 0, i.e. 1 unless 0 lies in the shard)."""
    bits = np.asarray(bits, dtype=bool)
    out = np.zeros((len(bits) + 7) // 8, np.uint8)
    for i, b in enumerate(list(bits) + [padding] * (len(out) * 8 - len(bits))):
        if b:
            out[i // 8] |= 1 << (i % 8)
    return out


def padding_bit(start, end):
    """aclnnFusedLinearOnlineMaxSum's padding bits: a target 0 masked against [start, end) (the vendor's golden)."""
    return bool(0 < start or 0 >= end)


def round_to(a, dtype):
    """``a`` rounded once to ``dtype`` (through float32, as the operators store G), back in float64."""
    return np.asarray(a, np.float64).astype(np.float32).astype(dtype).astype(np.float64)


def online_max_sum(x, w, target, start, end):
    """``(max, sum_exp, predicted, mask, masked_target, logits)`` of one shard, float64 (mask as bools)."""
    logits = f64(x) @ f64(w).T
    bt, v = logits.shape
    mx = logits.max(axis=1) if v else np.full(bt, -np.inf)
    sum_exp = np.exp(logits - mx[:, None]).sum(axis=1) if v else np.zeros(bt)
    t = np.asarray(target).astype(np.int64)
    mask = (t < start) | (t >= end)
    masked = np.where(mask, 0, t - start)
    pred = np.zeros(bt)
    rows = np.nonzero(~mask)[0]
    pred[rows] = logits[rows, masked[rows]] - mx[rows]
    return mx, sum_exp, pred, mask, masked, logits


def loss_grad(grad, x, w, mask_bits, masked, gmax, gsum, softmax, dtype=None):
    """``(grad_input, grad_weight)`` in float64: G = softmax or exp(L - max)/sum; G[i, t_i] -= 1 where the
    mask bit (a bool per row) is 0; G *= grad; G rounded to ``dtype`` first when given (as the operator
    stores it)."""
    if softmax is None:
        g = np.exp(f64(x) @ f64(w).T - f64(gmax)[:, None]) / f64(gsum)[:, None]
    else:
        g = f64(softmax).copy()
    rows = np.nonzero(~np.asarray(mask_bits, bool))[0]
    g[rows, np.asarray(masked)[rows]] -= 1.0
    g *= f64(grad)[:, None]
    if dtype is not None:
        g = round_to(g, dtype)
    return g @ f64(w), g.T @ f64(x)


def linear_cross_entropy(x, w, target, reduction="mean", bias=None, class_weight=None, label_smoothing=0.0,
                         lse_square_scale=0.0, softcap: Optional[float] = None, grad_output=None,
                         ignore_index=-100):
    """``(loss, z_loss, grad_input, grad_weight, grad_bias)`` in float64 (grad_bias None without a bias).

    logits = softcap * tanh((x @ w^T + bias) / softcap) (no cap when None); loss = cross entropy of the
    logits including the z-term, z_loss the z-term alone; the gradients are those of
    sum(grad_output * loss) (grad_output: per row for "none", a scalar otherwise; default ones)."""
    x, w = f64(x), f64(w)
    linear = x @ w.T + (0.0 if bias is None else f64(bias))
    logits = linear if softcap is None else softcap * np.tanh(linear / softcap)
    n = x.shape[0]
    if grad_output is None:
        grad_output = np.ones(n) if reduction == "none" else 1.0
    cw = None if class_weight is None else f64(class_weight)
    loss, z_loss, d_logits = cross_entropy_with_zloss(logits, np.asarray(target), cw, ignore_index, reduction,
                                                      label_smoothing, lse_square_scale,
                                                      f64(grad_output).reshape((n,) if reduction == "none" else ()))
    d_linear = d_logits if softcap is None else d_logits * (1.0 - np.tanh(linear / softcap) ** 2)
    grad_bias = None if bias is None else d_linear.sum(axis=0)
    return loss, z_loss, d_linear @ w, d_linear.T @ x, grad_bias


def zero_width_loss(target, vocab, ignore_index, reduction, class_weight, smoothing, z):
    """float64 loss when every logit is 0 (H = 0, no bias): log_prob = -log V for every class, in closed
    form, so a vocabulary of 2^40 costs nothing."""
    lse = np.log(float(vocab))
    kept = target != ignore_index
    if class_weight is None:  # unit weights, summed without forming V of them
        wt, w_sum = kept.astype(np.float64), float(vocab)
    else:
        w = class_weight.astype(np.float64)
        wt, w_sum = np.where(kept, w[np.where(kept, target, 0)], 0.0), w.sum()
    ce = np.where(kept, (1 - smoothing) * wt * lse + smoothing / vocab * w_sum * lse, 0.0)
    zl = np.where(kept, z * lse * lse, 0.0)
    if reduction == "none":
        return ce + zl
    if reduction == "sum":
        return (ce + zl).sum()
    return ce.sum() / wt.sum() + zl.sum() / kept.sum()


def softmax_grad(x, w, t, ignore_index=-100):
    """float64 p - onehot(target) per row (zero rows where ignored)."""
    z = f64(x) @ f64(w).T
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    valid = t != ignore_index
    p[np.flatnonzero(valid), t[valid]] -= 1.0
    p[~valid] = 0.0
    return p


def block_maxima(g, row_chunk, col_chunk, rows=FILTER_ROWS, cols=FILTER_COLS):
    """{(r0, c0, r1, c1): max |g|} over the filtering blocks (rows x cols) of each G block
    (row_chunk x col_chunk, the plan's)."""
    out = {}
    for b0 in range(0, g.shape[0], row_chunk):
        for v0 in range(0, g.shape[1], col_chunk):
            b1, v1 = min(b0 + row_chunk, g.shape[0]), min(v0 + col_chunk, g.shape[1])
            for r0 in range(b0, b1, rows):
                for c0 in range(v0, v1, cols):
                    r1, c1 = min(r0 + rows, b1), min(c0 + cols, v1)
                    out[(r0, c0, r1, c1)] = float(np.abs(g[r0:r1, c0:c1]).max())
    return out


def filtered_reference(x, w, g_unscaled, row_scale, maxima, eps):
    """float64 gradients of sum_i row_scale[i] * ce_i keeping only the blocks with max |g| >= eps."""
    mask = np.zeros(g_unscaled.shape, bool)
    for (r0, c0, r1, c1), m in maxima.items():
        mask[r0:r1, c0:c1] = m >= eps
    g = g_unscaled * mask * row_scale[:, None]
    return g @ f64(w), g.T @ f64(x), int(sum(m >= eps for m in maxima.values())), len(maxima)
