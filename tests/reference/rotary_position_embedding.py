"""Independent float64 references for aclnnRotaryPositionEmbedding and aclnnRotaryPositionEmbeddingGrad,
written from the vendor's documents (aclnn-docs/aclnnRotaryPositionEmbedding.md and
aclnnRotaryPositionEmbeddingGrad.md) formula by formula, never from tilegrad's code; and the error
bounds the tests hold tilegrad to.

Forward (D = x.shape[-1]):
    mode 0 half:            x1, x2 = x[..., :D//2], x[..., D//2:];  x_rotate = cat(-x2, x1)
    mode 1 interleave:      x1 = x[..., ::2].view(-1, 1); x2 = x[..., 1::2].view(-1, 1);
                            x_rotate = cat((-x2, x1), dim=-1).view(x.shape)
    mode 2 quarter:         x1..x4 the quarters; x_rotate = cat(-x2, x1, -x4, x3)
    (modes 0-2)             y = x * cos + x_rotate * sin
    mode 3 interleave-half: x1, x2 = x[..., ::2], x[..., 1::2];
                            y = cat(x1, x2) * cos + cat(-x2, x1) * sin

Gradient, ``dims`` the axes over which cos / sin broadcast in the forward:
    mode 0: dy1, dy2 = chunk(dy, 2); cos1, cos2, sin1, sin2 likewise
            dx = cat(cos1 dy1 + sin2 dy2, cos2 dy2 - sin1 dy1)
            dcos = sum(dy * x, dims); dsin = sum(dy * cat(-x2, x1), dims)
    mode 1: the same with even / odd elements (dy[..., ::2], dy[..., 1::2]) and stack(..., -1)
    mode 2: the mode 0 formulas on each half (four chunks)
    mode 3: dy, cos, sin chunked; x1, x2 = x[..., ::2], x[..., 1::2];
            dx = stack(cos1 dy1 + sin2 dy2, cos2 dy2 - sin1 dy1).reshape(dy.shape)
            dcos = sum(dy * cat(x1, x2), dims); dsin = sum(dy * cat(-x2, x1), dims)

Error bounds
------------
Every output element is a sum of products of two stored values. ``scale`` is the sum of the
products' magnitudes (the same formula on |values|). tilegrad rounds each product to float32 and adds
in float32 (a pair's two products for y and dx; a row at a time for dcos / dsin, in blocks whose
partials are added in float64), then rounds once to the output dtype. So for ``n`` products:
|fp32 result - exact| <= (n + 1) * u32 * scale with u32 = 2^-24 (n = 2 for y and dx), and a
float16 / bfloat16 output is within that plus half an ulp of the dtype at the value.
"""

import ml_dtypes
import numpy as np

from .silu import ulp  # the spacing of a dtype at a value, subnormals included

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)

U32 = 2.0 ** -24


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _rotate(x, mode):
    """x_rotate of the forward formulas (modes 0-2); for mode 3 the pair (x_part1, x_part2)."""
    d = x.shape[-1]
    if mode == 0:
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate((-x2, x1), axis=-1)
    if mode == 1:
        x1 = x[..., ::2].reshape(-1, 1)
        x2 = x[..., 1::2].reshape(-1, 1)
        return np.concatenate((-x2, x1), axis=-1).reshape(x.shape)
    if mode == 2:
        x1, x2 = x[..., : d // 4], x[..., d // 4: d // 2]
        x3, x4 = x[..., d // 2: d // 4 * 3], x[..., d // 4 * 3:]
        return np.concatenate((-x2, x1, -x4, x3), axis=-1)
    x1, x2 = x[..., ::2], x[..., 1::2]
    return np.concatenate((x1, x2), axis=-1), np.concatenate((-x2, x1), axis=-1)


def rope_forward_f64(x, cos, sin, mode):
    """(y, scale) in float64; cos / sin broadcast over x's leading dims."""
    x, cos, sin = _f64(x), _f64(cos), _f64(sin)
    if mode == 3:
        part1, part2 = _rotate(x, 3)
        return part1 * cos + part2 * sin, np.abs(part1 * cos) + np.abs(part2 * sin)
    rot = _rotate(x, mode)
    return x * cos + rot * sin, np.abs(x * cos) + np.abs(rot * sin)


def _chunks(t, n):
    return np.split(t, n, axis=-1)


def _dx(dy, cos, sin, mode, mag=False):
    """dx of the gradient formulas; with mag, the same formula on the terms' magnitudes."""
    f = np.abs if mag else (lambda v: v)
    sub = (lambda a, b: f(a) + f(b)) if mag else (lambda a, b: a - b)
    add = (lambda a, b: f(a) + f(b)) if mag else (lambda a, b: a + b)
    if mode in (0, 2):
        n = 2 if mode == 0 else 4
        g, c, s = _chunks(dy, n), _chunks(cos, n), _chunks(sin, n)
        parts = []
        for h in range(0, n, 2):
            parts += [add(c[h] * g[h], s[h + 1] * g[h + 1]), sub(c[h + 1] * g[h + 1], s[h] * g[h])]
        return np.concatenate(parts, axis=-1)
    if mode == 1:
        g1, g2 = dy[..., ::2], dy[..., 1::2]
        c1, c2 = cos[..., ::2], cos[..., 1::2]
        s1, s2 = sin[..., ::2], sin[..., 1::2]
    else:
        (g1, g2), (c1, c2), (s1, s2) = _chunks(dy, 2), _chunks(cos, 2), _chunks(sin, 2)
    return np.stack((add(c1 * g1, s2 * g2), sub(c2 * g2, s1 * g1)), axis=-1).reshape(dy.shape)


def broadcast_axes(x_shape, cos_shape):
    """The leading axes over which cos broadcasts (size 1 against a larger x dim)."""
    return tuple(k for k in range(3) if cos_shape[k] == 1 and x_shape[k] != 1)


def rope_grad_f64(dy, cos, sin, x, mode):
    """((dx, dx_scale), (dcos, dsin, sum_scale) or None when x is None) in float64."""
    dy, cos64, sin64 = _f64(dy), _f64(cos), _f64(sin)
    cb, sb = np.broadcast_to(cos64, dy.shape), np.broadcast_to(sin64, dy.shape)
    dx = (_dx(dy, cb, sb, mode), _dx(dy, cb, sb, mode, mag=True))
    if x is None:
        return dx, None
    x = _f64(x)
    axes = broadcast_axes(dy.shape, np.shape(cos))
    if mode == 3:
        xc, xs = _rotate(x, 3)
    else:
        xc, xs = x, _rotate(x, mode)
    dcos = np.sum(dy * xc, axis=axes, keepdims=True)
    dsin = np.sum(dy * xs, axis=axes, keepdims=True)
    scale = np.sum(np.abs(dy * xc), axis=axes, keepdims=True) + np.sum(np.abs(dy * xs), axis=axes, keepdims=True)
    return dx, (dcos, dsin, scale)


def assert_rope_close(got, ref, scale, products, what="result"):
    """got (any float dtype) within (products + 1) * u32 * scale of ref, plus half an ulp of got's dtype
    at the value when got is float16 / bfloat16."""
    got = np.asarray(got)
    dtype = got.dtype
    ref = np.broadcast_to(ref, got.shape)
    scale = np.broadcast_to(scale, got.shape)
    g = got.astype(np.float64)
    bound = (products + 1) * U32 * scale + 1e-300
    if dtype != F32:
        bound = bound + 0.5 * ulp(np.abs(ref) + bound, dtype)
    err = np.abs(g - ref)
    bad = ~(err <= bound)
    if bad.any():
        i = np.flatnonzero(bad)[:8]
        raise AssertionError(f"{what}: {bad.sum()} of {bad.size} {dtype} values out of tolerance: "
                             f"got={g.ravel()[i]}, ref={ref.ravel()[i]}, bound={bound.ravel()[i]}")
