"""tg.fused_linear_cross_entropy extras (issue 12): linear bias, class weights, label smoothing, z-loss,
softcap, grad_output, the three plans (whole / chunked / vocab_outer) and bit-identical results for 1, 2
and 3 threads, against a float64 PyTorch composite (F.linear + tanh softcap + F.cross_entropy + z-loss,
autograd)."""

import ml_dtypes
import numpy as np
import pytest
import torch

import tilegrad as tg
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
# max |error| / max |exact| of the gradients (G is rounded once to the input dtype)
GRAD_TOL = {F32: 3e-5, np.dtype(np.float16): 4e-3, BF16: 3e-2}
BT, H, V = 300, 16, 123
# budgets forcing each plan for (BT, H, V) above: chunks of >= 128 rows of fp32 logits (+ 16-bit G),
# plus the 123 x 16 fp32 grad_weight accumulator for 16-bit dtypes
PLAN_BUDGETS = {"whole": 1 << 30, "chunked": 140000, "vocab_outer": 1}


def f64(a):
    return np.asarray(a).astype(np.float64)


def rel_err(a, b):
    a, b = f64(a), f64(b)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def make(bt, h, v, dtype, seed=0, ignore=(0, 7, 8)):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((bt, h)) * 0.7).astype(np.float32).astype(dtype)
    w = (rng.standard_normal((v, h)) * 0.5).astype(np.float32).astype(dtype)
    t = rng.integers(0, v, bt).astype(np.int64)
    t[list(i for i in ignore if i < bt)] = -100
    return x, w, t


def torch_reference(x, w, t, reduction="mean", bias=None, class_weight=None, label_smoothing=0.0,
                    lse_square_scale=0.0, softcap=None, grad_output=None, ignore_index=-100):
    """float64 autograd of the composite; returns (loss, z_loss, grad_input, grad_weight, grad_bias)."""
    xt = torch.tensor(f64(x), requires_grad=True)
    wt = torch.tensor(f64(w), requires_grad=True)
    bt_ = torch.tensor(f64(bias), requires_grad=True) if bias is not None else None
    z = torch.nn.functional.linear(xt, wt, bt_)
    if softcap is not None:
        z = softcap * torch.tanh(z / softcap)
    target = torch.tensor(t)
    cw = torch.tensor(f64(class_weight)) if class_weight is not None else None
    ce = torch.nn.functional.cross_entropy(z, target, weight=cw, ignore_index=ignore_index, reduction=reduction,
                                           label_smoothing=label_smoothing)
    valid = (target != ignore_index).double()
    zrows = lse_square_scale * torch.logsumexp(z, dim=1) ** 2 * valid
    zl = {"none": zrows, "sum": zrows.sum(), "mean": zrows.sum() / valid.sum()}[reduction]
    loss = ce + zl
    g = torch.ones_like(loss) if grad_output is None else torch.tensor(f64(grad_output)).reshape(loss.shape)
    loss.backward(g)
    return (loss.detach().numpy(), zl.detach().numpy(), xt.grad.numpy(), wt.grad.numpy(),
            None if bt_ is None else bt_.grad.numpy())


def check_against_reference(dtype, reduction, kwargs, got, rtol_loss=2e-5):
    x, w, t = kwargs.pop("_inputs")
    ref = torch_reference(x, w, t, reduction=reduction, **kwargs)
    loss, gi, gw = got[:3]
    np.testing.assert_allclose(loss, ref[0], rtol=rtol_loss, atol=2e-5)
    assert rel_err(gi, ref[2]) < GRAD_TOL[dtype]
    assert rel_err(gw, ref[3]) < GRAD_TOL[dtype]
    k = 3
    if kwargs.get("bias") is not None:
        assert got[k].dtype == dtype and rel_err(got[k], ref[4]) < GRAD_TOL[dtype]
        k += 1
    if kwargs.get("lse_square_scale", 0.0):
        np.testing.assert_allclose(got[k], ref[1], rtol=rtol_loss, atol=2e-5)
        k += 1
    assert len(got) == k


FEATURES = {
    "bias": lambda rng, dt: dict(bias=(rng.standard_normal(V) * 0.5).astype(np.float32).astype(dt)),
    "class_weight": lambda rng, dt: dict(class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32)),
    "smoothing": lambda rng, dt: dict(label_smoothing=0.1),
    "smoothing_weighted": lambda rng, dt: dict(label_smoothing=0.2, class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32)),
    "zloss": lambda rng, dt: dict(lse_square_scale=1e-2),
    "softcap": lambda rng, dt: dict(softcap=3.0),
    "all": lambda rng, dt: dict(bias=(rng.standard_normal(V) * 0.5).astype(np.float32).astype(dt),
                                class_weight=rng.uniform(0.2, 2.0, V).astype(np.float32), label_smoothing=0.1,
                                lse_square_scale=1e-3, softcap=5.0),
}


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
def test_features_match_torch(dtype, feature, reduction, plan):
    rng = np.random.default_rng(hash(feature) % 1000)
    x, w, t = make(BT, H, V, dtype, seed=3)
    kwargs = FEATURES[feature](rng, dtype)
    assert fused_linear_cross_entropy_plan(BT, H, V, dtype, memory_budget=PLAN_BUDGETS[plan])["plan"] == plan
    got = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction, memory_budget=PLAN_BUDGETS[plan], **kwargs)
    check_against_reference(dtype, reduction, dict(kwargs, _inputs=(x, w, t)), got)


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_grad_output(reduction, plan):
    x, w, t = make(BT, H, V, F32, seed=4)
    rng = np.random.default_rng(9)
    go = rng.uniform(-2.0, 2.0, BT).astype(np.float32) if reduction == "none" else np.float32(-1.75)
    kw = dict(label_smoothing=0.05, lse_square_scale=1e-3)
    got = tg.fused_linear_cross_entropy(x, w, t, reduction=reduction, grad_output=go,
                                        memory_budget=PLAN_BUDGETS[plan], **kw)
    check_against_reference(F32, reduction, dict(kw, grad_output=go, _inputs=(x, w, t)), got)


def test_grad_output_scalar_for_none_and_errors():
    x, w, t = make(20, 8, 30, F32, seed=5, ignore=())
    one = tg.fused_linear_cross_entropy(x, w, t, reduction="none")
    half = tg.fused_linear_cross_entropy(x, w, t, reduction="none", grad_output=0.5)
    np.testing.assert_array_equal(one[0], half[0])
    np.testing.assert_allclose(half[1], one[1] * 0.5, rtol=1e-6)
    with pytest.raises(ValueError, match="grad_output"):
        tg.fused_linear_cross_entropy(x, w, t, reduction="mean", grad_output=np.ones(20, np.float32))
    with pytest.raises(ValueError, match="grad_output"):
        tg.fused_linear_cross_entropy(x, w, t, reduction="none", grad_output=np.ones(19, np.float32))
    with pytest.raises(ValueError, match="label_smoothing"):
        tg.fused_linear_cross_entropy(x, w, t, label_smoothing=1.5)
    with pytest.raises(ValueError, match="lse_square_scale"):
        tg.fused_linear_cross_entropy(x, w, t, lse_square_scale=-1.0)
    with pytest.raises(ValueError, match="softcap"):
        tg.fused_linear_cross_entropy(x, w, t, softcap=-2.0)
    with pytest.raises(ValueError, match="bias"):
        tg.fused_linear_cross_entropy(x, w, t, bias=np.zeros(29, np.float32))
    with pytest.raises(ValueError, match="bias"):
        tg.fused_linear_cross_entropy(x, w, t, bias=np.zeros(30, np.float64))
    with pytest.raises(ValueError, match="class_weight"):
        tg.fused_linear_cross_entropy(x, w, t, class_weight=np.ones(31, np.float32))
    with pytest.raises(ValueError, match="memory_budget"):
        tg.fused_linear_cross_entropy(x, w, t, memory_budget=0)
    for bad in (-1.0, float("nan"), float("inf"), "bogus"):
        with pytest.raises(ValueError, match="filter_eps"):
            tg.fused_linear_cross_entropy(x, w, t, filter_eps=bad)
    for bad in (True, [0.1]):
        with pytest.raises(TypeError, match="filter_eps"):
            tg.fused_linear_cross_entropy(x, w, t, filter_eps=bad)


@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
def test_mean_with_every_row_ignored_gives_zero_gradients(plan):
    x, w, t = make(BT, H, V, BF16, seed=6)
    t[:] = -100
    b = np.ones(V, BF16)
    loss, gi, gw, gb, zl = tg.fused_linear_cross_entropy(x, w, t, bias=b, lse_square_scale=0.1, label_smoothing=0.1,
                                                         memory_budget=PLAN_BUDGETS[plan])
    assert np.isnan(loss) and np.isnan(zl)  # 0 / 0, as PyTorch
    for g in (gi, gw, gb):
        np.testing.assert_array_equal(f64(g), 0.0)


def test_empty_hidden_size_still_gives_the_bias_gradient():
    # H = 0: the logits are the bias alone; grad_input / grad_weight are empty, grad_bias is not zero
    x, w = np.zeros((5, 0), np.float32), np.zeros((7, 0), np.float32)
    t = np.array([0, 3, -100, 6, 3])
    b = np.linspace(-1.0, 2.0, 7).astype(np.float32)
    kw = dict(bias=b, label_smoothing=0.1, softcap=2.0, lse_square_scale=0.01)
    got = tg.fused_linear_cross_entropy(x, w, t, **kw)
    ref = torch_reference(x, w, t, **kw)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
    np.testing.assert_allclose(got[3], ref[4], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got[4], ref[1], rtol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
def test_plans_agree(dtype):
    x, w, t = make(BT, H, V, dtype, seed=7)
    rng = np.random.default_rng(2)
    kw = FEATURES["all"](rng, dtype)
    outs = {p: tg.fused_linear_cross_entropy(x, w, t, memory_budget=b, **kw) for p, b in PLAN_BUDGETS.items()}
    for p in ("chunked", "vocab_outer"):
        np.testing.assert_allclose(outs[p][0], outs["whole"][0], rtol=1e-5)
        np.testing.assert_allclose(outs[p][4], outs["whole"][4], rtol=1e-5)
        for a, b in zip(outs[p][1:4], outs["whole"][1:4]):
            assert rel_err(a, b) < (1e-5 if dtype == F32 else 1e-2)


def test_plan_choice_and_memory_bound():
    mib = 1 << 20
    # float32: the chunked plan needs no accumulator (grad_weight accumulates in the output itself)
    p = fused_linear_cross_entropy_plan(4096, 2048, 32000, np.float32, memory_budget=64 * mib)
    assert p["plan"] == "chunked" and p["gemms"] == 3 and p["acc_weight_bytes"] == 0
    assert p["workspace_bytes"] <= 64 * mib and p["chunk_rows"] * p["num_chunks"] >= 4096
    # bfloat16: the V x H fp32 accumulator (262 MB) does not fit 64 MiB: four GEMMs vocabulary-outer
    p = fused_linear_cross_entropy_plan(4096, 2048, 32000, BF16, memory_budget=64 * mib)
    assert p["plan"] == "vocab_outer" and p["gemms"] == 4
    p = fused_linear_cross_entropy_plan(4096, 2048, 32000, BF16, memory_budget=512 * mib)
    assert p["plan"] == "chunked" and p["acc_weight_bytes"] == 32000 * 2048 * 4 and p["workspace_bytes"] <= 512 * mib
    assert fused_linear_cross_entropy_plan(512, 2048, 32000, np.float32, memory_budget=1 << 30)["plan"] == "whole"
    # no allocation grows with BT x V: the workspace is bounded as BT grows
    for dt in (np.float32, BF16):
        sizes = [fused_linear_cross_entropy_plan(bt, 4096, 128256, dt)["workspace_bytes"] for bt in (8192, 65536)]
        # at most a BT x H fp32 accumulator (vocab-outer) grows, plus blocks within the budget
        assert sizes[1] - sizes[0] <= (65536 - 8192) * 4096 * 4 + (64 << 20)
        assert sizes[1] < 65536 * 128256 * 4 // 16


DET_SHAPES = [(2048, 16, 16), (4096, 64, 128), (16384, 32, 64)]


@pytest.mark.parametrize("shape", DET_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=lambda d: d.name)
@pytest.mark.parametrize("plan", ["whole", "chunked", "vocab_outer"])
def test_bit_identical_for_1_2_3_threads(shape, dtype, plan, threads):
    bt, h, v = shape
    x, w, t = make(bt, h, v, dtype, seed=8)
    rng = np.random.default_rng(4)
    budget = {"whole": 1 << 30, "chunked": 200 * v * 6 + v * h * 4 + 4096, "vocab_outer": 1}[plan]
    assert fused_linear_cross_entropy_plan(bt, h, v, dtype, memory_budget=budget)["plan"] == plan
    kw = dict(bias=rng.standard_normal(v).astype(np.float32).astype(dtype), label_smoothing=0.1,
              lse_square_scale=1e-3, memory_budget=budget)
    g = np.full(bt, 1.0 / bt, np.float32)
    runs = []
    for n in (1, 2, 3):
        threads(n)
        plain = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget)
        extra = tg.fused_linear_cross_entropy(x, w, t, **kw)
        mx, s, p, mask, masked, _ = tg.fused_linear_online_max_sum(x, w, t, 0, v)
        grads = tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
        runs.append(tuple(plain) + tuple(extra) + (mx, s, p) + tuple(grads))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(np.atleast_1d(a).view(np.uint8), np.atleast_1d(b).view(np.uint8))
