"""The recycled-output pool of tilegrad.torch (python/tilegrad/torch/_tensor.py): a buffer is handed out
again only when no tensor views it, the pool stays within its limit, and concurrent callers never
share a live buffer."""

import threading

import pytest

torch = pytest.importorskip("torch")

# small tensors: tilegrad's kernels, not the crossover to torch (tests/torch/conftest.py)
pytestmark = pytest.mark.usefixtures("kernels_at_every_size")

from tilegrad.torch import _tensor  # noqa: E402

MB = 1 << 20


def _tensor_from(pool, nbytes, dtype=torch.float32):
    return torch.from_numpy(pool.take(nbytes)).view(dtype)


def test_buffer_is_reused_only_after_every_view_is_gone():
    pool = _tensor._BufferPool(64 * MB)
    a = _tensor_from(pool, 8 * MB)
    address = a.data_ptr()
    view = a[100:200]
    del a
    b = _tensor_from(pool, 8 * MB)
    assert b.data_ptr() != address  # `view` still uses the first buffer
    del view
    c = _tensor_from(pool, 8 * MB)
    assert c.data_ptr() == address


def test_pool_keeps_within_its_limit_and_never_drops_buffers_in_use():
    pool = _tensor._BufferPool(20 * MB)
    live = [_tensor_from(pool, 8 * MB) for _ in range(4)]  # 32 MB in use: only what fits is pooled
    assert pool.pooled_bytes() <= 20 * MB
    addresses = {t.data_ptr() for t in live}
    assert len(addresses) == 4
    del live
    fresh = _tensor_from(pool, 12 * MB)  # different size: old unused buffers make room
    assert pool.pooled_bytes() <= 20 * MB
    assert fresh.numel() * 4 == 12 * MB


def test_new_output_values_are_written_by_the_kernel_not_stale():
    x = torch.randn(2048, 1024)  # 8 MB outputs come from the pool
    first = torch.ops.tilegrad.silu_backward(torch.ones_like(x), x)
    expected = first.clone()
    del first
    second = torch.ops.tilegrad.silu_backward(torch.ones_like(x), x)
    assert torch.equal(second, expected)
    third = torch.ops.tilegrad.silu_backward(torch.full_like(x, 2.0), x)
    assert torch.equal(third, 2 * expected) and torch.equal(second, expected)


def test_concurrent_callers_never_share_a_live_buffer():
    pool = _tensor._BufferPool(256 * MB)
    held, errors = [], []
    lock = threading.Lock()

    def worker():
        try:
            for _ in range(20):
                t = _tensor_from(pool, 4 * MB)
                t.fill_(threading.get_ident() % 1000)
                with lock:
                    held.append(t)
                    if len(held) > 8:
                        held.pop(0)
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({t.data_ptr() for t in held}) == len(held)


def test_zero_limit_disables_the_pool(monkeypatch):
    monkeypatch.setattr(_tensor, "_pool", _tensor._BufferPool(0))
    out = _tensor.new_output((2048, 1024), torch.float32)
    assert _tensor._pool.pooled_bytes() == 0 and out.shape == (2048, 1024)
