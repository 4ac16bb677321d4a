"""Batched least squares inside one kernel: ``min ||A_i x_i - b_i||`` (``LeastSquaresSolver``).

cuSOLVERDx's ``gels`` factorizes each tall A (QR by Householder reflections) and overwrites the
right-hand side with the solution: B and X share one ``max(M, N) x K`` buffer per problem
(``bx_size``, ``bx_strides``). Here A comes in NumPy's C order and is transposed into
cuSOLVERDx's column-major layout while it is loaded.

    python examples/device/solver_least_squares.py  (needs a GPU, numba-cuda, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import LeastSquaresSolver

M, N, K, BATCH = 48, 16, 2, 4_096


def build():
    solver = LeastSquaresSolver((M, N, K), np.float32, "Block", batches_per_block="suggested")
    n_a, n_b, n_t = solver.a_size(), solver.bx_size(), solver.tau_size
    lda, ldb = solver.lda, solver.ldb
    bpb, nthreads, vt = solver.batches_per_block, solver.block_size, solver.value_type

    @cuda.jit
    def lstsq(a, b, x):
        sa = cuda.shared.array(n_a, dtype=vt)
        sb = cuda.shared.array(n_b, dtype=vt)
        tau = cuda.shared.array(n_t, dtype=vt)
        t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        first = cuda.blockIdx.x * bpb
        for i in range(t, bpb * M * N, nthreads):   # a[p, r, c] -> column-major A_p
            p, r, c = i // (M * N), (i // N) % M, i % N
            sa[p * lda * N + r + c * lda] = a[first + p, r, c]
        for i in range(t, bpb * M * K, nthreads):   # b[p, r, j] -> column-major B_p
            p, r, j = i // (M * K), (i // K) % M, i % K
            sb[p * ldb * K + r + j * ldb] = b[first + p, r, j]
        cuda.syncthreads()
        solver.solve(sa, tau, sb)
        cuda.syncthreads()
        for i in range(t, bpb * N * K, nthreads):   # the first N rows of the buffer are X
            p, r, j = i // (N * K), (i // K) % N, i % K
            x[first + p, r, j] = sb[p * ldb * K + r + j * ldb]

    return solver, lstsq


def main() -> float:
    solver, kernel = build()
    print(solver)
    batch = BATCH - BATCH % solver.batches_per_block
    rng = np.random.default_rng(2)
    a = rng.standard_normal((batch, M, N)).astype(np.float32)
    b = rng.standard_normal((batch, M, K)).astype(np.float32)
    x = cuda.device_array((batch, N, K), np.float32)
    kernel[batch // solver.batches_per_block, solver.block_dim](cuda.to_device(a),
                                                              cuda.to_device(b), x)
    got = x.copy_to_host()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = np.stack([np.linalg.lstsq(a64[p], b64[p], rcond=None)[0] for p in range(batch)])
    err = float(np.max(np.linalg.norm(got - ref, axis=(1, 2)) /
                       np.linalg.norm(ref, axis=(1, 2))))
    print(f"{batch} least squares {M}x{N} (K={K}) fp32: max relative error vs NumPy float64 "
          f"lstsq = {err:.2e}")
    assert err < 1e-4
    return err


if __name__ == "__main__":
    main()
