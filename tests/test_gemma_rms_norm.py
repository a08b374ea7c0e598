"""Gemma's RMSNorm, y = (x * rstd) * (1 + gamma): CANN's aclnnGemmaRmsNorm through the C ABI, and
tilegrad's weight_offset keyword of tg.rms_norm / tg.rms_norm_grad (the vendor has no Gemma gradient
operator), against the float64 RMSNorm reference with the weight 1 + gamma (the documents' formula),
and against Hugging Face's GemmaRMSNorm written in PyTorch."""

import ctypes

import numpy as np
import pytest

import tilegrad as tg
from acl_ctypes import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR, ACLNN_SUCCESS, AclTensors, run_op
from reference import rms_norm as ref
from helpers import normal

F32, F16, BF16 = ref.F32, ref.F16, ref.BF16
DTYPES = [(F32, F32), (F16, F16), (BF16, BF16), (BF16, F32), (F16, F32)]
IDS = ["f32", "f16", "bf16", "bf16-f32", "f16-f32"]


def _one_plus(gamma):
    return 1.0 + np.asarray(gamma).astype(np.float64)


@pytest.mark.parametrize("dt", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape,k", [((3, 64), 1), ((2, 5, 33), 1), ((2, 3, 4, 8), 2), ((7, 1000), 1)])
def test_forward_and_grad(isa, dt, shape, k):
    x = normal(shape, dt[0], 1, 2.0)
    g = normal(shape[-k:], dt[1], 2, 0.3)
    y, rstd = tg.rms_norm(x, g, 1e-6, weight_offset=1.0)
    yr, rr, ys = ref.rms_norm_ref(x, _one_plus(g), 1e-6)
    ref.assert_close(y, yr, ys, ref.Y_ULPS)
    ref.assert_close(rstd, rr, rr, ref.RSTD_ULPS)
    dy = normal(shape, dt[0], 3)
    dx, dg = tg.rms_norm_grad(dy, x, rstd, g, weight_offset=1.0)
    dxr, dgr, dxs, dgs = ref.rms_norm_grad_ref(dy, x, rstd, _one_plus(g))
    ref.assert_close(dx, dxr, dxs, ref.DX_ULPS)
    assert (np.abs(dg - dgr) <= ref.DGAMMA_REL * dgs + 1e-30).all()
    # dgamma does not depend on the offset
    np.testing.assert_array_equal(dg, tg.rms_norm_grad(dy, x, rstd, g)[1])


def test_offset_zero_is_rms_norm_bit_for_bit():
    x, g = normal((4, 48), BF16, 4), normal(48, BF16, 5)
    g[3] = -0.0  # the sign of a zero weight survives (the offset is not added at 0)
    a, b = tg.rms_norm(x, g, 1e-5), tg.rms_norm(x, g, 1e-5, weight_offset=0.0)
    np.testing.assert_array_equal(a[0].view(np.uint16), b[0].view(np.uint16))


@pytest.mark.parametrize("dt", DTYPES[:3], ids=IDS[:3])
def test_c_abi_matches_python_api(isa, dt):
    x, g = normal((6, 40), dt[0], 6), normal(40, dt[1], 7)
    y, rstd = np.zeros_like(x), np.zeros((6, 1), F32)
    with AclTensors() as t:
        assert run_op("aclnnGemmaRmsNorm", [t.new(x), t.new(g), ctypes.c_double(1e-6), t.new(y), t.new(rstd)]) == (
            ACLNN_SUCCESS, "")
    want_y, want_rstd = tg.rms_norm(x, g, 1e-6, weight_offset=1.0)
    np.testing.assert_array_equal(y.view(np.uint8), want_y.view(np.uint8))
    np.testing.assert_array_equal(rstd, want_rstd)


def test_c_abi_errors():
    x, g = normal((6, 40), F32, 8), normal(40, F32, 9)
    with AclTensors() as t:
        s, m = run_op("aclnnGemmaRmsNorm", [t.new(x), None, ctypes.c_double(1e-6), t.new(np.zeros_like(x)),
                                            t.new(np.zeros((6, 1), F32))])
        assert s == ACLNN_ERR_PARAM_NULLPTR and m.startswith("aclnnGemmaRmsNorm: gamma"), m
        s, m = run_op("aclnnGemmaRmsNorm", [t.new(x), t.new(g.astype(F16)), ctypes.c_double(1e-6),
                                            t.new(np.zeros_like(x)), t.new(np.zeros((6, 1), F32))])
        assert s == ACLNN_ERR_PARAM_INVALID and m.startswith("aclnnGemmaRmsNorm: gamma"), m


def test_bad_offset():
    x, g = normal((2, 8), F32, 10), normal(8, F32, 11)
    with pytest.raises(ValueError, match="aclnnRmsNorm: weight_offset must be finite, got nan"):
        tg.rms_norm(x, g, weight_offset=float("nan"))
    with pytest.raises(TypeError, match="weight_offset must be a float"):
        tg.rms_norm(x, g, weight_offset="1")
    y, rstd = tg.rms_norm(x, g)
    with pytest.raises(ValueError, match="aclnnRmsNormGrad: weight_offset must be finite, got inf"):
        tg.rms_norm_grad(x, x, rstd, g, weight_offset=float("inf"))


@pytest.mark.parametrize("dtype", [F32, BF16], ids=["fp32", "bf16"])
def test_matches_hugging_face_gemma(dtype):
    """transformers' GemmaRMSNorm: fp32 normalisation, times (1 + weight) in fp32, one cast back."""
    torch = pytest.importorskip("torch")
    x = normal((8, 64), dtype, 12, 2.0)
    w = normal(64, dtype, 13, 0.3)
    tdt = torch.float32 if dtype == F32 else torch.bfloat16
    tx = torch.from_numpy(x.astype(F32)).to(tdt).requires_grad_()
    tw = torch.from_numpy(w.astype(F32)).to(tdt).requires_grad_()
    xf = tx.float()
    out = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * (1.0 + tw.float())).type_as(tx)
    dy = normal((8, 64), dtype, 14)
    out.backward(torch.from_numpy(dy.astype(F32)).to(tdt))
    y, rstd = tg.rms_norm(x, w, 1e-6, weight_offset=1.0)
    dx, dg = tg.rms_norm_grad(dy, x, rstd, w, weight_offset=1.0)
    tol = 2e-6 if dtype == F32 else 1e-2
    np.testing.assert_allclose(y.astype(F32), out.detach().float().numpy(), rtol=tol, atol=tol)
    np.testing.assert_allclose(dx.astype(F32), tx.grad.float().numpy(), rtol=tol * 5, atol=tol * 5)
    np.testing.assert_allclose(dg, tw.grad.float().numpy(), rtol=tol * 5, atol=tol * 5)
