"""ctypes declarations of the cuSOLVER-Dn functions ``cuweave.linalg`` uses (CUDA 13 headers).

Nothing is loaded at import time: the first :func:`function` call loads ``libcusolver``
(the ``nvidia-cusolver`` wheel, pip extra ``cusolver``) through
:func:`cuweave._bindings._loader.load_library` and declares every function once.
:func:`call` raises :class:`CusolverError` for any status other than
``CUSOLVER_STATUS_SUCCESS``. The 64-bit generic API (``cusolverDnX*``) serves single
systems; ``cusolverDn<t>potrfBatched`` batched Cholesky factorizations.
"""

from __future__ import annotations

import ctypes
import threading

from .._internal.errors import LibraryError
from ._loader import load_library

__all__ = ["CusolverError", "function", "call", "create", "destroy", "set_stream",
           "create_params", "destroy_params", "get_version"]


class CusolverError(LibraryError):
    """A cuSOLVER call returned a status other than CUSOLVER_STATUS_SUCCESS."""

    library = "cuSOLVER"
    _names = {
        0: "CUSOLVER_STATUS_SUCCESS",
        1: "CUSOLVER_STATUS_NOT_INITIALIZED",
        2: "CUSOLVER_STATUS_ALLOC_FAILED",
        3: "CUSOLVER_STATUS_INVALID_VALUE",
        4: "CUSOLVER_STATUS_ARCH_MISMATCH",
        5: "CUSOLVER_STATUS_MAPPING_ERROR",
        6: "CUSOLVER_STATUS_EXECUTION_FAILED",
        7: "CUSOLVER_STATUS_INTERNAL_ERROR",
        8: "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED",
        9: "CUSOLVER_STATUS_NOT_SUPPORTED",
        10: "CUSOLVER_STATUS_ZERO_PIVOT",
        11: "CUSOLVER_STATUS_INVALID_LICENSE",
        31: "CUSOLVER_STATUS_INVALID_WORKSPACE",
    }
    _hints = {
        "CUSOLVER_STATUS_NOT_INITIALIZED": "the CUDA driver or context is not usable; check "
        "`python -m cuweave info`",
        "CUSOLVER_STATUS_ALLOC_FAILED": "the GPU is out of memory; free memory and retry",
        "CUSOLVER_STATUS_INVALID_VALUE": "a size or leading dimension is out of range (a cuweave "
        "bug if the call came from a validated plan: please report)",
        "CUSOLVER_STATUS_EXECUTION_FAILED": "the GPU kernel failed to launch or run",
    }


_P = ctypes.c_void_p
_I = ctypes.c_int
_I64 = ctypes.c_int64

#: C name -> argtypes (the handle first where there is one)
_SIGNATURES: dict[str, list] = {
    "cusolverDnCreate": [_P],
    "cusolverDnDestroy": [_P],
    "cusolverDnSetStream": [_P, _P],
    "cusolverDnCreateParams": [_P],
    "cusolverDnDestroyParams": [_P],
    "cusolverGetVersion": [_P],
    "cusolverDnXgetrf_bufferSize": [_P, _P, _I64, _I64, _I, _P, _I64, _I, _P, _P],
    "cusolverDnXgetrf": [_P, _P, _I64, _I64, _I, _P, _I64, _P, _I, _P, ctypes.c_size_t, _P,
                         ctypes.c_size_t, _P],
    "cusolverDnXgetrs": [_P, _P, _I, _I64, _I64, _I, _P, _I64, _P, _I, _P, _I64, _P],
    "cusolverDnXpotrf_bufferSize": [_P, _P, _I, _I64, _I, _P, _I64, _I, _P, _P],
    "cusolverDnXpotrf": [_P, _P, _I, _I64, _I, _P, _I64, _I, _P, ctypes.c_size_t, _P,
                         ctypes.c_size_t, _P],
    "cusolverDnXpotrs": [_P, _P, _I, _I64, _I64, _I, _P, _I64, _I, _P, _I64, _P],
}
for _t in "SDCZ":
    _SIGNATURES[f"cusolverDn{_t}potrfBatched"] = [_P, _I, _I, _P, _I, _P, _I]

_lock = threading.Lock()
_declared: dict[str, object] = {}


def function(name: str):
    """The declared C function ``name`` of libcusolver (loaded and declared on first use)."""
    fn = _declared.get(name)
    if fn is not None:
        return fn
    with _lock:
        if not _declared:
            lib = load_library("cusolver")
            for cname, argtypes in _SIGNATURES.items():
                f = getattr(lib, cname)
                f.argtypes = argtypes
                f.restype = ctypes.c_int
                _declared[cname] = f
    return _declared[name]


def call(name: str, *args) -> None:
    """Call ``name``; a status other than success raises :class:`CusolverError`."""
    status = function(name)(*args)
    if status:
        raise CusolverError(status, name)


def create() -> int:
    h = ctypes.c_void_p()
    call("cusolverDnCreate", ctypes.byref(h))
    return int(h.value)


def destroy(handle: int) -> None:
    call("cusolverDnDestroy", handle)


def set_stream(handle: int, stream: int) -> None:
    call("cusolverDnSetStream", handle, stream)


def create_params() -> int:
    h = ctypes.c_void_p()
    call("cusolverDnCreateParams", ctypes.byref(h))
    return int(h.value)


def destroy_params(params: int) -> None:
    call("cusolverDnDestroyParams", params)


def get_version() -> int:
    v = ctypes.c_int()
    call("cusolverGetVersion", ctypes.byref(v))
    return int(v.value)
