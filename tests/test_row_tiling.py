"""The row-wise operators' tilings (core/row_tiling.h: pure functions of the shape, layouts and a
Platform), each family through its own hook, for simulated machines of 1..256 threads.

Forwards (_rms_norm_tiling, _add_rms_norm_tiling, _layer_norm_tiling): every row in exactly one
tile, no more tiles than threads or rows, one thread for small work, the workspace layout (the
family's fp32 vectors, scratch rows per tile when rows are packed), the streaming-store decision.
Gradients (_rms_norm_grad_tiling, also AddRmsNorm's backward; _layer_norm_backward_tiling): the row
blocks (the parameter gradients' summation order) are core::RowBlocks and do not depend on the thread
count, the workspace holds the family's vectors, partial sets and scratch rows, the streaming-store
decision. Both: no rows or empty rows ask for no workspace; the ISA is carried through."""

import pytest

from tilegrad import _core

MiB = 1 << 20
SHAPES = [(0, 8), (1, 1), (3, 7), (16, 2048), (4096, 2048), (100003, 64), (5, 1 << 20), (1 << 20, 4096)]
THREADS = [1, 2, 3, 4, 7, 8, 16, 31, 64, 128, 256]
ALIGN = 64

# What each family keeps in its workspace (its README / tiling header): fp32 vector regions of N
# floats each (sizes in vectors), sets of fp32 block partials, scratch rows per tile when packed.
FORWARDS = {
    "rms_norm": dict(hook="_rms_norm_tiling", vectors=[1], scratch_rows=2),  # gamma; x, y
    "add_rms_norm": dict(hook="_add_rms_norm_tiling", vectors=[1], scratch_rows=2),  # gamma; x1 / xOut, x2 / y
    "layer_norm": dict(hook="_layer_norm_tiling", vectors=[2], scratch_rows=2),  # weight + bias; x, out
}
BACKWARDS = {
    # gamma, dgamma; dgamma's partials; dy, x, dx, dresidual
    "rms_norm_grad": dict(hook="_rms_norm_grad_tiling", vectors=[1, 1], partial_sets=1, scratch_rows=4),
    # weight, dweight + dbias; their partials; dy, x, dx
    "layer_norm_backward": dict(hook="_layer_norm_backward_tiling", vectors=[1, 2], partial_sets=2,
                                scratch_rows=3),
}


def tiling(spec, rows, cols, threads, elem=4, pack=False, dense=True, l3=32 * MiB, isa="avx512"):
    return getattr(_core, spec["hook"])(rows, cols, elem, pack, dense, threads, 32 << 10, 1 << 20, l3, isa)


def workspace_bounds(spec, t, cols, elem, partial_bytes=0):
    """(least, most) workspace bytes: every region's bytes, each region (and each scratch row) padded
    to less than one more 64-byte line."""
    scratch_rows = t["num_tiles"] * spec["scratch_rows"] if t["pack_rows"] else 0
    least = sum(v * cols * 4 for v in spec["vectors"]) + partial_bytes + scratch_rows * cols * elem
    padded_regions = len(spec["vectors"]) + (1 if partial_bytes else 0) + scratch_rows
    return least, least + padded_regions * (ALIGN - 1)


fwd_families = pytest.mark.parametrize("family", sorted(FORWARDS))
bwd_families = pytest.mark.parametrize("family", sorted(BACKWARDS))


@fwd_families
@pytest.mark.parametrize("threads", THREADS)
def test_forward_rows_partitioned(family, threads):
    spec = FORWARDS[family]
    for rows, cols in SHAPES:
        t = tiling(spec, rows, cols, threads)
        if rows == 0:
            assert t["num_tiles"] == 0 and t["workspace_bytes"] == 0
            continue
        n, rpt = t["num_tiles"], t["rows_per_tile"]
        assert 1 <= n <= min(threads, rows)
        assert (n - 1) * rpt < rows <= n * rpt  # every row in exactly one tile, last tile non-empty
        least, most = workspace_bounds(spec, t, cols, 4)
        assert least <= t["workspace_bytes"] <= most and t["workspace_bytes"] % ALIGN == 0


@fwd_families
def test_forward_tiles_balanced(family):
    # equal ranges: no tile holds more than one row beyond an even share
    for rows, threads in [(100003, 64), (4097, 7), (65, 64), (1000, 3)]:
        t = tiling(FORWARDS[family], rows, 4096, threads)
        assert t["rows_per_tile"] <= -(-rows // t["num_tiles"])


@fwd_families
def test_forward_small_work_wakes_one_thread(family):
    assert tiling(FORWARDS[family], 4, 100, 64)["num_tiles"] == 1
    assert tiling(FORWARDS[family], 4096, 2048, 64)["num_tiles"] == 64


@fwd_families
def test_forward_streaming_and_scratch(family):
    spec = FORWARDS[family]
    assert tiling(spec, 4096, 2048, 2)["streaming_stores"] is True  # 64 MiB moved > half the L3
    assert tiling(spec, 64, 2048, 2)["streaming_stores"] is False
    assert tiling(spec, 4096, 2048, 2, dense=False)["streaming_stores"] is False
    assert tiling(spec, 4096, 2048, 2, pack=True)["streaming_stores"] is False
    for elem in (2, 4):
        a, b = tiling(spec, 100, 256, 3, elem), tiling(spec, 100, 256, 3, elem, pack=True)
        assert not a["pack_rows"] and b["pack_rows"]
        assert b["workspace_bytes"] >= a["workspace_bytes"] + b["num_tiles"] * spec["scratch_rows"] * 256 * elem
        least, most = workspace_bounds(spec, b, 256, elem)
        assert least <= b["workspace_bytes"] <= most


@bwd_families
@pytest.mark.parametrize("rows,cols", SHAPES)
def test_backward_blocks_independent_of_threads(family, rows, cols):
    spec = BACKWARDS[family]
    base = tiling(spec, rows, cols, 1)
    for threads in THREADS:
        t = tiling(spec, rows, cols, threads)
        assert (t["num_tiles"], t["block_rows"], t["workspace_bytes"]) == (
            base["num_tiles"], base["block_rows"], base["workspace_bytes"])
        assert 1 <= t["tile_threads"] <= max(1, min(threads, t["num_tiles"]))
    rb = _core._row_blocks(rows, cols)
    assert (base["num_tiles"], base["block_rows"]) == (rb["num_blocks"], rb["block_rows"])
    if rows:
        assert (base["num_tiles"] - 1) * base["block_rows"] < rows <= base["num_tiles"] * base["block_rows"]
        least, most = workspace_bounds(spec, base, cols, 4, spec["partial_sets"] * rb["workspace_bytes"])
        assert least <= base["workspace_bytes"] <= most
    else:
        assert base["num_tiles"] == 0 and base["workspace_bytes"] == 0


@bwd_families
def test_backward_streaming_and_scratch(family):
    spec = BACKWARDS[family]
    assert tiling(spec, 4096, 2048, 2)["streaming_stores"] is True  # dy, x, dx: 96 MiB > half the L3
    assert tiling(spec, 4096, 2048, 2, pack=True)["streaming_stores"] is False
    assert tiling(spec, 4096, 2048, 2, dense=False)["streaming_stores"] is False
    assert tiling(spec, 16, 64, 2)["streaming_stores"] is False
    for elem in (2, 4):
        a, b = tiling(spec, 100, 256, 3, elem), tiling(spec, 100, 256, 3, elem, pack=True)
        assert not a["pack_rows"] and b["pack_rows"]
        assert b["workspace_bytes"] >= a["workspace_bytes"] + b["num_tiles"] * spec["scratch_rows"] * 256 * elem
        rb = _core._row_blocks(100, 256)
        least, most = workspace_bounds(spec, b, 256, elem, spec["partial_sets"] * rb["workspace_bytes"])
        assert least <= b["workspace_bytes"] <= most


@bwd_families
def test_backward_sweeps(family):
    # rows per kernel call: their dy and x rows within a quarter of the L2 (1 MiB here), 1..32 rows,
    # never a function of the thread count; one row when rows are gathered into scratch rows
    spec = BACKWARDS[family]
    for cols, elem, want in [(2048, 2, 32), (2048, 4, 16), (4096, 4, 8), (1 << 20, 2, 1), (8, 2, 32)]:
        for threads in (1, 2, 7, 64):
            assert tiling(spec, 4096, cols, threads, elem)["sweep_rows"] == want
    assert tiling(spec, 4096, 2048, 2, 2, pack=True)["sweep_rows"] == 1


@pytest.mark.parametrize("family", sorted(FORWARDS) + sorted(BACKWARDS))
def test_empty_rows_ask_for_no_workspace(family):
    # nothing to do: a launch never touches its workspace (the gradients write NaN or zero
    # parameter gradients directly), so it asks for none
    spec = {**FORWARDS, **BACKWARDS}[family]
    for rows, cols in [(0, 8), (0, 4096), (5, 0), (0, 0)]:
        for pack in (False, True):
            t = tiling(spec, rows, cols, 4, pack=pack)
            assert (t["num_tiles"], t["workspace_bytes"]) == (0, 0), (rows, cols, pack)


@pytest.mark.parametrize("threads", [1, 3, 64])
def test_add_rms_norm_plans_as_rms_norm(threads):
    # AddRmsNorm's y is RMSNorm's of xOut, planned the same way (its README)
    for rows, cols in SHAPES:
        for elem, pack, dense in [(4, False, True), (2, True, True), (2, False, False)]:
            args = (rows, cols, threads, elem, pack, dense)
            assert tiling(FORWARDS["add_rms_norm"], *args) == tiling(FORWARDS["rms_norm"], *args)


@pytest.mark.parametrize("family", sorted(FORWARDS) + sorted(BACKWARDS))
def test_pure_and_isa_carried(family):
    spec = {**FORWARDS, **BACKWARDS}[family]
    assert tiling(spec, 300, 1000, 3) == tiling(spec, 300, 1000, 3)
    for isa in ("scalar", "avx2", "avx512"):
        assert tiling(spec, 300, 1000, 3, isa=isa)["isa"] == isa
