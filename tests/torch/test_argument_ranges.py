"""Argument ranges in tilegrad.torch (issue 29): what torch computes is computed (rms_norm with a
negative eps), and what would make a promise meaningless is refused with a message naming the
argument, the value and the valid range (filter_tolerance >= 1 bounded nothing and zeroed every
gradient)."""

import re

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _rms_norm_float64(x, w, eps):
    """The formula in float64: x / sqrt(mean(x^2) + eps) * w (NaN where mean(x^2) + eps < 0)."""
    x64 = x.detach().double().requires_grad_()
    w64 = w.detach().double().requires_grad_()
    y = x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + eps) * w64
    return y, x64, w64


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("rows", [4, 4096], ids=["small", "large"])
def test_rms_norm_with_a_negative_eps_computes_as_torch(dtype, rows):
    """The vendor kernel refuses eps < 0; F.rms_norm computes it (NaN where mean(x^2) + eps < 0), and so
    does tilegrad.torch at every size: torch's values, within one rounding of the float64 formula."""
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(rows, 64, generator=g) * 2).to(dtype).requires_grad_()
    x.data[1] *= 0.01  # mean(x^2) + eps < 0 on this row: NaN, as torch
    w = (torch.rand(64, generator=g) + 0.5).to(dtype).requires_grad_()
    eps = -0.05
    got = tgt.rms_norm(x, (64,), w, eps=eps)
    want = F.rms_norm(x, (64,), w, eps=eps)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    assert got[1].isnan().all() and not got[0].isnan().any()
    ref, x64, w64 = _rms_norm_float64(x, w, eps)
    kept = torch.ones(rows, dtype=torch.bool)
    kept[1] = False
    tol = dict(rtol=2 ** -7, atol=1e-6) if dtype == torch.bfloat16 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got[kept].double(), ref[kept].detach(), **tol)
    up = torch.randn(rows, 64, generator=g).to(dtype)
    up[1] = 0
    got.backward(up)
    ref[kept].backward(up[kept].double())
    torch.testing.assert_close(x.grad[kept].double(), x64.grad[kept], **tol)


@pytest.mark.parametrize("tolerance", [1.0, 1e30, -0.1, float("nan"), float("inf")])
def test_linear_cross_entropy_refuses_a_filter_tolerance_that_bounds_nothing(tolerance):
    """tau >= 1 lets every block of the logits gradient go (every row's whole gradient is within tau of
    its bound sum): 1e30 used to be accepted and gave zero gradients."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 256, generator=g, requires_grad=True)
    w = torch.randn(512, 256, generator=g, requires_grad=True)
    t = torch.randint(0, 512, (512,), generator=g)
    with pytest.raises(ValueError, match=r"filter_tolerance must be None or a float in \[0, 1\).* got "
                                         + re.escape(repr(tolerance))):
        tgt.linear_cross_entropy(x, w, t, filter_tolerance=tolerance)


def test_linear_cross_entropy_filter_tolerance_below_one_keeps_its_bound():
    """tau = 0.5 is accepted, and each row of grad_input stays within tau * S_i of the exact one,
    S_i = sum_j |G_ij| ||w_j|| (G: the logits' gradient), from a float64 reference."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(512, 256, generator=g, requires_grad=True)
    w = torch.randn(512, 256, generator=g, requires_grad=True)
    t = torch.randint(0, 512, (512,), generator=g)
    tgt.linear_cross_entropy(x, w, t, filter_tolerance=0.5).backward()
    x64, w64 = x.detach().double(), w.detach().double()
    logits_grad = (torch.softmax(x64 @ w64.T, dim=1) - F.one_hot(t, 512).double()) / 512
    exact = logits_grad @ w64
    bound = logits_grad.abs() @ w64.norm(dim=1)
    assert bool(((x.grad.double() - exact).norm(dim=1) <= 0.5 * bound + 1e-6 * bound.max()).all())
