"""torch.compile(fullgraph=True) of a small model that uses every tilegrad.torch function (silu, embedding,
cross_entropy with z-loss, binary_cross_entropy_with_logits, linear_cross_entropy mean and none) and the
nn modules: no graph break, and the same loss and gradients as eager.

The backend is "aot_eager" (dynamo + AOT autograd: the fake kernels and autograd formulas are what it
exercises). Inductor takes ~35 s to compile this model on the project's 2-core machine, so it runs
only with TILEGRAD_TEST_INDUCTOR=1."""

import os

import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import nn as tnn  # noqa: E402

VOCAB, HIDDEN, CLASSES = 61, 16, 3
BACKENDS = ["aot_eager"] + (["inductor"] if os.environ.get("TILEGRAD_TEST_INDUCTOR") == "1" else [])


class TinyModel(torch.nn.Module):
    """Embedding -> SiLU MLP -> three losses (LM head via linear_cross_entropy and cross_entropy, a
    multi-label head via BCE with logits)."""

    def __init__(self, dtype):
        super().__init__()
        torch.manual_seed(0)
        self.embed = tnn.Embedding(VOCAB, HIDDEN, padding_idx=0, dtype=dtype)
        self.up = torch.nn.Linear(HIDDEN, 2 * HIDDEN, dtype=dtype)
        self.act = tnn.SiLU()
        self.down = torch.nn.Linear(2 * HIDDEN, HIDDEN, dtype=dtype)
        self.head = torch.nn.Linear(HIDDEN, VOCAB, bias=False, dtype=dtype)
        self.tags = torch.nn.Linear(HIDDEN, CLASSES, dtype=dtype)
        self.register_buffer("pos_weight", torch.full((CLASSES,), 2.0, dtype=dtype))

    def forward(self, ids, target, tags):
        h = self.embed(ids)
        h = h + self.down(tgt.silu(self.up(h))) + self.act(h)
        h = h + tgt.embedding(ids, self.embed.weight, scale_grad_by_freq=True)
        lce = tgt.linear_cross_entropy(h, self.head.weight, target)
        lce_rows = tgt.linear_cross_entropy(h, self.head.weight, target, reduction="none")
        logits = self.head(h).flatten(0, 1)
        ce, zloss = tgt.cross_entropy(logits, target.flatten(), label_smoothing=0.1, z_loss_scale=1e-3,
                                      return_z_loss=True)
        bce = tgt.binary_cross_entropy_with_logits(self.tags(h), tags, pos_weight=self.pos_weight)
        return lce + (lce_rows * 0.5).float().mean().to(lce.dtype) + ce + zloss + bce


def _batch(batch=4, seq=7, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq), generator=g)
    target = torch.randint(0, VOCAB, (batch, seq), generator=g)
    target[0, :2] = -100
    tags = torch.rand(batch, seq, CLASSES, generator=g)
    return ids, target, tags


def _loss_and_grads(model, fn, batch):
    model.zero_grad(set_to_none=True)
    loss = fn(*batch)
    loss.backward()
    return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_model_matches_eager(backend, dtype):
    """float32 compiles with dynamic=True and runs two batch shapes through one graph (SymInt shapes
    through the fake kernels); bfloat16 compiles static."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    model = TinyModel(dtype)
    dynamic = dtype == torch.float32
    compiled = torch.compile(model, fullgraph=True, backend=backend, dynamic=dynamic)  # graph break = error
    # aot_eager runs the same kernels on the same inputs: identical up to torch's own decompositions
    tol = {torch.float32: 1e-6, torch.bfloat16: 1e-2}[dtype]
    for batch_size, seq in ([(4, 7), (6, 9)] if dynamic else [(4, 7)]):
        ids, target, tags = _batch(batch_size, seq, seed=batch_size)
        batch = (ids, target, tags.to(dtype))
        eager_loss, eager_grads = _loss_and_grads(model, model, batch)
        loss, grads = _loss_and_grads(model, compiled, batch)
        torch.testing.assert_close(loss, eager_loss, rtol=tol, atol=tol)
        for name, grad in grads.items():
            torch.testing.assert_close(grad, eager_grads[name], rtol=tol, atol=tol, msg=f"grad {name}")
    assert counters["stats"]["unique_graphs"] == 1  # one graph, no recompilation for the second shape


def test_export_traces_every_op():
    """torch.export gives a graph with the tilegrad ops in it (fake kernels only, no execution)."""
    model = TinyModel(torch.float32)
    exported = torch.export.export(model, _batch())
    targets = {str(node.target) for node in exported.graph.nodes if node.op == "call_function"}
    for op in ("tilegrad.embedding.default", "tilegrad.silu.default", "tilegrad.cross_entropy_loss.default",
               "tilegrad.binary_cross_entropy_with_logits_fused.default", "tilegrad.linear_cross_entropy_rows.default"):
        assert op in targets, f"{op} not in {sorted(targets)}"
