"""Load (prolog) and store (epilog) callbacks for cuFFT, as LTO-IR.

* :func:`compile_prolog` / :func:`compile_epilog` compile a Python function with numba-cuda
  (C ABI) under the symbol cuFFT looks for by default: the C++-mangled name of
  ``cufftJITCallbackLoad<T>`` / ``cufftJITCallbackStore<T>``.
* :func:`scale_callback` builds, with NVRTC, the store/load callback cuweave uses to fuse a
  ``norm=`` scaling into the transform (no second pass over memory).
* :func:`fold_scale` recompiles a numba-compiled epilog (or prolog) with the scaling folded in,
  when the user already occupies the callback slot.
"""

from __future__ import annotations

import threading

import numpy as np

from .._bindings.cufft import XtCallbackType
from .._internal.errors import InvalidOperandError, InvalidOptionError, LibraryNotFoundError

__all__ = ["compile_prolog", "compile_epilog", "LTOIR", "default_symbol", "callback_type",
           "scale_callback", "fold_scale", "CALLBACK_DTYPES"]

CALLBACK_DTYPES = ("float32", "float64", "complex64", "complex128")
# cuFFT's default callback names end in these (cufftJITCallbackStoreComplex, ...LoadReal, ...);
# with the C++ mangling of the element type they give the symbol cuFFT looks up by default
_SUFFIX = {"complex64": "Complex", "complex128": "DoubleComplex", "float32": "Real",
           "float64": "DoubleReal"}
_MANGLED = {"complex64": "6float2", "complex128": "7double2", "float32": "f", "float64": "d"}
_CTYPE = {"complex64": "float2", "complex128": "double2", "float32": "float",
          "float64": "double"}
_CB_TYPE = {
    ("prolog", "complex64"): XtCallbackType.LD_COMPLEX,
    ("prolog", "complex128"): XtCallbackType.LD_COMPLEX_DOUBLE,
    ("prolog", "float32"): XtCallbackType.LD_REAL,
    ("prolog", "float64"): XtCallbackType.LD_REAL_DOUBLE,
    ("epilog", "complex64"): XtCallbackType.ST_COMPLEX,
    ("epilog", "complex128"): XtCallbackType.ST_COMPLEX_DOUBLE,
    ("epilog", "float32"): XtCallbackType.ST_REAL,
    ("epilog", "float64"): XtCallbackType.ST_REAL_DOUBLE,
}


class LTOIR(bytes):
    """LTO-IR bytes that remember how they were compiled (so a scale can be folded in)."""

    source: tuple | None = None


def _check_dtype(dtype, name: str) -> str:
    key = getattr(dtype, "name", None) or str(dtype)
    if key not in CALLBACK_DTYPES:
        raise InvalidOperandError(f"{name} must be one of {list(CALLBACK_DTYPES)}, got {dtype!r}")
    return key


def default_symbol(kind: str, dtype: str) -> str:
    """cuFFT's default LTO callback symbol for ``kind`` ('prolog'/'epilog') and ``dtype``."""
    dtype = _check_dtype(dtype, "element_dtype")
    if kind == "prolog":
        name = f"cufftJITCallbackLoad{_SUFFIX[dtype]}"
        return f"_Z{len(name)}{name}PvyS_S_"
    name = f"cufftJITCallbackStore{_SUFFIX[dtype]}"
    return f"_Z{len(name)}{name}Pvy{_MANGLED[dtype]}S_S_"


def callback_type(kind: str, dtype: str) -> XtCallbackType:
    """The ``cufftXtCallbackType`` of a ``kind`` callback over elements of ``dtype``."""
    try:
        return _CB_TYPE[(kind, dtype)]
    except KeyError:
        raise InvalidOperandError(
            f"{kind} callbacks need an element dtype in {list(CALLBACK_DTYPES)}, got {dtype!r}"
        ) from None


def _cc_tuple(compute_capability) -> tuple[int, int]:
    if compute_capability is None:
        from .._internal import cuda

        cuda.require(0)
        return cuda.compute_capability(cuda.current_device() or 0)
    if isinstance(compute_capability, str) and compute_capability.isdigit():
        v = int(compute_capability)
        return (v // 10, v % 10)
    if isinstance(compute_capability, tuple | list) and len(compute_capability) == 2:
        return (int(compute_capability[0]), int(compute_capability[1]))
    raise InvalidOptionError(
        f"compute_capability must be a string such as '90' or a (major, minor) tuple, got "
        f"{compute_capability!r}")


def _numba():
    try:
        from numba import cuda, types
    except ImportError as e:
        raise LibraryNotFoundError("numba-cuda", "numba", str(e)) from e
    return cuda, types


def _signature(kind: str, element_dtype: str, user_info_dtype):
    """numba signature of a ``kind`` callback; the data pointer (and a ``user_info`` of one of
    :data:`CALLBACK_DTYPES`) are aligned global-memory pointers (vector loads and stores)."""
    _, types = _numba()
    from ._numba_callbacks import global_pointer

    elem = getattr(types, element_dtype)
    if isinstance(user_info_dtype, str):
        info_p = global_pointer(_check_dtype(user_info_dtype, "user_info_dtype"))
    elif isinstance(user_info_dtype, types.Type):
        info_p = types.CPointer(user_info_dtype)
    else:
        raise InvalidOptionError(
            f"user_info_dtype must be one of {list(CALLBACK_DTYPES)} or a numba type, got "
            f"{user_info_dtype!r}")
    data = global_pointer(element_dtype)
    if kind == "prolog":
        return elem(data, types.uint64, info_p, types.voidptr)
    return types.void(data, types.uint64, elem, info_p, types.voidptr)


_PHASES = {"Load": "prolog", "Store": "epilog"}


def _compile(kind, fn, element_dtype, user_info_dtype, compute_capability,
             output="ltoir", name=None, phase=None) -> LTOIR:
    """The callback as LTO-IR (``output="ptx"``: PTX text as bytes, to test its signature);
    ``name`` the symbol (default: the one cuFFT looks for), ``phase`` nvmath-python's
    ``'Load'``/``'Store'`` (a prolog or an epilog, whichever function compiles it)."""
    if phase is not None:
        if phase not in _PHASES:
            raise InvalidOptionError(f"phase must be 'Load' or 'Store', got {phase!r}")
        kind = _PHASES[phase]
    if output not in ("ltoir", "ptx"):
        raise InvalidOptionError(f"representation must be 'ltoir' or 'ptx', got {output!r}")
    if name is not None and not isinstance(name, str):
        raise InvalidOptionError(f"name must be a str (the callback's symbol) or None, got "
                                 f"{name!r}")
    cuda, _ = _numba()
    from ._numba_callbacks import compile_inlinable

    element_dtype = _check_dtype(element_dtype, "element_dtype")
    cc = _cc_tuple(compute_capability)
    sig = _signature(kind, element_dtype, user_info_dtype)
    symbol = name or default_symbol(kind, element_dtype)
    code = compile_inlinable(kind, fn, sig, element_dtype, symbol, cc, output)
    if code is None:  # numba's own C ABI wrapper: correct, but called out of line
        code, _ = cuda.compile(fn, sig, device=True, cc=cc, abi="c", output=output,
                               abi_info={"abi_name": symbol})
        if isinstance(code, str):
            code = code.encode()
    out = LTOIR(code)
    out.source = (kind, fn, element_dtype, user_info_dtype, cc)
    return out


def compile_prolog(prolog_fn, element_dtype, user_info_dtype, *, name=None, phase=None,
                   representation="ltoir", compute_capability=None):
    """Compile ``prolog_fn(data_in, offset, user_info, reserved) -> element`` to LTO-IR.

    Parameters
    ----------
    prolog_fn : callable
        Returns the element to load at flat ``offset`` of ``data_in`` (a typed pointer).
    element_dtype : str
        Element type of the FFT operand: 'float32', 'float64', 'complex64', 'complex128'.
    user_info_dtype : str or numba type
        Element type of the ``user_info`` pointer (the ``data`` of the DeviceCallable).
    name : str, optional
        The compiled function's symbol (default: the name cuFFT looks for; another name must
        be given to cuFFT as the callable's ``symbol``).
    phase : {'Load', 'Store'}, optional
        nvmath-python 1.0's argument: ``'Load'`` compiles a prolog (the default here),
        ``'Store'`` an epilog.
    representation : {'ltoir', 'ptx'}
        The code's form: LTO-IR for cuFFT (default), or PTX text to read.
    compute_capability : str or tuple, optional
        Target such as ``'90'``; default: the current device's.

    Returns
    -------
    bytes
        The LTO-IR (an :class:`LTOIR`), to pass as ``prolog={"ltoir": ..., "data": ptr}``.
    """
    return _compile("prolog", prolog_fn, element_dtype, user_info_dtype, compute_capability,
                    representation, name, phase)


def compile_epilog(epilog_fn, element_dtype, user_info_dtype, *, name=None, phase=None,
                   representation="ltoir", compute_capability=None):
    """Compile ``epilog_fn(data_out, offset, element, user_info, reserved)`` to LTO-IR.

    The function stores (a function of) ``element`` at flat ``offset`` of ``data_out``.

    Parameters
    ----------
    epilog_fn : callable
        Stores (a function of) ``element`` at flat ``offset`` of ``data_out``.
    element_dtype : str
        The result's element type: 'float32', 'float64', 'complex64', 'complex128'.
    user_info_dtype : str or numba type
        Element type of the ``user_info`` pointer.
    name, phase, representation, compute_capability
        As for :func:`compile_prolog` (``phase`` defaults to ``'Store'`` here).

    Returns
    -------
    bytes
        The LTO-IR (an :class:`LTOIR`), to pass as ``epilog={"ltoir": ..., "data": ptr}``.
    """
    return _compile("epilog", epilog_fn, element_dtype, user_info_dtype, compute_capability,
                    representation, name, phase)


def fold_scale(ltoir: LTOIR, scale: float) -> LTOIR:
    """Recompile a :func:`compile_epilog`/:func:`compile_prolog` result with ``*scale`` fused."""
    kind, fn, element_dtype, user_info_dtype, cc = ltoir.source
    cuda, _ = _numba()
    inner = cuda.jit(device=True)(fn)
    s = np.dtype(element_dtype).type(0).real.dtype.type(scale)
    if kind == "epilog":
        def folded(data_out, offset, element, user_info, reserved):
            inner(data_out, offset, element * s, user_info, reserved)
    else:
        def folded(data_in, offset, user_info, reserved):
            return inner(data_in, offset, user_info, reserved) * s
    return _compile(kind, folded, element_dtype, user_info_dtype, cc)


_scale_cache: dict[tuple, tuple[bytes, str]] = {}
_scale_lock = threading.Lock()


def _literal(scale: float, dtype: str) -> str:
    if dtype in ("complex64", "float32"):
        return float(np.float32(scale)).hex() + "f"
    return float(scale).hex()


def scale_callback(kind: str, dtype: str, scale: float, cc: tuple[int, int]) -> tuple[bytes, str]:
    """LTO-IR and symbol of a ``kind`` callback multiplying each element by ``scale``."""
    key = (kind, dtype, float(scale), tuple(cc))
    hit = _scale_cache.get(key)
    if hit is not None:
        return hit
    t, lit = _CTYPE[dtype], _literal(scale, dtype)
    mul = f"v.x *= {lit}; v.y *= {lit};" if dtype.startswith("complex") else f"v *= {lit};"
    # C++ linkage with cuFFT's exact parameter types: the mangled name is cuFFT's default
    if kind == "epilog":
        name = f"cufftJITCallbackStore{_SUFFIX[dtype]}"
        src = (f"__device__ void {name}(void* p, unsigned long long o, {t} v, void* info, "
               f"void* smem) {{ {mul} (({t}*)p)[o] = v; }}\n")
    else:
        name = f"cufftJITCallbackLoad{_SUFFIX[dtype]}"
        src = (f"__device__ {t} {name}(void* p, unsigned long long o, void* info, "
               f"void* smem) {{ {t} v = (({t}*)p)[o]; {mul} return v; }}\n")
    sym = default_symbol(kind, dtype)
    code = _nvrtc_ltoir(src, cc)
    with _scale_lock:
        _scale_cache[key] = (code, sym)
    return code, sym


def _nvrtc_ltoir(src: str, cc: tuple[int, int]) -> bytes:
    from .._bindings.nvrtc import compile_ltoir

    opts = [f"-arch=compute_{cc[0]}{cc[1]}".encode(), b"-dlto", b"-rdc=true"]
    ok, log, code = compile_ltoir(src, "cuweave_fft_cb.cu", opts)
    if not ok:
        raise InvalidOptionError(f"callback source must compile, got: {log}")
    return code
