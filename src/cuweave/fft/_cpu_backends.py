"""Host FFT libraries behind :class:`~cuweave.fft._cpu.CpuPlan`: MKL's DFTI or SciPy's pocketfft.

MKL (the ``cpu-fft`` extra: ``pip install 'cuweave[cpu-fft]'``, x86-64) is called through
``libmkl_rt``'s DFTI interface with :mod:`ctypes`, as nvmath-python uses MKL on x86 hosts. Where
it is missing SciPy's pocketfft runs, as before. ``CUWEAVE_CPU_FFT`` picks by hand: ``mkl``
(an error where MKL cannot be loaded), ``pocketfft``, or ``auto`` (the default).

Threads are cuweave's own, never MKL's: every descriptor has ``DFTI_THREAD_LIMIT = 1`` and
``workers`` threads (the caller and a small pool) take single-threaded DFTI calls in turn:
chunks of the batch, and for a multidimensional transform of few batches one stage over all
but the first axis, then an in-place stage over the first (:class:`MklPlan`). No process-wide
setting changes (MKL's and OpenMP's thread counts are left alone), and no OpenMP team runs:
on a 2-core machine where another process holds a core, MKL's own two threads were 3-8x
slower than one, while calls handed out one at a time degrade like pocketfft's threads.

One committed descriptor serves one geometry (precision, domain, lengths, strides and
distances of both sides, batch count, scale: ``norm`` is fused into the transform, placement).
Each thread keeps its own small LRU cache of them, so no descriptor is ever used by two threads
at once and the function forms reuse them as scipy reuses its plans.

Layouts DFTI cannot take in :data:`MAX_CALLS` calls per stage (batch dimensions that do not
merge), empty, unaligned, byte-swapped, negative- or zero-strided arrays, and double-precision
lengths with a prime factor of 17 or more (where MKL is several times less accurate:
:data:`ACCURATE_PRIME_LIMIT`) make :meth:`MklPlan.run` answer ``None``: pocketfft runs those.
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

__all__ = ["MklPlan", "MklError", "mkl_library", "backend_name", "MAX_CALLS", "PARALLEL_MIN",
           "clear_cache", "cached_descriptors", "ACCURATE_PRIME_LIMIT", "largest_prime_factor"]

_log = get_logger("fft.cpu")

#: most DFTI calls one execution may take (outer batch dimensions looped over); beyond, pocketfft
MAX_CALLS = 64
#: committed descriptors each thread keeps (least recently used dropped first)
CACHE_SIZE = 32
#: the smallest prime factor of a length from which MKL's double-precision transforms lose
#: accuracy: measured over lengths 2..1024 on an AVX-512 host, MKL's relative error reached
#: 5.5x pocketfft's (n = 47) and 20-70x on other hosts (n = 38, 106), while lengths whose prime
#: factors are all below 17 stay within 2.5x. Such double-precision transforms run on
#: pocketfft; single precision stays on MKL (within 2.1x for every length).
ACCURATE_PRIME_LIMIT = 17

# mkl_dfti.h: configuration parameters and values
_PRECISION = {True: 35, False: 36}  # single: DFTI_SINGLE, else DFTI_DOUBLE
_COMPLEX, _REAL = 32, 33
_FORWARD_SCALE, _BACKWARD_SCALE = 4, 5
_NUMBER_OF_TRANSFORMS = 7
_CONJUGATE_EVEN_STORAGE, _COMPLEX_COMPLEX = 10, 39
_PLACEMENT, _INPLACE, _NOT_INPLACE = 11, 43, 44
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
    """A committed DFTI descriptor of one geometry, used by one thread only.

    ``geo`` is ``(single, real, lengths, (fwd strides, fwd distance), (bwd strides, bwd
    distance), howmany, forward, scale, inplace)``, strides and distances in elements.
    """

    __slots__ = ("dfti", "handle", "compute")

    def __init__(self, dfti: _Dfti, geo: tuple):
        single, real, lengths, fwd, bwd, howmany, forward, scale, inplace = geo
        self.dfti, self.handle = dfti, ctypes.c_void_p()
        lib, L = dfti.lib, ctypes.c_long
        dims = (L * len(lengths))(*lengths) if len(lengths) > 1 else L(lengths[0])
        dfti.check(lib.DftiCreateDescriptor(ctypes.byref(self.handle), _PRECISION[single],
                                            _REAL if real else _COMPLEX, L(len(lengths)),
                                            dims), "DftiCreateDescriptor")
        settings = [(_PLACEMENT, L(_INPLACE if inplace else _NOT_INPLACE)),
                    (_THREAD_LIMIT, L(1)),  # the threads are ours (see _run_tasks)
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
            dfti.check(lib.DftiSetValue(self.handle, param, value), "DftiSetValue")
        dfti.check(lib.DftiCommitDescriptor(self.handle), "DftiCommitDescriptor")
        fn = lib.DftiComputeForward if forward else lib.DftiComputeBackward
        name, h = fn.__name__, self.handle
        if inplace:
            self.compute = lambda src, dst: dfti.check(fn(h, ctypes.c_void_p(src)), name)
        else:
            self.compute = lambda src, dst: dfti.check(
                fn(h, ctypes.c_void_p(src), ctypes.c_void_p(dst)), name)

    def __del__(self):
        handle = getattr(self, "handle", None)
        if handle:
            try:
                self.dfti.lib.DftiFreeDescriptor(ctypes.byref(handle))
            except Exception:  # pragma: no cover - interpreter shutdown
                pass


_LOCAL = threading.local()  # each thread's own descriptors: DFTI calls never share one
_REFUSED: set = set()  # geometries MKL would not commit (pocketfft runs those)
_GENERATION = [0]  # bumped by clear_cache(): every thread drops its descriptors on next use


def _descriptor(dfti: _Dfti, geo: tuple) -> _Descriptor | None:
    """This thread's committed descriptor of ``geo`` (made on a miss; the least recently used
    of more than :data:`CACHE_SIZE` dropped); ``None`` where MKL refuses the configuration."""
    cache = getattr(_LOCAL, "cache", None)
    if cache is None or _LOCAL.generation != _GENERATION[0]:
        cache = _LOCAL.cache = OrderedDict()
        _LOCAL.generation = _GENERATION[0]
    desc = cache.get(geo)
    if desc is not None:
        cache.move_to_end(geo)
        return desc
    if geo in _REFUSED:
        return None
    try:
        desc = _Descriptor(dfti, geo)
    except MklError as e:
        _log.info("MKL DFTI refused %r (%s); pocketfft runs it", geo, e)
        _REFUSED.add(geo)
        return None
    cache[geo] = desc
    while len(cache) > CACHE_SIZE:
        cache.popitem(last=False)
    return desc


def clear_cache() -> None:
    """Free every thread's cached descriptors (the calling thread's now, the others' on their
    next use)."""
    _GENERATION[0] += 1
    _LOCAL.cache = OrderedDict()
    _LOCAL.generation = _GENERATION[0]


def cached_descriptors() -> int:
    """How many descriptors the calling thread holds."""
    cache = getattr(_LOCAL, "cache", None)
    return 0 if cache is None or _LOCAL.generation != _GENERATION[0] else len(cache)


# ---- threads ------------------------------------------------------------------------------------
_POOL: list = []
_POOL_LOCK = threading.Lock()
if hasattr(os, "register_at_fork"):  # a forked child has none of the parent's pool threads
    os.register_at_fork(after_in_child=_POOL.clear)


def _pool():
    """The helper threads (created on first use, at most one per core)."""
    if not _POOL:
        with _POOL_LOCK:
            if not _POOL:
                from concurrent.futures import ThreadPoolExecutor

                _POOL.append(ThreadPoolExecutor(max_workers=max(1, (os.cpu_count() or 2)),
                                                thread_name_prefix="cuweave-fft"))
    return _POOL[0]


class _Tasks:
    """DFTI calls handed out one at a time to whichever thread asks first: a thread the OS
    keeps waiting only delays the call it has taken, never the others' (static splits, and
    OpenMP's barriers, stall a whole transform behind one descheduled thread)."""

    __slots__ = ("tasks", "src", "dst", "dfti", "next", "done", "error", "cond")

    def __init__(self, dfti, tasks, src, dst):
        self.dfti, self.tasks, self.src, self.dst = dfti, tasks, src, dst
        self.next = self.done = 0
        self.error = None
        self.cond = threading.Condition()

    def work(self) -> None:
        n = len(self.tasks)
        while True:
            with self.cond:
                i, self.next = self.next, self.next + 1
            if i >= n:
                return
            geo, oi, oo = self.tasks[i]
            try:
                desc = _descriptor(self.dfti, geo)
                if desc is None:
                    raise MklError(-1, "DftiCommitDescriptor", hint="configuration refused")
                desc.compute(self.src + oi, self.dst + oo)
            except BaseException as e:  # noqa: B036 - handed to the waiting caller
                self.error = self.error or e
            with self.cond:
                self.done += 1
                if self.done == n:
                    self.cond.notify_all()

    def wait(self) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.done == len(self.tasks))
        if self.error is not None:
            raise self.error


def _run_tasks(dfti, tasks, src: int, dst: int, threads: int) -> None:
    """Run ``tasks`` (``(geo, src offset, dst offset)``) on up to ``threads`` threads, the
    caller included; returns when all are done."""
    batch = _Tasks(dfti, tasks, src, dst)
    if threads <= 1 or len(tasks) == 1:
        batch.work()
        batch.wait()
        return
    pool = _pool()
    for _ in range(min(threads, len(tasks)) - 1):
        pool.submit(batch.work)
    batch.work()
    batch.wait()


# ---- geometry -----------------------------------------------------------------------------------
def _elem_strides(shape, strides, itemsize) -> list[int] | None:
    """Strides in elements (1 for length-1 dimensions); ``None`` where DFTI cannot take them
    (negative, zero, or not whole elements)."""
    out = []
    for n, s in zip(shape, strides):
        if n == 1:
            out.append(1)
        elif s <= 0 or s % itemsize:
            return None
        else:
            out.append(s // itemsize)
    return out


def _c_strides(shape) -> list[int]:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc if n > 1 else 1)
        acc *= n
    return out[::-1]


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


class _Buf:
    """Shape, element strides and item size of one array of a stage."""

    __slots__ = ("shape", "strides", "itemsize")

    def __init__(self, shape, strides, itemsize):
        self.shape, self.strides, self.itemsize = tuple(shape), strides, itemsize


def _stage_tasks(kind, axes, src: _Buf, dst: _Buf, forward, scale, single, chunks):
    """``[(geo, src offset, dst offset)]`` of one stage: a ``kind`` transform over ``axes``
    from ``src`` to ``dst`` (the same buffer: in place), its largest batch dimension cut into
    up to ``chunks`` calls; ``None`` past :data:`MAX_CALLS` loop calls."""
    inplace = src is dst
    s_in, s_out = src.strides, dst.strides
    lengths = tuple((dst if kind == "C2R" else src).shape[a] for a in axes)
    batch = _batches([d for d in range(len(src.shape)) if d not in axes and src.shape[d] > 1],
                     src.shape, s_in, s_out)
    count, d_in, d_out = batch.pop() if batch else (1, 0, 0)
    loops = math.prod(b[0] for b in batch)
    if loops > MAX_CALLS or max(lengths + (count,)) > _LONG_MAX:
        return None
    size = -(-count // max(1, min(chunks, count)))
    side_in = ((0, *(s_in[a] for a in axes)), d_in)
    side_out = ((0, *(s_out[a] for a in axes)), d_out)
    fwd, bwd = (side_in, side_out) if forward else (side_out, side_in)
    tasks = []
    for idx in product(*(range(b[0]) for b in batch)):
        oi = sum(i * b[1] for i, b in zip(idx, batch))
        oo = sum(i * b[2] for i, b in zip(idx, batch))
        for start in range(0, count, size):
            n = min(size, count - start)
            geo = (single, kind != "C2C", lengths, fwd, bwd, n, forward, scale, inplace)
            tasks.append((geo, (oi + start * d_in) * src.itemsize,
                          (oo + start * d_out) * dst.itemsize))
    return tasks


#: elements below which one thread runs the transform whatever ``workers`` says
PARALLEL_MIN = 1 << 15
#: DFTI calls a stage's batch is cut into per thread (more: better balance when the OS keeps
#: a thread waiting; fewer: less per-call cost)
CHUNKS_PER_THREAD = 4


class MklPlan:
    """One transform type over fixed axes, run with MKL's DFTI.

    With one thread each layout is one DFTI call (or a short loop of them). With more, the
    work is cut into DFTI calls of one thread each that the threads take in turn: batches
    into chunks, and a multidimensional transform of few batches into a stage over all but
    the first axis and an in-place C2C stage over the first, as pocketfft does.

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
        Most threads one execution may use.
    """

    __slots__ = ("_dfti", "_type", "_axes", "_out_lengths", "_threads", "_last")

    def __init__(self, dfti: _Dfti, fft_type: str, axes, out_lengths, workers: int):
        self._dfti, self._type, self._axes = dfti, fft_type, tuple(axes)
        self._out_lengths, self._threads = tuple(out_lengths), max(1, int(workers))
        self._last: tuple = (None, None)  # (call key, stages): the hot path

    def _shapes(self, x):
        """``(out shape, out dtype, mid shape or None)``."""
        shape = list(x.shape)
        if self._type == "C2C":
            return shape, x.dtype, None
        if self._type == "R2C":
            shape[self._axes[-1]] = shape[self._axes[-1]] // 2 + 1
            return shape, np.result_type(x.dtype, np.complex64), None
        for a, n in zip(self._axes, self._out_lengths):
            shape[a] = n
        return shape, x.real.dtype, (x.shape if len(self._axes) > 1 else None)

    def _stages(self, x, forward, scale, threads):
        """``[(src name, dst name, tasks)]`` for ``x``; ``None`` where pocketfft must run."""
        s_x = _elem_strides(x.shape, x.strides, x.itemsize)
        if s_x is None or not self._accurate(x):
            return None
        out_shape, out_dtype, mid_shape = self._shapes(x)
        bufs = {"x": _Buf(x.shape, s_x, x.itemsize),
                "out": _Buf(out_shape, _c_strides(out_shape), np.dtype(out_dtype).itemsize)}
        axes, chunks = self._axes, CHUNKS_PER_THREAD * threads if threads > 1 else 1
        if mid_shape is not None:
            # DFTI's multidimensional C2R takes its input as Hermitian throughout; NumPy and
            # pocketfft run C2C over the leading axes, then C2R over the last one: so do we.
            bufs["mid"] = _Buf(mid_shape, _c_strides(mid_shape), x.itemsize)
            plan = [("C2C", axes[:-1], "x", "mid", 1.0), ("C2R", axes[-1:], "mid", "out", scale)]
        elif threads > 1 and len(axes) > 1 and self._few_batches(x, threads):
            plan = [(self._type, axes[1:], "x", "out", 1.0), ("C2C", axes[:1], "out", "out", scale)]
        else:
            plan = [(self._type, axes, "x", "out", scale)]
        single = x.dtype.char in "fF"
        stages = []
        for kind, ax, src, dst, sc in plan:
            tasks = _stage_tasks(kind, ax, bufs[src], bufs[dst], forward, sc, single, chunks)
            if tasks is None or any(_descriptor(self._dfti, t[0]) is None for t in tasks[:1]):
                return None
            stages.append((src, dst, tasks))
        return stages

    def _accurate(self, x) -> bool:
        """Whether MKL computes this transform about as accurately as pocketfft: single
        precision always, double precision where no length has a prime factor of
        :data:`ACCURATE_PRIME_LIMIT` or more."""
        if x.dtype.char in "fF":
            return True
        lengths = self._out_lengths if self._type == "C2R" else [x.shape[a] for a in self._axes]
        return all(largest_prime_factor(n) < ACCURATE_PRIME_LIMIT for n in lengths)

    def _few_batches(self, x, threads) -> bool:
        """Whether the batch of ``x`` is too small to keep ``threads`` threads busy."""
        batch = math.prod(n for d, n in enumerate(x.shape) if d not in self._axes)
        return batch < 2 * threads

    def run(self, x: np.ndarray, direction: FFTDirection, norm: str | None):
        """Transform the host array ``x`` (never modified) into a new C-ordered array, or
        answer ``None`` for a layout left to pocketfft."""
        if x.size == 0 or not x.flags.aligned or not x.dtype.isnative:
            return None
        forward = direction == FFTDirection.FORWARD
        n = math.prod(self._out_lengths if self._type == "C2R" else
                      (x.shape[a] for a in self._axes))
        scale = _scale(norm, forward, n)
        threads = self._threads if x.size >= PARALLEL_MIN else 1
        key = (x.shape, x.strides, forward, scale, threads)
        last_key, stages = self._last
        if last_key != key:
            stages = self._stages(x, forward, scale, threads)
            if stages is None:
                return None
            self._last = (key, stages)
        out_shape, out_dtype, mid_shape = self._shapes(x)
        out = np.empty(out_shape, out_dtype)
        ptr = {"x": x.ctypes.data, "out": out.ctypes.data}
        if mid_shape is not None:
            mid = np.empty(mid_shape, x.dtype)
            ptr["mid"] = mid.ctypes.data
        for src, dst, tasks in stages:
            _run_tasks(self._dfti, tasks, ptr[src], ptr[dst], threads)
        return out


def largest_prime_factor(n: int) -> int:
    """The largest prime factor of ``n`` (1 for ``n`` <= 1)."""
    largest, p = 1, 2
    while p * p <= n:
        while n % p == 0:
            largest, n = p, n // p
        p += 1
    return max(largest, n) if n > 1 else largest


def _scale(norm: str | None, forward: bool, n: int) -> float:
    """NumPy's ``norm`` factor in this direction (``None``: unscaled both ways)."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    return 1.0 / n if (norm == "backward") != forward else 1.0
