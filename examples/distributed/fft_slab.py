"""Distributed 3-D FFT of NumPy arrays on CPU ranks, uneven Slab.X split, checked against
NumPy's FFT of the gathered array.

    mpiexec -n 4 python examples/distributed/fft_slab.py
"""

import numpy as np
from mpi4py import MPI

import cuweave.distributed
from cuweave.distributed.distribution import Slab

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
cuweave.distributed.initialize(None, comm)  # None: a CPU-only rank

global_shape = (35, 32, 16)  # 35 rows do not split evenly: the first ranks get one more
rng = np.random.default_rng(42)  # the same global array on every rank, for the check
x = rng.standard_normal(global_shape) + 1j * rng.standard_normal(global_shape)
lo = sum(Slab.X.shape(r, global_shape)[0] for r in range(rank))
a = x[lo:lo + Slab.X.shape(rank, global_shape)[0]].copy()  # this rank's slab

# Forward transform; redistribute=False leaves the result on Slab.Y (one exchange fewer).
b = cuweave.distributed.fft.fft(a, distribution=Slab.X, options={"redistribute": False})
# Inverse from Slab.Y back to Slab.X (unnormalized, as cuFFT).
c = cuweave.distributed.fft.ifft(b, distribution=Slab.Y, options={"redistribute": False})

gathered = comm.gather(b, root=0)
error = np.abs(c / x.size - a).max()
errors = comm.gather(error, root=0)
if rank == 0:
    result = np.concatenate(gathered, axis=1)  # Slab.Y pieces side by side
    ref = np.fft.fftn(x)
    print(f"local shapes: input {a.shape}, forward result {b.shape}")
    print(f"max |fft - numpy| / max|numpy| = {np.abs(result - ref).max() / np.abs(ref).max():.2e}")
    print(f"round-trip error = {max(errors):.2e}")
    assert np.allclose(result, ref) and max(errors) < 1e-10
    print("OK")
