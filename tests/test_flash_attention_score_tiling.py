"""Flash attention tilings: pure functions of the shape and a simulated Platform. Block sizes and the
grad's kv groups (which fix every row's summation order) never depend on the thread count; tasks
cover the work; the workspace holds the packed operands (the grad's statistics and dQ slabs) plus one
scratch area per thread."""

import math

import pytest

from tilegrad import _core

SHAPES = [(2, 9, 3, 512, 512, 64, 64), (1, 16, 8, 1024, 1024, 128, 128), (1, 1, 1, 1, 1, 1, 1),
          (3, 4, 2, 130, 600, 24, 8), (0, 2, 1, 5, 5, 8, 8)]


KV_GROUPS = 4  # the grad's kv groups per (batch, kv head), at most (README)
FORWARD_KEYS = ["block_q", "block_kv", "tasks"]
GRAD_KEYS = ["grad_block_q", "grad_block_kv", "kv_groups", "grad_tasks", "dq_slab_bytes"]


def _round64(n):
    return (n + 63) // 64 * 64


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("hook,keys", [("_flash_attention_score_tiling", FORWARD_KEYS),
                                       ("_flash_attention_score_grad_tiling", GRAD_KEYS)])
def test_blocks_do_not_depend_on_threads(shape, hook, keys):
    fn = getattr(_core, hook)
    plans = [fn(*shape, threads=n) for n in (1, 2, 3, 8, 64, 256)]
    for p in plans[1:]:
        assert {k: p[k] for k in keys} == {k: plans[0][k] for k in keys}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("threads", [1, 2, 3, 7, 256])
def test_tasks_cover_the_work(shape, threads):
    b, n1, n2, sq, skv, d, dv = shape
    f = _core._flash_attention_score_tiling(*shape, threads=threads)
    g = _core._flash_attention_score_grad_tiling(*shape, threads=threads)
    # One task per (batch, kv head, block of query positions): the group's heads are stacked in it.
    assert f["group"] == (n1 // n2 if n2 else 1)
    assert f["tasks"] == b * n2 * math.ceil(sq / max(f["block_q"], 1))
    # One grad task per (batch, kv head, kv group), at least one group (with Skv = 0 it zeroes dQ).
    kv_blocks = math.ceil(skv / g["grad_block_kv"])
    assert g["kv_groups"] == max(1, min(KV_GROUPS, kv_blocks))
    assert g["grad_tasks"] == b * n2 * g["kv_groups"]
    dq_units = b * n2 * math.ceil(sq / g["grad_block_q"])  # the pass summing the slabs into dQ
    assert 1 <= f["threads_used"] <= max(1, min(threads, f["tasks"]))
    assert 1 <= g["threads_used"] <= max(1, min(threads, max(g["grad_tasks"], dq_units)))
    assert "block_q" not in g and "grad_block_q" not in f
    assert f["block_q"] <= max(sq, 1) and f["block_kv"] <= max(skv, 1)
    if f["tasks"] == 0:
        assert f["workspace_bytes"] == 0
    else:
        packed = 4 * b * (n1 * sq * d + n2 * skv * (d + dv))
        assert f["workspace_bytes"] >= packed


def test_workspace_grows_by_scratch_per_thread_only():
    shape = (2, 9, 3, 512, 512, 64, 64)
    one = _core._flash_attention_score_grad_tiling(*shape, threads=1)
    two = _core._flash_attention_score_grad_tiling(*shape, threads=2)
    four = _core._flash_attention_score_grad_tiling(*shape, threads=4)
    per_thread = two["workspace_bytes"] - one["workspace_bytes"]
    assert per_thread > 0
    assert four["workspace_bytes"] - one["workspace_bytes"] == 3 * per_thread


@pytest.mark.parametrize("shape", SHAPES)
def test_grad_workspace_is_the_sum_of_its_parts(shape):
    # Without the per-thread scratch (found from two thread counts): q, k, v, dy packed as fp32, three
    # fp32 statistics per query row, one fp32 dQ slab of G * Sq x D per (batch, kv head, kv group), one
    # flag byte per (slab, query block); each part rounded up to 64 bytes.
    b, n1, n2, sq, skv, d, dv = shape
    one = _core._flash_attention_score_grad_tiling(*shape, threads=1)
    two = _core._flash_attention_score_grad_tiling(*shape, threads=2)
    if one["workspace_bytes"] == 0:
        assert b * n2 == 0
        return
    fixed = 2 * one["workspace_bytes"] - two["workspace_bytes"] if two["threads_used"] == 2 else None
    g, slabs = n1 // n2, one["grad_tasks"]
    assert one["dq_slab_bytes"] == _round64(4 * g * sq * d)
    want = (_round64(4 * b * n1 * sq * d) + _round64(4 * b * n2 * skv * d) + _round64(4 * b * n2 * skv * dv)
            + _round64(4 * b * n1 * sq * dv) + _round64(12 * b * n1 * sq)
            + slabs * _round64(4 * g * sq * d) + _round64(slabs * math.ceil(sq / one["grad_block_q"])))
    if fixed is not None:
        assert fixed == want
    assert one["workspace_bytes"] > want


def test_grad_slabs_are_kv_groups_copies_of_fp32_dq():
    # SmolLM2-135M's attention: 4 kv groups, so the slabs take 4 x B x N1 x Sq x D x 4 bytes.
    b, n1, n2, sq, skv, d = 2, 9, 3, 512, 512, 64
    g = _core._flash_attention_score_grad_tiling(b, n1, n2, sq, skv, d, d, threads=2)
    assert g["kv_groups"] == 4
    assert g["grad_tasks"] * g["dq_slab_bytes"] == 4 * b * n1 * sq * d * 4


@pytest.mark.parametrize("skv,groups", [(1, 1), (128, 1), (129, 2), (384, 3), (512, 4), (4096, 4)])
def test_kv_groups_depend_on_the_kv_length_alone(skv, groups):
    # dQ's sums are grouped by kv group: the grouping may depend on Skv only, never on B, the heads,
    # Sq or the thread count.
    for b, n1, n2, sq, threads in [(1, 1, 1, 7, 1), (2, 9, 3, 512, 2), (3, 16, 8, 1000, 64)]:
        g = _core._flash_attention_score_grad_tiling(b, n1, n2, sq, skv, 64, 64, threads=threads)
        assert g["kv_groups"] == groups and g["grad_block_kv"] == min(128, skv)


@pytest.mark.parametrize("hook", ["_flash_attention_score_tiling", "_flash_attention_score_grad_tiling"])
def test_sizes_beyond_64_bits_are_refused(hook):
    with pytest.raises(ValueError, match="overflows 64-bit sizes") as e:
        getattr(_core, hook)(1 << 31, 256, 256, 1 << 20, 1 << 20, 768, 768, threads=2)
    assert e.value.code == 161002


@pytest.mark.parametrize("n1,n2,rows,grad_rows", [(4, 4, 128, 256), (4, 2, 256, 512), (6, 2, 192, 384),
                                                  (16, 2, 256, 512), (32, 1, 512, 512)])
def test_gqa_stacks_the_group_into_larger_blocks(n1, n2, rows, grad_rows):
    # Stacked rows per block (group x positions): up to 256 in the forward, 512 in the grad (the
    # one-head blocks of 128 / 256 when G = 1), at least 16 positions, powers of two.
    f = _core._flash_attention_score_tiling(1, n1, n2, 4096, 4096, 64, 64, threads=2)
    g = _core._flash_attention_score_grad_tiling(1, n1, n2, 4096, 4096, 64, 64, threads=2)
    assert f["group"] == g["group"] == n1 // n2
    assert f["block_q"] * f["group"] == rows
    assert g["grad_block_q"] * g["group"] == grad_rows


@pytest.mark.parametrize("shape", SHAPES[:2])  # SmolLM2-135M, Qwen3-0.6B
def test_model_shapes_give_two_cores_many_tasks(shape):
    f = _core._flash_attention_score_tiling(*shape, threads=2)
    g = _core._flash_attention_score_grad_tiling(*shape, threads=2)
    assert f["threads_used"] == g["threads_used"] == 2
    assert f["tasks"] >= 16 and g["grad_tasks"] >= 16
