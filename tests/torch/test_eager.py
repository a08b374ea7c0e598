"""The eager path of silu, cross_entropy, embedding and binary_cross_entropy_with_logits: a lean
autograd node (no torch.library dispatch) above the crossover, torch's own function below it and
under torch.func; second derivatives as torch's (or a clear error); tensor subclasses (DTensor)
falling back to torch; K-dimensional cross entropy in one call; SiLU gradients in the input's memory
format. Values are checked against torch's own functions (float64 where the kernels allow)."""

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import functional as TF  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402  (tests/torch/conftest.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def _node_name(t):
    return type(t.grad_fn).__name__


# ----------------------------------------------------------------------------------------------
# routing: the lean node above the crossover, torch's function below it


def _routing_calls():
    g = _gen(1)
    x = torch.randn(8, 16, generator=g, requires_grad=True)
    w = torch.randn(10, 16, generator=g, requires_grad=True)
    ids = torch.randint(0, 10, (5,), generator=g)
    t = torch.randint(0, 16, (8,), generator=g)
    y = torch.rand(8, 16, generator=g)
    return {
        "silu": (lambda: tgt.silu(x), "TilegradSiluBackward", "SiluBackward0"),
        "cross_entropy": (lambda: tgt.cross_entropy(x, t), "TilegradCrossEntropyBackward", "NllLossBackward0"),
        "embedding": (lambda: tgt.embedding(ids, w), "TilegradEmbeddingBackward", "EmbeddingBackward0"),
        "bce": (lambda: tgt.binary_cross_entropy_with_logits(x, y), "TilegradBceWithLogitsBackward",
                "BinaryCrossEntropyWithLogitsBackward0"),
    }


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("op", sorted(_routing_calls()))
def test_eager_call_is_one_autograd_node_without_op_dispatch(op):
    call, node, _ = _routing_calls()[op]
    assert _node_name(call()) == node


@pytest.mark.usefixtures("composites_at_every_size")
@pytest.mark.parametrize("op", sorted(_routing_calls()))
def test_below_the_crossover_torchs_function_runs(op):
    call, _, torch_node = _routing_calls()[op]
    names = autograd_node_names(call())
    assert torch_node in names and not any(n.startswith("Tilegrad") for n in names), names


@pytest.mark.parametrize("classes", [2, 16])
def test_few_classes_take_torchs_cross_entropy(classes):
    """Few classes: torch's cross entropy even with more logits than the logits' crossover."""
    assert classes < TF.CROSSOVER["cross_entropy_classes"][torch.float32]
    rows = TF.CROSSOVER["cross_entropy"][torch.float32] // classes + 1
    x = torch.randn(rows, classes, generator=_gen(2), requires_grad=True)
    t = torch.randint(0, classes, (rows,), generator=_gen(3))
    assert "NllLossBackward0" in autograd_node_names(tgt.cross_entropy(x, t))


def test_enough_classes_and_logits_take_the_kernel():
    classes = TF.CROSSOVER["cross_entropy_classes"][torch.float32]
    rows = TF.CROSSOVER["cross_entropy"][torch.float32] // classes + 1
    x = torch.randn(rows, classes, generator=_gen(2), requires_grad=True)
    t = torch.randint(0, classes, (rows,), generator=_gen(3))
    assert _node_name(tgt.cross_entropy(x, t)) == "TilegradCrossEntropyBackward"


# ----------------------------------------------------------------------------------------------
# second derivatives: an input-gradient penalty through a Linear layer, as torch computes it


def _penalty(loss_fn, lin, x):
    """g = d loss(lin(x)) / dx with create_graph, then backward of sum(g^2): lin's gradients."""
    lin.zero_grad(set_to_none=True)
    xg = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(loss_fn(lin(xg)), xg, create_graph=True)
    g.pow(2).sum().backward()
    return lin.weight.grad.clone(), lin.bias.grad.clone()


def _penalty_cases():
    g = _gen(4)
    y = torch.rand(6, 12, generator=g)
    w = torch.rand(6, 12, generator=g)
    pw = torch.rand(12, generator=g) * 3
    return {
        "silu": (lambda h: tgt.silu(h).pow(2).sum(), lambda h: F.silu(h).pow(2).sum()),
        "bce": (lambda h: tgt.binary_cross_entropy_with_logits(h, y, w, pos_weight=pw),
                lambda h: F.binary_cross_entropy_with_logits(h, y.double(), w.double(), pos_weight=pw.double())),
    }


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("name", sorted(_penalty_cases()))
def test_second_derivatives_match_torch(name):
    ours, theirs = _penalty_cases()[name]
    torch.manual_seed(5)
    lin = torch.nn.Linear(12, 12)
    x = torch.randn(6, 12, generator=_gen(6))
    got = _penalty(ours, lin, x)
    want = _penalty(theirs, lin.double(), x.double())
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_bce_second_derivative_with_target_grad_raises_naming_tilegrad():
    lin = torch.nn.Linear(12, 12)
    x = torch.randn(6, 12, generator=_gen(21))
    with pytest.raises(RuntimeError, match="tilegrad.*second derivatives.*target"):
        _penalty(lambda h: tgt.binary_cross_entropy_with_logits(h, h.sigmoid().detach().requires_grad_()), lin, x)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_embedding_second_derivative_raises_naming_tilegrad():
    ids = torch.randint(0, 9, (4, 5), generator=_gen(7))
    weight = torch.randn(9, 6, requires_grad=True)
    loss = torch.tanh(tgt.embedding(ids, weight)).pow(2).sum()
    with pytest.raises(RuntimeError, match="tilegrad.*second derivatives"):
        torch.autograd.grad(loss, weight, create_graph=True)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_cross_entropy_second_derivative_raises_naming_tilegrad():
    lin = torch.nn.Linear(12, 12)
    x = torch.randn(6, 12, generator=_gen(9))
    t = torch.randint(0, 12, (6,), generator=_gen(10))
    with pytest.raises(RuntimeError, match="tilegrad.*second derivatives.*create_graph"):
        _penalty(lambda h: tgt.cross_entropy(h, t), lin, x)
    # the torch.ops path refuses the same way
    xg = torch.randn(6, 12, generator=_gen(11), requires_grad=True)
    loss = torch.ops.tilegrad.cross_entropy_loss(xg, t, None, "mean", -100, 0.0, 0.0, False)[0]
    with pytest.raises(RuntimeError, match="tilegrad.*second derivatives"):
        torch.autograd.grad(loss, xg, create_graph=True)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_first_derivative_unchanged_by_the_second_derivative_path():
    """create_graph=False keeps tilegrad's kernels (and torch's values)."""
    x = torch.randn(6, 12, generator=_gen(12), requires_grad=True)
    (got,) = torch.autograd.grad(tgt.silu(x).sum(), x)
    (want,) = torch.autograd.grad(F.silu(x).sum(), x)
    torch.testing.assert_close(got, want)


# ----------------------------------------------------------------------------------------------
# torch.func


def _func_cases():
    g = _gen(13)
    x = torch.randn(4, 6, generator=g)
    t = torch.randint(0, 6, (4,), generator=g)
    y = torch.rand(4, 6, generator=g)
    ids = torch.randint(0, 5, (3,), generator=g)
    table = torch.randn(5, 6, generator=g)
    return {
        "silu": (lambda a: tgt.silu(a).pow(2).sum(), lambda a: F.silu(a).pow(2).sum(), x),
        "cross_entropy": (lambda a: tgt.cross_entropy(a, t, label_smoothing=0.1),
                          lambda a: F.cross_entropy(a, t, label_smoothing=0.1), x),
        "cross_entropy_zloss": (lambda a: tgt.cross_entropy(a, t, z_loss_scale=1e-2),
                                lambda a: F.cross_entropy(a, t) + 1e-2 * torch.logsumexp(a, 1).square().mean(), x),
        "embedding": (lambda w: tgt.embedding(ids, w).pow(2).sum(), lambda w: F.embedding(ids, w).pow(2).sum(), table),
        "bce": (lambda a: tgt.binary_cross_entropy_with_logits(a, y), lambda a: F.binary_cross_entropy_with_logits(a, y),
                x),
    }


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("op", sorted(_func_cases()))
def test_torch_func_grad_jacrev_vmap(op):
    ours, theirs, arg = _func_cases()[op]
    torch.testing.assert_close(torch.func.grad(ours)(arg), torch.func.grad(theirs)(arg))
    torch.testing.assert_close(torch.func.jacrev(ours)(arg), torch.func.jacrev(theirs)(arg))
    batch = torch.stack([arg, arg * 0.5])
    torch.testing.assert_close(torch.func.vmap(ours)(batch), torch.func.vmap(theirs)(batch))


@pytest.mark.usefixtures("kernels_at_every_size")
def test_torch_func_functional_call_on_tilegrad_modules():
    from tilegrad.torch import nn as tnn
    torch.manual_seed(14)
    model = torch.nn.Sequential(tnn.Embedding(7, 4), tnn.SiLU(), torch.nn.Linear(4, 3))
    ids = torch.randint(0, 7, (5,), generator=_gen(15))
    target = torch.randint(0, 3, (5,), generator=_gen(16))
    params = dict(model.named_parameters())

    def loss(p, module, ce):
        return ce(torch.func.functional_call(module, p, (ids,)), target)

    got = torch.func.grad(loss)(params, model, tgt.cross_entropy)
    plain = torch.nn.Sequential(torch.nn.Embedding(7, 4), torch.nn.SiLU(), torch.nn.Linear(4, 3))
    want = torch.func.grad(loss)(params, plain, F.cross_entropy)
    for name in params:
        torch.testing.assert_close(got[name], want[name])


# ----------------------------------------------------------------------------------------------
# K-dimensional cross entropy, few classes, SiLU memory format


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_k_dimensional_cross_entropy_is_one_call_with_torchs_values(reduction, weighted):
    g = _gen(17)
    x = torch.randn(3, 5, 4, 2, generator=g)
    t = torch.randint(0, 5, (3, 4, 2), generator=g)
    t[0, 0, 0] = -100
    w = torch.rand(5, generator=g) + 0.5 if weighted else None
    xs = x.clone().requires_grad_()
    got = tgt.cross_entropy(xs, t, w, reduction=reduction, label_smoothing=0.05)
    assert reduction == "none" or _node_name(got) == "TilegradCrossEntropyBackward"
    xd = x.double().requires_grad_()
    want = F.cross_entropy(xd, t, None if w is None else w.double(), reduction=reduction, label_smoothing=0.05)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    up = torch.rand(got.shape, generator=g)
    (gx,) = torch.autograd.grad(got, xs, up)
    (gw,) = torch.autograd.grad(want, xd, up.double())
    torch.testing.assert_close(gx.double(), gw, rtol=1e-5, atol=1e-6)


@pytest.mark.usefixtures("kernels_at_every_size")
def test_k_dimensional_cross_entropy_does_not_recompile_per_batch_size():
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    counter = CompileCounter()
    fn = torch.compile(lambda a, b: tgt.cross_entropy(a, b), backend=counter, dynamic=True, fullgraph=True)
    for batch in (2, 3, 5):
        x = torch.randn(batch, 4, 6, generator=_gen(batch))
        t = torch.randint(0, 4, (batch, 6), generator=_gen(batch + 10))
        torch.testing.assert_close(fn(x, t), F.cross_entropy(x, t))
    assert counter.frame_count == 1


@pytest.mark.usefixtures("kernels_at_every_size")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_silu_gradient_keeps_channels_last(dtype):
    x = torch.randn(2, 3, 4, 5, generator=_gen(18)).to(dtype).to(memory_format=torch.channels_last)
    x.requires_grad_()
    up = torch.randn(2, 3, 4, 5, generator=_gen(19)).to(dtype).to(memory_format=torch.channels_last)
    (got,) = torch.autograd.grad(tgt.silu(x), x, up)
    (want,) = torch.autograd.grad(F.silu(x), x, up)
    assert got.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(got, want)
    op_grad = torch.ops.tilegrad.silu_backward(up, x.detach())
    assert op_grad.stride() == x.stride()


# ----------------------------------------------------------------------------------------------
# tensor subclasses: DTensor falls back to torch


@pytest.fixture
def one_rank_group():
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not built in")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.usefixtures("kernels_at_every_size")
def test_dtensor_inputs_fall_back_to_torch(one_rank_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor
    mesh = init_device_mesh("cpu", (1,))
    g = _gen(20)
    x = distribute_tensor(torch.randn(4, 6, generator=g), mesh, [Replicate()]).requires_grad_()
    t = distribute_tensor(torch.randint(0, 6, (4,), generator=g), mesh, [Replicate()])
    y = distribute_tensor(torch.rand(4, 6, generator=g), mesh, [Replicate()])
    w = distribute_tensor(torch.randn(6, 3, generator=g), mesh, [Replicate()]).requires_grad_()
    ids = distribute_tensor(torch.randint(0, 6, (5,), generator=g), mesh, [Replicate()])
    for ours, theirs, leaf in (
            (lambda: tgt.silu(x).sum(), lambda: F.silu(x).sum(), x),
            (lambda: tgt.cross_entropy(x, t), lambda: F.cross_entropy(x, t), x),
            (lambda: tgt.binary_cross_entropy_with_logits(x, y), lambda: F.binary_cross_entropy_with_logits(x, y), x),
            (lambda: tgt.embedding(ids, w).sum(), lambda: F.embedding(ids, w).sum(), w)):
        got, want = ours(), theirs()
        torch.testing.assert_close(got.full_tensor(), want.full_tensor())
        torch.testing.assert_close(torch.autograd.grad(got, leaf)[0].full_tensor(),
                                   torch.autograd.grad(want, leaf)[0].full_tensor())
