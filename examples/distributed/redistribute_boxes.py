"""Redistribute a matrix from column blocks to row blocks (custom boxes), then to Slab.Y.

    mpiexec -n 2 python examples/distributed/redistribute_boxes.py
"""

import numpy as np
from mpi4py import MPI

import cuweave.distributed
from cuweave.distributed.distribution import Box, Slab, redistribute

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
cuweave.distributed.initialize(None, comm)

n = 4 * nranks
full = np.arange(n * n, dtype=np.float64).reshape(n, n)
cols = Box((0, 4 * rank), (n, 4 * rank + 4))  # this rank's 4 columns
rows = Box((4 * rank, 0), (4 * rank + 4, n))  # this rank's 4 rows
a = full[:, 4 * rank:4 * rank + 4].copy()

b = redistribute(a, cols, rows)  # nvmath 0.x spelling: cuweave.distributed.reshape.reshape
c = redistribute(b, rows, Slab.Y)
assert np.array_equal(b, full[4 * rank:4 * rank + 4])
assert np.array_equal(c, a)
shapes = comm.gather((a.shape, b.shape, c.shape))  # one process prints: no interleaving
if rank == 0:
    for r, (sa, sb, sc) in enumerate(shapes):
        print(f"[{r}] column block {sa} -> row block {sb} -> Slab.Y {sc}")
    print("OK")
