"""One router decides every tilegrad.torch call's path, in one order (issue 29): what the kernels cannot
take -> torch's function; compiling -> the torch.ops.tilegrad op, whatever the size; torch.func
transforms and sizes below the crossover -> the composite; else the eager kernel node.

swiglu and rotary_position_embedding used to test the crossover before torch.compile, so a small
compiled call traced torch's composite instead of the tilegrad op; every function is compiled here
with tensors below its crossover (every crossover raised above them, so the test holds whatever sizes
are measured)."""

import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch as tgt  # noqa: E402
from tilegrad.torch import _eager  # noqa: E402
from tilegrad.torch._eager import CROSSOVER, Path  # noqa: E402
from reference.torch_compare import autograd_node_names  # noqa: E402  (tests/torch/conftest.py)

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BF16 = torch.bfloat16


def _small_calls():
    """Every function, and its arguments: small tensors (bf16; float32 for embedding and
    linear_cross_entropy, whose 16-bit calls take the kernel at every size)."""
    g = torch.Generator().manual_seed(0)

    def r(*shape, dtype=BF16):
        return torch.randn(*shape, generator=g).to(dtype).requires_grad_()

    ids = torch.randint(0, 10, (6,), generator=g)
    target = torch.randint(0, 32, (6,), generator=g)
    cos = torch.randn(1, 4, 1, 8, generator=g).to(BF16)
    probabilities = torch.rand(6, 32, generator=g).to(BF16)
    return {
        "silu": (tgt.silu, r(6, 32)),
        "cross_entropy": (tgt.cross_entropy, r(6, 32), target),
        "embedding": (tgt.embedding, ids, r(10, 8, dtype=torch.float32)),
        "binary_cross_entropy_with_logits": (tgt.binary_cross_entropy_with_logits, r(6, 32), probabilities),
        "linear_cross_entropy": (tgt.linear_cross_entropy, r(6, 8, dtype=torch.float32),
                                 r(32, 8, dtype=torch.float32), target),
        "rms_norm": (lambda x: tgt.rms_norm(x, (32,)), r(6, 32)),
        "add_rms_norm": (lambda a, b, w: tgt.add_rms_norm(a, b, w)[0], r(6, 32), r(6, 32), r(32)),
        "silu_mul": (tgt.silu_mul, r(6, 32), r(6, 32)),
        "swiglu": (tgt.swiglu, r(6, 32)),
        "gelu": (tgt.gelu, r(6, 32)),
        "gelu_mul": (tgt.gelu_mul, r(6, 32), r(6, 32)),
        "geglu": (tgt.geglu, r(6, 32)),
        "rotary_position_embedding": (lambda x, c: tgt.rotary_position_embedding(x, c, c, 1), r(1, 4, 2, 8), cos),
        "apply_rotary_pos_emb": (lambda q, k, c: tgt.apply_rotary_pos_emb(q, k, c, c)[0], r(1, 2, 4, 8),
                                 r(1, 2, 4, 8), cos[:, :, 0]),
        "linear": (tgt.linear, r(6, 8, dtype=torch.float32), r(4, 8, dtype=torch.float32)),
    }


def _calls_without_crossover():
    """Functions that take the kernel at every size in eager mode (no CROSSOVER entry)."""
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 5, 8, generator=g).requires_grad_() for _ in range(3))
    return {"scaled_dot_product_attention": (tgt.scaled_dot_product_attention, q, k, v)}


def _traced_ops(fn, args):
    """The operator names in the graph torch.compile(fullgraph=True) traces from ``fn(*args)``."""
    names = []

    def backend(gm, example_inputs):
        names.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    return names


@pytest.mark.usefixtures("composites_at_every_size")  # tests/torch/conftest.py
@pytest.mark.parametrize("name", sorted(_small_calls()))
def test_compile_takes_the_tilegrad_op_below_the_crossover(name):
    fn, *args = _small_calls()[name]
    eager_nodes = autograd_node_names(fn(*args))  # eager: below the crossover, torch's ops
    assert not any(n.startswith(("Tilegrad", "LinearCrossEntropyFunction")) for n in eager_nodes), eager_nodes
    traced = _traced_ops(fn, args)
    assert any(n.startswith("tilegrad.") for n in traced), traced


# The family module each public function lives in (issue 30: one module per operator family).
FAMILY = {"silu": "_silu", "cross_entropy": "_cross_entropy", "embedding": "_embedding",
          "binary_cross_entropy_with_logits": "_bce", "linear_cross_entropy": "_linear_cross_entropy",
          "rms_norm": "_rms_norm", "add_rms_norm": "_add_rms_norm", "silu_mul": "_swiglu", "swiglu": "_swiglu",
          "rotary_position_embedding": "_rope", "apply_rotary_pos_emb": "_rope", "linear": "_linear",
          "scaled_dot_product_attention": "_attention", "gelu": "_gelu", "gelu_mul": "_gelu", "geglu": "_gelu"}
KERNEL_NODES = ("Tilegrad", "LinearCrossEntropyFunction")


@pytest.mark.parametrize("name", sorted({**_small_calls(), **_calls_without_crossover()}))
def test_every_function_takes_the_path_the_router_gives(name, monkeypatch):
    """Whatever the size, the path is the router's: its family module's ``route`` answering KERNEL gives
    tilegrad's eager node, COMPOSITE and TORCH give torch's ops only."""
    import importlib
    family = importlib.import_module(f"tilegrad.torch.{FAMILY[name]}")
    fn, *args = {**_small_calls(), **_calls_without_crossover()}[name]
    nodes = {}
    for path in (Path.KERNEL, Path.COMPOSITE, Path.TORCH):
        monkeypatch.setattr(family, "route", lambda *a, _path=path, **k: _path)
        nodes[path] = autograd_node_names(fn(*args))
    assert any(n.startswith(KERNEL_NODES) for n in nodes[Path.KERNEL]), nodes[Path.KERNEL]
    for path in (Path.COMPOSITE, Path.TORCH):
        assert not any(n.startswith(KERNEL_NODES) for n in nodes[path]), (path, nodes[path])


def test_family_modules_import_no_other_familys_names():
    """A family module imports the shared machinery (_eager, _library, _tensor) and the core, never
    another family module."""
    import ast
    import pathlib
    import tilegrad.torch
    shared = {"_eager", "_library", "_tensor"}
    folder = pathlib.Path(tilegrad.torch.__file__).parent
    for module in sorted(set(FAMILY.values())):
        tree = ast.parse((folder / f"{module}.py").read_text())
        local = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 1}
        assert local <= shared, (module, local - shared)


def test_route_order(monkeypatch):
    """Unsupported first, then compiling, then torch.func / the crossover, then the kernel."""
    monkeypatch.setitem(CROSSOVER, "silu", {torch.float32: 100})
    assert _eager.route(False, torch.float32, silu=1000) is Path.TORCH
    assert _eager.route(True, torch.float32, silu=1000) is Path.KERNEL
    assert _eager.route(True, torch.float32, silu=99) is Path.COMPOSITE
    assert _eager.route(True, torch.float32, wants_grad=False, silu=1000) is Path.COMPOSITE
    assert _eager.route(True, torch.bfloat16, silu=1) is Path.KERNEL  # no entry for the dtype: no crossover
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert _eager.route(True, torch.float32, silu=99) is Path.COMPILE
    assert _eager.route(False, torch.float32, silu=99) is Path.TORCH


def test_every_function_has_its_own_crossover_entry():
    """swiglu used silu_mul's entry; each function now names its own (a missing dtype: no crossover)."""
    for op in ("silu", "cross_entropy", "cross_entropy_classes", "embedding", "binary_cross_entropy_with_logits",
               "linear_cross_entropy", "rms_norm", "add_rms_norm", "silu_mul", "swiglu", "rope", "gelu", "gelu_mul"):
        assert op in CROSSOVER
    assert CROSSOVER["swiglu"] is not CROSSOVER["silu_mul"]


@pytest.mark.parametrize("dtype", [torch.float32, BF16], ids=["f32", "bf16"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_composites_do_not_depend_on_the_thread_count(dtype, reduction, torch_threads):
    """Few classes take the composite at any row count, and torch.func at any size: their sums go in a
    fixed order (torch's full reductions split the elements among the threads). Bit-identical loss
    and gradient for 1, 2 and 3 threads; the loss is also checked against float64."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1 << 18, 4, generator=g).to(dtype)
    target = torch.randint(0, 4, (1 << 18,), generator=g)
    target[::9] = -100
    weight = torch.rand(4, generator=g) + 0.5
    y = torch.rand(1 << 18, 4, generator=g).to(dtype)
    results = []
    for threads in (1, 2, 3):
        torch_threads(threads)
        xx = x.clone().requires_grad_()
        loss, zloss = tgt.cross_entropy(xx, target, weight, reduction=reduction, label_smoothing=0.1,
                                        z_loss_scale=1e-3, return_z_loss=True)
        loss.backward()
        bce_grad = torch.func.grad(lambda v: tgt.binary_cross_entropy_with_logits(v, y, reduction=reduction))(x)
        results.append((loss.detach(), zloss.detach(), xx.grad, bce_grad))
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))
    x64 = x.double()
    want = torch.nn.functional.cross_entropy(x64, target, weight.double(), reduction=reduction, label_smoothing=0.1)
    kept = target != -100
    zwant = torch.where(kept, 1e-3 * torch.logsumexp(x64, 1).square(), 0.0).sum()
    zwant = zwant / kept.sum() if reduction == "mean" else zwant
    tol = 2 ** -8 if dtype == BF16 else 1e-6
    torch.testing.assert_close(results[0][0].double(), want + zwant, rtol=tol, atol=0)


def test_docs_crossover_table_is_the_registry():
    """docs/pytorch/fallbacks.md's table is rendered by the docs hook from _eager.py's source (the build
    imports no torch): what it reads is the registry the router uses, every entry has its row."""
    import importlib.util
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("docs_includes", root / "docs" / "_hooks" / "includes.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    # the hook reads the source tree's _eager.py; the installed one is the same file (and the only one
    # there is when the tests run against a wheel)
    from tilegrad.torch import _eager
    hook.EAGER = pathlib.Path(_eager.__file__)
    names = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
    assert hook.crossovers(hook.EAGER.read_text()) == {
        op: {names[d]: n for d, n in sizes.items()} for op, sizes in CROSSOVER.items()}
    table = hook.crossover_table("pytorch").splitlines()
    assert len(table) == 2 + len(CROSSOVER)
    assert "<!-- crossover-table: pytorch -->" in (root / "docs" / "pytorch" / "fallbacks.md").read_text()

    def cells(entry_function):
        row = next(r for r in table if r.startswith(f"| `{entry_function}` |"))
        return [c.strip() for c in row.strip("|").split("|")][2:]
    assert cells("swiglu") == [f"{CROSSOVER['swiglu'][d] >> 10}K" for d in names]  # 8K, 4K, 4K
    assert cells("embedding")[1:] == ["kernel", "kernel"]  # no 16-bit entry: the kernel at every size
