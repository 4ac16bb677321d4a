"""Distributed 3-D FFT of GPU arrays (CuPy, else CUDA torch), one GPU per process: NCCL moves
the slabs, cuFFT transforms them. Checked against NumPy's FFT of the gathered array.

    mpiexec -n 2 python examples/distributed/fft_gpu.py

Each process takes GPU ``rank % device count`` (several processes must not share a GPU: NCCL
refuses that).
"""

import numpy as np
from mpi4py import MPI

import cuweave.distributed
from cuweave.distributed.distribution import Slab

try:
    import cupy as xp

    ndev = xp.cuda.runtime.getDeviceCount()
    package = "cupy"
except Exception:  # no CuPy (or no GPU for it): CUDA torch
    import torch

    ndev, package = torch.cuda.device_count(), "torch"
if ndev == 0:
    raise SystemExit("this example needs a GPU (CuPy or torch with CUDA)")

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()
device = rank % ndev
cuweave.distributed.initialize(device, comm, backends=["nccl"])

global_shape = (65, 48, 32)  # 65 rows do not split evenly: the first ranks get one more
rng = np.random.default_rng(7)  # the same global array on every rank, for the check
x = (rng.standard_normal(global_shape) + 1j * rng.standard_normal(global_shape)).astype(
    np.complex64)
lo = sum(Slab.X.shape(r, global_shape)[0] for r in range(rank))
mine = x[lo:lo + Slab.X.shape(rank, global_shape)[0]]  # this rank's slab, on the host

if package == "cupy":
    with xp.cuda.Device(device):
        a = xp.asarray(mine)
    to_host = xp.asnumpy
else:
    a = torch.from_numpy(np.ascontiguousarray(mine)).to(f"cuda:{device}")
    to_host = lambda t: t.cpu().numpy()  # noqa: E731

# Forward to Slab.Y (one exchange), inverse back to Slab.X: results stay on this GPU.
b = cuweave.distributed.fft.fft(a, distribution=Slab.X, options={"redistribute": False})
c = cuweave.distributed.fft.ifft(b, distribution=Slab.Y, options={"redistribute": False})
assert type(b) is type(a) and type(c) is type(a)

gathered = comm.gather(to_host(b), root=0)
error = float(np.abs(to_host(c) / x.size - mine).max())
errors = comm.gather(error, root=0)
if rank == 0:
    result = np.concatenate(gathered, axis=1)  # Slab.Y pieces side by side
    ref = np.fft.fftn(x.astype(np.complex128))
    rel = np.abs(result - ref).max() / np.abs(ref).max()
    print(f"{nranks} processes, {package} on GPU(s) {sorted({r % ndev for r in range(nranks)})}")
    print(f"local shapes: input {a.shape}, forward result {b.shape}")
    print(f"max |fft - numpy| / max|numpy| = {rel:.2e}, round-trip error = {max(errors):.2e}")
    assert rel < 1e-5 and max(errors) < 1e-5
    print("OK")
cuweave.distributed.finalize()
