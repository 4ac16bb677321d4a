"""Newton's method for a nonlinear PDE, reusing the solver's plan across iterations.

Solves -Δu + u^3 = f on the unit square (Dirichlet zero boundary). Each Newton step solves
J(u) du = -F(u) with J = A + diag(3 u^2): the Jacobian's sparsity pattern never changes, only
its values. One DirectSolver is planned once (reordering + symbolic factorization); every step
gives the new Jacobian values with reset_operands(a=...), refactorizes and solves - the
symbolic phase is not repeated.

    python examples/sparse/newton_loop.py [grid size, default 256]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import on_gpu, poisson_2d

from cuweave.sparse.advanced import DirectSolver, DirectSolverMatrixType


def main(m: int = 256) -> float:
    h = 1.0 / (m + 1)
    lap = poisson_2d(m) / h**2
    xs = np.linspace(h, 1 - h, m)
    f = 100.0 * np.outer(np.sin(np.pi * xs), np.sin(2 * np.pi * xs)).ravel()
    u = np.zeros(m * m)
    # the Jacobian's pattern: the Laplacian's (its diagonal is present), values updated in place
    jac = lap.copy()
    diag_pos = np.flatnonzero(jac.indices == np.repeat(np.arange(m * m), np.diff(jac.indptr)))
    base_diag = lap.data[diag_pos].copy()

    def residual_of(u):
        return lap @ u + u**3 - f

    r = residual_of(u)
    options = {"sparse_system_type": DirectSolverMatrixType.SPD}  # J is SPD for this problem
    execution = None if on_gpu() else "cpu"
    t0 = time.perf_counter()
    with DirectSolver(jac, -r, options=options, execution=execution) as solver:
        space = solver.execution_space
        solver.plan()  # once: reordering and symbolic factorization
        for step in range(1, 11):
            jac.data[diag_pos] = base_diag + 3.0 * u**2
            solver.reset_operands(a=jac, b=-r)  # same pattern: the plan is kept
            solver.factorize()
            du = np.asarray(solver.solve())
            u += du
            r = residual_of(u)
            norm = np.linalg.norm(r) / np.linalg.norm(f)
            print(f"  step {step}: |F(u)| / |f| = {norm:.2e}")
            if norm < 1e-10:
                break
    print(f"Newton on a {m}x{m} grid ({space}): {step} steps, one plan, "
          f"{time.perf_counter() - t0:.2f} s")
    assert norm < 1e-10
    return norm


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 256)
