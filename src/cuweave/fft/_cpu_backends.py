"""Host FFT libraries behind :class:`~cuweave.fft._cpu.CpuPlan`: MKL's DFTI or SciPy's pocketfft.

MKL (the ``cpu-fft`` extra: ``pip install 'cuweave[cpu-fft]'``, x86-64) is called through
``libmkl_rt``'s DFTI interface with :mod:`ctypes`, as nvmath-python uses MKL on x86 hosts. Where
it is missing SciPy's pocketfft runs, as before. ``CUWEAVE_CPU_FFT`` picks by hand: ``mkl``
(an error where MKL cannot be loaded), ``pocketfft``, or ``auto`` (the default).

One committed DFTI descriptor serves one geometry: precision, domain, lengths, strides and
distances of both sides, batch count, scale (``norm`` is fused into the transform) and thread
limit. Descriptors are kept in a small LRU cache, so the function forms reuse them as scipy
reuses its plans. Threads: ``DFTI_THREAD_LIMIT`` on each descriptor, never a process-wide
setting (``mkl_set_num_threads`` and the OpenMP settings are left alone); MKL uses at most its
own maximum (``MKL_NUM_THREADS``, else the physical cores).

Layouts DFTI cannot express in one call (several batch dimensions that do not merge) run as a
short loop of calls over the outer batch dimensions; past :data:`MAX_CALLS` calls, and for
empty, unaligned or byte-swapped arrays, :meth:`MklPlan.run` answers ``None`` and pocketfft
runs instead: the result is the same either way.
"""

from __future__ import annotations

import ctypes
import math
import os
import threading
from collections import OrderedDict
from itertools import product

import numpy as np

from .._internal.errors import InvalidOptionError, LibraryError, LibraryNotFoundError
from .._internal.logging import get_logger
from ._options import FFTDirection

__all__ = ["MklPlan", "MklError", "mkl_library", "backend_name", "MAX_CALLS", "clear_cache"]

_log = get_logger("fft.cpu")

#: most DFTI calls one execution may take (outer batch dimensions looped over); beyond, pocketfft
MAX_CALLS = 64
#: committed descriptors kept (least recently used dropped first)
CACHE_SIZE = 32

# mkl_dfti.h: configuration parameters and values
_PRECISION = {True: 35, False: 36}  # single: DFTI_SINGLE, else DFTI_DOUBLE
_COMPLEX, _REAL = 32, 33
_FORWARD_SCALE, _BACKWARD_SCALE = 4, 5
_NUMBER_OF_TRANSFORMS = 7
_CONJUGATE_EVEN_STORAGE, _COMPLEX_COMPLEX = 10, 39
_PLACEMENT, _NOT_INPLACE = 11, 44
_THREAD_LIMIT = 27
_FWD_DISTANCE, _BWD_DISTANCE, _FWD_STRIDES, _BWD_STRIDES = 58, 59, 60, 61
_LONG_MAX = 2 ** (8 * ctypes.sizeof(ctypes.c_long) - 1) - 1


class MklError(LibraryError):
    """An MKL DFTI call returned a nonzero status (``status``; the text is MKL's own)."""

    library = "MKL DFTI"


# ---- the library --------------------------------------------------------------------------------
class _Dfti:
    """``libmkl_rt`` with the DFTI entry points typed (the variadic ones take ctypes values)."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)  # RTLD_LOCAL: MKL's FFTW and BLAS symbols stay private
        lib.DftiErrorMessage.restype = ctypes.c_char_p
        lib.DftiErrorMessage.argtypes = [ctypes.c_long]
        for name in ("DftiCreateDescriptor", "DftiSetValue", "DftiCommitDescriptor",
                     "DftiComputeForward", "DftiComputeBackward", "DftiFreeDescriptor"):
            getattr(lib, name).restype = ctypes.c_long
        self.lib, self.path = lib, path

    def check(self, status: int, function: str) -> None:
        if status:
            text = self.lib.DftiErrorMessage(status) or b""
            raise MklError(status, function, hint=text.decode(errors="replace").strip())


def _mkl_paths() -> list[str]:
    """Where ``libmkl_rt`` may be: the ``mkl`` wheel's own files (installed under the
    environment's ``lib``), then the system's loader path."""
    import importlib.metadata as md
    from ctypes.util import find_library

    paths = []
    try:
        for f in md.distribution("mkl").files or ():
            if f.name.startswith(("libmkl_rt.so", "mkl_rt")) and not f.name.endswith(".lib"):
                paths.append(str(f.locate()))
    except md.PackageNotFoundError:
        pass
    found = find_library("mkl_rt")
    if found:
        paths.append(found)
    return paths


_STATE: dict = {}
_STATE_LOCK = threading.Lock()


def _choice() -> str:
    choice = os.environ.get("CUWEAVE_CPU_FFT", "auto").strip().lower() or "auto"
    if choice not in ("auto", "mkl", "pocketfft"):
        raise InvalidOptionError(
            f"CUWEAVE_CPU_FFT must be 'auto', 'mkl' or 'pocketfft', got {choice!r}")
    return choice


def mkl_library() -> _Dfti | None:
    """MKL's DFTI, loaded on first use; ``None`` where it is missing or not wanted
    (``CUWEAVE_CPU_FFT=pocketfft``). ``CUWEAVE_CPU_FFT=mkl`` without MKL raises
    :class:`~cuweave._internal.errors.LibraryNotFoundError`."""
    if "lib" in _STATE:
        return _STATE["lib"]
    with _STATE_LOCK:
        if "lib" not in _STATE:
            choice, lib, errors = _choice(), None, []
            for path in _mkl_paths() if choice != "pocketfft" else ():
                try:
                    lib = _Dfti(path)
                    break
                except (OSError, AttributeError) as e:
                    errors.append(f"{path}: {e}")
            if lib is None and choice == "mkl":
                raise LibraryNotFoundError("MKL (libmkl_rt)", "cpu-fft", "; ".join(errors))
            if lib is not None:
                _log.debug("CPU FFTs run on MKL DFTI from %s", lib.path)
            _STATE["lib"] = lib
    return _STATE["lib"]


def backend_name() -> str:
    """``'mkl'`` or ``'pocketfft'``: what CPU FFTs run on in this process."""
    return "mkl" if mkl_library() is not None else "pocketfft"


# ---- descriptors --------------------------------------------------------------------------------
class _Descriptor:
    """A committed DFTI descriptor; one thread computes with it at a time (``lock``)."""

    __slots__ = ("dfti", "geo", "handle", "lock", "forward")

    def __init__(self, dfti: _Dfti, geo: tuple):
        single, real, lengths, fwd, bwd, howmany, threads, forward, scale = geo
        self.dfti, self.geo, self.forward, self.lock = dfti, geo, forward, threading.Lock()
        self.handle = ctypes.c_void_p()
        lib, L = dfti.lib, ctypes.c_long
        dims = (L * len(lengths))(*lengths) if len(lengths) > 1 else L(lengths[0])
        dfti.check(lib.DftiCreateDescriptor(ctypes.byref(self.handle), _PRECISION[single],
                                            _REAL if real else _COMPLEX, L(len(lengths)),
                                            dims), "DftiCreateDescriptor")
        h = self.handle
        settings = [(_PLACEMENT, L(_NOT_INPLACE)), (_THREAD_LIMIT, L(threads)),
                    (_FWD_STRIDES, (L * len(fwd[0]))(*fwd[0])),
                    (_BWD_STRIDES, (L * len(bwd[0]))(*bwd[0]))]
        if real:
            settings.append((_CONJUGATE_EVEN_STORAGE, L(_COMPLEX_COMPLEX)))
        if howmany > 1:
            settings += [(_NUMBER_OF_TRANSFORMS, L(howmany)), (_FWD_DISTANCE, L(fwd[1])),
                         (_BWD_DISTANCE, L(bwd[1]))]
        if scale != 1.0:
            settings.append((_FORWARD_SCALE if forward else _BACKWARD_SCALE,
                             ctypes.c_double(scale)))
        for param, value in settings:
            dfti.check(lib.DftiSetValue(h, param, value), "DftiSetValue")
        dfti.check(lib.DftiCommitDescriptor(h), "DftiCommitDescriptor")

    def compute(self, src: int, dst: int) -> None:
        lib = self.dfti.lib
        fn = lib.DftiComputeForward if self.forward else lib.DftiComputeBackward
        self.dfti.check(fn(self.handle, ctypes.c_void_p(src), ctypes.c_void_p(dst)),
                        fn.__name__)

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle:
            try:
                self.dfti.lib.DftiFreeDescriptor(ctypes.byref(handle))
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


_CACHE: OrderedDict = OrderedDict()
_CACHE_LOCK = threading.Lock()


def _descriptor(dfti: _Dfti, geo: tuple) -> _Descriptor | None:
    """The cached descriptor of ``geo`` (made and committed on a miss); ``None`` where MKL
    refuses the configuration (remembered, so pocketfft runs without asking again)."""
    with _CACHE_LOCK:
        if geo in _CACHE:
            _CACHE.move_to_end(geo)
            return _CACHE[geo]
    try:
        desc = _Descriptor(dfti, geo)
    except MklError as e:
        _log.info("MKL DFTI refused %r (%s); pocketfft runs it", geo, e)
        desc = None
    with _CACHE_LOCK:
        _CACHE[geo] = desc
        while len(_CACHE) > CACHE_SIZE:
            _CACHE.popitem(last=False)
    return desc


def clear_cache() -> None:
    """Free every cached descriptor."""
    with _CACHE_LOCK:
        _CACHE.clear()


# ---- geometry -----------------------------------------------------------------------------------
def _elem_strides(a: np.ndarray) -> list[int] | None:
    """Strides of ``a`` in elements (1 for length-1 dimensions); ``None`` where DFTI cannot
    take them (negative, zero, or not whole elements)."""
    out = []
    for n, s in zip(a.shape, a.strides):
        if n == 1:
            out.append(1)
        elif s <= 0 or s % a.itemsize:
            return None
        else:
            out.append(s // a.itemsize)
    return out


def _batches(dims, shape, s_in, s_out):
    """Batch dimensions ``[(count, in stride, out stride)]``, merged where both sides allow,
    largest count last."""
    merged: list[list[int]] = []
    for d in sorted(dims, key=lambda d: -s_out[d]):  # outermost first
        if merged and merged[-1][1] == s_in[d] * shape[d] and merged[-1][2] == s_out[d] * shape[d]:
            merged[-1] = [merged[-1][0] * shape[d], s_in[d], s_out[d]]
        else:
            merged.append([shape[d], s_in[d], s_out[d]])
    return sorted((tuple(b) for b in merged), key=lambda b: b[0])


class MklPlan:
    """One transform type over fixed axes, run with MKL's DFTI.

    Parameters
    ----------
    dfti : _Dfti
        The loaded library (:func:`mkl_library`).
    fft_type : {'C2C', 'R2C', 'C2R'}
    axes : tuple of int
        Transformed axes; the last one is halved by R2C and C2R.
    out_lengths : tuple of int
        Output lengths along ``axes`` (C2R's real lengths).
    workers : int
        Most threads one execution may use (``DFTI_THREAD_LIMIT``).
    """

    __slots__ = ("_dfti", "_type", "_axes", "_out_lengths", "_threads", "_last", "_split")

    def __init__(self, dfti: _Dfti, fft_type: str, axes, out_lengths, workers: int):
        self._dfti, self._type, self._axes = dfti, fft_type, tuple(axes)
        self._out_lengths, self._threads = tuple(out_lengths), int(workers)
        self._last: tuple = (None, None)  # (call key, (descriptor, offsets)): the hot path
        # DFTI's multidimensional C2R takes its input as Hermitian throughout; NumPy and
        # pocketfft run C2C over the leading axes, then C2R over the last one: so do we.
        self._split = None
        if fft_type == "C2R" and len(self._axes) > 1:
            self._split = (MklPlan(dfti, "C2C", self._axes[:-1], (), workers),
                           MklPlan(dfti, "C2R", self._axes[-1:], self._out_lengths[-1:],
                                   workers))

    def _out(self, x: np.ndarray) -> np.ndarray:
        shape = list(x.shape)
        if self._type == "C2C":
            return np.empty(shape, x.dtype)
        last = self._axes[-1]
        if self._type == "R2C":
            shape[last] = shape[last] // 2 + 1
            return np.empty(shape, np.result_type(x.dtype, np.complex64))
        for a, n in zip(self._axes, self._out_lengths):
            shape[a] = n
        return np.empty(shape, x.real.dtype)

    def _layout(self, x, out, forward: bool, scale: float):
        """``(descriptor, [(in offset, out offset) in bytes])`` for ``x`` -> ``out``; ``None``
        where pocketfft must run."""
        s_in, s_out = _elem_strides(x), _elem_strides(out)
        if s_in is None or s_out is None:
            return None
        axes = self._axes
        lengths = tuple((out if self._type == "C2R" else x).shape[a] for a in axes)
        batch = _batches([d for d in range(x.ndim) if d not in axes and x.shape[d] > 1],
                         x.shape, s_in, s_out)
        howmany, d_in, d_out = batch.pop() if batch else (1, 0, 0)
        calls = math.prod(b[0] for b in batch)
        if calls > MAX_CALLS or max(lengths + (howmany,)) > _LONG_MAX:
            return None
        side_in = ((0, *(s_in[a] for a in axes)), d_in)
        side_out = ((0, *(s_out[a] for a in axes)), d_out)
        fwd, bwd = (side_in, side_out) if forward else (side_out, side_in)
        geo = (x.dtype.char in "fF", self._type != "C2C", lengths, fwd, bwd, howmany,
               self._threads, forward, scale)
        desc = _descriptor(self._dfti, geo)
        if desc is None:
            return None
        offsets = [(sum(i * b[1] for i, b in zip(idx, batch)) * x.itemsize,
                    sum(i * b[2] for i, b in zip(idx, batch)) * out.itemsize)
                   for idx in product(*(range(b[0]) for b in batch))]
        return desc, offsets

    def run(self, x: np.ndarray, direction: FFTDirection, norm: str | None):
        """Transform the host array ``x`` (never modified) into a new C-ordered array, or
        answer ``None`` for a layout left to pocketfft."""
        if x.size == 0 or not x.flags.aligned or not x.dtype.isnative:
            return None
        forward = direction == FFTDirection.FORWARD
        n = math.prod(self._out_lengths if self._type == "C2R" else
                      (x.shape[a] for a in self._axes))
        scale = _scale(norm, forward, n)
        if self._split is None:
            return self._run(x, forward, scale)
        leading, last = self._split
        mid = leading._run(x, False, 1.0)
        return None if mid is None else last._run(mid, False, scale)

    def _run(self, x: np.ndarray, forward: bool, scale: float):
        out = self._out(x)
        key = (x.shape, x.strides, forward, scale)
        last_key, found = self._last
        if last_key != key:
            found = self._layout(x, out, forward, scale)
            if found is None:
                return None
            self._last = (key, found)
        desc, offsets = found
        src, dst = x.ctypes.data, out.ctypes.data
        if desc.lock.acquire(blocking=False):
            try:
                for oi, oo in offsets:
                    desc.compute(src + oi, dst + oo)
            finally:
                desc.lock.release()
        else:  # another thread is computing with it: a private copy for this call
            mine = _Descriptor(self._dfti, desc.geo)
            for oi, oo in offsets:
                mine.compute(src + oi, dst + oo)
        return out


def _scale(norm: str | None, forward: bool, n: int) -> float:
    """NumPy's ``norm`` factor in this direction (``None``: unscaled both ways)."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") != forward else 1.0
