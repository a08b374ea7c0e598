"""tilegrad.torch.functional against torch computed in float64 on the same rounded inputs: forward
values and gradients for float32 and bfloat16 (float16 where cheap), odd shapes, transposed / sliced /
expanded inputs, every reduction, ignore_index (also every row ignored), class weights, label smoothing,
z-loss (float64 NumPy formula in tests/reference), (C,) and (N, C, d1, d2) inputs, BCE weight +
pos_weight with a target that requires grad, embedding padding_idx / scale_grad_by_freq, linear cross
entropy's fused, per-row and composite paths; fallbacks to torch and the errors for bad arguments.
Tolerances: reference.torch_compare.tolerance (a few unit roundoffs of the dtype, relative to the largest value)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# small tensors: tilegrad's kernels, not the crossover to torch (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("kernels_at_every_size")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from reference.torch_compare import assert_matches, rounded  # noqa: E402
from reference.cross_entropy import cross_entropy_with_zloss  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16]
REDUCTIONS = ["none", "mean", "sum"]


def upstream(shape, dtype, seed=7):
    """A random upstream gradient (rounded to dtype) and its float64 copy; 1 for a scalar loss."""
    if len(shape) == 0:
        return torch.ones((), dtype=dtype), torch.ones((), dtype=torch.float64)
    return rounded(shape, dtype, seed=seed)


def grads_of(loss, grad, *tensors):
    """d(sum(loss * grad)) / d tensors."""
    return torch.autograd.grad(loss, tensors, grad)


# ---------------------------------------------------------------------------------------------------
# cross_entropy


def ce_both(x, x64, target, dtype, **kwargs):
    """tilegrad's loss and input gradient next to torch float64's on the same values."""
    weight = kwargs.pop("weight", None)
    xa = x.detach().requires_grad_()
    xr = x64.detach().requires_grad_()
    loss = tgt.cross_entropy(xa, target, weight, **kwargs)
    ref = F.cross_entropy(xr, target, None if weight is None else weight.to(torch.float64), **kwargs)
    g, g64 = upstream(ref.shape, dtype)
    (grad,) = grads_of(loss, g, xa)
    (grad_ref,) = grads_of(ref, g64, xr)
    return loss, ref, grad, grad_ref


@pytest.mark.parametrize("dtype", DTYPES + [torch.float16])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("variant", ["plain", "ignore", "weight", "smoothing", "weight+smoothing+ignore"])
def test_cross_entropy_matches_torch_float64(dtype, reduction, variant):
    x, x64 = rounded((37, 53), dtype, scale=2.0)
    target = torch.randint(0, 53, (37,), generator=torch.Generator().manual_seed(1))
    kwargs = {"reduction": reduction}
    if "ignore" in variant:
        target[::5] = 7 if variant == "ignore" else -100
        kwargs["ignore_index"] = 7 if variant == "ignore" else -100
    if "weight" in variant:
        kwargs["weight"] = torch.rand(53, generator=torch.Generator().manual_seed(2)) + 0.1
    if "smoothing" in variant:
        kwargs["label_smoothing"] = 0.15
    loss, ref, grad, grad_ref = ce_both(x, x64, target, dtype, **kwargs)
    assert loss.dtype == dtype and grad.dtype == dtype
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad, grad_ref, dtype, "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_ignore_index_outside_the_classes(dtype, reduction):
    """ignore_index 1000 (not a class) masks its rows like -100; a strided upstream gradient for none."""
    x, x64 = rounded((7, 9), dtype, scale=2.0)
    target = torch.tensor([0, 1000, 8, 3, 1000, 5, 2])
    xa, xr = x.detach().requires_grad_(), x64.detach().requires_grad_()
    loss = tgt.cross_entropy(xa, target, ignore_index=1000, reduction=reduction, label_smoothing=0.2)
    ref = F.cross_entropy(xr, target, ignore_index=1000, reduction=reduction, label_smoothing=0.2)
    g64 = torch.randn(14, generator=torch.Generator().manual_seed(30), dtype=torch.float64)[::2].to(dtype).double()
    g64 = g64 if reduction == "none" else g64[0]
    (grad,) = grads_of(loss, g64.to(dtype), xa)
    (grad_ref,) = grads_of(ref, g64, xr)
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad, grad_ref, dtype, "grad")


def _strided_logits(kind, dtype):
    """(13, 29) logits as a transposed, a sliced or an expanded (stride-0 rows) view, and float64."""
    if kind == "transposed":
        base, _ = rounded((29, 13), dtype, scale=2.0)
        x = base.t()
    elif kind == "sliced":
        base, _ = rounded((26, 61), dtype, scale=2.0)
        x = base[::2, 3:61:2]
    else:  # expanded: every row the same memory
        base, _ = rounded((1, 29), dtype, scale=2.0)
        x = base.expand(13, 29)
    assert not x.is_contiguous()
    return x, x.to(torch.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["transposed", "sliced", "expanded"])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cross_entropy_strided_input(dtype, kind, reduction):
    x, x64 = _strided_logits(kind, dtype)
    target = torch.randint(0, 29, (26,), generator=torch.Generator().manual_seed(3))[::2]
    loss, ref, grad, grad_ref = ce_both(x, x64, target, dtype, reduction=reduction, label_smoothing=0.05)
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad, grad_ref, dtype, "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_single_sample_input(dtype, reduction):
    """(C,) logits and a 0-d target, as torch: scalar loss for every reduction."""
    x, x64 = rounded((41,), dtype, scale=2.0)
    loss, ref, grad, grad_ref = ce_both(x, x64, torch.tensor(5), dtype, reduction=reduction, label_smoothing=0.1)
    assert loss.shape == ref.shape == ()
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad, grad_ref, dtype, "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", ["contiguous", "channels-last"])
def test_cross_entropy_k_dimensional(dtype, reduction, layout):
    """(N, C, d1, d2) logits with (N, d1, d2) targets, class weights, smoothing and ignored positions."""
    x, _ = rounded((3, 11, 4, 5), dtype, scale=2.0)
    if layout == "channels-last":
        x = x.contiguous(memory_format=torch.channels_last)
    x64 = x.to(torch.float64)
    target = torch.randint(0, 11, (3, 4, 5), generator=torch.Generator().manual_seed(4))
    target[0, 1] = -100
    weight = torch.rand(11, generator=torch.Generator().manual_seed(5)) + 0.2
    loss, ref, grad, grad_ref = ce_both(x, x64, target, dtype, weight=weight, reduction=reduction,
                                        label_smoothing=0.1)
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad, grad_ref, dtype, "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_every_row_ignored(dtype, reduction):
    """mean -> NaN (0/0, as torch), sum -> 0, none -> zeros; the gradient is zero everywhere."""
    x, x64 = rounded((6, 9), dtype)
    target = torch.full((6,), -100)
    loss, ref, grad, grad_ref = ce_both(x, x64, target, dtype, reduction=reduction)
    assert torch.equal(torch.isnan(loss), torch.isnan(ref))
    if reduction == "mean":
        assert torch.isnan(loss)
    else:
        assert torch.all(loss == 0)
    assert torch.all(grad == 0) and torch.all(grad_ref == 0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_z_loss_against_float64_formula(dtype, reduction, weighted):
    """loss = CE + z * lse**2 per kept row (mean: CE over the weight sum, z over the kept-row count);
    return_z_loss gives the z term alone; gradients through both outputs."""
    z = 1e-2
    x, x64 = rounded((19, 23), dtype, scale=3.0, offset=2.0)  # offset: lse far from 0
    target = torch.randint(0, 23, (19,), generator=torch.Generator().manual_seed(6))
    target[[2, 11]] = -100
    weight = (torch.rand(23, generator=torch.Generator().manual_seed(8)) + 0.5) if weighted else None
    xa = x.detach().requires_grad_()
    loss, zloss = tgt.cross_entropy(xa, target, weight, reduction=reduction, label_smoothing=0.1, z_loss_scale=z,
                                    return_z_loss=True)
    g, g64 = upstream(loss.shape, dtype, seed=9)
    gz, gz64 = upstream(loss.shape, dtype, seed=10)
    if reduction != "none":
        gz, gz64 = gz * 0.5, gz64 * 0.5
    (grad,) = torch.autograd.grad((loss, zloss), (xa,), (g, gz))
    ref_loss, ref_zloss, ref_grad = cross_entropy_with_zloss(
        x64.numpy(), target.numpy(), None if weight is None else weight.double().numpy(), -100, reduction, 0.1, z,
        g64.numpy(), gz64.numpy())
    assert_matches(loss, torch.from_numpy(ref_loss), dtype, "loss")
    assert_matches(zloss, torch.from_numpy(ref_zloss), dtype, "z-loss")
    assert_matches(grad, torch.from_numpy(ref_grad), dtype, "grad")
    # without return_z_loss: the same loss, a single tensor
    plain = tgt.cross_entropy(x, target, weight, reduction=reduction, label_smoothing=0.1, z_loss_scale=z)
    assert torch.is_tensor(plain)
    assert torch.equal(plain, loss.detach())


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_z_loss_k_dimensional(reduction):
    """(N, C, d) logits with z-loss equal the (N*d, C) rows' result."""
    x, _ = rounded((2, 7, 5), torch.float32, scale=2.0)
    target = torch.randint(0, 7, (2, 5), generator=torch.Generator().manual_seed(11))
    target[1, 2] = -100
    loss, zloss = tgt.cross_entropy(x, target, reduction=reduction, z_loss_scale=0.05, return_z_loss=True)
    rows = x.movedim(1, -1).reshape(-1, 7).to(torch.float64)
    ref_loss, ref_zloss, _ = cross_entropy_with_zloss(rows.numpy(), target.reshape(-1).numpy(), None, -100,
                                                      reduction, 0.0, 0.05)
    shape = (2, 5) if reduction == "none" else ()
    assert_matches(loss, torch.from_numpy(ref_loss).reshape(shape), torch.float32, "loss")
    assert_matches(zloss, torch.from_numpy(ref_zloss).reshape(shape), torch.float32, "z-loss")


def test_cross_entropy_without_grad_and_legacy_reduction():
    x, x64 = rounded((8, 10), torch.float32)
    target = torch.randint(0, 10, (8,), generator=torch.Generator().manual_seed(12))
    with torch.no_grad():
        loss = tgt.cross_entropy(x.requires_grad_(), target)
    assert loss.grad_fn is None
    assert_matches(loss, F.cross_entropy(x64, target), torch.float32, "no-grad loss")
    with pytest.warns(UserWarning):
        summed = tgt.cross_entropy(x, target, None, False)  # size_average=False -> "sum", as torch
    assert_matches(summed, F.cross_entropy(x64, target, reduction="sum"), torch.float32, "legacy sum")


def test_cross_entropy_probability_targets_fall_back():
    x, x64 = rounded((5, 6), torch.float32)
    probs = torch.softmax(rounded((5, 6), torch.float32, seed=3)[0], dim=1)
    assert_matches(tgt.cross_entropy(x, probs, label_smoothing=0.1),
                   F.cross_entropy(x64, probs.double(), label_smoothing=0.1), torch.float32, "soft targets")


def test_cross_entropy_out_of_range_target_raises_index_error():
    x, _ = rounded((5, 6), torch.float32)
    with pytest.raises(IndexError, match="99"):
        tgt.cross_entropy(x, torch.tensor([0, 1, 2, 3, 99]))


# ---------------------------------------------------------------------------------------------------
# embedding


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("padding_idx", [None, 3, -1, -13])
@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
def test_embedding_matches_torch_float64(dtype, padding_idx, scale_grad_by_freq):
    """Forward is the exact rows; the weight gradient (repeated indices, the padding row among them)
    matches torch float64. padding_idx -13 is row 0 of 13."""
    w, w64 = rounded((13, 9), dtype)
    idx = torch.randint(0, 13, (4, 6), generator=torch.Generator().manual_seed(13))
    idx[0, :3] = torch.tensor([3, 12, 0])  # the padding rows (3, 12 = -1, 0 = -13) occur
    wa, wr = w.detach().requires_grad_(), w64.detach().requires_grad_()
    out = tgt.embedding(idx, wa, padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    ref = F.embedding(idx, wr, padding_idx, scale_grad_by_freq=scale_grad_by_freq)
    assert out.dtype == dtype and torch.equal(out.detach().double(), ref.detach())
    g, g64 = upstream(ref.shape, dtype)
    (grad,) = grads_of(out, g, wa)
    (grad_ref,) = grads_of(ref, g64, wr)
    assert_matches(grad, grad_ref, dtype, "grad_weight")
    if padding_idx is not None:
        assert torch.all(grad[padding_idx] == 0)


@pytest.mark.parametrize("grad_layout", ["transposed", "expanded"])
def test_embedding_strided_weight_and_gradient(grad_layout):
    """A transposed weight view; a gradient that arrives transposed, or expanded (from .sum())."""
    base, _ = rounded((9, 17), torch.float32)
    w = base.t()  # (17, 9), not contiguous
    w64 = w.to(torch.float64)
    idx = torch.randint(0, 17, (5, 4), generator=torch.Generator().manual_seed(14)).to(torch.int32)
    wa, wr = w.detach().requires_grad_(), w64.detach().requires_grad_()
    out, ref = tgt.embedding(idx, wa), F.embedding(idx.long(), wr)
    if grad_layout == "transposed":
        g, g64 = rounded((9, 4, 5), torch.float32, seed=15)
        loss, loss_ref = (out.permute(2, 1, 0) * g).sum(), (ref.permute(2, 1, 0) * g64).sum()
    else:
        loss, loss_ref = out.sum(), ref.sum()
    loss.backward()
    loss_ref.backward()
    assert_matches(wa.grad, wr.grad, torch.float32, "grad_weight")


def test_embedding_max_norm_and_sparse_fall_back_to_torch():
    w, _ = rounded((11, 4), torch.float32, scale=3.0)
    idx = torch.tensor([[1, 2, 1], [10, 0, 2]])
    wa, wr = w.clone().requires_grad_(), w.clone().requires_grad_()
    assert torch.equal(tgt.embedding(idx, wa.detach().clone(), max_norm=1.0), F.embedding(idx, wr.detach().clone(),
                                                                                          max_norm=1.0))
    tgt.embedding(idx, wa, sparse=True).sum().backward()
    F.embedding(idx, wr, sparse=True).sum().backward()
    assert wa.grad.is_sparse
    assert torch.equal(wa.grad.to_dense(), wr.grad.to_dense())


def test_embedding_bad_padding_idx_raises_value_error():
    w = torch.zeros(7, 3, requires_grad=True)
    for bad in (7, -8):
        with pytest.raises(ValueError, match=str(bad)):
            tgt.embedding(torch.tensor([0, 1]), w, padding_idx=bad)


# ---------------------------------------------------------------------------------------------------
# binary_cross_entropy_with_logits


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("variant", ["plain", "weight", "pos_weight", "weight+pos_weight", "row-weight"])
def test_bce_with_logits_matches_torch_float64(dtype, reduction, variant):
    """Input and target gradients (the target requires grad) against torch float64."""
    x, x64 = rounded((7, 33), dtype, scale=3.0)
    y = torch.rand(7, 33, generator=torch.Generator().manual_seed(16)).to(dtype)
    weight = pos_weight = None
    if variant in ("weight", "weight+pos_weight"):
        weight = (torch.rand(33, generator=torch.Generator().manual_seed(17)) + 0.1).to(dtype)
    if variant == "row-weight":
        weight = (torch.rand(7, 1, generator=torch.Generator().manual_seed(18)) + 0.1).to(dtype)
    if "pos_weight" in variant:
        pos_weight = (torch.rand(33, generator=torch.Generator().manual_seed(19)) * 3).to(dtype)
    xa, ya = x.detach().requires_grad_(), y.detach().requires_grad_()
    xr, yr = x64.detach().requires_grad_(), y.double().requires_grad_()
    f64 = (lambda t: None if t is None else t.double())
    loss = tgt.binary_cross_entropy_with_logits(xa, ya, weight, reduction=reduction, pos_weight=pos_weight)
    ref = F.binary_cross_entropy_with_logits(xr, yr, f64(weight), reduction=reduction, pos_weight=f64(pos_weight))
    g, g64 = upstream(ref.shape, dtype)
    grad_x, grad_y = grads_of(loss, g, xa, ya)
    ref_x, ref_y = grads_of(ref, g64, xr, yr)
    assert loss.dtype == dtype and grad_x.dtype == dtype and grad_y.dtype == dtype
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad_x, ref_x, dtype, "grad_input")
    assert_matches(grad_y, ref_y, dtype, "grad_target")


@pytest.mark.parametrize("dtype", DTYPES)
def test_bce_with_logits_strided_inputs(dtype):
    base, _ = rounded((40, 12), dtype, scale=2.0)
    x = base.t()[:, ::3]  # (12, 14), transposed and sliced
    y = torch.rand(14, generator=torch.Generator().manual_seed(20)).to(dtype).expand(12, 14)
    pos_weight = torch.full((14,), 2.0, dtype=dtype)
    xa, xr = x.detach().requires_grad_(), x.double().requires_grad_()
    loss = tgt.binary_cross_entropy_with_logits(xa, y, pos_weight=pos_weight, reduction="sum")
    ref = F.binary_cross_entropy_with_logits(xr, y.double(), pos_weight=pos_weight.double(), reduction="sum")
    loss.backward()
    ref.backward()
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(xa.grad, xr.grad, dtype, "grad_input")


def test_bce_with_logits_weight_requiring_grad_behaves_as_torch():
    """A class weight that requires grad goes to torch, which refuses it: the same error, never a
    silently dropped gradient."""
    x, _ = rounded((4, 5), torch.float32)
    y = torch.rand(4, 5, generator=torch.Generator().manual_seed(21))
    w = torch.rand(5, requires_grad=True)
    with pytest.raises(RuntimeError) as torch_error:
        F.binary_cross_entropy_with_logits(x, y, w)
    with pytest.raises(type(torch_error.value), match="weight"):
        tgt.binary_cross_entropy_with_logits(x, y, w)


# ---------------------------------------------------------------------------------------------------
# silu


@pytest.mark.parametrize("dtype", DTYPES + [torch.float16])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "expanded"])
def test_silu_matches_torch_float64(dtype, layout):
    base, _ = rounded((31, 37), dtype, scale=4.0)
    x = {"contiguous": base, "transposed": base.t(), "sliced": base[1::3, ::2],
         "expanded": base[:1].expand(5, 37)}[layout]
    xa, xr = x.detach().requires_grad_(), x.double().requires_grad_()
    out, ref = tgt.silu(xa), F.silu(xr)
    g, g64 = upstream(ref.shape, dtype)
    (grad,) = grads_of(out, g, xa)
    (grad_ref,) = grads_of(ref, g64, xr)
    assert out.dtype == dtype and grad.dtype == dtype
    assert_matches(out, ref, dtype, "silu")
    assert_matches(grad, grad_ref, dtype, "grad")


def test_silu_inplace_falls_back_to_torch():
    x, _ = rounded((6,), torch.float32)
    expected = F.silu(x.clone())
    y = x.clone()
    assert tgt.silu(y, inplace=True) is y
    assert torch.equal(y, expected)


# ---------------------------------------------------------------------------------------------------
# linear_cross_entropy


def lce_reference(h64, w64, target, bias=None, weight=None, **kwargs):
    """F.linear then F.cross_entropy over rows (class dimension last), float64."""
    logits = F.linear(h64, w64, bias)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), weight, **kwargs)
    return loss.view(target.shape) if kwargs.get("reduction") == "none" else loss


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("variant", ["fused", "bias", "class-weight", "smoothing"])
def test_linear_cross_entropy_matches_torch_float64(dtype, reduction, variant):
    """(B, T, H) hidden states, (V, H) weight, ignored targets; the fused path and the composite
    fallbacks (linear + tilegrad cross_entropy) for bias, class weight and label smoothing."""
    h, h64 = rounded((3, 7, 24), dtype, scale=0.8)
    w, w64 = rounded((45, 24), dtype, scale=0.3, seed=1)
    target = torch.randint(0, 45, (3, 7), generator=torch.Generator().manual_seed(22))
    target[0, :4] = -100
    target[2, 6] = -100
    kwargs = {"reduction": reduction}
    ref_kwargs = dict(kwargs)
    bias = bias64 = weight = weight64 = None
    if variant == "bias":
        bias, bias64 = rounded((45,), dtype, seed=2)
    if variant == "class-weight":
        weight = torch.rand(45, generator=torch.Generator().manual_seed(23)) + 0.2
        weight64 = weight.double()
    if variant == "smoothing":
        kwargs["label_smoothing"] = ref_kwargs["label_smoothing"] = 0.1
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    hr, wr = h64.detach().requires_grad_(), w64.detach().requires_grad_()
    loss = tgt.linear_cross_entropy(ha, wa, target, linear_bias=bias, weight=weight, **kwargs)
    ref = lce_reference(hr, wr, target, bias64, weight64, **ref_kwargs)
    g, g64 = upstream(ref.shape, dtype)
    grad_h, grad_w = grads_of(loss, g, ha, wa)
    ref_h, ref_w = grads_of(ref, g64, hr, wr)
    assert loss.dtype == dtype
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(grad_h, ref_h, dtype, "grad_input")
    assert_matches(grad_w, ref_w, dtype, "grad_linear_weight")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_linear_cross_entropy_2d_equals_torch_linear_cross_entropy(reduction):
    """(N, H) input: torch's own F.linear_cross_entropy in float64 is the reference."""
    h, h64 = rounded((29, 16), torch.float32)
    w, w64 = rounded((37, 16), torch.float32, scale=0.4, seed=3)
    target = torch.randint(0, 37, (29,), generator=torch.Generator().manual_seed(24))
    target[5] = -100
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    hr, wr = h64.detach().requires_grad_(), w64.detach().requires_grad_()
    loss = tgt.linear_cross_entropy(ha, wa, target, reduction=reduction)
    ref = F.linear_cross_entropy(hr, wr, target, reduction=reduction)
    g, g64 = upstream(ref.shape, torch.float32)
    assert_matches(loss, ref, torch.float32, "loss")
    for got, want, name in zip(grads_of(loss, g, ha, wa), grads_of(ref, g64, hr, wr), ("input", "weight")):
        assert_matches(got, want, torch.float32, f"grad_{name}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy_strided_input_and_weight(dtype, reduction):
    """A transposed hidden-state view and a sliced projection weight go in as views (fused path for
    mean, per-row path for none)."""
    h_base, _ = rounded((16, 9), dtype)
    w_base, _ = rounded((26, 32), dtype, scale=0.3, seed=1)
    h, w = h_base.t(), w_base[::2, ::2]  # (9, 16) transposed, (13, 16) sliced
    target = torch.randint(0, 13, (9,), generator=torch.Generator().manual_seed(31))
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    hr, wr = h.double().requires_grad_(), w.double().requires_grad_()
    loss = tgt.linear_cross_entropy(ha, wa, target, reduction=reduction)
    ref = lce_reference(hr, wr, target, reduction=reduction)
    g, g64 = upstream(ref.shape, dtype)
    assert_matches(loss, ref, dtype, "loss")
    for got, want, name in zip(grads_of(loss, g, ha, wa), grads_of(ref, g64, hr, wr), ("input", "weight")):
        assert_matches(got, want, dtype, f"grad_{name}")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_linear_cross_entropy_without_grad(reduction):
    """No gradient wanted: the statistics-only path gives the same loss."""
    h, h64 = rounded((11, 8), torch.bfloat16)
    w, w64 = rounded((19, 8), torch.bfloat16, seed=4)
    target = torch.randint(0, 19, (11,), generator=torch.Generator().manual_seed(25))
    target[3] = -100
    with torch.no_grad():
        loss = tgt.linear_cross_entropy(h.requires_grad_(), w, target, reduction=reduction)
    assert loss.grad_fn is None
    assert_matches(loss, lce_reference(h64, w64, target, reduction=reduction), torch.bfloat16, "loss")


def test_linear_cross_entropy_only_weight_requires_grad():
    h, h64 = rounded((9, 8), torch.float32)
    w, w64 = rounded((13, 8), torch.float32, seed=5)
    target = torch.randint(0, 13, (9,), generator=torch.Generator().manual_seed(26))
    wa, wr = w.detach().requires_grad_(), w64.detach().requires_grad_()
    tgt.linear_cross_entropy(h, wa, target, reduction="sum").backward()
    lce_reference(h64, wr, target, reduction="sum").backward()
    assert_matches(wa.grad, wr.grad, torch.float32, "grad_linear_weight")


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_linear_cross_entropy_filter_eps_is_the_fused_ops_filtering(reduction):
    """filter_eps reaches tilegrad.fused_linear_cross_entropy (whose filtering is tested against a float64
    reference in tests/test_fused_linear_cross_entropy_filter.py); the module takes it as an attribute;
    the loss stays exact."""
    import tilegrad as tg
    from tilegrad.torch._tensor import as_numpy
    h, _ = rounded((300, 16), torch.bfloat16)
    h = h * 0.25  # (exact) small logits: softmax spread thin, so only the targets' blocks stay
    w, _ = rounded((3000, 16), torch.bfloat16, seed=8)
    target = torch.randint(0, 100, (300,), generator=torch.Generator().manual_seed(27))
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    loss = tgt.linear_cross_entropy(ha, wa, target, reduction=reduction, filter_eps=0.05)
    loss.backward()
    ref = tg.fused_linear_cross_entropy(as_numpy(h), as_numpy(w), target.numpy(), reduction=reduction,
                                        filter_eps=0.05)
    active, total = tg.fused_linear_cross_entropy_filter_stats()
    assert 0 < active < total
    assert torch.equal(loss.detach().float(), tgt.linear_cross_entropy(h, w, target, reduction=reduction).float())
    np.testing.assert_array_equal(ha.grad.float().numpy(), ref[1].astype(np.float32))
    np.testing.assert_array_equal(wa.grad.float().numpy(), ref[2].astype(np.float32))
    module = tgt.nn.LinearCrossEntropyLoss(16, 3000, bias=False, reduction=reduction)
    module.filter_eps = 0.05
    with torch.no_grad():
        module.linear.weight.copy_(w.float())
    module(h.float(), target).backward()
    assert tg.fused_linear_cross_entropy_filter_stats()[0] < tg.fused_linear_cross_entropy_filter_stats()[1]
    with pytest.raises(ValueError, match="filter_eps"):
        tgt.linear_cross_entropy(ha, wa, target, filter_eps=-1.0)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_linear_cross_entropy_every_row_ignored(reduction):
    h, _ = rounded((4, 8), torch.float32)
    w, _ = rounded((5, 8), torch.float32, seed=6)
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    target = torch.full((4,), -100)
    loss = tgt.linear_cross_entropy(ha, wa, target, reduction=reduction)
    ref = F.linear_cross_entropy(h, w, target, reduction=reduction)
    assert torch.equal(torch.isnan(loss), torch.isnan(ref))
    loss.sum().backward()
    assert torch.all(ha.grad == 0) and torch.all(wa.grad == 0)


def test_linear_cross_entropy_out_of_range_target_raises_index_error():
    h, _ = rounded((3, 4), torch.float32)
    w, _ = rounded((5, 4), torch.float32)
    for requires_grad in (False, True):
        with pytest.raises(IndexError, match="7"):
            tgt.linear_cross_entropy(h.detach().requires_grad_(requires_grad), w, torch.tensor([0, 7, 1]))


# ---------------------------------------------------------------------------------------------------
# fallbacks and errors


def _fallback_cases(device):
    """(name, tilegrad call, torch call) on float64 (or meta) tensors that must go to torch."""
    dtype = torch.float64
    g = torch.Generator().manual_seed(27)
    x = torch.randn(6, 9, generator=g, dtype=dtype).to(device)
    t = torch.randint(0, 9, (6,), generator=g).to(device)
    w = torch.randn(9, 5, generator=g, dtype=dtype).to(device)
    y = torch.rand(6, 9, generator=g, dtype=dtype).to(device)
    pw = torch.rand(9, generator=g, dtype=dtype).to(device)
    return [
        ("silu", lambda m: m.silu(x)),
        ("cross_entropy", lambda m: m.cross_entropy(x, t, label_smoothing=0.1)),
        ("embedding", lambda m: m.embedding(t, w, padding_idx=2)),
        ("bce", lambda m: m.binary_cross_entropy_with_logits(x, y, pos_weight=pw)),
        ("linear_cross_entropy", lambda m: m.linear_cross_entropy(x[:, :5], w, t)),
    ]


@pytest.mark.parametrize("index", range(5))
def test_float64_falls_back_to_torch(index):
    name, call = _fallback_cases("cpu")[index]
    ours, theirs = call(tgt), call(F)
    assert ours.dtype == torch.float64
    assert torch.equal(ours, theirs), name
    assert ours.grad_fn is None or "tilegrad" not in type(ours.grad_fn).__name__


def test_float64_gradients_are_torch_gradients():
    x = torch.randn(6, 9, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, 9, (6,))
    tgt.cross_entropy(x, t).backward()
    ours = x.grad.clone()
    x.grad = None
    F.cross_entropy(x, t).backward()
    assert torch.equal(ours, x.grad)


@pytest.mark.parametrize("index", range(5))
def test_meta_tensors_fall_back_to_torch(index):
    name, call = _fallback_cases("meta")[index]
    ours, theirs = call(tgt), call(F)
    assert ours.device.type == "meta" and ours.shape == theirs.shape and ours.dtype == theirs.dtype, name


def test_sparse_inputs_behave_as_torch():
    """A sparse tensor goes to torch: same result, or the same error torch gives."""
    sparse = torch.randn(4, 4).to_sparse()
    target = torch.tensor([0, 1, 2, 3])
    for call in (lambda m: m.silu(sparse), lambda m: m.cross_entropy(sparse, target)):
        try:
            expected = call(F)
        except Exception as error:  # torch has no sparse kernel: the same exception type
            with pytest.raises(type(error)):
                call(tgt)
        else:
            assert torch.equal(call(tgt).to_dense(), expected.to_dense())


@pytest.mark.parametrize("call", [
    lambda x, t: tgt.cross_entropy(x, t, reduction="avg"),
    lambda x, t: tgt.binary_cross_entropy_with_logits(x, x, reduction="avg"),
    lambda x, t: tgt.linear_cross_entropy(x, x, t, reduction="avg"),
], ids=["cross_entropy", "bce", "linear_cross_entropy"])
def test_bad_reduction_raises_value_error_naming_it(call):
    x = torch.randn(4, 4)
    with pytest.raises(ValueError, match="'avg'"):
        call(x, torch.tensor([0, 1, 2, 3]))


def test_z_loss_off_tilegrads_path_raises_value_error():
    x = torch.randn(3, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="float64"):
        tgt.cross_entropy(x, torch.tensor([0, 1, 2]), z_loss_scale=1e-3)


def test_inputs_are_not_modified():
    """Every function, forward and backward: the caller's tensors keep their exact bytes."""
    x, _ = rounded((6, 9), torch.bfloat16)
    t = torch.randint(0, 9, (6,), generator=torch.Generator().manual_seed(28))
    w, _ = rounded((9, 9), torch.bfloat16, seed=1)
    y = torch.rand(6, 9).to(torch.bfloat16)
    pw = torch.rand(9).to(torch.bfloat16)
    tensors = [x, t, w, y, pw]
    before = [a.clone() for a in tensors]
    xa, wa = x.requires_grad_(), w.requires_grad_()
    losses = [tgt.silu(xa).sum(), tgt.cross_entropy(xa, t, label_smoothing=0.1, z_loss_scale=1e-3),
              tgt.embedding(t, wa, padding_idx=1).sum(), tgt.binary_cross_entropy_with_logits(xa, y, pos_weight=pw),
              tgt.linear_cross_entropy(xa, wa, t), tgt.linear_cross_entropy(xa, wa, t, reduction="none").sum()]
    torch.stack([loss.float() for loss in losses]).sum().backward()
    for a, b in zip(tensors, before):
        assert torch.equal(a.detach().view(torch.uint8) if a.is_floating_point() else a, b.view(torch.uint8)
                           if b.is_floating_point() else b)
    assert np.isfinite(xa.grad.float().numpy()).all()


# ---------------------------------------------------------------------------------------------------
# edge shapes: empty batches, 0-d indices, a single (H,) row


def _forward_backward(module, call, *leaves):
    """Result and gradients of call(module) (a tilegrad.torch or torch.nn.functional function)."""
    leaves = [leaf.detach().clone().requires_grad_() for leaf in leaves]
    out = call(module, *leaves)
    out.sum().backward()
    return out.detach(), [leaf.grad for leaf in leaves]


EDGE_CASES = {
    "cross_entropy (0, C, d)": (lambda m, x: m.cross_entropy(x, torch.zeros(0, 3, dtype=torch.long), reduction="sum"),
                                (torch.randn(0, 5, 3),)),
    "cross_entropy (0, C, d) none": (lambda m, x: m.cross_entropy(x, torch.zeros(0, 3, dtype=torch.long),
                                                                   reduction="none"), (torch.randn(0, 5, 3),)),
    "cross_entropy (N, C, 0)": (lambda m, x: m.cross_entropy(x, torch.zeros(2, 0, dtype=torch.long), reduction="sum"),
                                (torch.randn(2, 5, 0),)),
    "cross_entropy (0, C)": (lambda m, x: m.cross_entropy(x, torch.zeros(0, dtype=torch.long), reduction="sum"),
                             (torch.randn(0, 5),)),
    "embedding 0-d index": (lambda m, w: m.embedding(torch.tensor(3), w), (torch.randn(5, 4),)),
    "embedding empty indices": (lambda m, w: m.embedding(torch.zeros(0, 2, dtype=torch.long), w),
                                (torch.randn(5, 4),)),
    "bce 0-d": (lambda m, x: m.binary_cross_entropy_with_logits(x, torch.tensor(1.0)), (torch.tensor(0.3),)),
    "silu 0-d": (lambda m, x: m.silu(x), (torch.tensor(0.7),)),
    "linear_cross_entropy (H,) row": (lambda m, h, w: m.linear_cross_entropy(h, w, torch.tensor(2)),
                                      (torch.randn(4), torch.randn(6, 4))),
    "linear_cross_entropy (0, H)": (lambda m, h, w: m.linear_cross_entropy(h, w, torch.zeros(0, dtype=torch.long),
                                                                           reduction="sum"),
                                    (torch.randn(0, 4), torch.randn(6, 4))),
}


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_edge_shapes_match_torch(case):
    call, leaves = EDGE_CASES[case]
    out, grads = _forward_backward(tgt, call, *leaves)
    ref, ref_grads = _forward_backward(F, call, *leaves)
    assert out.shape == ref.shape
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6, equal_nan=True)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_linear_cross_entropy_under_autocast_matches_torch():
    """Under CPU bfloat16 autocast torch projects in bfloat16 and computes the cross entropy in float32
    (autocast's fp32 list), so its loss is float32; tilegrad's should be too, with torch's value."""
    h, _ = rounded((5, 8), torch.float32)
    w, _ = rounded((11, 8), torch.float32, seed=1)
    target = torch.randint(0, 11, (5,), generator=torch.Generator().manual_seed(29))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = tgt.linear_cross_entropy(h, w, target)
        ref = F.linear_cross_entropy(h, w, target)
    assert loss.dtype == ref.dtype == torch.float32
    assert_matches(loss, ref, torch.bfloat16, "loss")


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_linear_cross_entropy_bounded_average_is_the_fused_ops_filtering(reduction):
    """filter_tolerance and filter_weight_bound="average" reach tilegrad.fused_linear_cross_entropy
    (bound tested against float64 in tests/test_fused_linear_cross_entropy_bound.py), eagerly and
    through torch.ops.tilegrad (the torch.compile path); a bad filter_weight_bound is refused."""
    import tilegrad as tg
    from tilegrad.torch._tensor import as_numpy
    h, _ = rounded((300, 16), torch.bfloat16)
    h = h * 0.25
    w, _ = rounded((3000, 16), torch.bfloat16, seed=8)
    target = torch.randint(0, 100, (300,), generator=torch.Generator().manual_seed(28))
    ha, wa = h.detach().requires_grad_(), w.detach().requires_grad_()
    loss = tgt.linear_cross_entropy(ha, wa, target, reduction=reduction, filter_tolerance=0.3,
                                    filter_weight_bound="average")
    loss.backward()
    ref = tg.fused_linear_cross_entropy(as_numpy(h), as_numpy(w), target.numpy(), reduction=reduction,
                                        filter_tolerance=0.3, filter_weight_bound="average")
    assert tg.fused_linear_cross_entropy_filter_stats(detail=True)["weight_skipped"] > 0.0
    np.testing.assert_array_equal(ha.grad.float().numpy(), ref[1].astype(np.float32))
    np.testing.assert_array_equal(wa.grad.float().numpy(), ref[2].astype(np.float32))
    _, gi, gw, _ = torch.ops.tilegrad.linear_cross_entropy(h, w, target, None, None, -100, 0.0,
                                                           {"mean": 1, "sum": 2}[reduction], 0.0, 0.3, True)
    np.testing.assert_array_equal(gw.float().numpy(), ref[2].astype(np.float32))
    np.testing.assert_array_equal(gi.float().numpy(), ref[1].astype(np.float32))
    with pytest.raises(ValueError, match="filter_weight_bound"):
        tgt.linear_cross_entropy(ha, wa, target, filter_tolerance=0.3, filter_weight_bound="rows")
