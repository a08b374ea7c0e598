"""Rotary position embedding tilings (pure functions of the shape, element size, layout flags and a
Platform) through the test hooks _rotary_position_embedding_tiling and
_rotary_position_embedding_grad_tiling, for simulated machines of 1..256 threads: every row (unit,
group) covered exactly once by at most `threads` tiles; the gradient's reduction blocks, workspace
and second pass independent of the thread count (what makes dcos / dsin bit-identical); the
streaming-store rule; the fields the TILEGRAD_VERBOSE line prints."""

import itertools

import numpy as np
import pytest

from tilegrad import _core

MiB = 1 << 20
THREADS = list(range(1, 17)) + [31, 32, 64, 127, 128, 255, 256]
LEADS = [(1, 1, 1), (1, 1, 7), (2, 3, 5), (4, 16, 1024), (4, 1024, 16), (1024, 4, 4), (3, 1, 1), (64, 64, 64),
         (1, 100003, 1)]


def fwd(dims, cos_dims, d=128, mode=0, es=4, aligned=True, threads=2, l3=32 * MiB):
    return _core._rotary_position_embedding_tiling(dims, cos_dims, d, mode, es, aligned, threads, 32 << 10, 1 << 20,
                                                   l3, "avx512")


def grad(dims, cos_dims, d=128, mode=0, es=4, with_x=True, aligned=True, threads=2, l3=32 * MiB):
    return _core._rotary_position_embedding_grad_tiling(dims, cos_dims, d, mode, es, with_x, aligned, threads,
                                                        32 << 10, 1 << 20, l3, "avx512")


def assert_cover(n, num_tiles, tile, threads):
    """Tiles t = [t * tile, min(n, (t + 1) * tile)) cover [0, n) exactly once, none empty."""
    if n == 0:
        assert num_tiles == 0
        return
    assert 1 <= num_tiles <= threads
    assert (num_tiles - 1) * tile < n <= num_tiles * tile


def cos_patterns(dims):
    return sorted({tuple(c if keep else 1 for c, keep in zip(dims, m)) for m in itertools.product((0, 1), repeat=3)})


@pytest.mark.parametrize("threads", THREADS)
def test_forward_rows_covered(threads):
    for dims in LEADS:
        for d in (2, 64, 128, 1024):
            t = fwd(dims, (1, 1, 1), d=d, threads=threads)
            rows = int(np.prod(dims))
            assert t["rows"] == rows and t["d"] == d
            assert_cover(rows, t["num_tiles"], t["tile_rows"], threads)
            # at least ~16K elements per woken thread
            assert t["num_tiles"] == 1 or rows * d // t["num_tiles"] >= 16384 - d


@pytest.mark.parametrize("threads", THREADS)
def test_grad_partition_independent_of_threads(threads):
    for dims in LEADS:
        for cos_dims in cos_patterns(dims):
            t = grad(dims, cos_dims, threads=threads)
            one = grad(dims, cos_dims, threads=1)
            groups = int(np.prod(cos_dims))
            assert t["groups"] == groups and t["group_rows"] * groups == int(np.prod(dims))
            # the reduction's shape never depends on the thread count
            for key in ("block_rows", "blocks_per_group", "second_pass", "workspace_bytes"):
                assert t[key] == one[key], key
            nb, br = t["blocks_per_group"], t["block_rows"]
            assert (nb - 1) * br < t["group_rows"] <= nb * br
            assert_cover(groups * nb, t["num_tiles"], t["tile_rows"], threads)
            assert t["second_pass"] == (nb > 1)
            if nb > 1:
                assert_cover(groups, t["final_tiles"], -(-groups // t["final_tiles"]), threads)
                # one 64-byte aligned fp32 partial row of 2 D per block per group
                assert t["workspace_bytes"] == groups * nb * (-(-2 * 128 // 16) * 16) * 4
            else:
                assert t["workspace_bytes"] == 0


def test_grad_blocks_follow_plan_row_blocks():
    # cos (1,1,1,D) over 4*1024*16 rows: the whole tensor is one group, cut into many blocks
    t = grad((4, 1024, 16), (1, 1, 1))
    assert t["groups"] == 1 and t["group_rows"] == 65536 and t["blocks_per_group"] > 1 and t["second_pass"]
    # Hugging Face's (B, 1, S, D) cos over (B, N, S, D): one block of N rows per group, no second pass
    t = grad((4, 16, 1024), (4, 1, 1024))
    assert t["groups"] == 4096 and t["group_rows"] == 16 and t["blocks_per_group"] == 1
    assert not t["second_pass"] and t["workspace_bytes"] == 0
    assert t["cos_pattern"] == "B1ND"


def test_without_x_is_the_forward_split():
    for dims in LEADS:
        for threads in (1, 2, 3, 64):
            g = grad(dims, (1, 1, 1), with_x=False, threads=threads)
            f = fwd(dims, (1, 1, 1), threads=threads)
            assert (g["num_tiles"], g["tile_rows"]) == (f["num_tiles"], f["tile_rows"])
            assert not g["with_x"] and g["workspace_bytes"] == 0 and g["groups"] == 0


def test_streaming_stores_rule():
    big, small = (4, 1024, 16), (2, 8, 8)
    assert fwd(big, (1, 1024, 1))["streaming_stores"]  # 64 MiB moved > half of 32 MiB L3
    assert not fwd(small, (1, 8, 1))["streaming_stores"]  # in cache
    assert not fwd(big, (1, 1024, 1), aligned=False)["streaming_stores"]
    assert not fwd(big, (1, 1024, 1), l3=1 << 30)["streaming_stores"]
    # planar partners must be whole cache lines apart: D = 80 fp32 puts the second half 160 B in
    assert not fwd(big, (1, 1024, 1), d=80)["streaming_stores"]
    assert fwd(big, (1, 1024, 1), d=80, mode=1)["streaming_stores"]  # interleaved rows: no partner offset
    assert fwd(big, (1, 1024, 1), d=128, es=2)["streaming_stores"]  # bf16: halves 128 B apart
    assert fwd(big, (1, 1024, 1), d=128, mode=2, es=2)["streaming_stores"]  # bf16 quarters 64 B apart
    assert not fwd(big, (1, 1024, 1), d=64, mode=2, es=2)["streaming_stores"]  # 32 B apart
    assert grad(big, (1, 1024, 1), with_x=False)["streaming_stores"]
    assert not grad(big, (1, 1024, 1), with_x=True)["streaming_stores"]


def test_describe_fields():
    t = fwd((2, 3, 5), (1, 3, 1), d=64, mode=3)
    assert t["mode"] == 3 and t["mode_name"] == "interleave-half" and t["cos_pattern"] == "1S1D"
    assert t["cos_rows"] == 3 and t["isa"] == "avx512"
    g = grad((2, 3, 5), (2, 3, 5), d=64, mode=1)
    assert g["mode_name"] == "interleave" and g["cos_pattern"] == "BSND" and g["group_rows"] == 1
