"""2-D Poisson equation -Δu = f on the unit square with a sparse direct solver.

The 5-point Laplacian is symmetric positive definite: telling the solver so
(``sparse_system_type=SPD``) lets it use a Cholesky factorization. With a GPU and cuDSS the
operands go to the GPU as CuPy arrays (cupyx CSR) when CuPy is installed, or stay SciPy/NumPy
(cuweave copies them); without one the same call runs on the CPU (PARDISO, CHOLMOD or SuperLU).

    python examples/sparse/poisson_2d.py [grid size, default 512]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import on_gpu, poisson_2d, residual

from cuweave.sparse.advanced import DirectSolverMatrixType, direct_solver


def main(m: int = 512) -> float:
    h = 1.0 / (m + 1)
    a = poisson_2d(m) / h**2
    xs = np.linspace(h, 1 - h, m)
    f = np.outer(np.sin(np.pi * xs), np.sin(np.pi * xs)).ravel()  # exact u = f / (2 pi^2)
    options = {"sparse_system_type": DirectSolverMatrixType.SPD}
    gpu = on_gpu()
    a_in, f_in = a, f
    if gpu:
        try:
            import cupy as cp
            import cupyx.scipy.sparse as csp

            a_in, f_in = csp.csr_matrix(a), cp.asarray(f)
        except ImportError:
            pass
    t = time.perf_counter()
    u = direct_solver(a_in, f_in, options=options, execution=None if gpu else "cpu")
    u = u.get() if hasattr(u, "get") else u
    elapsed = time.perf_counter() - t
    err = np.abs(u - f / (2 * np.pi**2)).max() / np.abs(f / (2 * np.pi**2)).max()
    res = residual(a, u, f)
    print(f"2-D Poisson {m}x{m} ({m * m} unknowns) on {'GPU' if gpu else 'CPU'}: "
          f"{elapsed * 1e3:.1f} ms, residual {res:.2e}, discretization error {err:.2e}")
    assert res < 1e-8 and err < 1e-2
    return res


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 512)
