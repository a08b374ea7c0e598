"""TILEGRAD_VERBOSE=1: one line per operator launch on stderr. Each operator family runs in a child
process; every field of its line is checked against the arrays passed (names, dtypes, shapes,
strides), the ISA and thread count in force, and the tiling test hook's dict for the same problem
(the line and the hook come from the same describe()). Unset or 0 prints nothing; lines from many
threads launching at once stay whole."""

import functools
import itertools
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from registry import OPERATORS, trace_name

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# Run in the child before a family's code: the platform the tilings see, and helpers that record
# what the test expects of each line (printed as JSON lines on stdout).
PRELUDE = """
import json, os, sys
import numpy as np, ml_dtypes
import tilegrad as tg
from tilegrad import _core

BF16 = ml_dtypes.bfloat16
P = _core.platform()
CACHES = dict(l1_bytes=P["l1_bytes"], l2_bytes=P["l2_bytes"], l3_bytes=P["l3_bytes"], isa=tg.active_isa())
SHORT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "int64": "i64", "int32": "i32", "uint8": "u8",
         "bool": "bool"}

def spec(a):
    strides = None if a.flags.c_contiguous else [s // a.itemsize for s in a.strides]
    return [SHORT[a.dtype.name], list(a.shape), strides]

ONEDNN_ISA = os.environ.get("TEST_ONEDNN_ISA")  # what the FLCE lines must show (from the parent)

# The line this launch must print: tensors in parameter order, the tiling hook's dict, then the
# launch-level fields; at the ISA and thread count in force.
def expect(op, tensors, tiling=None, **extra):
    print(json.dumps({"op": op, "tensors": {k: spec(v) for k, v in tensors.items()}, "tiling": tiling or {},
                      "extra": extra, "isa": tg.active_isa(), "threads": tg.get_num_threads()}), flush=True)
"""


def run_child(code: str, verbose: str = "1", **env_extra: str):
    """Runs PRELUDE + code with TILEGRAD_VERBOSE=verbose (None: unset); returns (expectations, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TILEGRAD_VERBOSE", "TILEGRAD_FLCE_BUDGET")}
    env["OMP_NUM_THREADS"] = "2"
    env["PYTHONPATH"] = TESTS_DIR + os.pathsep + env.get("PYTHONPATH", "")
    if verbose is not None:
        env["TILEGRAD_VERBOSE"] = verbose
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


def split_fields(line: str):
    """The comma-separated fields of a line (commas inside [...] belong to a shape)."""
    fields, depth, start = [], 0, 0
    for i, ch in enumerate(line):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            fields.append(line[start:i])
            start = i + 1
    fields.append(line[start:])
    return fields


TENSOR = re.compile(r"^(\w+)\[([-\d,]*)\](?:strides\[([-\d,]*)\])?$")


def parse_line(line: str):
    """(operator, [(name, value), ...]) of one trace line."""
    fields = split_fields(line)
    assert fields[0] == "tilegrad_verbose", line
    pairs = []
    for f in fields[2:]:
        name, sep, value = f.partition("=")
        assert sep and name, f"field {f!r} of {line!r} is not name=value"
        pairs.append((name, value))
    assert len({n for n, _ in pairs}) == len(pairs), f"repeated field in {line!r}"
    return fields[1], pairs


def trace_lines(stderr: str):
    return [line for line in stderr.splitlines() if line.startswith("tilegrad_verbose,")]


def text(value) -> str:
    """A hook dict value as the trace line prints it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return format(value, ".9g")
    return str(value)


def cpu_has_avx512_bf16() -> bool:
    with open("/proc/cpuinfo") as f:
        return any("avx512_bf16" in line.split() for line in f if line.startswith("flags"))


def check_line(line: str, want: dict):
    """Every field of `line` against the child's expectation `want`."""
    isa = want["isa"]
    op, pairs = parse_line(line)
    assert op == want["op"]
    fields = dict(pairs)
    names = [n for n, _ in pairs]
    # tensors first, in the operator's parameter order; absent optional ones left out
    tensor_names = list(want["tensors"])
    assert names[: len(tensor_names)] == tensor_names, line
    for name, (dtype, shape, strides) in want["tensors"].items():
        m = TENSOR.match(fields[name])
        assert m, f"{name}={fields[name]}"
        assert m.group(1) == dtype
        assert m.group(2) == ",".join(map(str, shape))
        assert m.group(3) == (None if strides is None else ",".join(map(str, strides)))
    rest = names[len(tensor_names):]
    assert rest[:2] == ["isa", "threads"] and rest[-1] == "time_ms", line
    assert fields["isa"] == isa and fields["threads"] == str(want["threads"])
    assert float(fields["time_ms"]) >= 0.0
    if any(dtype == "bf16" for dtype, _, _ in want["tensors"].values()):
        expected = "vcvtneps2bf16" if isa == "avx512" and cpu_has_avx512_bf16() else "integer"
        assert fields.pop("bf16_convert") == expected
    tiling = {k: v for k, v in want["tiling"].items() if k != "isa"}
    if "isa" in want["tiling"]:
        assert want["tiling"]["isa"] == isa
    extra = want["extra"]
    if "bf16_gemm" in fields:  # GEMM operators on bf16: oneDNN's own bf16 matmul exists from AVX-512 on
        assert "onednn_isa" in extra and any(dtype == "bf16" for dtype, _, _ in want["tensors"].values())
        native = extra["onednn_isa"].startswith("avx512")
        assert fields.pop("bf16_gemm") == ("native" if native else "widened_to_f32")
    described = [n for n in rest[2:-1] if n not in ("bf16_convert", "bf16_gemm")]
    assert described == list(tiling) + list(extra), line  # the hook's fields, in order, then the launch's
    for name, value in list(tiling.items()) + list(extra.items()):
        assert fields[name] == text(value), f"{name}: line {fields[name]}, expected {value!r}"


def run_and_check(code: str, **env):
    """Runs code in a child; its lines must be exactly the ones it expect()s, in order."""
    wants, stderr = run_child(code, **env)
    lines = trace_lines(stderr)
    assert len(lines) == len(wants), stderr
    for line, want in zip(lines, wants):
        check_line(line, want)
    return lines


# ---- one family per child process --------------------------------------------------------------

SILU = """
dy = np.random.default_rng(0).standard_normal((64, 300)).astype(np.float32)
x = np.random.default_rng(1).standard_normal((64, 300)).astype(np.float32)
dx = tg.silu_backward(dy, x)
expect("aclnnSiluBackward", {"gradOutput": dy, "self": x, "gradInput": dx},
       _core._elementwise_op_tiling(dy.size, 12, True, 2, **CACHES))
x16 = x.astype(np.float16)[:, ::2]  # a strided view: the line shows its strides
dy16 = np.ascontiguousarray(dy[:, :150]).astype(np.float16)
out = np.empty((64, 150), np.float16)
tg.silu_backward(dy16, x16, out=out)
expect("aclnnSiluBackward", {"gradOutput": dy16, "self": x16, "gradInput": out},
       _core._elementwise_op_tiling(out.size, 6, False, 2, **CACHES))
xb = np.ascontiguousarray(x[:, ::3]).astype(BF16)
gb = tg.silu_backward(xb, xb)
expect("aclnnSiluBackward", {"gradOutput": xb, "self": xb, "gradInput": gb},
       _core._elementwise_op_tiling(xb.size, 6, True, 2, **CACHES))
"""


def test_silu_backward_lines():
    run_and_check(SILU)


def test_silu_backward_strided_view_shows_strides():
    code = """
    x = np.random.default_rng(0).standard_normal((40, 60)).astype(np.float32)
    v = x[::2, ::3]
    dx = tg.silu_backward(v, v)
    expect("aclnnSiluBackward", {"gradOutput": v, "self": v, "gradInput": dx},
           _core._elementwise_op_tiling(v.size, 12, True, 2, **CACHES))
    """
    (line,) = run_and_check(code)
    assert ",gradOutput=f32[20,20]strides[120,3]," in line


def test_isa_cap_shows_in_the_line():
    import tilegrad as tg
    cap = "scalar" if tg.detected_isa() == "scalar" else "avx2"
    lines = run_and_check(SILU, TILEGRAD_MAX_ISA=cap)
    assert all(f",isa={cap}," in line for line in lines)
    assert ",bf16_convert=integer," in lines[-1]  # vcvtneps2bf16 is for AVX-512 kernels only


def test_binary_cross_entropy_with_logits_backward_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((33, 70)).astype(np.float32)
    t = rng.random((33, 70)).astype(np.float32)
    dy = rng.standard_normal((33, 70)).astype(np.float32)
    w = rng.random((70,)).astype(np.float32)  # broadcast along rows
    g = tg.binary_cross_entropy_with_logits_backward(dy, x, t, w, reduction="mean")
    expect("aclnnBinaryCrossEntropyWithLogitsBackward",
           {"gradOutput": dy, "self": x, "target": t, "weightOptional": w, "out": g},
           _core._binary_cross_entropy_with_logits_backward_tiling(x.size, 16, True, 1, 2, **CACHES))
    g = tg.binary_cross_entropy_with_logits_backward(dy, x, t, reduction="sum")
    expect("aclnnBinaryCrossEntropyWithLogitsBackward", {"gradOutput": dy, "self": x, "target": t, "out": g},
           _core._binary_cross_entropy_with_logits_backward_tiling(x.size, 16, True, 2, 2, **CACHES))
    """)


def test_cross_entropy_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 1000)).astype(np.float32)
    t = rng.integers(0, 1000, 50)
    loss, log_prob, _, _ = tg.cross_entropy_loss(x, t)
    expect("aclnnCrossEntropyLoss", {"input": x, "target": t, "lossOut": loss, "logProbOut": log_prob},
           _core._cross_entropy_loss_tiling(50, 1000, 4, 4, True, 2, **CACHES), fused_log_prob=True)
    xb = x.astype(BF16)
    w = rng.random(1000).astype(np.float32)
    loss, lp, z, lse = tg.cross_entropy_loss(xb, t, w, reduction="none", label_smoothing=0.1,
                                              lse_square_scale_for_zloss=1e-4, return_zloss=True)
    expect("aclnnCrossEntropyLoss",
           {"input": xb, "target": t, "weightOptional": w, "lossOut": loss, "logProbOut": lp, "zlossOut": z,
            "lseForZlossOut": lse},
           _core._cross_entropy_loss_tiling(50, 1000, 2, 2, True, 2, **CACHES), fused_log_prob=False)
    g = np.ones(50, BF16)
    dx = tg.cross_entropy_loss_grad(g, lp, t, w, reduction="none", label_smoothing=0.1)
    expect("aclnnCrossEntropyLossGrad",
           {"gradLoss": g, "logProb": lp, "target": t, "weightOptional": w, "xGradOut": dx},
           _core._cross_entropy_loss_grad_tiling(50, 1000, 4, True, 2, **CACHES))
    """)


def test_embedding_dense_backward_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    grad = rng.standard_normal((4, 30, 16)).astype(np.float32)
    idx = rng.integers(0, 500, (4, 30))
    out = tg.embedding_dense_backward(grad, idx, 500, padding_idx=3)
    expect("aclnnEmbeddingDenseBackward", {"grad": grad, "indices": idx, "out": out},
           _core._embedding_dense_backward_tiling(120, 500, 16, 4, 4, True, 2, **CACHES))
    """)


def test_rms_norm_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 48)).astype(np.float32)
    g = rng.standard_normal(48).astype(np.float32)
    y, rstd = tg.rms_norm(x, g, 1e-6)
    expect("aclnnRmsNorm", {"x": x, "gamma": g, "yOut": y, "rstdOut": rstd},
           _core._rms_norm_tiling(30, 48, 4, False, True, 2, **CACHES))
    dx, dg = tg.rms_norm_grad(x, x, rstd, g)
    expect("aclnnRmsNormGrad", {"dy": x, "x": x, "rstd": rstd, "gamma": g, "dxOut": dx, "dgammaOut": dg},
           _core._rms_norm_grad_tiling(30, 48, 4, False, True, 2, **CACHES))
    xb = x.astype(BF16)[:, :, ::2]  # a strided view: packed rows
    gb = g[::2].astype(BF16)
    y, rstd = tg.rms_norm(xb, gb, 1e-5)
    expect("aclnnRmsNorm", {"x": xb, "gamma": gb, "yOut": y, "rstdOut": rstd},
           _core._rms_norm_tiling(30, 24, 2, True, True, 2, **CACHES))
    """)


def test_layer_norm_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 48)).astype(np.float32)
    w = rng.standard_normal(48).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    y, mean, rstd = tg.layer_norm(x, [48], w, b)
    expect("aclnnLayerNorm", {"input": x, "weightOptional": w, "biasOptional": b, "out": y,
                              "meanOutOptional": mean, "rstdOutOptional": rstd},
           _core._layer_norm_tiling(30, 48, 4, False, True, 2, **CACHES))
    dx, dw, db = tg.layer_norm_backward(x, x, [48], mean, rstd, w, b)
    expect("aclnnLayerNormBackward", {"gradOut": x, "input": x, "mean": mean, "rstd": rstd, "weightOptional": w,
                                      "biasOptional": b, "gradInputOut": dx, "gradWeightOut": dw,
                                      "gradBiasOut": db},
           _core._layer_norm_backward_tiling(30, 48, 4, False, True, 2, **CACHES))
    xb = x.astype(BF16)[:, :, ::2]  # a strided view, no weight or bias: packed rows
    y, mean, rstd = tg.layer_norm(xb, [24])
    expect("aclnnLayerNorm", {"input": xb, "out": y, "meanOutOptional": mean, "rstdOutOptional": rstd},
           _core._layer_norm_tiling(30, 24, 2, True, True, 2, **CACHES))
    """)


def test_add_rms_norm_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x1 = rng.standard_normal((6, 5, 48)).astype(np.float32)
    x2 = rng.standard_normal((6, 5, 48)).astype(np.float32)
    g = rng.standard_normal(48).astype(np.float32)
    y, rstd, xo = tg.add_rms_norm(x1, x2, g, 1e-6)
    expect("aclnnAddRmsNorm", {"x1": x1, "x2": x2, "gamma": g, "yOut": y, "rstdOut": rstd, "xOut": xo},
           _core._rms_norm_tiling(30, 48, 4, False, True, 2, **CACHES))
    dx, dg = tg.add_rms_norm_backward(x1, xo, rstd, g, x2)
    expect("add_rms_norm_backward", {"dy": x1, "x": xo, "rstd": rstd, "gamma": g, "dresidual": x2, "dxOut": dx,
                                     "dgammaOut": dg},
           _core._rms_norm_grad_tiling(30, 48, 4, False, True, 2, **CACHES))
    """)


def test_swi_glu_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 2 * 96)).astype(np.float32)
    y = tg.swi_glu(x)
    expect("aclnnSwiGlu", {"x": x, "out": y}, _core._elementwise_op_tiling(y.size, 12, True, 2, **CACHES), dim=-1)
    xb = x.astype(BF16).reshape(14, 96)
    dy = np.ones((7, 96), BF16)
    dx = tg.swi_glu_grad(dy, xb, 0)
    expect("aclnnSwiGluGrad", {"yGrad": dy, "x": xb, "out": dx},
           _core._elementwise_op_tiling(dy.size, 10, True, 2, **CACHES), dim=0)
    """)


def test_gelu_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 77)).astype(np.float32)
    y = tg.gelu(x, "tanh")
    expect("aclnnGeluV2", {"x": x, "y": y}, _core._elementwise_op_tiling(y.size, 8, True, 2, **CACHES), approximate=1)
    xb = x.astype(BF16)[:, ::2]  # a strided view
    dy = np.ones((1, 39), np.float32)  # broadcast, mixed dtypes: a float32 gradient
    dx = tg.gelu_backward(dy, xb)
    expect("aclnnGeluBackwardV2", {"gradOutput": dy, "self": xb, "gradInput": dx},
           _core._elementwise_op_tiling(dx.size, 10, False, 2, **CACHES), approximate="none")
    """)


def test_ge_glu_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 2 * 96)).astype(np.float32)
    y, g = tg.ge_glu(x, -1, "tanh", True)
    expect("aclnnGeGluV3", {"self": x, "out": y, "outGelu": g},
           _core._elementwise_op_tiling(y.size, 16, True, 2, **CACHES), dim=-1, approximate=1, activate_left=True)
    xb = x.astype(BF16).reshape(14, 96)
    dy = np.ones((7, 96), BF16)
    gb = np.ones((7, 96), BF16)
    dx = tg.ge_glu_backward(dy, xb, gb, 0, "none", False)
    expect("aclnnGeGluV3Backward", {"gradOutput": dy, "self": xb, "gelu": gb, "gradInput": dx},
           _core._elementwise_op_tiling(dy.size, 12, True, 2, **CACHES), dim=0, approximate=0, activate_left=False)
    """)


def test_rotary_position_embedding_lines():
    run_and_check("""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4, 128)).astype(np.float32)  # (B, N, S, D), cos / sin (B, 1, S, D)
    cos = rng.standard_normal((2, 1, 4, 128)).astype(np.float32)
    sin = rng.standard_normal((2, 1, 4, 128)).astype(np.float32)
    y = tg.rotary_position_embedding(x, cos, sin, 0)
    aligned = y.ctypes.data % 64 == 0
    expect("aclnnRotaryPositionEmbedding", {"x": x, "cos": cos, "sin": sin, "out": y},
           _core._rotary_position_embedding_tiling((2, 3, 4), (2, 1, 4), 128, 0, 4, aligned, 2, **CACHES),
           direct_rows=True)
    dx, dcos, dsin = tg.rotary_position_embedding_grad(y, cos, sin, x, 1)
    aligned = dx.ctypes.data % 64 == 0
    expect("aclnnRotaryPositionEmbeddingGrad",
           {"dy": y, "cos": cos, "sin": sin, "xOptional": x, "dxOut": dx, "dcosOut": dcos, "dsinOut": dsin},
           _core._rotary_position_embedding_grad_tiling((2, 3, 4), (2, 1, 4), 128, 1, 4, True, aligned, 2,
                                                        **CACHES), direct_rows=True)
    """)


def test_vocabulary_parallel_flce_lines():
    lines = run_and_check("""
    from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan
    rng = np.random.default_rng(0)
    bt, h, v = 24, 16, 300
    x = rng.standard_normal((bt, h)).astype(np.float32)
    w = rng.standard_normal((v, h)).astype(np.float32)
    t = rng.integers(0, 2 * v, bt)
    mx, s, pred, mask, masked, logits = tg.fused_linear_online_max_sum(x, w, t, v, 2 * v, return_logits=True)
    gemm = {"onednn_isa": ONEDNN_ISA}
    expect("aclnnFusedLinearOnlineMaxSum",
           {"input": x, "weight": w, "target": t, "logitsMaxLocalOut": mx, "sumExpLogitsLocalOut": s,
            "predictedLogitsLocalOut": pred, "targetMaskOut": mask, "maskedTargetOut": masked,
            "vocabParallelLogitsOutOptional": logits},
           _core._flce_forward_tiling(bt, h, v, 4, threads=2, isa=tg.active_isa()), **gemm)
    loss, softmax = tg.fused_cross_entropy_loss_with_max_sum(mx, s, pred, 0.0, logits)
    expect("aclnnFusedCrossEntropyLossWithMaxSum",
           {"logitsMax": mx, "sumExpLogits": s, "predictedLogits": pred, "vocabParallelLogitsOptional": logits,
            "lossOut": loss, "softMaxOutOptional": softmax})
    g = np.full(bt, 1.0 / bt, np.float32)
    gi, gw = tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, logits_max=mx, sum_exp_logits=s)
    expect("aclnnFusedLinearCrossEntropyLossGrad",
           {"grad": g, "input": x, "weight": w, "targetMask": mask, "maskedTarget": masked,
            "logitsMaxOptional": mx, "sumExpLogitsOptional": s, "inputGradOut": gi, "weightGradOut": gw},
           _core._flce_grad_tiling(bt, h, v, 4, True, threads=2, isa=tg.active_isa()), **gemm)
    gi, gw = tg.fused_linear_cross_entropy_loss_grad(g, x, w, mask, masked, softmax=softmax)
    expect("aclnnFusedLinearCrossEntropyLossGrad",
           {"grad": g, "input": x, "weight": w, "targetMask": mask, "maskedTarget": masked,
            "softmaxOptional": softmax, "inputGradOut": gi, "weightGradOut": gw},
           _core._flce_grad_tiling(bt, h, v, 4, False, threads=2, isa=tg.active_isa()), **gemm)
    """, TEST_ONEDNN_ISA=onednn_isa())
    assert ",recompute=true," in lines[2] and ",recompute=false," in lines[3]


@functools.lru_cache(maxsize=None)
def onednn_isa() -> str:
    """oneDNN's ISA in this environment, from a traced GEMM launch."""
    _, stderr = run_child("""
    x = np.ones((4, 8), np.float32)
    tg.fused_linear_online_max_sum(x, x, np.zeros(4, np.int64), 0, 4)
    """)
    (line,) = trace_lines(stderr)
    return dict(parse_line(line)[1])["onednn_isa"]


def test_onednn_isa_cap_shows_in_the_line():
    isa = onednn_isa()
    assert isa in {"sse41", "avx", "avx2", "avx2_vnni", "avx2_vnni_2", "avx512_core", "avx512_core_vnni",
                   "avx512_core_bf16", "avx512_core_fp16", "avx512_core_amx", "avx512_core_amx_fp16"}
    _, stderr = run_child("""
    x = np.ones((4, 8), np.float32)
    tg.fused_linear_online_max_sum(x, x, np.zeros(4, np.int64), 0, 4)
    """, ONEDNN_MAX_CPU_ISA="SSE41")
    (line,) = trace_lines(stderr)
    assert dict(parse_line(line)[1])["onednn_isa"] == "sse41"


@pytest.mark.parametrize("budget, plan, filter_eps", [(None, "whole", None), (1 << 20, "chunked", 1e-3),
                                                      (1, "vocab_outer", None)])
def test_fused_linear_cross_entropy_plans(budget, plan, filter_eps):
    lines = run_and_check("""
    from tilegrad._fused_linear_cross_entropy import fused_linear_cross_entropy_plan
    rng = np.random.default_rng(0)
    bt, h, v, budget, filter_eps = 512, 32, 400, BUDGET, FILTER_EPS
    x = rng.standard_normal((bt, h)).astype(BF16)
    w = rng.standard_normal((v, h)).astype(BF16)
    t = rng.integers(0, v, bt)
    loss, gi, gw = tg.fused_linear_cross_entropy(x, w, t, memory_budget=budget, filter_eps=filter_eps)
    # the binding always asks for z_loss (float32, shaped as loss); Python returns it only with a z-loss
    expect("fused_linear_cross_entropy",
           {"input": x, "weight": w, "target": t, "loss": loss, "grad_input": gi, "grad_weight": gw,
            "z_loss": loss},
           fused_linear_cross_entropy_plan(bt, h, v, BF16, memory_budget=budget), onednn_isa=ONEDNN_ISA,
           filter_eps=float(np.float32(filter_eps or 0.0)))
    """.replace("BUDGET", repr(budget)).replace("FILTER_EPS", repr(filter_eps)), TEST_ONEDNN_ISA=onednn_isa())
    assert f",plan={plan}," in lines[0]
    assert f",gemms={4 if plan == 'vocab_outer' else 3}," in lines[0]


def test_c_abi_prints_at_each_launch_only():
    wants, stderr = run_child("""
    import ctypes
    from acl_ctypes import ACLNN_SUCCESS, AclTensors, get_workspace_size, launch, lib
    lib.aclSetAclOpExecutorRepeatable.argtypes = [ctypes.c_void_p]
    lib.aclDestroyAclOpExecutor.argtypes = [ctypes.c_void_p]
    dy = np.ones((3, 5), np.float32)
    x = np.ones((3, 5), np.float32)
    out = np.zeros((3, 5), np.float32)
    with AclTensors() as t:
        status, ws, ex = get_workspace_size("aclnnSiluBackward", [t.new(dy), t.new(x), t.new(out)])
        assert status == ACLNN_SUCCESS and lib.aclSetAclOpExecutorRepeatable(ex) == ACLNN_SUCCESS
        print("phase 1 done", file=sys.stderr, flush=True)
        for _ in range(2):  # a repeatable executor: one line per launch
            assert launch("aclnnSiluBackward", ex, ws) == ACLNN_SUCCESS
            expect("aclnnSiluBackward", {"gradOutput": dy, "self": x, "gradInput": out},
                   _core._elementwise_op_tiling(15, 12, True, 2, **CACHES))
        lib.aclDestroyAclOpExecutor(ex)
    """)
    before, after = stderr.split("phase 1 done\n")
    assert trace_lines(before) == []
    lines = trace_lines(after)
    assert len(lines) == 2
    for line, want in zip(lines, wants):
        check_line(line, want)


def test_failed_launch_prints_nothing():
    _, stderr = run_child("""
    x = np.ones((4, 10), np.float32)
    try:
        tg.cross_entropy_loss(x, np.array([0, 1, 99, 2]))  # target 99 is found out of range at launch
    except IndexError as e:
        print(e, file=sys.stderr)
    """)
    assert trace_lines(stderr) == [] and "out of range" in stderr


# ---- off, bad values, threads ------------------------------------------------------------------

# Every operator of the registry, called once with its sample arguments (tests/registry.py).
EVERY_OPERATOR = """
from registry import OPERATORS, python_call
rng = np.random.default_rng(0)
for op in OPERATORS:
    fn, args, kwargs = python_call(op, rng)
    fn(*args, **kwargs)
"""


@pytest.mark.parametrize("verbose", [None, "0", ""])
def test_off_prints_nothing(verbose):
    _, stderr = run_child(EVERY_OPERATOR, verbose=verbose)
    assert stderr == ""


def test_on_prints_one_line_per_launch():
    """Each operator's sample call prints exactly one line, under its aclnn name (or its own)."""
    _, stderr = run_child(EVERY_OPERATOR)
    printed = [parse_line(line)[0] for line in trace_lines(stderr)]
    for op, got in itertools.zip_longest(OPERATORS, printed):
        assert op is not None and got == trace_name(op), \
            f"{op and op['name']}: printed {got!r}, expected {op and trace_name(op)!r}; all lines: {printed}"
    assert stderr.count("\n") == len(printed)  # nothing else


def test_unknown_value_warns_once_and_stays_off():
    _, stderr = run_child(EVERY_OPERATOR, verbose="yes")
    assert stderr == "tilegrad: warning: TILEGRAD_VERBOSE='yes' is not an integer; trace off\n"


def test_many_threads_print_whole_lines():
    wants, stderr = run_child("""
    import threading
    tg.set_num_threads(1)
    shapes = [(1 + k, 3 + 7 * k) for k in range(8)]
    barrier = threading.Barrier(len(shapes))
    def work(shape):
        x = np.ones(shape, np.float32)
        barrier.wait()
        for _ in range(50):
            tg.silu_backward(x, x)
            tg.cross_entropy_loss(x, np.zeros(shape[0], np.int64))
    threads = [threading.Thread(target=work, args=(s,)) for s in shapes]
    for th in threads: th.start()
    for th in threads: th.join()
    for s in shapes:
        x = np.ones(s, np.float32)
        expect("aclnnSiluBackward", {"gradOutput": x, "self": x, "gradInput": x},
               _core._elementwise_op_tiling(x.size, 12, True, 1, **CACHES))
    """)
    lines = stderr.splitlines()
    assert len(lines) == 8 * 50 * 2 and all(line.startswith("tilegrad_verbose,") for line in lines)
    silu = [line for line in lines if parse_line(line)[0] == "aclnnSiluBackward"]
    for want in wants:
        mine = [line for line in silu if f"gradOutput=f32[{','.join(map(str, want['tensors']['self'][1]))}]" in line]
        assert len(mine) == 50
        for line in mine:
            check_line(line, want)
    for line in lines:
        op, pairs = parse_line(line)
        assert pairs[-1][0] == "time_ms" and float(pairs[-1][1]) >= 0


def test_python_m_tilegrad_reports_trace_and_onednn_isa():
    def info(**env):
        full = {k: v for k, v in os.environ.items() if k not in ("TILEGRAD_VERBOSE", "ONEDNN_MAX_CPU_ISA")}
        full.update(env)
        out = subprocess.run([sys.executable, "-m", "tilegrad"], env=full, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stderr == "", out.stderr
        return {line.split(":")[0]: line.split(":", 1)[1].strip() for line in out.stdout.splitlines() if ":" in line}
    assert info()["trace"].startswith("off (TILEGRAD_VERBOSE=1")
    capped = info(TILEGRAD_VERBOSE="1", ONEDNN_MAX_CPU_ISA="SSE41")
    assert capped["trace"].startswith("on ")
    assert capped["oneDNN ISA"].startswith("sse41 ")
