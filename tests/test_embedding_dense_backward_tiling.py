"""Embedding dense backward tiling (a pure function of the shape, element sizes, output layout and
thread count) through tilegrad._core._embedding_dense_backward_tiling: sort and accumulation tiles
cover the work, the sparse / counting-sort choice, workspace regions aligned and disjoint."""

import pytest

from tilegrad import _core


SHAPES = [(1, 1, 1), (5, 10, 3), (8192, 32000, 4096), (65536, 32000, 64), (100000, 10, 8), (3, 1000000, 16),
          (0, 10, 4), (10, 0, 4), (10, 5, 0), (70000, 70000, 2)]


@pytest.mark.parametrize("threads_", [1, 2, 3, 4, 7, 16, 64, 256])
def test_tiling_invariants(threads_):
    for (n, v, d) in SHAPES:
        for ges, oes, packed in ((4, 4, True), (2, 4, False), (2, 2, True)):
            t = _core._embedding_dense_backward_tiling(n, v, d, ges, oes, packed, threads_)
            assert t == _core._embedding_dense_backward_tiling(n, v, d, ges, oes, packed, threads_)  # pure
            assert t["isa"] == "avx512"
            assert t["grad_row_cost"] == d * ges and t["out_row_cost"] == d * oes
            assert not t["streaming_stores"] or packed
            if n == 0 or v * d == 0:
                assert t["empty"] and t["workspace_bytes"] == 0
                assert 0 <= t["accum_tiles"] <= threads_ and (t["accum_tiles"] > 0) == (v * d > 0)
                continue
            assert not t["empty"]
            s, c = t["sort_tiles"], t["sort_chunk"]
            assert 1 <= s <= threads_ and s * c >= n and (s - 1) * c < n
            assert 1 <= t["accum_tiles"] <= min(threads_, v)
            assert t["column_quantum"] * oes % 64 == 0
            assert t["sparse"] == (v // 16 > n)  # rows far outnumber indices: sort pairs, O(n) workspace
            if t["sparse"]:
                assert t["prefix_tiles"] == 0
                regions = sorted([(t["keys_offset"], n * 8), (t["src_offset"], n * 8), (t["pairs_offset"], n * 16),
                                  (t["scratch_offset"], (s + t["accum_tiles"] + 1) * 8)])
            else:
                p, pc = t["prefix_tiles"], t["prefix_chunk"]
                assert 1 <= p <= threads_ and p * pc >= v and (p - 1) * pc < v
                regions = sorted([(t["keys_offset"], n * 8), (t["src_offset"], n * 8),
                                  (t["starts_offset"], (v + 1) * 8), (t["hist_offset"], s * v * 8),
                                  (t["scratch_offset"], (max(s, p) + p + t["accum_tiles"] + 1) * 8)])
            for (o1, n1), (o2, _) in zip(regions, regions[1:]):
                assert o1 % 64 == 0 and o1 + n1 <= o2
            assert regions[-1][0] + regions[-1][1] <= t["workspace_bytes"]
    assert _core._embedding_dense_backward_tiling(10, 5, 3, 4, 4, True, 2, isa="scalar")["isa"] == "scalar"
