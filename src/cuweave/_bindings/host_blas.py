"""The CPU's optimized BLAS and LAPACK (the ones SciPy is built with), called through ctypes.

SciPy exports its Fortran BLAS/LAPACK routines as C function pointers
(``scipy.linalg.cython_blas`` / ``cython_lapack``, ``__pyx_capi__``); this module looks them
up once and declares them with ``ctypes`` (every argument a pointer, Fortran's convention).
A ctypes call releases the GIL, so independent calls (the matrices of a batch) run in parallel
threads. Integers are 32-bit (SciPy's LP64 interface).

Examples
--------
>>> import ctypes, numpy as np
>>> a = np.asfortranarray([[4.0, 1.0], [1.0, 3.0]]); info = ctypes.c_int()
>>> call("dpotrf", b"L", 2, (a.ctypes.data,), 2, info)
>>> info.value, float(a[0, 0])
(0, 2.0)
"""

from __future__ import annotations

import ctypes
import threading

__all__ = ["routine", "call", "NARGS"]

#: routine (without its type letter) -> number of arguments (all pointers)
NARGS = {"gemm": 13, "symm": 12, "hemm": 12, "trmm": 11, "getrf": 6, "getrs": 9, "potrf": 5,
         "potrs": 8, "trsm": 11, "gesv": 8, "posv": 8}
_LAPACK = ("getrf", "getrs", "potrf", "potrs", "gesv", "posv")

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]

_lock = threading.Lock()
_routines: dict = {}


def routine(name: str):
    """The Fortran routine ``name`` (``"dgemm"``, ``"zpotrf"``...) as a ctypes function taking
    :data:`NARGS` pointers."""
    fn = _routines.get(name)
    if fn is not None:
        return fn
    with _lock:
        base = name[1:]
        if base in _LAPACK:
            from scipy.linalg import cython_lapack as mod
        else:
            from scipy.linalg import cython_blas as mod
        capsule = mod.__pyx_capi__[name]
        ptr = _api.PyCapsule_GetPointer(capsule, _api.PyCapsule_GetName(capsule))
        fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * NARGS[base]))(ptr)
        _routines[name] = fn
    return fn


def call(name: str, *values) -> None:
    """Call Fortran routine ``name``: ``bytes`` arguments are passed as a ``char``, ``int`` as a
    32-bit ``int`` (both by address), ctypes objects by address and ``(ptr,)`` as the raw
    address ``ptr`` (arrays)."""
    out, keep = [], []
    for v in values:
        if isinstance(v, tuple):
            out.append(v[0])
            continue
        if isinstance(v, bytes):
            v = ctypes.c_char(v)
        elif isinstance(v, int):
            v = ctypes.c_int(v)
        keep.append(v)
        out.append(ctypes.addressof(v))
    routine(name)(*out)
