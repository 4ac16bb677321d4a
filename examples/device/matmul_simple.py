"""Hello world for device GEMMs: one thread block computes ``C = alpha A B + beta C``.

The operands are staged in shared memory in cuBLASDx's layout (``MM.arrangement`` with
``MM.leading_dimension``), ``MM.execute`` runs the block GEMM, and C is written back.

    python examples/device/matmul_simple.py    (needs a GPU, numba-cuda, nvidia-libmathdx-cu13)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device.matmul import Matmul

M, N, K = 32, 16, 64


def build():
    """The GEMM object and the kernel using it."""
    MM = Matmul(size=(M, N, K), precision=np.float32, data_type="real",
                arrangement=("row_major", "col_major", "col_major"), block_size=128)
    lda, ldb, ldc = MM.leading_dimension

    @cuda.jit
    def gemm(a, b, c, alpha, beta, out):
        smem = cuda.shared.array(0, dtype=np.float32)
        sa = smem[:MM.a_size]
        sb = smem[MM.a_size:MM.a_size + MM.b_size]
        sc = smem[MM.a_size + MM.b_size:MM.a_size + MM.b_size + MM.c_size]
        t = cuda.threadIdx.x
        for idx in range(t, M * K, MM.block_size):      # A row-major: A[i, j] at i*lda + j
            sa[(idx // K) * lda + idx % K] = a[idx // K, idx % K]
        for idx in range(t, K * N, MM.block_size):      # B column-major: B[i, j] at i + j*ldb
            sb[idx % K + (idx // K) * ldb] = b[idx % K, idx // K]
        for idx in range(t, M * N, MM.block_size):      # C column-major
            sc[idx % M + (idx // M) * ldc] = c[idx % M, idx // M]
        cuda.syncthreads()
        MM.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        for idx in range(t, M * N, MM.block_size):
            out[idx % M, idx // M] = sc[idx % M + (idx // M) * ldc]

    return MM, gemm


def main() -> float:
    MM, gemm = build()
    print(MM, "shared memory", MM.get_shared_storage_size(), "B")
    rng = np.random.default_rng(0)
    a, b, c = (rng.uniform(-1, 1, s).astype(np.float32) for s in (MM.a_dim, MM.b_dim, MM.c_dim))
    out = cuda.device_array(MM.c_dim, np.float32)
    gemm[1, MM.block_dim, 0, MM.get_shared_storage_size()](
        cuda.to_device(a), cuda.to_device(b), cuda.to_device(c), 2.0, 0.5, out)
    ref = 2.0 * a.astype(np.float64) @ b + 0.5 * c
    err = float(np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref))
    print(f"{M}x{N}x{K} fp32 GEMM in one block: relative L2 error vs NumPy = {err:.2e}")
    assert err < 1e-5
    return err


if __name__ == "__main__":
    main()
