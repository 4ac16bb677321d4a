"""Shared helpers of the FFT tests: references in float64 and error bounds."""

from __future__ import annotations

import numpy as np

TOL = {"float32": 2e-6, "complex64": 2e-6, "float64": 1e-13, "complex128": 1e-13,
       "float16": 3e-3, "complex32": 3e-3}

REAL_OF = {"complex64": "float32", "complex128": "float64"}
COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}


def rng_array(shape, dtype, seed=0):
    """Fresh random data (never zeros) of ``dtype`` in NumPy."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def rel_l2(got, want) -> float:
    got = np.asarray(got, dtype=np.complex128)
    want = np.asarray(want, dtype=np.complex128)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.linalg.norm((got - want).ravel()) / max(np.linalg.norm(want.ravel()), 1e-300))


def tol(dtype: str, n: int) -> float:
    """Bound for an FFT of ``n`` points: grows like log2(n)."""
    return TOL[dtype] * max(1.0, np.log2(max(n, 2)))


def reference(x, fft_type, direction, axes, norm=None, out_last=None):
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


def to_numpy(y):
    mod = type(y).__module__.split(".")[0]
    if mod == "torch":
        return y.detach().cpu().numpy()
    if mod == "cupy":
        return y.get()
    return np.asarray(y)
