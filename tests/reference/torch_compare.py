"""Comparison helpers for the tilegrad.torch tests: inputs rounded to a dtype with their exact float64
copy, and the error bound every comparison against a float64 reference uses (imports torch)."""

import torch

# Unit roundoff u of each dtype (half an ulp at 1): a value rounded once is within u of exact.
UNIT_ROUNDOFF = {torch.float32: 2.0 ** -24, torch.float16: 2.0 ** -11, torch.bfloat16: 2.0 ** -8}

# How many u a result may be off, relative to the largest reference value. float32 results sum up to
# ~1e3 float32 terms (error grows like sqrt(n) u to n u) -> 64 u (~4e-6). float16/bfloat16 results are
# rounded once (u) after an fp32 computation that may read one stored, already rounded intermediate
# (cross entropy's log_prob, linear cross entropy's G): that adds at most p*|log p|*u <= u/e per
# element, or ~u once GEMM cancellations are counted -> 4 u (bf16: 1.6e-2, fp16: 2e-3).
ROUNDOFFS_ALLOWED = {torch.float32: 64, torch.float16: 4, torch.bfloat16: 4}



def tolerance(dtype: "torch.dtype") -> float:
    """Max error, relative to max |reference|, allowed for a result computed in ``dtype``."""
    return ROUNDOFFS_ALLOWED[dtype] * UNIT_ROUNDOFF[dtype]



def rounded(shape, dtype, scale=1.0, seed=0, offset=0.0):
    """``(t, t64)``: normal values * scale + offset rounded to ``dtype``, and the same values in float64."""
    g = torch.Generator().manual_seed(seed)
    t = (torch.randn(*shape, generator=g, dtype=torch.float64) * scale + offset).to(dtype)
    return t, t.to(torch.float64)



def assert_matches(actual, expected, dtype, what: str, factor: float = 1.0) -> None:
    """max |actual - expected| <= factor * tolerance(dtype) * max |expected| (shapes equal, NaN where
    expected is NaN)."""
    assert actual is not None, f"{what}: no result"
    assert tuple(actual.shape) == tuple(expected.shape), \
        f"{what}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    a = actual.detach().to(torch.float64)
    e = expected.detach().to(torch.float64)
    assert torch.equal(torch.isnan(a), torch.isnan(e)), f"{what}: NaN pattern differs"
    a, e = torch.nan_to_num(a), torch.nan_to_num(e)
    scale = max(e.abs().max().item(), 1e-30) if e.numel() else 1.0
    err = (a - e).abs().max().item() / scale if e.numel() else 0.0
    bound = factor * tolerance(dtype)
    assert err <= bound, f"{what}: relative error {err:.3g} > {bound:.3g} ({dtype})"


def autograd_node_names(t) -> set:
    """The class names of every autograd node behind ``t`` (which path a call took: tilegrad's nodes
    are named ``Tilegrad*`` / ``LinearCrossEntropyFunction*``)."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo.extend(n for n, _ in node.next_functions)
    return {type(n).__name__ for n in seen}


def penalty_grads(fn, inputs) -> tuple:
    """Second derivatives through an input-gradient penalty: ``g = d(sum fn^2)/d(first input)`` with
    ``create_graph``, then ``d(sum g^2)/d(every input)``."""
    import torch

    out = fn(*inputs)
    (g,) = torch.autograd.grad(out.pow(2).sum(), inputs[0], create_graph=True)
    return torch.autograd.grad(g.pow(2).sum(), inputs)


def saved_tensors(fn) -> list:
    """The tensors autograd saves for backward while ``fn()`` runs."""
    import torch

    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        fn()
    return saved


def saved_bytes(fn) -> int:
    """The bytes of :func:`saved_tensors` (a tensor saved twice counts twice)."""
    return sum(t.numel() * t.element_size() for t in saved_tensors(fn))


def assert_gradients_do_not_depend_on_threads(fn, inputs, upstream, counts=(1, 2, 3)) -> None:
    """``fn(*inputs).backward(upstream)`` gives every input the same gradient bits on each thread count
    (the caller's fixture restores torch's count)."""
    import torch

    results = []
    for threads in counts:
        torch.set_num_threads(threads)
        leaves = [t.detach().clone().requires_grad_() for t in inputs]
        fn(*leaves).backward(upstream)
        results.append([t.grad for t in leaves])
    for grads in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(grads, results[0]))


def assert_second_derivatives_match(ours, theirs, inputs) -> None:
    """``ours`` on float32 copies of ``inputs`` gives the second derivatives (:func:`penalty_grads`) of
    ``theirs`` (torch's formula) on float64 copies."""
    import torch

    got = penalty_grads(ours, [t.detach().clone().requires_grad_() for t in inputs])
    want = penalty_grads(theirs, [t.detach().double().requires_grad_() for t in inputs])
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-5)


def assert_compiled_matches_eager(fn, inputs) -> None:
    """``torch.compile(fn, fullgraph=True)`` (aot_eager) gives eager's scalar and the gradients of
    every input that requires grad (None inputs are passed as they are)."""
    import torch

    leaves = [t for t in inputs if t is not None and t.requires_grad]
    torch._dynamo.reset()
    eager = fn(*inputs)
    grads = torch.autograd.grad(eager, leaves)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(*inputs)
    torch.testing.assert_close(got, eager)
    torch.testing.assert_close(torch.autograd.grad(got, leaves), grads)


# float32 parameters: tilegrad and torch sum in other orders (measured: loss 1e-7, gradients 6e-7 of
# the tensor's largest value); bfloat16: the roundings listed in
# test_hf_causal_lm_bfloat16_training_follows_torch (measured: loss 1.1e-5, gradients 1.1e-2, i.e.
# a few bf16 ulps), relative to the largest value of the tensor
PATCHED_LOSS_RTOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -8}
PATCHED_GRAD_RTOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -5}


def assert_same_loss_and_gradients(patched_loss, reference_loss, patched, reference, dtype):
    """One loss and every parameter gradient of two models with the same weights (a patched model and
    its unpatched twin), within dtype's tolerance."""
    assert patched_loss.dtype == reference_loss.dtype == torch.float32
    assert abs(patched_loss.item() - reference_loss.item()) <= PATCHED_LOSS_RTOL[dtype] * abs(reference_loss.item())
    patched_loss.backward()
    reference_loss.backward()
    grads = dict(reference.named_parameters())
    for name, p in patched.named_parameters():
        want = grads[name].grad.double()
        assert p.grad is not None, name
        scale = want.abs().max().item()
        err = (p.grad.double() - want).abs().max().item()
        assert err <= PATCHED_GRAD_RTOL[dtype] * scale, f"{name}: {err} > {PATCHED_GRAD_RTOL[dtype]} * {scale}"
