"""A GEMM and a Cholesky solve fused in one kernel: batched ridge regressions.

For each problem ``i`` (one thread block), with samples ``X_i`` (M x N) and targets ``y_i``:

    w_i = (X_i^T X_i + lambda I)^-1 X_i^T y_i

The Gram matrix ``X^T X`` is a cuBLASDx GEMM (``Matmul``) computed in shared memory; the
diagonal gets ``lambda``; ``X^T y`` is a few dot products; then ``CholeskySolver`` factorizes
the Gram matrix and solves, in the same shared memory. Nothing but ``X``, ``y`` and ``w``
touches global memory. ``X`` is loaded once: row-major ``M x N`` is at the same time the
column-major ``N x M`` matrix ``X^T``, so it is both operands of the GEMM.

    python examples/device/solver_gemm_cholesky.py  (needs a GPU, numba-cuda, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import CholeskySolver, Matmul

M, N, BATCH, LAMBDA = 64, 16, 2_048, 0.1


def build():
    """The GEMM, the solver (same threads) and the kernel ``ridge(x, y, w, info)``."""
    mm = Matmul(size=(N, N, M), precision=np.float32, data_type="real",
                arrangement=("col_major", "row_major", "col_major"), block_size=64)
    solver = CholeskySolver((N, N, 1), np.float32, "Block", "lower", block_dim=mm.block_dim)
    assert tuple(mm.leading_dimension) == (N, N, N) and solver.lda == N
    nthreads, n_x, n_gram = mm.block_size, M * N, N * N

    @cuda.jit
    def ridge(x, y, w, info):
        sx = cuda.shared.array(n_x, dtype=np.float32)     # X row-major = X^T column-major
        gram = cuda.shared.array(n_gram, dtype=np.float32)
        rhs = cuda.shared.array(N, dtype=np.float32)
        p, t = cuda.blockIdx.x, cuda.threadIdx.x
        for i in range(t, M * N, nthreads):
            sx[i] = x[p, i // N, i % N]
        cuda.syncthreads()
        mm.execute(1.0, sx, sx, 0.0, gram)                 # gram = X^T X
        for j in range(t, N, nthreads):                    # rhs = X^T y
            acc = np.float32(0)
            for i in range(M):
                acc += sx[i * N + j] * y[p, i]
            rhs[j] = acc
        cuda.syncthreads()
        for j in range(t, N, nthreads):
            gram[j * N + j] += LAMBDA
        cuda.syncthreads()
        solver.factorize(gram, info[p:])
        cuda.syncthreads()
        solver.solve(gram, rhs)
        cuda.syncthreads()
        for j in range(t, N, nthreads):
            w[p, j] = rhs[j]

    return mm, solver, ridge


def main() -> float:
    mm, solver, kernel = build()
    print(mm)
    print(solver)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((BATCH, M, N)).astype(np.float32)
    y = rng.standard_normal((BATCH, M)).astype(np.float32)
    w = cuda.device_array((BATCH, N), np.float32)
    info = cuda.device_array(BATCH, np.int32)
    kernel[BATCH, mm.block_dim](cuda.to_device(x), cuda.to_device(y), w, info)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    gram = np.swapaxes(x64, 1, 2) @ x64 + LAMBDA * np.eye(N)
    ref = np.linalg.solve(gram, (np.swapaxes(x64, 1, 2) @ y64[..., None]))[..., 0]
    got = w.copy_to_host()
    err = float(np.max(np.linalg.norm(got - ref, axis=1) / np.linalg.norm(ref, axis=1)))
    print(f"{BATCH} ridge regressions ({M} samples, {N} features) fused GEMM + Cholesky: "
          f"max relative error vs NumPy float64 = {err:.2e}")
    assert err < 1e-4 and not info.copy_to_host().any()
    return err


if __name__ == "__main__":
    main()
