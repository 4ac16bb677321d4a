"""ctypes declarations of the cuBLAS functions ``cuweave.linalg`` uses (CUDA 13 headers).

Nothing is loaded at import time: the first :func:`function` call loads ``libcublas`` through
:func:`cuweave._bindings._loader.load_library` and declares every ``argtypes``/``restype`` once.
:func:`call` raises :class:`CublasError` (status name + hint) for any status other than
``CUBLAS_STATUS_SUCCESS``.

The BLAS-3 families (``gemm``, ``symm``, ``hemm``, ``trmm``, ``dgmm``, ``geam``, ``scal``,
batched LU and triangular solves) are declared for the four types ``S``, ``D``, ``C``, ``Z``:
:func:`typed` returns the member of a family for a dtype name. Scalars (alpha, beta) are
passed by pointer (``CUBLAS_POINTER_MODE_HOST``, the default, set explicitly on every handle).
"""

from __future__ import annotations

import ctypes
import threading
from enum import IntEnum

from .._internal.errors import LibraryError
from ._loader import load_library

__all__ = ["Operation", "FillMode", "SideMode", "DiagType", "PointerMode", "CublasError",
           "function", "call", "typed", "PREFIX", "create", "destroy", "set_stream",
           "get_version"]


class Operation(IntEnum):
    """``cublasOperation_t``."""

    N = 0
    T = 1
    C = 2


class FillMode(IntEnum):
    """``cublasFillMode_t``."""

    LOWER = 0
    UPPER = 1
    FULL = 2


class SideMode(IntEnum):
    """``cublasSideMode_t``."""

    LEFT = 0
    RIGHT = 1


class DiagType(IntEnum):
    """``cublasDiagType_t``."""

    NON_UNIT = 0
    UNIT = 1


class PointerMode(IntEnum):
    """``cublasPointerMode_t``."""

    HOST = 0
    DEVICE = 1


class CublasError(LibraryError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""

    library = "cuBLAS"
    _names = {
        0: "CUBLAS_STATUS_SUCCESS",
        1: "CUBLAS_STATUS_NOT_INITIALIZED",
        3: "CUBLAS_STATUS_ALLOC_FAILED",
        7: "CUBLAS_STATUS_INVALID_VALUE",
        8: "CUBLAS_STATUS_ARCH_MISMATCH",
        11: "CUBLAS_STATUS_MAPPING_ERROR",
        13: "CUBLAS_STATUS_EXECUTION_FAILED",
        14: "CUBLAS_STATUS_INTERNAL_ERROR",
        15: "CUBLAS_STATUS_NOT_SUPPORTED",
        16: "CUBLAS_STATUS_LICENSE_ERROR",
    }
    _hints = {
        "CUBLAS_STATUS_NOT_INITIALIZED": "the CUDA driver or context is not usable; check "
        "`python -m cuweave info`",
        "CUBLAS_STATUS_ALLOC_FAILED": "the GPU is out of memory; free memory and retry",
        "CUBLAS_STATUS_INVALID_VALUE": "a size, leading dimension or enum value is out of range "
        "for this routine (a cuweave bug if the call came from a validated plan: please report)",
        "CUBLAS_STATUS_EXECUTION_FAILED": "the GPU kernel failed to launch or run",
        "CUBLAS_STATUS_ARCH_MISMATCH": "this GPU does not support the routine",
    }


_P = ctypes.c_void_p
_I = ctypes.c_int
_LL = ctypes.c_longlong

#: dtype name -> cuBLAS type letter
PREFIX = {"float32": "S", "float64": "D", "complex64": "C", "complex128": "Z"}

# Families declared for every type letter ("{t}" is replaced); the arguments after the handle.
_FAMILIES = {
    "cublas{t}gemm_v2": [_I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I],
    "cublas{t}gemmStridedBatched": [_I, _I, _I, _I, _I, _P, _P, _I, _LL, _P, _I, _LL, _P, _P,
                                    _I, _LL, _I],
    "cublas{t}symm_v2": [_I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I],
    "cublas{t}trmm_v2": [_I, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _I],
    "cublas{t}dgmm": [_I, _I, _I, _P, _I, _P, _I, _P, _I],
    "cublas{t}geam": [_I, _I, _I, _I, _P, _P, _I, _P, _P, _I, _P, _I],
    "cublas{t}scal_v2": [_I, _P, _P, _I],
    "cublas{t}getrfBatched": [_I, _P, _I, _P, _P, _I],
    "cublas{t}getrsBatched": [_I, _I, _I, _P, _I, _P, _P, _I, _P, _I],
    "cublas{t}trsmBatched": [_I, _I, _I, _I, _I, _I, _P, _P, _I, _P, _I, _I],
}
_COMPLEX_FAMILIES = {
    "cublas{t}hemm_v2": [_I, _I, _I, _I, _P, _P, _I, _P, _I, _P, _P, _I],
}

#: C name -> argtypes (the handle first), every function this module declares
_SIGNATURES: dict[str, list] = {
    "cublasCreate_v2": [_P],
    "cublasDestroy_v2": [_P],
    "cublasSetStream_v2": [_P, _P],
    "cublasSetPointerMode_v2": [_P, _I],
    "cublasGetVersion_v2": [_P, _P],
}
for _name, _args in _FAMILIES.items():
    for _t in "SDCZ":
        _SIGNATURES[_name.format(t=_t)] = [_P, *_args]
for _name, _args in _COMPLEX_FAMILIES.items():
    for _t in "CZ":
        _SIGNATURES[_name.format(t=_t)] = [_P, *_args]

_lock = threading.Lock()
_declared: dict[str, object] = {}


def function(name: str):
    """The declared C function ``name`` of libcublas (loaded and declared on first use)."""
    fn = _declared.get(name)
    if fn is not None:
        return fn
    with _lock:
        if not _declared:
            lib = load_library("cublas")
            for cname, argtypes in _SIGNATURES.items():
                f = getattr(lib, cname)
                f.argtypes = argtypes
                f.restype = ctypes.c_int
                _declared[cname] = f
    return _declared[name]


def call(name: str, *args) -> None:
    """Call cuBLAS function ``name``; a status other than success raises :class:`CublasError`."""
    status = function(name)(*args)
    if status:
        raise CublasError(status, name)


def typed(family: str, dtype: str) -> str:
    """The C name of ``family`` (e.g. ``"cublas{t}gemm_v2"``) for dtype name ``dtype``."""
    return family.format(t=PREFIX[dtype])


def create() -> int:
    """A new cuBLAS handle on the current device, in host pointer mode."""
    h = ctypes.c_void_p()
    call("cublasCreate_v2", ctypes.byref(h))
    call("cublasSetPointerMode_v2", h, int(PointerMode.HOST))
    return int(h.value)


def destroy(handle: int) -> None:
    call("cublasDestroy_v2", handle)


def set_stream(handle: int, stream: int) -> None:
    call("cublasSetStream_v2", handle, stream)


def get_version(handle: int) -> int:
    v = ctypes.c_int()
    call("cublasGetVersion_v2", handle, ctypes.byref(v))
    return int(v.value)
