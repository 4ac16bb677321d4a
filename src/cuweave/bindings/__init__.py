"""nvmath-python's ``nvmath.bindings`` names that programs use: :mod:`.mathdx`, and the error
classes of :mod:`.cublasLt` and :mod:`.cufft` (cuweave's library errors).

Submodules load their library on first use, never on import. This package only serves
nvmath-python's public names: cuweave's own declarations of the libraries live in
``cuweave._bindings`` (cuBLASLt, cuFFT, NCCL, NVRTC) and, for libmathdx, in
``cuweave.device._blas_mathdx``."""

from __future__ import annotations

import importlib

__all__ = ["mathdx", "cublasLt", "cufft"]


def __getattr__(name):
    if name in __all__:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
