"""cuweave: NVIDIA's GPU math libraries for the arrays you already use.

cuBLASLt matrix products with explicit compute types and fused epilogs
(:mod:`cuweave.linalg.advanced`), cuFFT transforms with Python callbacks (:mod:`cuweave.fft`),
and FFTs callable inside Numba CUDA kernels (:mod:`cuweave.device`). NumPy, CuPy and PyTorch
arrays go in; results come back in the same package, on the caller's stream. Without a GPU the
same calls run on the CPU.

``import cuweave`` imports neither torch, CuPy, Numba nor CUDA: the engines load lazily.
"""

from __future__ import annotations

import importlib

from ._bindings.library_types import ComputeType, CudaDataType
from ._internal import errors
from ._internal.errors import (
    CublasLtError,
    CudaUnavailableError,
    CufftError,
    CuweaveError,
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
    LibraryNotFoundError,
    UnsupportedLayoutError,
)
from ._internal.memory import BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync, MemoryPointer
from ._internal.options import ExecutionCPU, ExecutionCUDA
from ._version import __version__

__all__ = [
    "__version__",
    "linalg",
    "fft",
    "tensor",
    "sparse",
    "device",
    "info",
    "is_available",
    "ComputeType",
    "CudaDataType",
    "BaseCUDAMemoryManager",
    "BaseCUDAMemoryManagerAsync",
    "MemoryPointer",
    "ExecutionCUDA",
    "ExecutionCPU",
    "errors",
    "CuweaveError",
    "InvalidOperandError",
    "InvalidOptionError",
    "UnsupportedLayoutError",
    "InvalidStateError",
    "LibraryNotFoundError",
    "CudaUnavailableError",
    "CublasLtError",
    "CufftError",
]

_SUBMODULES = ("linalg", "fft", "tensor", "device", "distributed", "torch", "sparse")


def __getattr__(name: str):
    if name in _SUBMODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module 'cuweave' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))


def is_available() -> bool:
    """Whether cuweave can run on a GPU here.

    Returns
    -------
    bool
        ``True`` when a CUDA device is usable and cuBLASLt and cuFFT can be loaded; without
        one every call runs on the CPU (``python -m cuweave info`` says why).
    """
    from . import _info

    return _info.is_available()


def info() -> dict:
    """A description of this machine as cuweave sees it (what ``python -m cuweave info`` prints).

    Returns
    -------
    dict
        JSON-able: ``cuda`` (usable, driver or the reason it is not), ``gpus``, ``libraries``
        (the CUDA libraries found, versions and paths), ``cpu`` (cores, NumPy's BLAS library
        and its threads, the CPU FFT library and its threads, whether the ``scipy.fft``
        backend serves NumPy arrays), ``packages`` and ``execution_spaces``.
    """
    from . import _info

    return _info.collect()
