"""Batched Cholesky solves inside one kernel: ``A_i x_i = b_i`` for many small SPD matrices.

Each thread block loads ``batches_per_block`` problems into shared memory, factorizes them
(``CholeskySolver.factorize``, cuSOLVERDx's ``potrf``) and solves (``solve``, ``potrs``); the
factor never leaves shared memory, only ``x`` and ``info`` are written back. A symmetric matrix
is its own transpose, so the row-major (C-order) input is copied as it is into cuSOLVERDx's
column-major layout: with the default leading dimension the block's problems are one
contiguous span of global memory, loaded with coalesced reads.

The same kernel runs with ``nvmath.device.CholeskySolver`` (``solver_class=``), which
benchmarks/cases_device_solver.py uses.

    python examples/device/solver_cholesky_batched.py  (needs a GPU, numba-cuda, libmathdx)
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from cuweave.device import CholeskySolver

N, BATCH = 32, 10_000


def build(n=N, precision=np.float32, *, batches_per_block="suggested", block_dim=None,
          solver_class=CholeskySolver, store_factor=False):
    """The solver and the kernel ``cholesky_solve(a, b, x, info, factor)``: ``a``
    (problems * n * n), ``b`` and ``x`` (problems * n), ``info`` (one per problem, padded to
    whole blocks); with ``store_factor`` the Cholesky factors go to ``factor`` (like ``a``;
    otherwise any array, untouched)."""
    knobs = {} if block_dim is None else {"block_dim": block_dim}
    solver = solver_class((n, n, 1), precision, "Block", "lower",
                          batches_per_block=batches_per_block, **knobs)
    n_a, n_b = solver.a_size(), solver.b_size()
    bpb, nthreads, vt = solver.batches_per_block, solver.block_size, solver.value_type

    @cuda.jit
    def cholesky_solve(a, b, x, info, factor):
        sa = cuda.shared.array(n_a, dtype=vt)
        sb = cuda.shared.array(n_b, dtype=vt)
        first = cuda.blockIdx.x * bpb
        count = min(bpb, b.size // n - first)   # the last block may hold fewer problems
        t = cuda.threadIdx.x + cuda.threadIdx.y * cuda.blockDim.x
        for i in range(t, count * n * n, nthreads):
            sa[i] = a[first * n * n + i]
        for i in range(t, count * n, nthreads):
            sb[i] = b[first * n + i]
        cuda.syncthreads()
        solver.factorize(sa, info[first:])
        cuda.syncthreads()
        solver.solve(sa, sb)
        cuda.syncthreads()
        for i in range(t, count * n, nthreads):
            x[first * n + i] = sb[i]
        if store_factor:
            for i in range(t, count * n * n, nthreads):
                factor[first * n * n + i] = sa[i]

    return solver, cholesky_solve


def spd_batch(batch, n, dtype, rng):
    """Well-conditioned symmetric positive-definite matrices ``M M^T / n + I``."""
    m = rng.uniform(-1, 1, (batch, n, n))
    return (m @ np.swapaxes(m, 1, 2) / n + np.eye(n)).astype(dtype)


def main() -> float:
    solver, kernel = build()
    print(solver)
    rng = np.random.default_rng(0)
    a = spd_batch(BATCH, N, np.float32, rng)
    b = rng.uniform(-1, 1, (BATCH, N)).astype(np.float32)
    blocks = -(-BATCH // solver.batches_per_block)
    d_a, d_b = cuda.to_device(a.ravel()), cuda.to_device(b.ravel())
    d_x = cuda.device_array(BATCH * N, np.float32)
    d_info = cuda.device_array(blocks * solver.batches_per_block, np.int32)
    kernel[blocks, solver.block_dim](d_a, d_b, d_x, d_info, d_a[:1])
    x = d_x.copy_to_host().reshape(BATCH, N)
    info = d_info.copy_to_host()[:BATCH]
    ref = np.linalg.solve(a.astype(np.float64), b.astype(np.float64)[..., None])[..., 0]
    err = float(np.max(np.linalg.norm(x - ref, axis=1) / np.linalg.norm(ref, axis=1)))
    print(f"{BATCH} Cholesky solves {N}x{N} fp32 ({solver.batches_per_block} per block): "
          f"max relative error vs NumPy float64 = {err:.2e}, info all zero: {not info.any()}")
    assert err < 1e-4 and not info.any()
    return err


if __name__ == "__main__":
    main()
