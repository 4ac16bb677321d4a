"""float64 references and error bounds of every engine's tests (one module; no sys.path edits).

Sections: data and errors shared by all; FFT references and bounds; matmul references and
bounds. Compare results against these by relative L2 error (:func:`rel_l2`).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

# ---- data and errors ----------------------------------------------------------------------------


def rng_array(shape, dtype, seed=0):
    """Fresh random data (never zeros) of ``dtype`` in NumPy."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def rel_l2(got, want) -> float:
    """Relative L2 error of ``got`` against ``want`` of the same shape (absolute when ``want``
    is all zeros)."""
    got = np.asarray(got, dtype=np.complex128)
    want = np.asarray(want, dtype=np.complex128)
    assert got.shape == want.shape, (got.shape, want.shape)
    den = np.linalg.norm(want.ravel())
    return float(np.linalg.norm((got - want).ravel()) / (den if den else 1.0))


def to_numpy(y):
    """A result of any package as a NumPy array (copied from the device where needed)."""
    mod = type(y).__module__.split(".")[0]
    if mod == "torch":
        return y.detach().cpu().numpy()
    if mod == "cupy":
        return y.get()
    return np.asarray(y)


# ---- FFT ----------------------------------------------------------------------------------------
#: relative L2 bound of one transform per point count doubling (see :func:`fft_tol`)
FFT_TOL = {"float32": 2e-6, "complex64": 2e-6, "float64": 1e-13, "complex128": 1e-13,
           "float16": 3e-3, "complex32": 3e-3}
REAL_OF = {"complex64": "float32", "complex128": "float64"}
COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def fft_tol(dtype: str, n: int) -> float:
    """Bound for an FFT of ``n`` points: grows like log2(n)."""
    return FFT_TOL[dtype] * max(1.0, np.log2(max(n, 2)))


def fft_reference(x, fft_type, direction, axes, norm=None, out_last=None):
    """float64/complex128 NumPy reference of cuweave's (unnormalized by default) transform."""
    x = np.asarray(x)
    xd = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)
    if norm is None:
        norm = "backward" if direction == "forward" else "forward"
    if fft_type == "C2C":
        fn = np.fft.fftn if direction == "forward" else np.fft.ifftn
        return fn(xd, axes=axes, norm=norm)
    if fft_type == "R2C":
        return np.fft.rfftn(xd, axes=axes, norm=norm)
    s = [x.shape[a] for a in axes]
    s[-1] = out_last
    return np.fft.irfftn(xd, s=s, axes=axes, norm=norm)


# ---- matmul -------------------------------------------------------------------------------------
#: relative L2 bound of a matmul result per dtype
MATMUL_TOL = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12,
              "complex64": 1e-5, "complex128": 1e-12}
_S = 0.7978845608028654  # sqrt(2 / pi)
_KC = 0.044715


def gelu(x):
    """cuBLASLt's tanh GELU; 0.5 * (1 + tanh(u)) == expit(2u) avoids 1 + tanh(u) cancelling."""
    return x * expit(2 * _S * (x + _KC * x**3))


def dgelu(x):
    """Derivative of :func:`gelu`."""
    u2 = 2 * _S * (x + _KC * x**3)
    sech2 = 4 * expit(u2) * expit(-u2)
    return expit(u2) + 0.5 * x * sech2 * _S * (1 + 3 * _KC * x**2)


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


def torch_activation(y, act):
    """torch's own ``act`` ("relu", "gelu": tanh approximation, as cuBLASLt's; None: identity) of
    the tensor ``y``, the reference for cuweave.torch's fused epilogs."""
    import torch

    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return torch.nn.functional.gelu(y, approximate="tanh")
    return y
