"""``cuweave.distributed``: FFT, redistribution and matmul across processes (nvmath-python's
``nvmath.distributed``), on MPI through mpi4py.

Run a program under ``mpiexec -n P``; every process calls :func:`initialize` once, then the
same distributed calls with its own local arrays. Operands select the data plane: host arrays
(NumPy, CPU torch) run on CPU ranks with MPI all-to-all exchanges and cuweave's CPU FFT/GEMM
engines; GPU operands (CuPy arrays, CUDA torch tensors on the ``device_id`` given to
:func:`initialize`, one GPU per process) move between processes with NCCL grouped send/recv
and run on cuweave's cuFFT/cuBLASLt engines, on the package's current stream. Both planes share
one exchange planner.

``import cuweave.distributed`` needs no mpi4py; :func:`initialize` does (``cuweave[distributed]``).

Examples
--------
>>> import numpy as np  # doctest: +SKIP
>>> from mpi4py import MPI  # doctest: +SKIP
>>> import cuweave.distributed as dist  # doctest: +SKIP
>>> from cuweave.distributed.distribution import Slab  # doctest: +SKIP
>>> dist.initialize(None, MPI.COMM_WORLD)  # doctest: +SKIP
>>> rank = MPI.COMM_WORLD.Get_rank()  # doctest: +SKIP
>>> a = np.random.rand(*Slab.X.shape(rank, (64, 64, 64))) + 0j  # doctest: +SKIP
>>> b = dist.fft.fft(a, distribution=Slab.X)  # doctest: +SKIP
"""

from __future__ import annotations

import importlib

from .._internal.errors import NcclError
from ._errors import CollectiveError, NotSupportedError, UnsupportedMemorySpaceError
from ._runtime import (
    DistributedContext,
    MPIProcessGroup,
    ProcessGroup,
    finalize,
    get_context,
    initialize,
)
from ._symmetric import allocate_symmetric_memory, free_symmetric_memory

__all__ = [
    "initialize",
    "finalize",
    "get_context",
    "DistributedContext",
    "ProcessGroup",
    "MPIProcessGroup",
    "allocate_symmetric_memory",
    "free_symmetric_memory",
    "UnsupportedMemorySpaceError",
    "CollectiveError",
    "NotSupportedError",
    "NcclError",
    "distribution",
    "fft",
    "reshape",
    "linalg",
]

_SUBMODULES = ("distribution", "fft", "reshape", "linalg")


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'cuweave.distributed' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
