"""Zero-copy hand-off and the thread knob of tilegrad.torch.

Zero-copy: the arrays the C++ kernels receive are views of the caller's tensors (same data pointer and
strides, float32 / float16 / bfloat16, contiguous or transposed / sliced / expanded), and every output
the kernel writes is the memory of the tensor torch allocated and the op returns. Proven by spying on
``tilegrad._core`` (the kernels themselves run unchanged). Threads: every function gives bit-identical
results with torch.set_num_threads(1) and (2), and tilegrad follows torch's thread count."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

# small tensors: tilegrad's kernels, not the crossover to torch (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("kernels_at_every_size")
import ml_dtypes  # noqa: E402

import tilegrad as tg  # noqa: E402
import tilegrad.torch as tgt  # noqa: E402
from tilegrad import _core  # noqa: E402
from tilegrad.torch._tensor import as_numpy, from_numpy, unsupported_reason  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
NUMPY_DTYPES = {torch.float32: np.float32, torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16}


def pointer(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def views(dtype):
    """(name, tensor) for a contiguous, a transposed, a sliced and an expanded (stride 0) tensor."""
    base = torch.randn(8, 12, generator=torch.Generator().manual_seed(0)).to(dtype)
    return [("contiguous", base), ("transposed", base.t()), ("sliced", base[1::2, 3::3]),
            ("expanded", base[:1].expand(5, 12))]


@pytest.mark.parametrize("dtype", DTYPES)
def test_as_numpy_is_a_view_of_the_tensor(dtype):
    """Same pointer, shape, element strides and values; a write through the array lands in the tensor."""
    for name, t in views(dtype):
        a = as_numpy(t)
        assert pointer(a) == t.data_ptr(), name
        assert a.dtype == NUMPY_DTYPES[dtype] and a.shape == tuple(t.shape), name
        assert tuple(s // a.itemsize for s in a.strides) == t.stride(), name
        assert np.array_equal(a.astype(np.float64), t.to(torch.float64).numpy()), name
    t = torch.zeros(3, 4, dtype=dtype).t()
    as_numpy(t)[1, 2] = 5.0
    assert t[1, 2].item() == 5.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_shares_memory(dtype):
    a = as_numpy(torch.randn(4, 6).to(dtype))
    t = from_numpy(a)
    assert t.dtype == dtype and t.data_ptr() == pointer(a)


def test_unsupported_tensors_are_named():
    assert "float64" in unsupported_reason(torch.zeros(2, dtype=torch.float64))
    assert "meta" in unsupported_reason(torch.zeros(2, device="meta"))
    assert "sparse" in unsupported_reason(torch.zeros(2, 2).to_sparse())
    assert unsupported_reason(torch.zeros(2, dtype=torch.bfloat16).expand(3, 2)) is None


@pytest.mark.parametrize("kind", ["sparse", "meta"])
def test_raw_op_rejects_sparse_and_gives_meta_shapes(kind):
    """Sparse: a TypeError naming the layout; meta: the fake kernel's shapes (no kernel call)."""
    x = torch.randn(4, 4)
    if kind == "sparse":
        with pytest.raises(TypeError, match="sparse"):
            torch.ops.tilegrad.silu_backward(x.to_sparse(), x.to_sparse())
    else:
        out = torch.ops.tilegrad.silu_backward(x.to("meta"), x.to("meta"))
        assert out.device.type == "meta" and out.shape == (4, 4)


def test_raw_op_rejects_float64_with_value_error_naming_the_dtype():
    x = torch.randn(4, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match="float64"):
        torch.ops.tilegrad.silu_backward(x, x)


class KernelSpy:
    """Wraps tilegrad._core functions: records the data pointer of every array argument and result."""

    def __init__(self, monkeypatch, *names):
        self.calls = {name: [] for name in names}
        for name in names:
            monkeypatch.setattr(_core, name, self._wrap(name, getattr(_core, name)))

    def _wrap(self, name, kernel):
        def spy(*args):
            result = kernel(*args)
            results = result if isinstance(result, tuple) else (result,)
            self.calls[name].append(([pointer(a) if isinstance(a, np.ndarray) else None for a in args],
                                     [pointer(r) if isinstance(r, np.ndarray) else None for r in results]))
            return result
        return spy

    def only_call(self, name):
        assert len(self.calls[name]) == 1, f"{name} called {len(self.calls[name])} times"
        return self.calls[name][0]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced"])
def test_silu_backward_reads_the_callers_tensors_and_writes_the_returned_one(monkeypatch, dtype, layout):
    spy = KernelSpy(monkeypatch, "silu_backward")
    x = dict(views(dtype))[layout]
    grad = torch.randn(x.shape).to(dtype)
    out = torch.ops.tilegrad.silu_backward(grad, x)
    (grad_ptr, x_ptr, out_ptr), _ = spy.only_call("silu_backward")
    assert (grad_ptr, x_ptr) == (grad.data_ptr(), x.data_ptr())
    assert out_ptr == out.data_ptr()


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_forward_and_backward_are_zero_copy(monkeypatch, dtype):
    """Forward: logits and targets read in place, log_prob written into the tensor the op returns
    (and saves); backward: that log_prob read in place, the gradient written into the returned tensor."""
    spy = KernelSpy(monkeypatch, "cross_entropy_loss", "cross_entropy_loss_grad")
    x = torch.randn(9, 20).to(dtype).t()  # (20, 9), transposed
    target = torch.randint(0, 9, (40,))[::2]  # strided targets
    loss, log_prob, _, _ = torch.ops.tilegrad.cross_entropy_loss(x, target, None, "mean", -100, 0.0, 0.0, False)
    args, _ = spy.only_call("cross_entropy_loss")
    assert args[0] == x.data_ptr() and args[1] == target.data_ptr()
    assert args[-1] == log_prob.data_ptr()  # the out= array
    grad = torch.ops.tilegrad.cross_entropy_loss_grad(torch.tensor(1.0, dtype=dtype), log_prob, target, None, None,
                                                     None, "mean", -100, 0.0, 0.0)
    args, _ = spy.only_call("cross_entropy_loss_grad")
    assert args[1] == log_prob.data_ptr() and args[2] == target.data_ptr()
    assert args[-1] == grad.data_ptr()


def test_cross_entropy_autograd_saves_the_kernels_log_prob(monkeypatch):
    """Through autograd the backward kernel reads exactly the memory the forward kernel wrote."""
    spy = KernelSpy(monkeypatch, "cross_entropy_loss", "cross_entropy_loss_grad")
    x = torch.randn(6, 7, requires_grad=True)
    tgt.cross_entropy(x, torch.randint(0, 7, (6,))).backward()
    forward_args, _ = spy.only_call("cross_entropy_loss")
    backward_args, _ = spy.only_call("cross_entropy_loss_grad")
    assert backward_args[1] == forward_args[-1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_and_bce_backward_are_zero_copy(monkeypatch, dtype):
    spy = KernelSpy(monkeypatch, "embedding_dense_backward", "binary_cross_entropy_with_logits_backward")
    grad = torch.randn(4, 3, 8).to(dtype)
    indices = torch.randint(0, 10, (4, 3))
    out = torch.ops.tilegrad.embedding_dense_backward(grad, indices, 10, -1, False)
    args, _ = spy.only_call("embedding_dense_backward")
    assert (args[0], args[1], args[-1]) == (grad.data_ptr(), indices.data_ptr(), out.data_ptr())

    x = torch.randn(5, 6).to(dtype).t()
    y = torch.rand(6, 5).to(dtype)
    w = torch.rand(5).to(dtype)
    g = torch.ones((), dtype=dtype)
    out = torch.ops.tilegrad.binary_cross_entropy_with_logits_backward(g, x, y, w, w, 1)
    args, _ = spy.only_call("binary_cross_entropy_with_logits_backward")
    assert args[:5] == [g.data_ptr(), x.data_ptr(), y.data_ptr(), w.data_ptr(), w.data_ptr()]
    assert args[-1] == out.data_ptr()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fused_linear_ops_read_in_place_and_return_the_kernels_arrays(monkeypatch, dtype):
    """The vocabulary-parallel ops: inputs read in place; the arrays the kernel allocates are returned
    as tensors over the same memory (no copy on the way back)."""
    spy = KernelSpy(monkeypatch, "fused_linear_online_max_sum", "fused_linear_cross_entropy_loss_grad")
    h = torch.randn(6, 8).to(dtype)
    w = torch.randn(11, 8).to(dtype)
    target = torch.randint(0, 11, (6,))
    outputs = torch.ops.tilegrad.fused_linear_online_max_sum(h, w, target, 0, 11, True)
    args, results = spy.only_call("fused_linear_online_max_sum")
    assert args[:3] == [h.data_ptr(), w.data_ptr(), target.data_ptr()]
    assert results == [t.data_ptr() for t in outputs]
    logits_max, sum_exp, _, mask, masked_target, _ = outputs
    grads = torch.ops.tilegrad.fused_linear_cross_entropy_loss_grad(torch.ones(6), h, w, mask, masked_target, 0.0,
                                                                   logits_max, sum_exp, None)
    args, results = spy.only_call("fused_linear_cross_entropy_loss_grad")
    assert args[1:5] == [h.data_ptr(), w.data_ptr(), mask.data_ptr(), masked_target.data_ptr()]
    assert results == [t.data_ptr() for t in grads]


# ---------------------------------------------------------------------------------------------------
# threads


def _every_function(dtype):
    """Forward values and gradients of every functional, on inputs large enough to be split over threads."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(257, 3001, generator=g).to(dtype).requires_grad_()
    t = torch.randint(0, 3001, (257,), generator=g)
    t[::7] = -100
    table = torch.randn(1000, 64, generator=g).to(dtype).requires_grad_()
    ids = torch.randint(0, 1000, (64, 64), generator=g)
    y = torch.rand(257, 3001, generator=g).to(dtype)
    pw = torch.rand(3001, generator=g).to(dtype)
    h = torch.randn(300, 64, generator=g).to(dtype).requires_grad_()
    w = (torch.randn(2000, 64, generator=g) * 0.2).to(dtype).requires_grad_()
    ht = torch.randint(0, 2000, (300,), generator=g)
    results = []
    for out, params in [
        (tgt.silu(x), [x]),
        (tgt.cross_entropy(x, t, label_smoothing=0.1, z_loss_scale=1e-4), [x]),
        (tgt.embedding(ids, table, padding_idx=0, scale_grad_by_freq=True), [table]),
        (tgt.binary_cross_entropy_with_logits(x, y, pos_weight=pw), [x]),
        (tgt.linear_cross_entropy(h, w, ht), [h, w]),
        (tgt.linear_cross_entropy(h, w, ht, reduction="none"), [h, w]),
    ]:
        # a fixed upstream gradient (no torch reduction, whose order could follow the thread count)
        upstream = torch.randn(out.shape, generator=g).to(out.dtype)
        results.append(out.detach())
        results.extend(torch.autograd.grad(out, params, upstream))
    return results


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_results_do_not_depend_on_torchs_thread_count(torch_threads, dtype):
    torch_threads(1)
    one = _every_function(dtype)
    assert tg.get_num_threads() == 1  # tilegrad followed torch
    torch_threads(2)
    two = _every_function(dtype)
    assert tg.get_num_threads() == 2
    for i, (a, b) in enumerate(zip(one, two)):
        assert torch.equal(a.view(torch.int16) if a.dtype == torch.bfloat16 else a,
                           b.view(torch.int16) if b.dtype == torch.bfloat16 else b), f"result {i}"


def test_torch_thread_count_reaches_tilegrad_after_tilegrads_own_setting(torch_threads):
    """tilegrad.set_num_threads(1) between two torch calls must not hide a later torch.set_num_threads(2)."""
    x = torch.randn(64, 64).requires_grad_()
    torch_threads(2)
    tgt.silu(x).sum().backward()
    assert tg.get_num_threads() == 2
    tg.set_num_threads(1)
    torch_threads(2)
    tgt.silu(x).sum().backward()
    assert tg.get_num_threads() == 2  # followed torch again


@pytest.mark.parametrize("float_dtype", [torch.float32, torch.float16, torch.float64, torch.bfloat16], ids=str)
def test_embedding_dense_backward_refuses_float_indices_as_torch_does(float_dtype):
    grad = torch.ones(2, 3)
    indices = torch.tensor([0.7, 1.0], dtype=float_dtype)
    with pytest.raises(RuntimeError, match="indices"):  # torch's own refusal
        torch.ops.aten.embedding_dense_backward(grad, indices, 4, -1, False)
    with pytest.raises(TypeError, match=r"indices must be an integer or bool array .*got " + str(float_dtype)[6:]):
        torch.ops.tilegrad.embedding_dense_backward(grad, indices, 4, -1, False)
    if float_dtype != torch.bfloat16:  # NumPy has no bfloat16 of its own
        with pytest.raises(TypeError, match="indices must be an integer or bool array"):
            tg.embedding_dense_backward(as_numpy(grad), indices.numpy(), 4)
