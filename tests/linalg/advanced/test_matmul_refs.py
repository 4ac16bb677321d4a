"""float64 references for the advanced-matmul tests (helpers; imported by test_matmul_*)."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

S = 0.7978845608028654  # sqrt(2 / pi)
KC = 0.044715


def gelu(x):
    """cuBLASLt's tanh GELU; 0.5 * (1 + tanh(u)) == expit(2u) avoids 1 + tanh(u) cancelling."""
    return x * expit(2 * S * (x + KC * x**3))


def dgelu(x):
    """Derivative of :func:`gelu`."""
    u2 = 2 * S * (x + KC * x**3)
    sech2 = 4 * expit(u2) * expit(-u2)
    return expit(u2) + 0.5 * x * sech2 * S * (1 + 3 * KC * x**2)


def bias_term(bias, m, n):
    """Bias broadcast to (..., M, N) in the user's frame (along M or along N)."""
    b = np.asarray(bias, np.float64)
    if b.ndim == 1:
        return b[:, None] if b.shape[0] == m else b[None, :]
    return b


def forward(a, b, *, alpha=1.0, c=None, beta=0.0, bias=None, act=None):
    """(pre-activation z, result) of epilog(alpha a@b + beta c + bias) in float64."""
    z = alpha * (np.asarray(a, np.complex128 if np.iscomplexobj(a) else np.float64)
                 @ np.asarray(b, np.float64 if not np.iscomplexobj(b) else np.complex128))
    if c is not None:
        z = z + beta * np.asarray(c, z.dtype)
    if bias is not None:
        z = z + bias_term(bias, z.shape[-2], z.shape[-1])
    if act == "relu":
        return z, np.maximum(z, 0)
    if act == "gelu":
        return z, gelu(z)
    return z, z


def rel_err(x, ref) -> float:
    """Relative L2 error (absolute when the reference is all zeros)."""
    x, ref = np.asarray(x, np.complex128), np.asarray(ref, np.complex128)
    den = np.linalg.norm(ref)
    return float(np.linalg.norm(x - ref) / (den if den else 1.0))


TOL = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12,
       "complex64": 1e-5, "complex128": 1e-12}
