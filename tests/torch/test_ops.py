"""torch.library.opcheck for every torch.ops.tilegrad operator: schema, fake (meta) kernel against the
real one, autograd registration, and AOT dispatch with static and dynamic shapes.

Ops without an autograd formula (the backward ops and the vocabulary-parallel aclnn ops) get inputs
that do not require grad. Outputs that are never differentiated: cross_entropy_loss's log_prob and
lse (marked non-differentiable), linear_cross_entropy's saved gradients, linear_cross_entropy_rows's
statistics. The list of cases is checked against the ops registered under ``tilegrad::``, so a new op
without an opcheck case fails here."""

import pytest

torch = pytest.importorskip("torch")

import tilegrad.torch  # noqa: E402,F401  (registers torch.ops.tilegrad)

N, C, H, V = 6, 9, 5, 11


def _inputs():
    """Representative tensors (fixed seed), small enough that each opcheck takes well under a second."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, C, generator=g)
    target = torch.randint(0, C, (N,), generator=g)
    target[1] = -100
    return {
        "x": x,
        "x_grad": x.clone().requires_grad_(),
        "x_bf16": x.to(torch.bfloat16).requires_grad_(),
        "x_t": torch.randn(C, N, generator=g).t(),  # transposed (non-contiguous)
        "target": target,
        "target_in_range": target.clamp(min=0),
        "weight": torch.rand(C, generator=g) + 0.1,
        "prob_target": torch.rand(N, C, generator=g),
        "log_prob": torch.log_softmax(x, dim=1),
        "lse": torch.logsumexp(x, dim=1),
        "table": torch.randn(V, H, generator=g).requires_grad_(),
        "indices": torch.randint(0, V, (3, 4), generator=g),
        "hidden": torch.randn(N, H, generator=g),
        "proj": torch.randn(V, H, generator=g) * 0.5,
        "target_vocab": torch.randint(0, V, (N,), generator=g),
    }


def _cases():
    """(op name, case id, args): every tilegrad op with representative arguments."""
    t = _inputs()
    stats = torch.ops.tilegrad.fused_linear_online_max_sum(t["hidden"], t["proj"], t["target_vocab"], 0, V, True)
    logits_max, sum_exp, predicted, mask, masked_target, logits = stats
    _, softmax = torch.ops.tilegrad.fused_cross_entropy_loss_with_max_sum(logits_max, sum_exp, predicted, 0.0,
                                                                         logits)
    grad_rows = torch.rand(N)
    lce_target = t["target_vocab"].clone()
    lce_target[2] = -100
    grad = lambda a: a.clone().requires_grad_()  # noqa: E731
    return [
        ("silu", "fp32", (t["x_grad"],)),
        ("silu", "bf16", (t["x_bf16"],)),
        ("silu", "transposed", (grad(t["x_t"]),)),
        ("silu", "sliced", (grad(t["x"][:, ::2]),)),
        ("silu_backward", "fp32", (torch.randn(N, C), t["x"])),
        ("silu_backward", "transposed", (torch.randn(N, C), t["x_t"])),
        ("silu_backward", "sliced", (torch.randn(N, 5), t["x"][:, ::2])),
        ("cross_entropy_loss", "mean-weight-smoothing", (t["x_grad"], t["target"], t["weight"], "mean", -100, 0.1,
                                                         0.0, False)),
        ("cross_entropy_loss", "none-zloss", (t["x_grad"], t["target"], None, "none", -100, 0.0, 1e-3, True)),
        ("cross_entropy_loss", "sum-bf16", (t["x_bf16"], t["target"], None, "sum", -100, 0.0, 0.0, False)),
        ("cross_entropy_loss_grad", "mean", (torch.tensor(1.0), t["log_prob"], t["target"], t["weight"], None,
                                             None, "mean", -100, 0.1, 0.0)),
        ("cross_entropy_loss_grad", "none-zloss", (torch.rand(N), t["log_prob"], t["target"], None, torch.rand(N),
                                                   t["lse"], "none", -100, 0.0, 1e-3)),
        ("embedding", "padding-freq", (t["table"], t["indices"], 2, True)),
        ("embedding", "plain", (t["table"], t["indices"], -1, False)),
        ("embedding_dense_backward", "padding-freq", (torch.randn(3, 4, H), t["indices"], V, 2, True)),
        ("binary_cross_entropy_with_logits", "mean-weights",
         (t["x_grad"], grad(t["prob_target"]), t["weight"], t["weight"] * 2, 1)),
        ("binary_cross_entropy_with_logits", "none", (t["x_grad"], t["prob_target"], None, None, 0)),
        ("binary_cross_entropy_with_logits_fused", "mean-weights",
         (t["x_grad"], grad(t["prob_target"]), t["weight"], t["weight"] * 2, 1)),
        ("binary_cross_entropy_with_logits_fused", "none", (t["x_grad"], t["prob_target"], None, None, 0)),
        ("binary_cross_entropy_with_logits_fused", "none-transposed",
         (grad(t["x_t"]), t["prob_target"].t().contiguous().t(), None, t["weight"], 0)),
        ("binary_cross_entropy_with_logits_fused", "none-expanded",
         (grad(t["x"][:1]).expand(N, C), t["prob_target"][:, :1].expand(N, C), t["weight"], None, 0)),
        ("binary_cross_entropy_with_logits_fused", "sum-bf16-fp32-target",
         (t["x_bf16"], t["prob_target"], None, (t["weight"] * 2).to(torch.bfloat16), 2)),
        ("binary_cross_entropy_with_logits_backward", "sum",
         (torch.tensor(1.0), t["x"], t["prob_target"], t["weight"], t["weight"], 2)),
        # transposed and expanded (stride-0) inputs for every op: the fake kernel's output strides must
        # be the real one's (torch.compile plans with them)
        ("silu", "expanded", (grad(t["x"][:1]).expand(N, C),)),
        ("silu_backward", "expanded", (torch.randn(N, C), t["x"][:1].expand(N, C))),
        ("cross_entropy_loss", "transposed", (grad(t["x_t"]), t["target"], None, "mean", -100, 0.0, 0.0, False)),
        ("cross_entropy_loss", "expanded", (grad(t["x"][:1]).expand(N, C), t["target"], t["weight"], "none", -100,
                                            0.0, 1e-3, True)),
        ("cross_entropy_loss_grad", "transposed", (torch.tensor(1.0), t["log_prob"].t().contiguous().t(),
                                                   t["target"], None, None, None, "sum", -100, 0.0, 0.0)),
        ("cross_entropy_loss_grad", "expanded", (torch.rand(1).expand(N), t["log_prob"][:1].expand(N, C),
                                                 t["target"], None, None, None, "none", -100, 0.0, 0.0)),
        ("embedding", "transposed-table", (grad(t["table"].detach().t().contiguous().t()), t["indices"], -1, False)),
        ("embedding", "expanded-indices", (t["table"], t["indices"][:1].expand(3, 4), 1, True)),
        ("embedding_dense_backward", "expanded", (torch.randn(1, 4, H).expand(3, 4, H), t["indices"][:1].expand(3, 4),
                                                  V, -1, False)),
        ("embedding_dense_backward", "transposed", (torch.randn(H, 4, 3).permute(2, 1, 0), t["indices"].t()
                                                    .contiguous().t(), V, 2, False)),
        ("binary_cross_entropy_with_logits", "transposed", (grad(t["x_t"]), t["prob_target"].t().contiguous().t(),
                                                            None, t["weight"], 0)),
        ("binary_cross_entropy_with_logits", "expanded", (grad(t["x"][:1]).expand(N, C),
                                                          t["prob_target"][:, :1].expand(N, C), t["weight"], None, 1)),
        ("binary_cross_entropy_with_logits_backward", "expanded",
         (torch.rand(1, C).expand(N, C), t["x"][:1].expand(N, C), t["prob_target"].t().contiguous().t(), None,
          t["weight"], 0)),
        ("fused_linear_online_max_sum", "transposed", (t["hidden"].t().contiguous().t(), t["proj"].t().contiguous()
                                                       .t(), t["target_vocab"], 0, V, True)),
        ("linear_cross_entropy", "transposed", (grad(t["hidden"].t().contiguous().t()), grad(t["proj"]), lce_target,
                                                None, None, -100, 0.0, 1, 0.0)),
        ("linear_cross_entropy_rows", "expanded", (grad(t["hidden"][:1]).expand(N, H), grad(t["proj"]), lce_target,
                                                   -100)),
        ("fused_linear_online_max_sum", "logits", (t["hidden"], t["proj"], t["target_vocab"], 0, V, True)),
        ("fused_linear_online_max_sum", "shard", (t["hidden"], t["proj"][:6], t["target_vocab"], 0, 6, False)),
        ("fused_linear_online_max_sum", "bf16", (t["hidden"].to(torch.bfloat16), t["proj"].to(torch.bfloat16),
                                                 t["target_vocab"], 0, V, False)),
        ("fused_cross_entropy_loss_with_max_sum", "softmax", (logits_max, sum_exp, predicted, 0.0, logits)),
        ("fused_cross_entropy_loss_with_max_sum", "no-logits", (logits_max, sum_exp, predicted, 0.0, None)),
        ("fused_linear_cross_entropy_loss_grad", "memory-saving",
         (grad_rows, t["hidden"], t["proj"], mask, masked_target, 0.0, logits_max, sum_exp, None)),
        ("fused_linear_cross_entropy_loss_grad", "softmax",
         (grad_rows, t["hidden"], t["proj"], mask, masked_target, 0.0, None, None, softmax)),
        ("linear_cross_entropy", "mean", (grad(t["hidden"]), grad(t["proj"]), lce_target, None, None, -100, 0.0, 1, 0.0)),
        ("linear_cross_entropy", "sum", (grad(t["hidden"]), grad(t["proj"]), lce_target, None, None, -100, 0.0, 2, 0.0)),
        ("linear_cross_entropy", "bias-weight-smoothing",
         (grad(t["hidden"]), grad(t["proj"]), lce_target, grad(torch.randn(V)), torch.rand(V) + 0.5, -100, 0.1, 1, 0.0)),
        ("linear_cross_entropy", "bf16", (grad(t["hidden"].to(torch.bfloat16)), grad(t["proj"].to(torch.bfloat16)),
                                          lce_target, None, None, -100, 0.0, 1, 0.0)),
        ("linear_cross_entropy", "bf16-filtered", (grad(t["hidden"].to(torch.bfloat16)),
                                                   grad(t["proj"].to(torch.bfloat16)), lce_target, None, None, -100,
                                                   0.0, 1, 2.0 ** -12)),
        ("linear_cross_entropy_rows", "rows", (grad(t["hidden"]), grad(t["proj"]), lce_target, -100)),
    ]


CASES = _cases()


def test_every_registered_op_has_an_opcheck_case():
    """Here or, for the decoder-block ops, in test_decoder.py (the linear ops: test_linear.py;
    attention's: test_attention.py; GELU's and gelu_mul's: test_gelu_geglu.py; LayerNorm's:
    test_layer_norm_torch.py; add_rms_norm's: test_torch_add_rms_norm.py)."""
    from test_attention import _opcheck_cases as attention_opcheck_cases
    from test_torch_add_rms_norm import _opcheck_cases as add_rms_norm_opcheck_cases
    from test_decoder import _opcheck_cases as decoder_opcheck_cases
    from test_gelu_geglu import _opcheck_cases as gelu_opcheck_cases
    from test_layer_norm_torch import _opcheck_cases as layer_norm_opcheck_cases
    from test_linear import _opcheck_cases as linear_opcheck_cases
    registered = {name.split("::", 1)[1] for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("tilegrad::")}
    assert registered == ({name for name, _, _ in CASES} | {name for name, _ in decoder_opcheck_cases()}
                          | {name for name, _ in linear_opcheck_cases()}
                          | {name for name, _ in attention_opcheck_cases()}
                          | {name for name, _ in gelu_opcheck_cases()}
                          | {name for name, _ in layer_norm_opcheck_cases()}
                          | {name for name, _ in add_rms_norm_opcheck_cases()})


@pytest.mark.parametrize("name,case,args", CASES, ids=[f"{n}-{c}" for n, c, _ in CASES])
def test_opcheck(name, case, args):
    result = torch.library.opcheck(getattr(torch.ops.tilegrad, name).default, args)
    failed = {test: outcome for test, outcome in result.items() if outcome != "SUCCESS"}
    assert not failed, f"{name} ({case}): {failed}"


@pytest.mark.parametrize("name,case,args", CASES, ids=[f"{n}-{c}" for n, c, _ in CASES])
def test_fake_kernel_matches_real_metadata(name, case, args):
    """Under FakeTensorMode each output has the real output's shape and dtype (what torch.compile plans
    memory with)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    op = getattr(torch.ops.tilegrad, name).default
    real = op(*args)
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake_args = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        fake = op(*fake_args)
    real = real if isinstance(real, tuple) else (real,)
    fake = fake if isinstance(fake, tuple) else (fake,)
    assert [(tuple(r.shape), r.dtype) for r in real] == [(tuple(f.shape), f.dtype) for f in fake]
