"""A fused linear layer ``Y = relu(X @ W + bias)`` in one kernel: GEMM tiles plus epilogue.

Each block owns a ``TM x TN`` tile of ``Y``. It walks the inner dimension in ``TK`` steps,
staging the fp16 tiles of ``X`` and ``W`` in shared memory and accumulating into an fp32 tile
of ``C`` there (``MM.execute(1, A, B, 1, C)``); the bias and the ReLU are applied on the
shared-memory tile before the single store of ``Y`` -- no intermediate ever reaches global
memory.

    python examples/device/gemm_fused_bias_relu.py   (needs a GPU, numba-cuda, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device.matmul import Matmul, SharedStorageCalc

ROWS, IN, OUT = 256, 512, 256
TM, TN, TK = 64, 64, 32


def build():
    """The Matmul of one tile step and the fused kernel using it."""
    MM = Matmul(size=(TM, TN, TK), precision=(np.float16, np.float16, np.float32),
                data_type="real", arrangement=("row_major", "row_major", "row_major"),
                block_size=128)
    lda, ldb, ldc = MM.leading_dimension
    calc = SharedStorageCalc()
    calc.add(MM.alignment.a, 2, MM.a_size)
    calc.add(MM.alignment.b, 2, MM.b_size)
    b_off = (calc.get() - 2 * MM.b_size) // 2             # in fp16 elements
    calc.add(MM.alignment.c, 4, MM.c_size)
    c_off = (calc.get() - 4 * MM.c_size) // 4             # in fp32 elements
    nt = MM.block_size

    @cuda.jit
    def linear_relu(x, w, bias, y):
        r0, c0 = cuda.blockIdx.y * TM, cuda.blockIdx.x * TN
        t = cuda.threadIdx.x
        half = cuda.shared.array(0, dtype=np.float16)
        sa, sb = half[:MM.a_size], half[b_off:b_off + MM.b_size]
        sc = cuda.shared.array(0, dtype=np.float32)[c_off:c_off + MM.c_size]
        for idx in range(t, MM.c_size, nt):
            sc[idx] = 0.0
        for k0 in range(0, x.shape[1], TK):
            for idx in range(t, TM * TK, nt):
                i, j = idx // TK, idx % TK
                sa[i * lda + j] = x[r0 + i, k0 + j]
            for idx in range(t, TK * TN, nt):
                i, j = idx // TN, idx % TN
                sb[i * ldb + j] = w[k0 + i, c0 + j]
            cuda.syncthreads()
            MM.execute(1.0, sa, sb, 1.0, sc)
            cuda.syncthreads()
        for idx in range(t, TM * TN, nt):
            i, j = idx // TN, idx % TN
            v = sc[i * ldc + j] + bias[c0 + j]
            y[r0 + i, c0 + j] = v if v > 0 else 0.0

    return MM, linear_relu, calc.get()


def main() -> float:
    MM, kernel, smem = build()
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (ROWS, IN)).astype(np.float16)
    w = rng.uniform(-1, 1, (IN, OUT)).astype(np.float16)
    bias = rng.uniform(-1, 1, OUT).astype(np.float32)
    y = cuda.device_array((ROWS, OUT), np.float32)
    kernel[(OUT // TN, ROWS // TM), MM.block_dim, 0, smem](
        cuda.to_device(x), cuda.to_device(w), cuda.to_device(bias), y)
    ref = np.maximum(x.astype(np.float64) @ w + bias, 0)
    err = float(np.linalg.norm(y.copy_to_host() - ref) / np.linalg.norm(ref))
    print(f"relu(X @ W + b), X {ROWS}x{IN} fp16, W {IN}x{OUT} fp16: relative error {err:.2e}")
    assert err < 1e-3
    return err


if __name__ == "__main__":
    main()
