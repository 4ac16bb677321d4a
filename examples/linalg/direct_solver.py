"""Dense linear systems with ``cuweave.linalg.direct_solver`` / ``DirectSolver``.

LU with partial pivoting (the default) or Cholesky (``factorization="Cholesky"``, symmetric or
Hermitian positive definite matrices), one system or a batch, a factorization reused for new
right-hand sides, and a singular matrix reported with the failing system. NumPy operands run
on the GPU when one is usable (cuSOLVER / cuBLAS, as nvmath-python), else on the CPU's LAPACK.
"""

import numpy as np

from cuweave.linalg import DirectSolver, FactorizationError, direct_solver


def check(what, got, want, bound=1e-9):
    err = float(np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want))
    print(f"{what}: relative error {err:.1e}")
    if not err < bound:
        raise SystemExit(f"{what}: relative error {err:.1e} exceeds {bound:.0e}")


def main():
    rng = np.random.default_rng(1)
    n = 300
    a = rng.standard_normal((n, n)) + np.sqrt(n) * np.eye(n)
    b = rng.standard_normal((n, 4))
    check("LU solve", direct_solver(a, b), np.linalg.solve(a, b))

    spd = a @ a.T + n * np.eye(n)
    check("Cholesky solve", direct_solver(spd, b, options={"factorization": "Cholesky"}),
          np.linalg.solve(spd, b))

    # 1,000 small systems at once
    batch = rng.standard_normal((1000, 16, 16)) + 16 * np.eye(16)
    rhs = rng.standard_normal((1000, 16))
    check("1000 batched 16x16 systems", direct_solver(batch, rhs),
          np.linalg.solve(batch, rhs[..., None])[..., 0])

    # one factorization, several right-hand sides
    with DirectSolver(a, b) as solver:
        solver.plan()
        solver.factorize()
        for _ in range(3):
            b_new = rng.standard_normal((n, 4))
            solver.reset_operands(b=b_new)
            check("reused factorization", solver.solve(), np.linalg.solve(a, b_new))

    # a singular system in a batch is named
    batch[7] = 0
    try:
        direct_solver(batch, rhs)
    except FactorizationError as e:
        print(f"caught: {e}")
        assert e.batch_indices == ((7,),) or e.batch_indices == (7,)
    else:
        raise SystemExit("a singular system was not reported")
    print("OK")


if __name__ == "__main__":
    main()
