"""The AdamW tiling (pure function): every element of every tensor in exactly one tile, in order;
tiles balanced by bytes; boundaries on 64-element units; small calls on one thread."""

import pytest

import tilegrad._core as core


def _check(numel, bpe, threads):
    t = core._fused_adamw_tiling(numel, bpe, threads)
    covered = {i: [] for i in range(len(numel))}
    loads = []
    for segs in t["tiles"]:
        loads.append(sum((e - b) * bpe[s] for s, b, e in segs))
        for s, b, e in segs:
            assert 0 <= b < e <= numel[s]
            covered[s].append((b, e))
            assert b % 64 == 0 or b == 0
    flat = [(s, b, e) for segs in t["tiles"] for s, b, e in segs]
    assert flat == sorted(flat)
    for i, n in enumerate(numel):
        pos = 0
        for b, e in covered[i]:
            assert b == pos
            pos = e
        assert pos == n
    total = sum(n * b for n, b in zip(numel, bpe))
    assert t["total_bytes"] == total
    assert 1 <= t["num_tiles"] <= max(1, threads)
    if t["num_tiles"] > 1:
        target = total / t["num_tiles"]
        assert max(loads) - target <= 64 * max(bpe) * len(numel) + 1
    return t


LLAMA = [32000 * 768] + [768 * 768, 768 * 2048] * 12 + [768] * 25  # one embedding, matrices, norms


@pytest.mark.parametrize("threads", [1, 2, 3, 7, 64, 256])
def test_llama_like_balanced(threads):
    t = _check(LLAMA, [28] * len(LLAMA), threads)
    assert t["num_tiles"] == threads  # the embedding is split across threads, not given to one


@pytest.mark.parametrize("numel", [[0], [1], [5, 0, 7], [64] * 100, [10 ** 6, 3, 10 ** 6], [0, 0, 129]])
@pytest.mark.parametrize("threads", [1, 2, 5, 256])
def test_invariants(numel, threads):
    _check(numel, [14 + 2 * (i % 3) for i in range(len(numel))], threads)


def test_small_calls_single_tile():
    assert core._fused_adamw_tiling([1000, 10], [28, 28], 8)["num_tiles"] == 1


def test_norm_blocks_do_not_depend_on_threads():
    a = core._fused_adamw_tiling(LLAMA, [28] * len(LLAMA), 1)
    b = core._fused_adamw_tiling(LLAMA, [28] * len(LLAMA), 3)
    assert a["norm_blocks"] == b["norm_blocks"] == sum(-(-n // a["norm_block_elems"]) for n in LLAMA)
