"""tilegrad.torch.nn modules: subclasses of the torch modules they replace, with torch's constructor
arguments, parameters and state_dict; forward and gradients against torch's module computed in float64
on the same rounded values."""

import pytest

torch = pytest.importorskip("torch")

# small tensors: tilegrad's kernels, not the crossover to torch (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("kernels_at_every_size")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import nn as tnn  # noqa: E402
from reference.torch_compare import assert_matches, rounded  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16]


def test_every_module_subclasses_torchs():
    for ours, theirs in [(tnn.SiLU, torch.nn.SiLU), (tnn.CrossEntropyLoss, torch.nn.CrossEntropyLoss),
                         (tnn.Embedding, torch.nn.Embedding), (tnn.BCEWithLogitsLoss, torch.nn.BCEWithLogitsLoss),
                         (tnn.LinearCrossEntropyLoss, torch.nn.LinearCrossEntropyLoss)]:
        assert issubclass(ours, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_silu_module(dtype):
    x, x64 = rounded((5, 17), dtype, scale=3.0)
    xa, xr = x.detach().requires_grad_(), x64.detach().requires_grad_()
    out, ref = tnn.SiLU()(xa), torch.nn.SiLU()(xr)
    out.sum().backward()
    ref.sum().backward()
    assert_matches(out, ref, dtype, "silu")
    assert_matches(xa.grad, xr.grad, dtype, "grad")
    y = x.clone()
    assert tnn.SiLU(inplace=True)(y) is y  # inplace as torch's (torch's own op)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_loss_module(dtype, reduction):
    x, x64 = rounded((13, 21), dtype, scale=2.0)
    target = torch.randint(0, 21, (13,), generator=torch.Generator().manual_seed(1))
    target[4] = 3
    weight = torch.rand(21, generator=torch.Generator().manual_seed(2)) + 0.1
    ours = tnn.CrossEntropyLoss(weight, ignore_index=3, reduction=reduction, label_smoothing=0.1)
    theirs = torch.nn.CrossEntropyLoss(weight.double(), ignore_index=3, reduction=reduction, label_smoothing=0.1)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    xa, xr = x.detach().requires_grad_(), x64.detach().requires_grad_()
    loss, ref = ours(xa, target), theirs(xr, target)
    loss.sum().backward()
    ref.sum().backward()
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(xa.grad, xr.grad, dtype, "grad")


def test_cross_entropy_loss_module_z_loss():
    x, x64 = rounded((9, 12), torch.float32, scale=2.0, offset=1.0)
    target = torch.randint(0, 12, (9,), generator=torch.Generator().manual_seed(3))
    target[0] = -100
    loss = tnn.CrossEntropyLoss(z_loss_scale=0.01)(x, target)
    kept = target != -100
    expected = torch.nn.functional.cross_entropy(x64, target) + 0.01 * (torch.logsumexp(x64, 1)[kept] ** 2).mean()
    assert_matches(loss, expected, torch.float32, "loss with z-loss")
    assert "z_loss_scale=0.01" in repr(tnn.CrossEntropyLoss(z_loss_scale=0.01))
    with pytest.raises(ValueError, match="-1"):
        tnn.CrossEntropyLoss(z_loss_scale=-1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_module_state_dict_and_gradient(dtype):
    """Same parameter names and state_dict as torch.nn.Embedding; loads torch's state_dict."""
    theirs = torch.nn.Embedding(17, 6, padding_idx=2, scale_grad_by_freq=True, dtype=dtype)
    ours = tnn.Embedding(17, 6, padding_idx=2, scale_grad_by_freq=True, dtype=dtype)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict(theirs.state_dict())
    assert torch.equal(ours.weight, theirs.weight)
    reference = torch.nn.Embedding(17, 6, padding_idx=2, scale_grad_by_freq=True, dtype=torch.float64)
    with torch.no_grad():
        reference.weight.copy_(theirs.weight.double())
    ids = torch.randint(0, 17, (5, 7), generator=torch.Generator().manual_seed(4))
    ids[0, 0] = 2
    out, ref = ours(ids), reference(ids)
    assert torch.equal(out.double(), ref)
    g, g64 = rounded(ref.shape, dtype, seed=5)
    out.backward(g)
    ref.backward(g64)
    assert_matches(ours.weight.grad, reference.weight.grad, dtype, "grad_weight")
    assert torch.all(ours.weight.grad[2] == 0)


def test_embedding_module_from_pretrained():
    weight = torch.randn(5, 3)
    emb = tnn.Embedding.from_pretrained(weight, freeze=False, padding_idx=1)
    assert isinstance(emb, tnn.Embedding) and torch.equal(emb(torch.tensor([0, 4])), weight[[0, 4]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_with_logits_loss_module(dtype, reduction):
    x, x64 = rounded((6, 10), dtype, scale=2.0)
    y = torch.rand(6, 10, generator=torch.Generator().manual_seed(6)).to(dtype)
    weight = (torch.rand(10, generator=torch.Generator().manual_seed(7)) + 0.1).to(dtype)
    pos_weight = (torch.rand(10, generator=torch.Generator().manual_seed(8)) * 3).to(dtype)
    ours = tnn.BCEWithLogitsLoss(weight, reduction=reduction, pos_weight=pos_weight)
    theirs = torch.nn.BCEWithLogitsLoss(weight.double(), reduction=reduction, pos_weight=pos_weight.double())
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    xa, xr = x.detach().requires_grad_(), x64.detach().requires_grad_()
    loss, ref = ours(xa, y), theirs(xr, y.double())
    loss.sum().backward()
    ref.sum().backward()
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(xa.grad, xr.grad, dtype, "grad")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("options", [{}, {"bias": True}, {"label_smoothing": 0.1}])
def test_linear_cross_entropy_loss_module(dtype, reduction, options):
    """Same constructor, parameters and state_dict as torch.nn.LinearCrossEntropyLoss; loss and the
    gradients of input, projection weight (and bias) against torch's module in float64."""
    theirs = torch.nn.LinearCrossEntropyLoss(16, 29, reduction=reduction, ignore_index=-1, dtype=dtype, **options)
    ours = tnn.LinearCrossEntropyLoss(16, 29, reduction=reduction, ignore_index=-1, dtype=dtype, **options)
    assert ours.state_dict().keys() == theirs.state_dict().keys()
    ours.load_state_dict(theirs.state_dict())
    reference = torch.nn.LinearCrossEntropyLoss(16, 29, reduction=reduction, ignore_index=-1, dtype=torch.float64,
                                                **options)
    reference.load_state_dict({k: v.double() for k, v in theirs.state_dict().items()})
    h, h64 = rounded((11, 16), dtype)
    target = torch.randint(0, 29, (11,), generator=torch.Generator().manual_seed(9))
    target[[1, 5]] = -1
    ha, hr = h.detach().requires_grad_(), h64.detach().requires_grad_()
    loss, ref = ours(ha, target), reference(hr, target)
    loss.sum().backward()
    ref.sum().backward()
    assert loss.dtype == dtype
    assert_matches(loss, ref, dtype, "loss")
    assert_matches(ha.grad, hr.grad, dtype, "grad_input")
    for (name, p), (_, p_ref) in zip(ours.named_parameters(), reference.named_parameters()):
        assert_matches(p.grad, p_ref.grad, dtype, f"grad {name}")


@pytest.mark.parametrize("module", [tnn.CrossEntropyLoss, tnn.BCEWithLogitsLoss])
def test_bad_reduction_raises_value_error(module):
    loss = module(reduction="avg")
    x = torch.randn(3, 4)
    with pytest.raises(ValueError, match="'avg'"):
        loss(x, torch.tensor([0, 1, 2]) if module is tnn.CrossEntropyLoss else torch.rand(3, 4))


def test_a_model_that_scripted_before_patch_scripts_after_it_with_torchs_numbers():
    """torch.jit.script of a patched model runs torch's functions (the tilegrad dispatch is
    @torch.jit.unused); the eager model keeps its tilegrad classes."""
    torch.manual_seed(0)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(10, 8, padding_idx=0)
            self.body = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.SiLU(), torch.nn.RMSNorm(8),
                                            torch.nn.Linear(8, 4))
            self.ce = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
            self.bce = torch.nn.BCEWithLogitsLoss(pos_weight=torch.full((4,), 2.0))

        def forward(self, ids: torch.Tensor, t: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            logits = self.body(self.emb(ids))
            return self.ce(logits, t) + self.bce(logits, y)

    model = Model().double()
    ids, t, y = torch.randint(0, 10, (6,)), torch.randint(0, 4, (6,)), torch.rand(6, 4, dtype=torch.float64)
    before = torch.jit.script(model)(ids, t, y)
    tgt.patch(model)
    after = torch.jit.script(model)(ids, t, y)
    torch.testing.assert_close(after, before, rtol=0, atol=0)
    assert type(model.body[1]) is tgt.nn.SiLU and type(model.emb) is tgt.nn.Embedding
    torch.testing.assert_close(model(ids, t, y), before, rtol=1e-12, atol=1e-12)
    tgt.unpatch(model)


def test_scripted_cross_entropy_with_z_loss_refuses():
    loss = torch.jit.script(tgt.nn.CrossEntropyLoss(z_loss_scale=1e-3))
    with pytest.raises(Exception, match="z-loss"):
        loss(torch.randn(3, 5), torch.tensor([0, 1, 2]))
