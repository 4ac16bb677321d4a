"""A GEMM followed by FFTs in one kernel: ``F = fft(alpha A B + beta C, axis=1)``.

cuBLASDx leaves ``C`` (16 x 64, complex64, row-major) in shared memory; the same block then
runs 16 cuFFTDx FFTs of 64 points, one per row, and writes only the result. The GEMM is built
for the FFT's block shape (``block_dim=fft.block_dim``) so both share one launch.

    python examples/device/gemm_fft.py   (needs a GPU, numba-cuda, nvidia-mathdx, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import FFT
from cuweave.device.matmul import Matmul

M, N, K = 16, 64, 32


def build():
    """The FFT and GEMM objects, the fused kernel and its shared-memory bytes."""
    fft = FFT("c2c", size=N, precision=np.float32, direction="forward",
              elements_per_thread=8, ffts_per_block=M)
    MM = Matmul(size=(M, N, K), precision=np.float32, data_type="complex",
                arrangement=("row_major", "row_major", "row_major"), block_dim=fft.block_dim)
    lda, ldb, ldc = MM.leading_dimension
    a_n, b_n = MM.a_size, MM.b_size
    ept, stride, vt = fft.elements_per_thread, fft.stride, fft.value_type
    smem_bytes = max(MM.get_shared_storage_size(), fft.shared_memory_size)

    @cuda.jit
    def gemm_fft(a, b, c, alpha, beta, out):
        smem = cuda.shared.array(0, dtype=np.complex64)
        sa, sb, sc = smem[:a_n], smem[a_n:a_n + b_n], smem[a_n + b_n:]
        t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        nt = cuda.blockDim.x * cuda.blockDim.y
        for idx in range(t, M * K, nt):
            sa[(idx // K) * lda + idx % K] = a[idx // K, idx % K]
        for idx in range(t, K * N, nt):
            sb[(idx // N) * ldb + idx % N] = b[idx // N, idx % N]
        for idx in range(t, M * N, nt):
            sc[(idx // N) * ldc + idx % N] = c[idx // N, idx % N]
        cuda.syncthreads()
        MM.execute(alpha, sa, sb, beta, sc)
        cuda.syncthreads()
        td = cuda.local.array(fft.storage_size, dtype=vt)
        row = cuda.threadIdx.y                       # one FFT per row of C
        for i in range(ept):
            td[i] = sc[row * ldc + cuda.threadIdx.x + i * stride]
        cuda.syncthreads()                           # the FFT reuses the shared memory
        fft.execute(td, smem)
        for i in range(ept):
            out[row, cuda.threadIdx.x + i * stride] = td[i]

    return fft, MM, gemm_fft, smem_bytes


def main() -> float:
    fft, MM, gemm_fft, smem_bytes = build()
    rng = np.random.default_rng(3)

    def rand(shape):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)

    a, b, c = rand(MM.a_dim), rand(MM.b_dim), rand(MM.c_dim)
    out = cuda.device_array((M, N), np.complex64)
    alpha, beta = 2.0 + 0j, 3.0 + 0j
    gemm_fft[1, fft.block_dim, 0, smem_bytes](cuda.to_device(a), cuda.to_device(b),
                                             cuda.to_device(c), alpha, beta, out)
    ref = np.fft.fft(alpha * (a.astype(np.complex128) @ b) + beta * c, axis=1)
    err = float(np.linalg.norm(out.copy_to_host() - ref) / np.linalg.norm(ref))
    print(f"GEMM {M}x{N}x{K} complex64 + {M} FFTs of {N} in one kernel: error {err:.2e}")
    assert err < 1e-5
    return err


if __name__ == "__main__":
    main()
