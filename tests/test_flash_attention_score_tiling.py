"""Flash attention tilings: pure functions of the shape and a simulated Platform. Block sizes (which
fix every row's summation order) never depend on the thread count; tasks cover the work; the
workspace holds the packed operands plus one scratch area per thread."""

import math

import pytest

from tilegrad import _core

SHAPES = [(2, 9, 3, 512, 512, 64, 64), (1, 16, 8, 1024, 1024, 128, 128), (1, 1, 1, 1, 1, 1, 1),
          (3, 4, 2, 130, 600, 24, 8), (0, 2, 1, 5, 5, 8, 8)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("hook", ["_flash_attention_score_tiling", "_flash_attention_score_grad_tiling"])
def test_blocks_do_not_depend_on_threads(shape, hook):
    fn = getattr(_core, hook)
    plans = [fn(*shape, threads=n) for n in (1, 2, 3, 8, 64, 256)]
    keys = ["block_q", "block_kv", "tasks", "grad_block_q", "grad_block_kv", "grad_kv_tasks"]
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
    assert g["grad_kv_tasks"] == b * n2 * math.ceil(skv / max(g["grad_block_kv"], 1))
    assert 1 <= f["threads_used"] <= max(1, min(threads, f["tasks"]))
    assert 1 <= g["threads_used"] <= max(1, min(threads, max(g["tasks"], g["grad_kv_tasks"])))
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


@pytest.mark.parametrize("hook", ["_flash_attention_score_tiling", "_flash_attention_score_grad_tiling"])
def test_sizes_beyond_64_bits_are_refused(hook):
    with pytest.raises(ValueError, match="overflows 64-bit sizes") as e:
        getattr(_core, hook)(1 << 31, 256, 256, 1 << 20, 1 << 20, 768, 768, threads=2)
    assert e.value.code == 161002


@pytest.mark.parametrize("n1,n2,rows,grad_rows", [(4, 4, 128, 256), (4, 2, 256, 512), (6, 2, 192, 384),
                                                  (16, 2, 256, 512), (32, 1, 512, 512)])
def test_gqa_stacks_the_group_into_larger_blocks(n1, n2, rows, grad_rows):
    # Stacked rows per block (group x positions): up to 256 in the forward / pass A, 512 in pass B (the
    # one-head blocks of 128 / 256 when G = 1), at least 16 positions, powers of two.
    f = _core._flash_attention_score_grad_tiling(1, n1, n2, 4096, 4096, 64, 64, threads=2)
    assert f["group"] == n1 // n2
    assert f["block_q"] * f["group"] == rows
    assert f["grad_block_q"] * f["group"] == grad_rows


@pytest.mark.parametrize("shape", SHAPES[:2])  # SmolLM2-135M, Qwen3-0.6B
def test_model_shapes_give_two_cores_many_tasks(shape):
    g = _core._flash_attention_score_grad_tiling(*shape, threads=2)
    assert g["threads_used"] == 2
    assert g["tasks"] >= 16 and g["grad_kv_tasks"] >= 16
