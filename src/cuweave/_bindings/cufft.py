"""ctypes declarations of the cuFFT entry points cuweave uses (cuFFT 12, CUDA 13).

The library is loaded lazily on the first call through
:func:`cuweave._bindings._loader.load_library` and every function's ``argtypes``/``restype`` is
declared once. Each wrapper checks the returned ``cufftResult`` and raises
:class:`~cuweave._internal.errors.CufftError` (status name + hint) on failure.

Hot paths should not go through the checking wrappers: :func:`raw` returns the ctypes function
with its arguments declared (ints are converted on each call), and :func:`bare` the same entry
point with no ``argtypes`` at all, for callers that pass pre-built ctypes objects (e.g. a
``c_void_p`` whose ``.value`` they update) and only compare the status with ``0``.
"""

from __future__ import annotations

import ctypes
import threading
from enum import IntEnum

from .._internal.errors import CufftError
from ._loader import load_library, untyped

__all__ = [
    "CufftType",
    "Direction",
    "XtCallbackType",
    "WorkAreaPolicy",
    "check",
    "raw",
    "bare",
    "get_version",
    "create",
    "destroy",
    "make_plan_many64",
    "xt_make_plan_many",
    "set_stream",
    "set_auto_allocation",
    "get_size",
    "set_work_area",
    "xt_set_jit_callback",
    "xt_exec",
    "exec_c2c",
    "exec_r2c",
    "exec_c2r",
    "exec_z2z",
    "exec_d2z",
    "exec_z2d",
]


class CufftType(IntEnum):
    """``cufftType`` (``cufft.h``)."""

    R2C = 0x2A
    C2R = 0x2C
    C2C = 0x29
    D2Z = 0x6A
    Z2D = 0x6C
    Z2Z = 0x69


class Direction(IntEnum):
    """``CUFFT_FORWARD`` / ``CUFFT_INVERSE``."""

    FORWARD = -1
    INVERSE = 1


class XtCallbackType(IntEnum):
    """``cufftXtCallbackType`` (``cufftXt.h``)."""

    LD_COMPLEX = 0x0
    LD_COMPLEX_DOUBLE = 0x1
    LD_REAL = 0x2
    LD_REAL_DOUBLE = 0x3
    ST_COMPLEX = 0x4
    ST_COMPLEX_DOUBLE = 0x5
    ST_REAL = 0x6
    ST_REAL_DOUBLE = 0x7
    UNDEFINED = 0x8


class WorkAreaPolicy(IntEnum):
    """``cufftXtWorkAreaPolicy``."""

    MINIMAL = 0
    USER = 1
    PERFORMANCE = 2


_c = ctypes
_i64p = _c.POINTER(_c.c_longlong)
_sizep = _c.POINTER(_c.c_size_t)
_handle = _c.c_int

# name -> (argtypes); restype is always cufftResult (int)
_SIGNATURES: dict[str, tuple] = {
    "cufftGetVersion": (_c.POINTER(_c.c_int),),
    "cufftCreate": (_c.POINTER(_handle),),
    "cufftDestroy": (_handle,),
    "cufftMakePlanMany64": (
        _handle, _c.c_int, _i64p, _i64p, _c.c_longlong, _c.c_longlong,
        _i64p, _c.c_longlong, _c.c_longlong, _c.c_int, _c.c_longlong, _sizep,
    ),
    "cufftXtMakePlanMany": (
        _handle, _c.c_int, _i64p, _i64p, _c.c_longlong, _c.c_longlong, _c.c_int,
        _i64p, _c.c_longlong, _c.c_longlong, _c.c_int, _c.c_longlong, _sizep, _c.c_int,
    ),
    "cufftSetStream": (_handle, _c.c_void_p),
    "cufftSetAutoAllocation": (_handle, _c.c_int),
    "cufftGetSize": (_handle, _sizep),
    "cufftSetWorkArea": (_handle, _c.c_void_p),
    "cufftXtSetJITCallback": (
        _handle, _c.c_char_p, _c.c_void_p, _c.c_size_t, _c.c_int, _c.POINTER(_c.c_void_p),
    ),
    "cufftXtExec": (_handle, _c.c_void_p, _c.c_void_p, _c.c_int),
    "cufftExecC2C": (_handle, _c.c_void_p, _c.c_void_p, _c.c_int),
    "cufftExecZ2Z": (_handle, _c.c_void_p, _c.c_void_p, _c.c_int),
    "cufftExecR2C": (_handle, _c.c_void_p, _c.c_void_p),
    "cufftExecD2Z": (_handle, _c.c_void_p, _c.c_void_p),
    "cufftExecC2R": (_handle, _c.c_void_p, _c.c_void_p),
    "cufftExecZ2D": (_handle, _c.c_void_p, _c.c_void_p),
}

_lock = threading.Lock()
_funcs: dict[str, object] = {}
_bare: dict[str, object] = {}


def _declare() -> dict[str, object]:
    """Load libcufft and declare every signature (once per process)."""
    if _funcs:
        return _funcs
    with _lock:
        if _funcs:
            return _funcs
        lib = load_library("cufft")
        table, bare_fns = {}, {}
        for name, argtypes in _SIGNATURES.items():
            try:
                fn = getattr(lib, name)
            except AttributeError:  # an older cuFFT without this entry point
                continue
            fn.argtypes = list(argtypes)
            fn.restype = _c.c_int
            table[name] = fn
            bare_fns[name] = untyped(lib, name)  # see bare()
        _bare.update(bare_fns)
        _funcs.update(table)
    return _funcs


def raw(name: str):
    """The bare ctypes function ``name`` (declared); for pre-built hot-path calls."""
    funcs = _declare()
    try:
        return funcs[name]
    except KeyError:
        raise CufftError(14, name, f"{name} is not exported by this cuFFT; "
                         "cuweave needs cuFFT 12 (CUDA 13)") from None


def bare(name: str):
    """``name`` without ``argtypes`` (:func:`~cuweave._bindings._loader.untyped`): addresses
    must be ``ctypes.c_void_p`` objects built once and updated through ``.value``. Saves the
    per-call argument conversion of :func:`raw` on hot paths."""
    _declare()
    try:
        return _bare[name]
    except KeyError:
        raise CufftError(14, name, f"{name} is not exported by this cuFFT; "
                         "cuweave needs cuFFT 12 (CUDA 13)") from None


def check(status: int, function: str) -> None:
    """Raise :class:`CufftError` if ``status`` is not ``CUFFT_SUCCESS``."""
    if status:
        raise CufftError(status, function)


def _call(name: str, *args) -> None:
    check(raw(name)(*args), name)


def _i64_array(values) -> ctypes.Array | None:
    if values is None:
        return None
    values = list(values)
    return (ctypes.c_longlong * len(values))(*values)


def get_version() -> int:
    """``cufftGetVersion`` (e.g. ``12000`` for cuFFT 12.0)."""
    v = ctypes.c_int()
    _call("cufftGetVersion", ctypes.byref(v))
    return v.value


def create() -> int:
    """``cufftCreate``: a new (unplanned) handle."""
    h = _handle()
    _call("cufftCreate", ctypes.byref(h))
    return h.value


def destroy(handle: int) -> None:
    """``cufftDestroy``."""
    _call("cufftDestroy", handle)


def make_plan_many64(handle, rank, n, inembed, istride, idist, onembed, ostride, odist,
                     fft_type, batch) -> int:
    """``cufftMakePlanMany64``; returns the work-area size in bytes."""
    ws = ctypes.c_size_t()
    _call("cufftMakePlanMany64", handle, rank, _i64_array(n), _i64_array(inembed), istride,
          idist, _i64_array(onembed), ostride, odist, int(fft_type), batch, ctypes.byref(ws))
    return ws.value


def xt_make_plan_many(handle, rank, n, inembed, istride, idist, input_type, onembed, ostride,
                      odist, output_type, batch, execution_type) -> int:
    """``cufftXtMakePlanMany`` (any ``cudaDataType``, e.g. half precision); returns workspace."""
    ws = ctypes.c_size_t()
    _call("cufftXtMakePlanMany", handle, rank, _i64_array(n), _i64_array(inembed), istride,
          idist, int(input_type), _i64_array(onembed), ostride, odist, int(output_type),
          batch, ctypes.byref(ws), int(execution_type))
    return ws.value


def set_stream(handle: int, stream: int) -> None:
    """``cufftSetStream``."""
    _call("cufftSetStream", handle, stream or None)


def set_auto_allocation(handle: int, auto: bool) -> None:
    """``cufftSetAutoAllocation``."""
    _call("cufftSetAutoAllocation", handle, 1 if auto else 0)


def get_size(handle: int) -> int:
    """``cufftGetSize``: the work-area size of a made plan, in bytes."""
    ws = ctypes.c_size_t()
    _call("cufftGetSize", handle, ctypes.byref(ws))
    return ws.value


def set_work_area(handle: int, ptr: int) -> None:
    """``cufftSetWorkArea``."""
    _call("cufftSetWorkArea", handle, ptr or None)


def xt_set_jit_callback(handle: int, symbol: str | None, ltoir, size: int, cb_type,
                        caller_info: int | None):
    """``cufftXtSetJITCallback`` (CUDA 13 signature, with the callback's symbol name).

    ``ltoir`` is ``bytes`` or an address; ``symbol=None`` lets cuFFT look for its default
    (C++-mangled ``cufftJITCallback...``) name. Must be called after :func:`create` and before
    the plan is made. Returns the objects that must stay alive as long as the plan.
    """
    keep = []
    if isinstance(ltoir, (bytes, bytearray)):
        buf = ctypes.create_string_buffer(bytes(ltoir), len(ltoir))
        keep.append(buf)
        addr = ctypes.addressof(buf)
    else:
        addr = int(ltoir)
    info = (ctypes.c_void_p * 1)(caller_info or None)
    keep.append(info)
    name = symbol.encode() if symbol else None
    _call("cufftXtSetJITCallback", handle, name, addr, size, int(cb_type), info)
    return keep


def xt_exec(handle: int, idata: int, odata: int, direction: int) -> None:
    """``cufftXtExec`` (any plan type)."""
    _call("cufftXtExec", handle, idata, odata, direction)


def exec_c2c(handle, idata, odata, direction):
    """``cufftExecC2C``."""
    _call("cufftExecC2C", handle, idata, odata, direction)


def exec_z2z(handle, idata, odata, direction):
    """``cufftExecZ2Z``."""
    _call("cufftExecZ2Z", handle, idata, odata, direction)


def exec_r2c(handle, idata, odata):
    """``cufftExecR2C``."""
    _call("cufftExecR2C", handle, idata, odata)


def exec_d2z(handle, idata, odata):
    """``cufftExecD2Z``."""
    _call("cufftExecD2Z", handle, idata, odata)


def exec_c2r(handle, idata, odata):
    """``cufftExecC2R``."""
    _call("cufftExecC2R", handle, idata, odata)


def exec_z2d(handle, idata, odata):
    """``cufftExecZ2D``."""
    _call("cufftExecZ2D", handle, idata, odata)
