"""LU factorization with partial pivoting and a solve inside one kernel (``LUPivotSolver``).

Every thread block factorizes ``P A = L U`` for its problems (cuSOLVERDx's
``getrf_partial_pivot``), then solves ``A x = b`` with the factors still in shared memory
(``getrs_partial_pivot``). ``x``, the pivots (1-based, LAPACK's convention) and ``info`` are
written back; with ``store_factors`` the packed L\\U too. The matrices stay in NumPy's C order:
the solver is told A is row-major, so each block's problems are copied as they are.

    python examples/device/solver_lu_pivot.py   (needs a GPU, numba-cuda, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import LUPivotSolver

N, BATCH = 64, 2_000


def build(n=N, precision=np.float64, *, batches_per_block=1, block_dim=None,
          solver_class=LUPivotSolver, store_factors=False):
    """The solver and the kernel ``lu_solve(a, b, x, ipiv, info, lu)``: ``a`` (problems * n *
    n, C order), ``b`` and ``x`` (problems * n), ``ipiv`` (problems * n), ``info`` (one per
    problem, padded to whole blocks); with ``store_factors`` the packed L\\U go to ``lu``
    (like ``a``; otherwise any array, untouched)."""
    knobs = {} if block_dim is None else {"block_dim": block_dim}
    solver = solver_class((n, n, 1), precision, "Block", arrangement=("row_major", "col_major"),
                          batches_per_block=batches_per_block, **knobs)
    n_a, n_b, n_p = solver.a_size(), solver.b_size(), solver.ipiv_size
    bpb, nthreads, vt = solver.batches_per_block, solver.block_size, solver.value_type

    @cuda.jit
    def lu_solve(a, b, x, ipiv, info, lu):
        sa = cuda.shared.array(n_a, dtype=vt)
        sb = cuda.shared.array(n_b, dtype=vt)
        sp = cuda.shared.array(n_p, dtype=np.int32)
        first = cuda.blockIdx.x * bpb
        count = min(bpb, b.size // n - first)
        t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        for i in range(t, count * n * n, nthreads):
            sa[i] = a[first * n * n + i]
        for i in range(t, count * n, nthreads):
            sb[i] = b[first * n + i]
        cuda.syncthreads()
        solver.factorize(sa, sp, info[first:])
        cuda.syncthreads()
        solver.solve(sa, sp, sb)
        cuda.syncthreads()
        for i in range(t, count * n, nthreads):
            x[first * n + i] = sb[i]
            ipiv[first * n + i] = sp[i]
        if store_factors:
            for i in range(t, count * n * n, nthreads):
                lu[first * n * n + i] = sa[i]

    return solver, lu_solve


def main() -> float:
    solver, kernel = build(store_factors=True)
    print(solver)
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (BATCH, N, N))
    b = rng.uniform(-1, 1, (BATCH, N))
    blocks = -(-BATCH // solver.batches_per_block)
    d_a, d_b = cuda.to_device(a.ravel()), cuda.to_device(b.ravel())
    d_x, d_lu = cuda.device_array(BATCH * N, np.float64), cuda.device_array(BATCH * N * N)
    d_ipiv = cuda.device_array(BATCH * N, np.int32)
    d_info = cuda.device_array(blocks * solver.batches_per_block, np.int32)
    kernel[blocks, solver.block_dim](d_a, d_b, d_x, d_ipiv, d_info, d_lu)
    x = d_x.copy_to_host().reshape(BATCH, N)
    lu = d_lu.copy_to_host().reshape(BATCH, N, N)
    ipiv = d_ipiv.copy_to_host().reshape(BATCH, N)
    info = d_info.copy_to_host()[:BATCH]
    # P A = L U with LAPACK's row interchanges, on a few problems
    for p in range(4):
        pa = a[p].copy()
        for i, j in enumerate(ipiv[p] - 1):
            pa[[i, j]] = pa[[j, i]]
        low, up = np.tril(lu[p], -1) + np.eye(N), np.triu(lu[p])
        assert np.linalg.norm(low @ up - pa) / np.linalg.norm(a[p]) < 1e-13
    ref = np.linalg.solve(a, b[..., None])[..., 0]
    err = float(np.max(np.linalg.norm(x - ref, axis=1) / np.linalg.norm(ref, axis=1)))
    print(f"{BATCH} LU solves {N}x{N} fp64 with partial pivoting: max relative error vs "
          f"NumPy = {err:.2e}, info all zero: {not info.any()}")
    assert err < 1e-9 and not info.any()
    return err


if __name__ == "__main__":
    main()
