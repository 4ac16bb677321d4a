"""Many small GEMMs in one launch: each thread block multiplies its own pair of matrices.

``BATCH`` independent 16x16x16 float64 products ``C_i = A_i B_i``; block ``i`` stages
``A_i`` and ``B_i`` in shared memory, runs ``MM.execute`` and stores ``C_i``.

    python examples/device/gemm_batched.py    (needs a GPU, numba-cuda, nvidia-libmathdx-cu13)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device.matmul import Matmul

M = N = K = 16
BATCH = 10_000


def build():
    """The GEMM object and the batched kernel using it."""
    MM = Matmul(size=(M, N, K), precision=np.float64, data_type="real",
                arrangement=("row_major", "row_major", "row_major"), block_size=64)
    lda, ldb, ldc = MM.leading_dimension
    sa_n, sb_n = MM.a_size, MM.b_size

    @cuda.jit
    def batched(a, b, c):
        g = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=np.float64)
        sa, sb, sc = smem[:sa_n], smem[sa_n:sa_n + sb_n], smem[sa_n + sb_n:]
        for idx in range(cuda.threadIdx.x, M * K, MM.block_size):
            sa[(idx // K) * lda + idx % K] = a[g, idx // K, idx % K]
        for idx in range(cuda.threadIdx.x, K * N, MM.block_size):
            sb[(idx // N) * ldb + idx % N] = b[g, idx // N, idx % N]
        for idx in range(cuda.threadIdx.x, MM.c_size, MM.block_size):
            sc[idx] = 0.0                           # C = 1 * A B + 0 * C: C must be finite
        cuda.syncthreads()
        MM.execute(1.0, sa, sb, 0.0, sc)
        cuda.syncthreads()
        for idx in range(cuda.threadIdx.x, M * N, MM.block_size):
            c[g, idx // N, idx % N] = sc[(idx // N) * ldc + idx % N]

    return MM, batched


def main() -> float:
    MM, batched = build()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((BATCH, M, K))
    b = rng.standard_normal((BATCH, K, N))
    c = cuda.device_array((BATCH, M, N), np.float64)
    batched[BATCH, MM.block_dim, 0, MM.get_shared_storage_size()](
        cuda.to_device(a), cuda.to_device(b), c)
    ref = a @ b
    err = float(np.linalg.norm(c.copy_to_host() - ref) / np.linalg.norm(ref))
    print(f"{BATCH} GEMMs {M}x{N}x{K} fp64, one per block: relative L2 error = {err:.2e}")
    assert err < 1e-12
    return err


if __name__ == "__main__":
    main()
