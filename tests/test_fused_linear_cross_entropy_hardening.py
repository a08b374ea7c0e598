"""Hostile input to the fused-linear-cross-entropy family (issue 14, defects 3, 5 and 6): zero-width
work in closed form, integers that must be integers, strings exact, label smoothing exactly 0."""

import numpy as np
import pytest

import tilegrad as tg


def test_online_max_sum_with_zero_hidden_size_is_closed_form_for_any_vocabulary():
    # V = 2^40 rows of width 0: no byte of input or output grows with V, so neither may the work
    # (this used to loop over the vocabulary for hours).
    vocab = 2**40
    target = np.array([3, vocab + 5, -1], np.int64)
    mx, sm, pred, mask, masked, logits = tg.fused_linear_online_max_sum(
        np.zeros((3, 0), np.float32), np.zeros((vocab, 0), np.float32), target, 0, vocab)
    # every logit is an empty dot product: 0; so max 0, sum of exp(0 - 0) over V, target logit 0
    np.testing.assert_array_equal(mx, np.zeros(3, np.float32))
    np.testing.assert_array_equal(sm, np.full(3, float(vocab), np.float32))
    np.testing.assert_array_equal(pred, np.zeros(3, np.float32))
    assert np.unpackbits(mask, bitorder="little")[:3].tolist() == [0, 1, 1]
    assert masked.tolist() == [3, 0, 0] and logits is None


def test_online_max_sum_zero_width_matches_the_general_path_on_a_small_vocabulary():
    # the closed form agrees with the GEMM path (forced by asking for the logits) where both run
    target = np.array([0, 4, 9], np.int64)
    closed = tg.fused_linear_online_max_sum(np.zeros((3, 0), np.float32), np.zeros((7, 0), np.float32), target, 2, 9)
    general = tg.fused_linear_online_max_sum(np.zeros((3, 0), np.float32), np.zeros((7, 0), np.float32), target, 2,
                                             9, True)
    for a, b in zip(closed[:5], general[:5]):
        np.testing.assert_array_equal(a, b)


X, W, T = np.ones((4, 8), np.float32), np.ones((10, 8), np.float32), np.zeros(4, np.int64)


@pytest.mark.parametrize("kwargs, error, words", [
    (dict(ignore_index=1.5), TypeError, "ignore_index"),
    (dict(ignore_index=2**63), ValueError, "ignore_index"),
    (dict(reduction="mean\0x"), ValueError, "reduction"),
    (dict(reduction=None), TypeError, "reduction"),
    (dict(label_smoothing="0.1"), TypeError, "label_smoothing"),
    (dict(memory_budget=2.5), TypeError, "memory_budget"),
])
def test_fused_linear_cross_entropy_argument_types(kwargs, error, words):
    with pytest.raises(error, match=words):
        tg.fused_linear_cross_entropy(X, W, T, **kwargs)


@pytest.mark.parametrize("start, end, error", [(0.5, 10, TypeError), (0, "10", TypeError), (0, 2**64, ValueError)])
def test_online_max_sum_vocab_range_must_be_integers(start, end, error):
    with pytest.raises(error, match="vocab_"):
        tg.fused_linear_online_max_sum(X, W, T, start, end)


@pytest.mark.parametrize("value", [1e-50, 0.1, -0.0 + 1e-300])
def test_loss_with_max_sum_label_smoothing_must_be_exactly_zero(value):
    stats = np.zeros(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="labelSmoothing must be 0"):
        tg.fused_cross_entropy_loss_with_max_sum(*stats, value)
    loss, _ = tg.fused_cross_entropy_loss_with_max_sum(*stats, 0.0)
    np.testing.assert_array_equal(loss, np.zeros(4, np.float32))


def _zero_width_reference(target, vocab, ignore_index, reduction, class_weight, smoothing, z):
    """float64 loss when every logit is 0: log_prob = -log V for every class."""
    lse = np.log(float(vocab))
    kept = target != ignore_index
    if class_weight is None:  # unit weights, summed without forming V of them
        wt, w_sum = kept.astype(np.float64), float(vocab)
    else:
        w = class_weight.astype(np.float64)
        wt, w_sum = np.where(kept, w[np.where(kept, target, 0)], 0.0), w.sum()
    ce = np.where(kept, (1 - smoothing) * wt * lse + smoothing / vocab * w_sum * lse, 0.0)
    zl = np.where(kept, z * lse * lse, 0.0)
    if reduction == "none":
        return ce + zl
    if reduction == "sum":
        return (ce + zl).sum()
    return ce.sum() / wt.sum() + zl.sum() / kept.sum()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_fused_zero_hidden_size_is_closed_form(reduction):
    target = np.array([3, -100, 6, 0], np.int64)
    x = np.zeros((4, 0), np.float32)
    # a vocabulary no byte of data grows with: must not take time proportional to it
    huge = 2**40
    loss, gi, gw = tg.fused_linear_cross_entropy(x, np.zeros((huge, 0), np.float32), target, reduction=reduction)[:3]
    np.testing.assert_allclose(loss, _zero_width_reference(target, huge, -100, reduction, None, 0.0, 0.0), rtol=1e-6)
    assert gi.shape == (4, 0) and gw.shape == (huge, 0)
    # small vocabulary with every feature that keeps the logits 0: class weights, smoothing, z-loss
    cw = np.linspace(0.5, 2.0, 7).astype(np.float32)
    loss, _, _, zl = tg.fused_linear_cross_entropy(x, np.zeros((7, 0), np.float32), target, reduction=reduction,
                                                   class_weight=cw, label_smoothing=0.2, lse_square_scale=1e-2)
    np.testing.assert_allclose(loss, _zero_width_reference(target, 7, -100, reduction, cw, 0.2, 1e-2), rtol=1e-5)
