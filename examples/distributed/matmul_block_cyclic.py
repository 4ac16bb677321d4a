"""Distributed matmul with a bias+ReLU epilog: A and B block-cyclic on a process grid, the
result split on rows, checked against NumPy on the gathered matrices.

    mpiexec -n 4 python examples/distributed/matmul_block_cyclic.py
"""

import numpy as np
from mpi4py import MPI

import cuweave.distributed
from cuweave.distributed.distribution import BlockCyclic, ProcessGrid, Slab
from cuweave.distributed.linalg.advanced import MatmulEpilog, matmul

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
cuweave.distributed.initialize(None, comm)

m, n, k = 96, 64, 80
rng = np.random.default_rng(7)  # the same global matrices on every rank, for the check
A, B = rng.standard_normal((m, k)), rng.standard_normal((k, n))
bias = rng.standard_normal((m, 1))

grid = ProcessGrid(shape=(nranks, 1))
if nranks % 2 == 0 and nranks > 2:
    grid = ProcessGrid(shape=(2, nranks // 2), layout=ProcessGrid.Layout.COL_MAJOR)
blocked = BlockCyclic(grid, (16, 16))


def local(x, distribution):
    """This rank's block of the global ``x`` (same code for every distribution)."""
    mine = distribution.global_indices(rank, x.shape)
    return x[np.ix_(*mine)].copy()


d = matmul(local(A, blocked), local(B, blocked), distributions=[blocked, blocked, Slab.X],
           epilog=MatmulEpilog.RELU_BIAS, epilog_inputs={"bias": local(bias, Slab.X)})

pieces = comm.gather(d, root=0)
if rank == 0:
    result = np.concatenate(pieces, axis=0)
    ref = np.maximum(A @ B + bias, 0)
    print(f"local result {d.shape} ({'F' if d.flags.f_contiguous else 'C'}-ordered); "
          f"max error {np.abs(result - ref).max():.2e}")
    assert np.allclose(result, ref)
    print("OK")
