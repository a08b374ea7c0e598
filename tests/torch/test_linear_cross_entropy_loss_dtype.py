"""tilegrad.torch.linear_cross_entropy(..., loss_dtype=torch.float32) with 16-bit inputs (issue 29):
the float32 loss the fused op computes, never rounded to 16 bits on the way (Hugging Face's causal-LM
loss upcasts its logits and so is a float32 value), on the kernel, on torch's composite (small
problems) and under torch.compile, against float64; the gradients stay those of that loss."""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from reference.torch_compare import assert_matches, rounded  # noqa: E402
from tilegrad.torch import functional as TF  # noqa: E402

ROWS, HIDDEN, VOCAB = 40, 32, 96
FLOAT32_LOSS = 64 * 2.0 ** -24  # a float32 result of a float32 computation (reference.torch_compare)


def problem(dtype, bias=False):
    """bf16/fp16 input, weight (and bias) with their exact float64 copies; targets with ignored rows."""
    x, x64 = rounded((ROWS, HIDDEN), dtype, seed=1)
    w, w64 = rounded((VOCAB, HIDDEN), dtype, scale=0.7, seed=2)
    b, b64 = rounded((VOCAB,), dtype, scale=0.5, seed=3) if bias else (None, None)
    target = torch.randint(0, VOCAB, (ROWS,), generator=torch.Generator().manual_seed(4))
    target[::7] = -100
    return (x, w, b, target), (x64, w64, b64)


def reference64(x64, w64, b64, target, reduction):
    x64, w64 = x64.clone().requires_grad_(), w64.clone().requires_grad_()
    loss = F.cross_entropy(F.linear(x64, w64, b64), target, reduction=reduction)
    return loss, x64, w64


def on_path(request, on_kernel):
    if on_kernel:
        request.getfixturevalue("kernels_at_every_size")


@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_float32_loss_is_unrounded_and_gradients_follow_it(request, on_kernel, dtype, reduction):
    on_path(request, on_kernel)
    (x, w, _, target), (x64, w64, _) = problem(dtype)
    x.requires_grad_()
    w.requires_grad_()
    loss = TF.linear_cross_entropy(x, w, target, reduction=reduction, loss_dtype=torch.float32)
    want, x64, w64 = reference64(x64, w64, None, target, reduction)
    assert loss.dtype == torch.float32
    err = (loss.double() - want.detach()).abs().max().item()
    assert err <= FLOAT32_LOSS * want.detach().abs().max().item(), err  # a 16-bit rounding is ~1e-3
    upstream = torch.linspace(0.5, 1.5, want.numel(), dtype=torch.float64).reshape(want.shape)
    loss.backward(upstream.float())
    want.backward(upstream)
    assert x.grad.dtype == w.grad.dtype == dtype
    assert_matches(x.grad, x64.grad, dtype, "grad input")
    assert_matches(w.grad, w64.grad, dtype, "grad weight")


@pytest.mark.parametrize("on_kernel", [False, True], ids=["composite", "kernel"])
def test_float32_loss_with_bias_without_gradients(request, on_kernel):
    on_path(request, on_kernel)
    (x, w, b, target), (x64, w64, b64) = problem(torch.bfloat16, bias=True)
    loss = TF.linear_cross_entropy(x, w, target, linear_bias=b, loss_dtype=torch.float32)
    want = reference64(x64, w64, b64, target, "mean")[0].item()
    assert loss.dtype == torch.float32 and abs(loss.item() - want) <= FLOAT32_LOSS * want


def test_default_loss_dtype_is_the_inputs_as_torchs():
    (x, w, _, target), _ = problem(torch.bfloat16)
    assert TF.linear_cross_entropy(x, w, target).dtype == torch.bfloat16
    assert TF.linear_cross_entropy(x, w, target, loss_dtype=torch.bfloat16).dtype == torch.bfloat16
    assert F.linear_cross_entropy(x, w, target).dtype == torch.bfloat16


@pytest.mark.parametrize("with_grad", [False, True], ids=["no-grad", "grad"])
def test_float32_loss_under_torch_compile(with_grad):
    (x, w, b, target), (x64, w64, b64) = problem(torch.bfloat16, bias=True)
    x.requires_grad_(with_grad)
    compiled = torch.compile(lambda x, w, b, t: TF.linear_cross_entropy(x, w, t, linear_bias=b,
                                                                        loss_dtype=torch.float32),
                             fullgraph=True)
    try:
        loss = compiled(x, w, b, target)
    finally:
        torch._dynamo.reset()
    want = reference64(x64, w64, b64, target, "mean")[0].item()
    assert loss.dtype == torch.float32 and abs(loss.item() - want) <= FLOAT32_LOSS * want


@pytest.mark.parametrize("bad", ["float32", torch.int64, 32])
def test_bad_loss_dtype_raises_naming_it(bad):
    (x, w, _, target), _ = problem(torch.bfloat16)
    with pytest.raises(TypeError, match=r"tilegrad\.torch\.linear_cross_entropy: loss_dtype must be None or a "
                                        r"floating-point torch\.dtype .*got"):
        TF.linear_cross_entropy(x, w, target, loss_dtype=bad)
