"""Many small GEMMs in one launch: each thread block multiplies its own pair of matrices.

``BATCH`` independent 16x16x16 float64 products ``C_i = A_i B_i`` with the opaque-tensor API:
block ``i`` copies ``A_i`` and ``B_i`` into shared memory with cuBLASDx's asynchronous 16-byte
copies, accumulates ``A_i B_i`` in registers and stores ``C_i`` from there. The operands are
declared 16-byte aligned (``MAX_ALIGNMENT``), which lets cuBLASDx use vector accesses; the
shared-memory buffer is allocated with that alignment.

    python examples/device/gemm_batched.py    (needs a GPU, numba-cuda, nvidia-libmathdx-cu13)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import MAX_ALIGNMENT
from cuweave.device.matmul import Matmul, clear, copy, copy_fragment, copy_wait, make_tensor

M = N = K = 16
BATCH = 10_000


def build():
    """The GEMM object, the batched kernel using it and its shared-memory bytes."""
    MM = Matmul(size=(M, N, K), precision=np.float64, data_type="real",
                arrangement=("row_major", "row_major", "row_major"), block_size=64,
                alignment=MAX_ALIGNMENT)
    la, lb = MM.suggest_layout_smem_a(), MM.suggest_layout_smem_b()
    lc = MM.suggest_layout_rmem_c()
    b_off = -(-la.cosize // 2) * 2                   # B starts 16-byte aligned (2 doubles)

    @cuda.jit
    def batched(a, b, c):
        g = cuda.blockIdx.x
        smem = cuda.shared.array(0, dtype=np.float64, alignment=16)
        sa = make_tensor(smem[:la.cosize], la)
        sb = make_tensor(smem[b_off:b_off + lb.cosize], lb)
        acc = make_tensor(cuda.local.array(lc.cosize, dtype=np.float64), lc)   # registers
        copy(make_tensor(a[g], MM.get_layout_gmem_a()), sa, alignment=16)
        copy(make_tensor(b[g], MM.get_layout_gmem_b()), sb, alignment=16)
        clear(acc)
        copy_wait()                                  # the copies landed; the block synced
        MM.execute(sa, sb, acc)                      # acc += A B
        copy_fragment(acc, make_tensor(c[g], MM.get_layout_gmem_c()))

    return MM, batched, (b_off + lb.cosize) * 8


def main() -> float:
    MM, batched, smem = build()
    rng = np.random.default_rng(1)
    a = rng.standard_normal((BATCH, M, K))
    b = rng.standard_normal((BATCH, K, N))
    c = cuda.device_array((BATCH, M, N), np.float64)
    batched[BATCH, MM.block_dim, 0, smem](cuda.to_device(a), cuda.to_device(b), c)
    ref = a @ b
    err = float(np.linalg.norm(c.copy_to_host() - ref) / np.linalg.norm(ref))
    print(f"{BATCH} GEMMs {M}x{N}x{K} fp64, one per block: relative L2 error = {err:.2e}")
    assert err < 1e-12
    return err


if __name__ == "__main__":
    main()
