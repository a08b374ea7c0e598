"""SiLU backward with tilegrad on NumPy arrays (float32, float16 and bfloat16).

    python examples/silu_backward.py
"""

import ml_dtypes
import numpy as np

import tilegrad as tg

rng = np.random.default_rng(0)
x = rng.standard_normal((4, 8)).astype(np.float32)
dy = np.ones_like(x)

# New output array.
dx = tg.silu_backward(dy, x)

# The same formula in float64 as a check: dx = dy * s * (1 + x * (1 - s)), s = sigmoid(x).
s = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
print("max |tilegrad - float64 reference| =", float(np.max(np.abs(dx - dy * s * (1 + x * (1 - s))))))

# bfloat16 in, bfloat16 out (computed in float32, rounded once), written into a reused buffer.
xb, dyb = x.astype(ml_dtypes.bfloat16), dy.astype(ml_dtypes.bfloat16)
out = np.empty_like(xb)
tg.silu_backward(dyb, xb, out=out)
print("bf16 result row 0:", out[0])

# Broadcasting and strided views: a per-column gradient against a transposed input.
print("broadcast + transposed:", tg.silu_backward(np.float32(2.0) * np.ones(4, np.float32), x.T[:, :4]).shape)

# Errors carry the aclnn message and status code.
try:
    tg.silu_backward(np.ones((2, 5), np.float32), np.ones((2, 4), np.float32))
except ValueError as e:
    print(f"ValueError (code {e.code}): {e}")

print(f"ran on {tg.get_num_threads()} threads at ISA level {tg.active_isa()}")
