"""tilegrad.torch.binary_cross_entropy_with_logits runs the fused forward
(torch.ops.tilegrad.binary_cross_entropy_with_logits_fused -> aclnnBinaryCrossEntropyWithLogits) and
tilegrad's backward: the forward kernel is called once and torch's multi-pass operator never; values
and gradients against the float64 reference; the fake kernel's shape, dtype and strides equal the real
ones for contiguous, transposed, sliced and expanded inputs; torch.compile(fullgraph=True) of transposed
inputs with reduction "none" (issue 20) gives eager's values; the loss is bit-identical for 1, 2 and 3
threads."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# small tensors: tilegrad's kernels, not the crossover to torch (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("kernels_at_every_size")

import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad import _core  # noqa: E402
from reference.bce import assert_bce_forward_close  # noqa: E402

OP = torch.ops.tilegrad.binary_cross_entropy_with_logits_fused.default
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def _np(t):
    from tilegrad.torch._tensor import as_numpy
    return None if t is None else as_numpy(t)


def _inputs(shape=(6, 11), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) * 4).to(dtype)
    y = torch.rand(shape, generator=g).to(dtype)
    w = (torch.rand(shape[-1:], generator=g) + 0.5).to(dtype)
    pw = (torch.rand(shape[:1] + (1,), generator=g) * 3 + 0.2).to(dtype)
    return x, y, w, pw


def _layouts(dtype):
    """(name, x, y, w, pw): the layouts whose fake strides must match the real kernel's."""
    x, y, w, pw = _inputs((6, 11), dtype)
    xt, yt, _, _ = _inputs((11, 6), dtype, seed=1)
    return [
        ("contiguous", x, y, w, pw),
        ("transposed", xt.t(), yt.t(), w, pw),
        ("sliced", x[:, ::2], y[:, ::2], w[::2], pw),
        ("expanded", x[:1].expand(6, 11), y[:, :1].expand(6, 11), None, pw.expand(6, 11)),
        ("mixed", xt.t(), y, w.expand(6, 11), None),
    ]


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_forward_runs_the_fused_kernel_once(monkeypatch, reduction, dtype):
    from torch.utils._python_dispatch import TorchDispatchMode

    class Ops(TorchDispatchMode):
        """The ops dispatched (the outermost ones: what the call itself runs)."""
        seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.seen.append(str(func))
            return func(*args, **(kwargs or {}))

    calls = []
    fused = _core.binary_cross_entropy_with_logits
    monkeypatch.setattr(_core, "binary_cross_entropy_with_logits", lambda *a: calls.append(a) or fused(*a))
    x, y, w, pw = _inputs(dtype=dtype)
    xa = x.detach().requires_grad_()
    with Ops() as ops:
        loss = tgt.binary_cross_entropy_with_logits(xa, y, w, reduction=reduction, pos_weight=pw)
    assert len(calls) == 1
    # no aten pass at all: allocation, detach and bf16 views of the hand-off (the eager node calls the core)
    assert set(ops.seen) <= {"aten.empty.memory_format", "aten.detach.default", "aten.view.dtype"}, ops.seen
    assert loss.dtype == y.dtype and loss.shape == (x.shape if reduction == "none" else ())
    assert_bce_forward_close(_np(loss.detach()), _np(x), _np(y), _np(w), _np(pw), reduction)
    loss.sum().backward()
    ref_x = x.double().requires_grad_()
    F.binary_cross_entropy_with_logits(ref_x, y.double(), w.double(), reduction=reduction,
                                       pos_weight=pw.double()).sum().backward()
    tol = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.float16: 2e-3}[dtype]
    torch.testing.assert_close(xa.grad.double(), ref_x.grad, rtol=tol, atol=tol * 1e-2)


@pytest.mark.parametrize("dtypes", [(torch.bfloat16, torch.float32), (torch.float32, torch.float16),
                                    (torch.float16, torch.bfloat16)], ids=str)
def test_mixed_dtypes_follow_target_as_torch(dtypes):
    x, y, w, pw = _inputs()
    x, y = x.to(dtypes[0]), y.to(dtypes[1])
    for reduction in ("none", "mean"):
        loss = tgt.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw)
        want = F.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw)
        assert loss.dtype == want.dtype == y.dtype
        assert_bce_forward_close(_np(loss), _np(x), _np(y), _np(w), _np(pw), reduction)


@pytest.mark.parametrize("reduction", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fake_metadata_equals_real_for_every_layout(reduction, dtype):
    """Shape, dtype and strides (what torch.compile plans its buffers with) of the fake kernel's output
    are the real kernel's, whatever the inputs' strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    for name, x, y, w, pw in _layouts(dtype):
        real = OP(x, y, w, pw, reduction)
        with FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fake = OP(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in (x, y, w, pw)], reduction)
        meta = lambda t: (tuple(t.shape), t.dtype, t.stride())  # noqa: E731
        assert meta(fake) == meta(real), name
        assert_bce_forward_close(_np(real), _np(x), _np(y), _np(w), _np(pw), reduction)


def test_opcheck_transposed_and_expanded():
    g = torch.Generator().manual_seed(4)
    leaf_t = torch.randn(11, 6, generator=g).requires_grad_()     # x = leaf_t.t(): transposed
    leaf_e = torch.randn(1, 11, generator=g).requires_grad_()     # x = leaf_e.expand(6, 11): stride 0
    y = torch.rand(11, 6, generator=g)
    w = torch.rand(11, generator=g) + 0.5
    for name, x, target in [("transposed", leaf_t.t(), y.t()), ("expanded", leaf_e.expand(6, 11), y.t()),
                            ("expanded-target", leaf_t.t(), y[:1].t().expand(6, 11))]:
        for reduction in (0, 1, 2):
            result = torch.library.opcheck(OP, (x, target, w, None, reduction))
            failed = {test: outcome for test, outcome in result.items() if outcome != "SUCCESS"}
            assert not failed, f"{name} ({reduction}): {failed}"


def test_compile_transposed_inputs(one_torch_thread):
    """torch.compile(fullgraph=True) (inductor) of transposed inputs with reduction "none" (issue 20:
    the old op's fake strides differed from the real ones, so inductor's stride assertion failed)
    gives eager's loss and input gradient."""
    def f(x, y, pw):
        return tgt.binary_cross_entropy_with_logits(x.t(), y.t(), reduction="none", pos_weight=pw) * 2

    x, y, _, _ = _inputs((11, 6))
    pw = torch.rand(11) + 0.5
    compiled = torch.compile(f, fullgraph=True)
    xa, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager = f(xa, y, pw)
    got = compiled(xc, y, pw)
    torch.testing.assert_close(got, eager, rtol=0, atol=0)
    eager.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(xc.grad, xa.grad, rtol=0, atol=0)


def test_loss_is_bit_identical_for_1_2_3_threads(torch_threads):
    x, y, _, _ = _inputs((700, 300), seed=3)
    w = torch.rand(700, 300) + 0.5
    pw = torch.rand(300) * 3
    for reduction in ("mean", "sum", "none"):
        results = []
        for n in (1, 2, 3):
            torch_threads(n)
            results.append(tgt.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw))
        for r in results[1:]:
            assert torch.equal(r.view(torch.int32), results[0].view(torch.int32)), reduction
