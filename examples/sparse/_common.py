"""Shared by the sparse examples: where they run and the test matrices they build."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def on_gpu() -> bool:
    """Whether cuDSS can run here (a usable GPU and libcudss); else the examples use the CPU."""
    from cuweave._internal import cuda

    if not cuda.is_available():
        return False
    try:
        from cuweave._bindings import cudss

        cudss.load()
        return True
    except Exception:
        return False


def poisson_2d(m: int) -> sp.csr_matrix:
    """The 5-point Laplacian on an m x m grid (SPD, m^2 unknowns), sorted CSR."""
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(m, m))
    i = sp.identity(m)
    a = (sp.kron(i, t) + sp.kron(t, i)).tocsr()
    a.sort_indices()
    return a


def residual(a, x, b) -> float:
    """||a x - b|| / ||b|| on the host."""
    x, b = np.asarray(x), np.asarray(b)
    return float(np.linalg.norm(a @ x - b) / np.linalg.norm(b))
