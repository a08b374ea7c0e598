"""Fused linear cross entropy tilings and plans (pure functions of the shape, element size, memory budget
and thread count) through the test hooks tilegrad._core._flce_grad_tiling / _flce_forward_tiling and
tilegrad._fused_linear_cross_entropy.fused_linear_cross_entropy_plan: chunks cover the problem, the
workspace is exactly its aligned parts and never (BT x V), the loop order and plan choices."""

import ml_dtypes
import numpy as np
import pytest

from tilegrad import _core
from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("threads", [1, 2, 3, 8, 64, 256])
@pytest.mark.parametrize("bt, h, v", [(1024, 2048, 32000), (1, 1, 1), (65536, 4096, 32000), (300, 64, 128256),
                                      (7, 3, 100000), (100000, 16, 50)])
@pytest.mark.parametrize("dsize, recompute", [(2, True), (4, True), (2, False), (4, False)])
def test_grad_tiling_invariants(bt, h, v, dsize, recompute, threads):
    t = _core._flce_grad_tiling(bt, h, v, dsize, recompute, threads=threads)
    assert t == _core._flce_grad_tiling(bt, h, v, dsize, recompute, threads=1)  # only the thread count differs
    bc, vc = t["bt_chunk"], t["v_chunk"]
    assert 1 <= bc <= bt and 1 <= vc <= v
    assert bc >= min(bt, 256) and vc >= min(v, 256)
    assert t["num_bt_chunks"] == -(-bt // bc) and t["num_v_chunks"] == -(-v // vc)
    assert t["grad_input_direct"] == (t["num_v_chunks"] == 1)
    assert t["grad_weight_direct"] == (t["num_bt_chunks"] == 1)
    if not t["grad_input_direct"]:
        assert t["acc_input_rows"] == (bt if t["v_outer"] else bc)
    if not t["grad_weight_direct"]:
        assert t["acc_weight_rows"] == (vc if t["v_outer"] else v)
    # the workspace is exactly the parts, each 64-byte aligned; no (BT x V) buffer
    a64 = lambda n: -(-n // 64) * 64
    block = bc * vc
    logits = block * 4 if recompute else 0
    g = 0 if (recompute and dsize == 4) else block * dsize
    assert t["logits_bytes"] == logits and t["g_bytes"] == (logits if g == 0 else g)
    assert t["acc_input_bytes"] == t["acc_input_rows"] * h * 4
    assert t["acc_weight_bytes"] == t["acc_weight_rows"] * h * 4
    assert t["workspace_bytes"] == a64(logits) + a64(g) + a64(t["acc_input_bytes"]) + a64(t["acc_weight_bytes"])
    if t["num_bt_chunks"] * t["num_v_chunks"] > 1:
        assert block < bt * v
    # the loop order gives the smaller workspace
    other = _core._flce_grad_tiling(bt, h, v, dsize, recompute, force_order=2 if t["v_outer"] else 1)
    assert t["workspace_bytes"] <= other["workspace_bytes"]


def test_grad_tiling_loop_order_choice():
    # many tokens, small vocabulary: keep grad_input whole per BT chunk and accumulate grad_weight (V x H)
    t = _core._flce_grad_tiling(100000, 1024, 4000, 2, True)
    assert not t["v_outer"] and t["acc_weight_rows"] == 4000 and t["acc_input_rows"] == 0
    # few tokens, large vocabulary: V-outer, grad_input accumulated (BT x H fp32)
    t = _core._flce_grad_tiling(1024, 2048, 32000, 2, True, budget=16 << 20)
    assert t["v_outer"] and t["acc_input_rows"] == 1024 and t["grad_weight_direct"]
    assert t["workspace_bytes"] < 64 << 20  # vs 1024 * 32000 * 6 bytes of whole logits + G
    # small problems: one block, both gradients written by their GEMMs, no accumulator
    t = _core._flce_grad_tiling(64, 40, 1000, 2, True)
    assert t["grad_input_direct"] and t["grad_weight_direct"]
    assert t["workspace_bytes"] == -(-64 * 1000 * 4 // 64) * 64 + -(-64 * 1000 * 2 // 64) * 64
    # a view oneDNN cannot take is copied: its bytes join the workspace
    u = _core._flce_grad_tiling(64, 40, 1000, 2, True, input_gemmable=False, weight_gemmable=False)
    assert u["input_copy_bytes"] == 64 * 40 * 2 and u["weight_copy_bytes"] == 1000 * 40 * 2
    assert u["workspace_bytes"] == t["workspace_bytes"] + -(-64 * 40 * 2 // 64) * 64 + 1000 * 40 * 2
    # an output oneDNN cannot write goes through an accumulator
    u = _core._flce_grad_tiling(64, 40, 1000, 2, True, grad_input_gemmable=False)
    assert not u["grad_input_direct"] and u["acc_input_rows"] == 64
    # empty problems need no workspace
    assert _core._flce_grad_tiling(0, 40, 1000, 2, True)["workspace_bytes"] == 0
    assert _core._flce_grad_tiling(5, 40, 0, 2, True)["workspace_bytes"] == 0


@pytest.mark.parametrize("bt, h, v", [(1024, 2048, 32000), (3, 2, 1), (100, 8, 1000000), (5000, 16, 300)])
@pytest.mark.parametrize("budget", [1, 1 << 20, 32 << 20])
def test_forward_tiling(bt, h, v, budget):
    t = _core._flce_forward_tiling(bt, h, v, 2, budget=budget)
    assert t["bt_chunk"] >= min(bt, 256) and t["v_chunk"] >= min(v, 256)
    assert t["logits_bytes"] == t["bt_chunk"] * t["v_chunk"] * 4
    assert t["workspace_bytes"] == -(-t["logits_bytes"] // 64) * 64
    if t["logits_bytes"] > budget:  # only the minimum chunk sizes may exceed the budget
        assert t["bt_chunk"] == min(bt, 256) or t["v_chunk"] <= max(256, min(v, 512))


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
