"""The scaffolding every family module shares (tilegrad/torch/_library.py, _eager.py): a KernelFunction's
schema reading, its eager node and the call of each of the router's paths, and the operand checks. Values
are checked against torch's own functions in float64."""

import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _eager, _gelu, _layer_norm, _library, _rms_norm, _rope, _swiglu  # noqa: E402
from tilegrad.torch._eager import Path  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402  (tests/torch/conftest.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("schema, count", [
    ("gelu(Tensor input, str approximate) -> Tensor", 1),
    ("silu_mul(Tensor gate, Tensor up) -> Tensor", 2),
    ("silu(Tensor input) -> Tensor", 1),
    ("layer_norm(Tensor input, int[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> Tensor", 1),
    ("rotary_position_embedding(Tensor input, Tensor cos, Tensor sin, int mode) -> Tensor", 3),
    ("rope_grad(Tensor grad, Tensor cos, Tensor sin, Tensor? input, int mode) -> (Tensor, Tensor, Tensor)", 3),
    ("linear_backward(Tensor grad, Tensor input, Tensor weight, bool[] needs) -> (Tensor, Tensor, Tensor)", 3),
])
def test_the_leading_plain_tensors_of_a_schema_are_counted(schema, count):
    """What the default setup saves: the plain tensors before the first other argument (an optional
    tensor or a list ends them)."""
    assert _library._leading_tensors(schema) == count


@pytest.mark.parametrize("module, node", [
    (_gelu, "TilegradGelu"), (_gelu, "TilegradGeluMul"), (_swiglu, "TilegradSwiGlu"), (_swiglu, "TilegradSiluMul"),
    (_rope, "TilegradRope"), (_rms_norm, "TilegradRmsNorm"), (_layer_norm, "TilegradLayerNorm")])
def test_each_eager_node_is_named_and_placed_as_its_family_declares(module, node):
    cls = getattr(module, node)
    assert issubclass(cls, torch.autograd.Function)
    assert (cls.__name__, cls.__qualname__, cls.__module__) == (node, node, module.__name__)
    assert cls.__doc__


def _gelu_float64(x, approximate):
    """torch's own gelu in float64: the reference of every path."""
    x64 = x.detach().double().requires_grad_()
    y = torch.nn.functional.gelu(x64, approximate=approximate)
    return y, x64


@pytest.mark.parametrize("path", [Path.KERNEL, Path.COMPOSITE, Path.TORCH])
def test_run_takes_the_path_it_is_given_with_the_same_values(path):
    x = torch.randn(6, 40, generator=torch.Generator().manual_seed(0)).requires_grad_()
    dy = torch.randn(6, 40, generator=torch.Generator().manual_seed(1))
    y = _gelu._GELU.run(path, x, "tanh")
    nodes = autograd_node_names(y)
    assert ("TilegradGeluBackward" in nodes) == (path is Path.KERNEL), nodes
    (dx,) = torch.autograd.grad(y, x, dy)
    want, x64 = _gelu_float64(x, "tanh")
    (dx_want,) = torch.autograd.grad(want, x64, dy.double())
    torch.testing.assert_close(y.double(), want.detach(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(dx.double(), dx_want, rtol=1e-5, atol=1e-6)


def test_returns_picks_the_functions_outputs_of_the_op():
    """rms_norm's op returns (y, rstd), the function y alone, on the kernel and the compile path alike;
    add_rms_norm's returns (y, x_out) of (y, rstd, x_out)."""
    g = torch.Generator().manual_seed(2)
    x, w = torch.randn(4, 16, generator=g), torch.rand(16, generator=g) + 0.5
    want = x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-6) * w.double()
    for path in (Path.KERNEL, Path.COMPILE):
        y = _rms_norm._RMS_NORM.run(path, x, w, 1e-6, 0.0)
        assert isinstance(y, torch.Tensor) and y.shape == x.shape
        torch.testing.assert_close(y.double(), want, rtol=1e-5, atol=1e-6)
    x2 = torch.randn(4, 16, generator=g)
    y, x_out = tgt.add_rms_norm(x, x2, w)
    torch.testing.assert_close(x_out, x + x2)


def test_the_default_backward_recomputes_second_derivatives_through_the_composite():
    """gelu's node keeps no formula of its own: under create_graph its gradient is the composite's, so
    a second derivative equals torch's in float64."""
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3)).requires_grad_()
    (dx,) = torch.autograd.grad(_gelu._GELU.run(Path.KERNEL, x, "none").sum(), x, create_graph=True)
    (ddx,) = torch.autograd.grad(dx.sum(), x)
    want, x64 = _gelu_float64(x, "none")
    (dx64,) = torch.autograd.grad(want.sum(), x64, create_graph=True)
    (ddx64,) = torch.autograd.grad(dx64.sum(), x64)
    torch.testing.assert_close(ddx.double(), ddx64, rtol=1e-4, atol=1e-5)


def test_elementwise_operands_must_share_shape_and_dtype_and_have_elements():
    a = torch.randn(3, 4)
    assert _eager.elementwise_on_kernel_path(a, torch.randn(3, 4))
    assert not _eager.elementwise_on_kernel_path(a, torch.randn(4))  # broadcasting: torch's
    assert not _eager.elementwise_on_kernel_path(a, torch.randn(3, 4, dtype=torch.bfloat16))
    assert not _eager.elementwise_on_kernel_path(torch.randn(0, 4))
    assert not _eager.elementwise_on_kernel_path(torch.randn(3, 4, dtype=torch.float64))


def test_glu_halves_are_checked_naming_tilegrad_the_function_and_the_value():
    x = torch.randn(3, 5)
    with pytest.raises(ValueError, match=r"tilegrad.torch.swiglu: input.shape\[1\] must be even, got 5"):
        _eager.check_halves("swiglu", x, 1)
    with pytest.raises(IndexError, match=r"tilegrad.torch.geglu: dim must be in \[-2, 1\], got -3"):
        _eager.check_halves("geglu", x, -3)
    _eager.check_halves("swiglu", torch.randn(4, 5), 0)  # even: no error
