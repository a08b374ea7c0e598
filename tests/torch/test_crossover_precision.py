"""The size crossovers never change what a call accepts or how precise it is (issue 29).

Below a measured size (``tilegrad.torch._eager.CROSSOVER``) an eager call runs torch ops instead of
tilegrad's kernel. Every tilegrad.torch function is called here with the same arguments just below
and just above each of its crossovers (16-bit inputs, float32 class weights, int32 targets, every
reduction, ignore_index and label smoothing where they apply), and where a dtype has no crossover at
a size that once had one; forward and every gradient are compared with one tolerance against torch's
functions (or the formula) in float64 on the same values. The tolerance is the promise of the README:
float32 arithmetic, each output rounded once.
"""

import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch._eager import CROSSOVER  # noqa: E402
from reference.torch_compare import UNIT_ROUNDOFF, autograd_node_names  # noqa: E402  (tests/torch/conftest.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
DTYPES = {"f32": F32, "f16": F16, "bf16": BF16}
UNIT = UNIT_ROUNDOFF  # the largest relative error of one rounding to the dtype
# Tolerances: (unit roundoffs, share of the tensor's largest value added to each element's own).
# float32 results: float32 sums, whose error grows with their length: relative to the largest value.
F32_SUMS = (32.0, 1.0)
# 16-bit results: one rounding is at most one unit, a quarter more for float32 arithmetic, and 1/256
# of the largest value for float32 cancellation.
ROUNDED_ONCE = (1.25, 1 / 256)
# Cross entropy's backward starts from the saved 16-bit log_prob (an error of u * |log p| in p).
FROM_LOG_PROB = (8.0, 1 / 256)
# The fused linear cross entropy rounds the logits' gradient G to the input dtype before its GEMMs:
# grad_weight_j = sum_i G_ij x_i is within u * sum_i |G_ij x_i| (the bound of its gradient filter).
ROUNDED_GEMM_OPERAND = (2.0, 1.0)


def assert_rounded_once(got, want, dtype, what, tolerance=ROUNDED_ONCE):
    """Each element within ``units`` unit roundoffs of its float64 value plus ``share`` of the
    tensor's largest one (``tolerance``; float32 results: ``F32_SUMS``), and of the smallest normal
    number (subnormal results). torch's 16-bit formulas, which round every intermediate, miss
    ``ROUNDED_ONCE`` by a factor of 1.4 to 500 (measured)."""
    got, want = got.detach().double(), want.detach().double()
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, float64 {tuple(want.shape)}"
    if not want.numel():
        return
    units, share = F32_SUMS if dtype == F32 else tolerance
    largest = want.abs().max().item()
    bound = units * UNIT[dtype] * (want.abs() + share * largest + torch.finfo(dtype).smallest_normal)
    err = (got - want).abs()
    if not bool((err <= bound).all()):
        i = (err - bound).nan_to_num(math.inf).argmax()
        pytest.fail(f"{what} ({dtype}): |error| {err.flatten()[i]:.3g} > {bound.flatten()[i]:.3g} at element "
                    f"{i.item()}: float64 {want.flatten()[i]:.6g}, got {got.flatten()[i]:.6g}")


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(shape, seed, scale=1.0):
    return torch.randn(shape, generator=_gen(seed), dtype=torch.float64) * scale


def _leaf(values, dtype, grad=True):
    return values.to(dtype).requires_grad_(grad)


def _float64(t):
    """The same values in float64 (a leaf when ``t`` requires grad); integer tensors as they are."""
    if not t.is_floating_point():
        return t
    return t.detach().double().requires_grad_(t.requires_grad)


def _kernel_size(dtype, **sizes) -> bool:
    """A call of these sizes (CROSSOVER entry -> the call's size in its measure) is at or above every
    crossover at ``dtype``: the kernel runs."""
    return all(n >= CROSSOVER[op].get(dtype, 0) for op, n in sizes.items())


def _on_kernel(out) -> bool:
    return any(n.startswith(("Tilegrad", "LinearCrossEntropyFunction")) for n in autograd_node_names(out))


def compare(call, reference, tensors, dtype, expect_kernel, tolerance=ROUNDED_ONCE):
    """``call(*tensors)`` against ``reference`` on the same values in float64: the outputs, then after
    one backward with the same upstream gradient, the gradient of every tensor that requires one.
    ``expect_kernel``: the call ran tilegrad's kernel (True) or the composite below the crossover."""
    high = [_float64(t) for t in tensors]
    outs, wants = call(*tensors), reference(*high)
    outs = outs if isinstance(outs, tuple) else (outs,)
    wants = wants if isinstance(wants, tuple) else (wants,)
    assert _on_kernel(outs[0]) == expect_kernel, f"kernel path {not expect_kernel}, expected {expect_kernel}"
    for i, (out, want) in enumerate(zip(outs, wants)):
        assert out.dtype == dtype, f"output {i}: dtype {out.dtype}"
        assert_rounded_once(out, want, dtype, f"output {i}", tolerance)
    ups = [_randn(out.shape, 90 + i).to(out.dtype) for i, out in enumerate(outs)]
    torch.autograd.backward(list(outs), ups)
    torch.autograd.backward(list(wants), [u.double() for u in ups])
    for i, (low, ref) in enumerate(zip(tensors, high)):
        if isinstance(low, torch.Tensor) and low.requires_grad:
            assert low.grad.dtype == low.dtype, f"gradient {i}: dtype {low.grad.dtype}, tensor {low.dtype}"
            assert_rounded_once(low.grad, ref.grad, low.dtype, f"gradient of tensor {i}", tolerance)


# ---------------------------------------------------------------------------------------------------
# The sizes: for each CROSSOVER entry the number of rows (of the op's row shape) just below and at the
# crossover, and a small size for a dtype without one (every call there is on the kernel).


def _rows_around(op, dtype, per_row, side, small=8):
    """(rows, on the kernel) for ``side`` "below" / "above" the crossover of ``op`` at ``dtype``, each
    row holding ``per_row`` units of the crossover's measure; "small" (``small`` rows) for a dtype
    with none."""
    threshold = CROSSOVER[op].get(dtype, 0)
    if side == "small":
        assert threshold == 0, f"{op} {dtype} has a crossover ({threshold}): test below and above it"
        return small, True
    assert threshold > 0, f"{op} {dtype} has no crossover"
    rows = -(-threshold // per_row)
    if side == "below":
        assert (rows - 1) * per_row < threshold
        return rows - 1, False
    assert rows * per_row >= threshold
    return rows, True


def _sides(op):
    """(dtype name, side) pairs: below and above where the dtype has a crossover, else small."""
    out = []
    for name, dtype in DTYPES.items():
        out += [(name, "below"), (name, "above")] if CROSSOVER[op].get(dtype, 0) else [(name, "small")]
    return out


def _params(op, variants):
    return [pytest.param(d, s, v, id=f"{d}-{s}-{v}") for d, s in _sides(op) for v in variants]


# ---------------------------------------------------------------------------------------------------
# silu


@pytest.mark.parametrize("dtype_name, side, variant", _params("silu", ["plain"]))
def test_silu(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    rows, kernel = _rows_around("silu", dtype, 256, side)
    x = _leaf(_randn((rows, 256), 1, 3.0), dtype)
    compare(tgt.silu, F.silu, [x], dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# cross_entropy: both crossovers (logits, classes); float32 class weights, int32 targets, ignored rows,
# smoothing, every reduction; the z-loss; K-dimensional input


CE_VARIANTS = ["none", "mean", "sum", "zloss", "kdim"]


def _ce_case(rows, classes, variant, dtype):
    x = _randn((rows, classes), 2, 2.0)
    target = torch.randint(0, classes, (rows,), generator=_gen(3), dtype=torch.int32)
    target[::7] = -100
    weight = torch.rand(classes, generator=_gen(4)) + 0.5  # float32 class weights whatever the logits
    if variant == "kdim":  # (N, C, d): the same rows, 4 positions per sample
        x = x[: rows // 4 * 4].reshape(rows // 4, 4, classes).transpose(1, 2)
        target = target[: rows // 4 * 4].reshape(rows // 4, 4)
    return _leaf(x, dtype), target, weight


def _ce_kwargs(variant):
    reduction = variant if variant in ("none", "mean", "sum") else "mean"
    return dict(reduction=reduction, ignore_index=-100, label_smoothing=0.1)


def _ce_reference(x, target, weight, variant):
    kwargs = _ce_kwargs(variant)
    loss = F.cross_entropy(x, target.long(), weight, **kwargs)
    if variant != "zloss":
        return loss
    kept = target != -100
    zloss = torch.where(kept, 1e-3 * torch.logsumexp(x, dim=1).square(), 0.0).sum() / kept.sum()
    return loss + zloss, zloss


@pytest.mark.parametrize("measure", ["cross_entropy", "cross_entropy_classes"])
@pytest.mark.parametrize("dtype_name, side, variant", _params("cross_entropy", CE_VARIANTS))
def test_cross_entropy(dtype_name, side, variant, measure):
    dtype = DTYPES[dtype_name]
    if measure == "cross_entropy":
        classes = 256
        rows, kernel = _rows_around(measure, dtype, classes, side)
    else:  # as many rows as the logits' crossover asks, 127 or 128 classes
        threshold = CROSSOVER[measure].get(dtype, 0)
        classes = threshold - 1 if side == "below" else max(threshold, 8)
        rows = -(-CROSSOVER["cross_entropy"].get(dtype, 0) // classes) + 4
        kernel = side != "below"
    x, target, weight = _ce_case(rows, classes, variant, dtype)
    kwargs = _ce_kwargs(variant)
    if variant == "zloss":
        kwargs.update(z_loss_scale=1e-3, return_z_loss=True)
    compare(lambda x, t, w: tgt.cross_entropy(x, t, w, **kwargs),
            lambda x, t, w: _ce_reference(x, t, w, variant), [x, target, weight], dtype, kernel, FROM_LOG_PROB)


# ---------------------------------------------------------------------------------------------------
# embedding: many tokens per row (the weight gradient sums them), padding_idx and scale_grad_by_freq


@pytest.mark.parametrize("dtype_name, side, variant", _params("embedding", ["plain", "padding_freq"]))
def test_embedding(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    dim = 64
    tokens, kernel = _rows_around("embedding", dtype, dim, side, small=1024)
    ids = torch.randint(0, 8, (tokens,), generator=_gen(5))
    weight = _leaf(_randn((8, dim), 6), dtype)
    kwargs = dict(padding_idx=0, scale_grad_by_freq=True) if variant == "padding_freq" else {}
    compare(lambda i, w: tgt.embedding(i, w, **kwargs), lambda i, w: F.embedding(i, w, **kwargs),
            [ids, weight], dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# binary_cross_entropy_with_logits: float32 weight and pos_weight, every reduction


@pytest.mark.parametrize("dtype_name, side, variant",
                         _params("binary_cross_entropy_with_logits", ["none", "mean", "sum"]))
def test_binary_cross_entropy_with_logits(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    rows, kernel = _rows_around("binary_cross_entropy_with_logits", dtype, 40, side)
    x = _leaf(_randn((rows, 40), 7, 3.0), dtype)
    y = torch.rand((rows, 40), generator=_gen(8), dtype=torch.float64).to(dtype)
    weight = torch.rand(40, generator=_gen(9)) + 0.5
    pos_weight = torch.rand(40, generator=_gen(10)) * 3
    compare(lambda x, y, w, pw: tgt.binary_cross_entropy_with_logits(x, y, w, reduction=variant, pos_weight=pw),
            lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, reduction=variant, pos_weight=pw),
            [x, y, weight, pos_weight], dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# linear_cross_entropy: bias, float32 class weights, int32 targets, ignored rows, smoothing, every
# reduction; the crossover counts multiply-adds rows x H x V


@pytest.mark.parametrize("dtype_name, side, variant", _params("linear_cross_entropy", ["none", "mean", "sum"]))
def test_linear_cross_entropy(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    hidden, vocab = 128, 512
    rows, kernel = _rows_around("linear_cross_entropy", dtype, hidden * vocab, side, small=256)
    x = _leaf(_randn((rows, hidden), 11), dtype)
    w = _leaf(_randn((vocab, hidden), 12, 0.1), dtype)
    b = _leaf(_randn(vocab, 13, 0.1), dtype)
    target = torch.randint(0, vocab, (rows,), generator=_gen(14), dtype=torch.int32)
    target[::5] = -100
    class_weight = torch.rand(vocab, generator=_gen(15)) + 0.5
    kwargs = dict(reduction=variant, ignore_index=-100, label_smoothing=0.1)
    compare(lambda x, w, t, b, cw: tgt.linear_cross_entropy(x, w, t, linear_bias=b, weight=cw, **kwargs),
            lambda x, w, t, b, cw: F.linear_cross_entropy(x, w, t.long(), linear_bias=b, weight=cw, **kwargs),
            [x, w, target, b, class_weight], dtype, kernel, ROUNDED_GEMM_OPERAND)


# ---------------------------------------------------------------------------------------------------
# rms_norm: a weight of the input's dtype, a float32 weight, no weight


def _rms_norm_reference(x, w, eps):
    """The formula: x / sqrt(mean(x^2) + eps) * w, eps the input dtype's machine epsilon."""
    y = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps)
    return y if w is None else y * w


@pytest.mark.parametrize("dtype_name, side, variant", _params("rms_norm", ["same_dtype", "f32_weight", "none"]))
def test_rms_norm(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    rows, kernel = _rows_around("rms_norm", dtype, 128, side)
    x = _leaf(_randn((rows, 128), 16), dtype)
    tensors = [x]
    if variant != "none":
        tensors.append(_leaf(_randn(128, 17) * 0.5 + 1.0, dtype if variant == "same_dtype" else F32))
    eps = torch.finfo(dtype).eps
    compare(lambda x, w=None: tgt.rms_norm(x, (128,), w),
            lambda x, w=None: _rms_norm_reference(x, w, eps), tensors, dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# silu_mul, swiglu


@pytest.mark.parametrize("dtype_name, side, variant", _params("silu_mul", ["plain"]))
def test_silu_mul(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    rows, kernel = _rows_around("silu_mul", dtype, 256, side)
    gate, up = _leaf(_randn((rows, 256), 18, 3.0), dtype), _leaf(_randn((rows, 256), 19), dtype)
    compare(tgt.silu_mul, lambda g, u: F.silu(g) * u, [gate, up], dtype, kernel)


@pytest.mark.parametrize("dtype_name, side, variant", _params("swiglu", ["last", "first"]))
def test_swiglu(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    rows, kernel = _rows_around("swiglu", dtype, 512, side)
    dim = -1 if variant == "last" else 0
    shape = (rows, 512) if dim == -1 else (512, rows)
    x = _leaf(_randn(shape, 20, 3.0), dtype)

    def reference(x):
        a, b = x.chunk(2, dim)
        return F.silu(a) * b
    compare(lambda x: tgt.swiglu(x, dim), reference, [x], dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# rotary position embedding: modes 0-3, cos / sin with gradients; Hugging Face's apply_rotary_pos_emb


def _rope_reference(x, cos, sin, mode):
    """The vendor's formulas (float64), written from the specification."""
    d = x.shape[-1]
    if mode == 0:
        rotated = torch.cat((-x[..., d // 2:], x[..., : d // 2]), -1)
    elif mode == 1:
        rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)
    elif mode == 2:
        q = d // 4
        rotated = torch.cat((-x[..., q:2 * q], x[..., :q], -x[..., 3 * q:], x[..., 2 * q:3 * q]), -1)
    else:
        x = torch.cat((x[..., 0::2], x[..., 1::2]), -1)
        rotated = torch.cat((-x[..., d // 2:], x[..., : d // 2]), -1)
    return x * cos + rotated * sin


@pytest.mark.parametrize("dtype_name, side, variant", _params("rope", ["mode0", "mode1", "mode2", "mode3",
                                                                       "trig_grad"]))
def test_rotary_position_embedding(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    seq, kernel = _rows_around("rope", dtype, 4 * 64, side)
    mode = 0 if variant == "trig_grad" else int(variant[-1])
    x = _leaf(_randn((1, seq, 4, 64), 21), dtype)
    angle = _randn((1, seq, 1, 64), 22, 3.0)
    trig_grad = variant == "trig_grad"
    cos, sin = _leaf(angle.cos(), dtype, trig_grad), _leaf(angle.sin(), dtype, trig_grad)
    compare(lambda x, c, s: tgt.rotary_position_embedding(x, c, s, mode),
            lambda x, c, s: _rope_reference(x, c, s, mode), [x, cos, sin], dtype, kernel)


@pytest.mark.parametrize("dtype_name, side, variant", _params("rope", ["plain"]))
def test_apply_rotary_pos_emb(dtype_name, side, variant):
    dtype = DTYPES[dtype_name]
    seq, kernel = _rows_around("rope", dtype, 4 * 64, side)
    q, k = _leaf(_randn((1, 4, seq, 64), 23), dtype), _leaf(_randn((1, 4, seq, 64), 24), dtype)
    angle = _randn((1, seq, 64), 25, 3.0)
    cos, sin = angle.cos().to(dtype), angle.sin().to(dtype)

    def reference(q, k, cos, sin):
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        return _rope_reference(q, cos, sin, 0), _rope_reference(k, cos, sin, 0)
    compare(tgt.apply_rotary_pos_emb, reference, [q, k, cos, sin], dtype, kernel)


# ---------------------------------------------------------------------------------------------------
# The cases the issue reported, at their sizes


@pytest.mark.parametrize("rows", [64, 8192])
def test_cross_entropy_bf16_logits_with_float32_class_weight_at_every_size(rows):
    """Accepted at 8192 rows, refused at 64 ("expected scalar type BFloat16 but found Float") before."""
    x = _leaf(_randn((rows, 128), 30, 2.0), BF16)
    target = torch.randint(0, 128, (rows,), generator=_gen(31))
    weight = torch.rand(128, generator=_gen(32)) + 0.5
    compare(lambda x, t, w: tgt.cross_entropy(x, t, weight=w), lambda x, t, w: F.cross_entropy(x, t, weight=w),
            [x, target, weight], BF16, expect_kernel=_kernel_size(BF16, cross_entropy=rows * 128,
                                                                  cross_entropy_classes=128),
            tolerance=FROM_LOG_PROB)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bf16_binary_cross_entropy_with_logits_gradient_rounded_once_at_16x40(reduction):
    """torch's bf16 formula, which ran below the crossover, was off by up to 100 unit roundoffs (the
    composite or the kernel now, by the crossover: both rounded once)."""
    x = _leaf(_randn((16, 40), 33, 3.0), BF16)
    y = torch.rand((16, 40), generator=_gen(34), dtype=torch.float64).to(BF16)
    compare(lambda x, y: tgt.binary_cross_entropy_with_logits(x, y, reduction=reduction),
            lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction=reduction), [x, y], BF16,
            expect_kernel=_kernel_size(BF16, binary_cross_entropy_with_logits=16 * 40))


@pytest.mark.parametrize("dtype_name", ["bf16", "f16"])
def test_16bit_linear_cross_entropy_keeps_float32_class_weights_on_tiny_problems(dtype_name):
    """Tiny 16-bit problems ran torch's function with the class weights rounded to 16 bits and 16-bit
    logits; the kernel keeps them in float32 at every size."""
    dtype = DTYPES[dtype_name]
    x, w = _leaf(_randn((4, 16), 35), dtype), _leaf(_randn((32, 16), 36, 0.5), dtype)
    target = torch.randint(0, 32, (4,), generator=_gen(37))
    class_weight = torch.rand(32, generator=_gen(38)) + 0.5
    compare(lambda x, w, t, cw: tgt.linear_cross_entropy(x, w, t, weight=cw),
            lambda x, w, t, cw: F.linear_cross_entropy(x, w, t, weight=cw), [x, w, target, class_weight], dtype,
            expect_kernel=True, tolerance=ROUNDED_GEMM_OPERAND)


@pytest.mark.parametrize("reduction", ["none", "sum"])
def test_torch_func_takes_the_composite_with_the_kernels_numerics(reduction):
    """Under torch.func (the composite, whatever the size) a bf16 gradient is rounded once too."""
    x = _randn((64, 40), 39, 3.0).to(BF16)
    y = torch.rand((64, 40), generator=_gen(40), dtype=torch.float64).to(BF16)
    up = _randn((64, 40) if reduction == "none" else (), 41).to(BF16)

    def loss(x):
        return (tgt.binary_cross_entropy_with_logits(x, y, reduction=reduction) * up).sum()
    got = torch.func.grad(loss)(x)
    x64 = x.double().requires_grad_()
    F.binary_cross_entropy_with_logits(x64, y.double(), reduction=reduction).backward(up.double())
    assert got.dtype == BF16
    assert_rounded_once(got, x64.grad, BF16, "gradient under torch.func.grad")
