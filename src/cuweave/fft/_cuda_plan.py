"""The cuFFT side of an FFT object: plan handle, callbacks and the fused ``norm`` scale.

:class:`CudaPlan` creates the handle with automatic work-area allocation off (the workspace comes
from the user's pool), attaches LTO callbacks (the user's, or the one fusing a ``norm=`` scale),
makes the plan with ``cufftMakePlanMany64`` (``cufftXtMakePlanMany`` for half precision) and
keeps the untyped ``cufftXtExec`` the run calls with pre-built arguments.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time

from .._bindings import cufft
from .._bindings.library_types import DATA_TYPE
from .._internal import cuda
from .._internal.errors import InvalidOptionError
from . import _callbacks as cb

__all__ = ["CudaPlan", "on_device", "make_plan", "estimate_workspace"]

_HALF = frozenset(["float16", "complex32"])
_EXEC_TYPE = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}


@contextlib.contextmanager
def on_device(device_id: int):
    """Make ``device_id`` current for the block, then the previously current one again.

    Costs one current-device query when the device already is current (the usual case).
    """
    prev = cuda.current_device()
    if prev != device_id:
        cuda.set_device(device_id)
    try:
        yield
    finally:
        if prev != device_id and prev is not None:
            cuda.set_device(prev)


#: Callback slots a ``norm`` scale goes to, in order of preference. Measured on an H200
#: (``benchmarks/results/fft_callbacks_probe.md``): a store callback costs 8% at 16384 FFTs
#: of 1024 points where a load callback costs 16%, and 2% on a 4096² 2-D transform where a
#: load callback costs 157%; elsewhere the two are within 5%.
_SCALE_SLOTS = ("epilog", "prolog")


def _resolve_callbacks(spec, prolog, epilog, scale, logger):
    """Attach the ``norm`` scale to a callback slot; returns (prolog, epilog, unfused_scale).

    An empty slot gets an NVRTC-compiled scaling callback, else a numba-compiled callback of
    the user's is recompiled with the scale folded in (slots in :data:`_SCALE_SLOTS` order);
    half precision and two raw LTO-IR callbacks leave the scale to a separate pass.
    """
    if scale == 1.0:
        return prolog, epilog, 1.0
    if spec.dtype in _HALF or spec.out_dtype in _HALF:
        return prolog, epilog, scale
    slots = {"prolog": prolog, "epilog": epilog}
    dtypes = {"prolog": spec.dtype, "epilog": spec.out_dtype}
    for slot in _SCALE_SLOTS:
        if slots[slot] is None:
            cc = cuda.compute_capability(spec.device_id)
            slots[slot] = cb_callable(cb.scale_callback(slot, dtypes[slot], scale, cc)[0])
            return slots["prolog"], slots["epilog"], 1.0
    for slot in _SCALE_SLOTS:
        c = slots[slot]
        if _foldable(c):
            slots[slot] = dataclasses.replace(c, ltoir=cb.fold_scale(c.ltoir, scale), size=None)
            return slots["prolog"], slots["epilog"], 1.0
    logger.warning("norm scaling cannot be fused: both prolog and epilog are raw LTO-IR; "
                   "applying it as a separate pass")
    return prolog, epilog, scale


def _foldable(c) -> bool:
    return isinstance(c.ltoir, cb.LTOIR) and c.ltoir.source is not None


def cb_callable(code: bytes):
    from ._options import DeviceCallable

    return DeviceCallable(ltoir=code)


def _preload_jit_dependencies() -> None:
    """cuFFT dlopens nvJitLink and NVRTC by soname for LTO callbacks: map ours first."""
    from .._bindings._loader import load_library

    for name in ("nvJitLink", "nvrtc"):
        try:
            load_library(name)
        except Exception:  # cuFFT reports CUFFT_MISSING_DEPENDENCY itself
            pass


def _basic(spec) -> bool:
    """True when both sides are cuFFT's basic (packed) layout, so embeds can be NULL."""
    lay = spec.layout
    n = list(lay.n)
    n_in, n_out = list(n), list(n)
    if spec.fft_type == "R2C":
        n_out[-1] = n[-1] // 2 + 1
    elif spec.fft_type == "C2R":
        n_in[-1] = n[-1] // 2 + 1

    def packed(side, dims):
        size = 1
        for d in dims:
            size *= d
        return (side.stride == 1 and tuple(side.embed[1:]) == tuple(dims[1:])
                and (lay.batch == 1 or side.dist == size))

    return packed(lay.inp, n_in) and packed(lay.out, n_out)


class CudaPlan:
    """A made cuFFT plan for ``spec`` (see module docstring).

    Attributes
    ----------
    handle : int
    workspace_size : int
    exec_bare : ctypes function
        ``cufftXtExec`` without argtypes: ``exec_bare(handle, c_void_p, c_void_p, direction)``
        with pre-built pointer objects (the hot path).
    unfused_scale : float
        A scale that could not be fused (applied by the caller after execution), else 1.
    """

    def __init__(self, spec, *, prolog, epilog, scale, logger):
        if (prolog is not None or epilog is not None) and (spec.dtype in _HALF):
            raise InvalidOptionError(
                f"prolog and epilog must be None for {spec.dtype} operands (cuFFT has no "
                "half-precision callbacks), got a callback")
        t0 = time.perf_counter()
        self.handle = None
        with on_device(spec.device_id):
            self._create(spec, prolog, epilog, scale, logger)
        if logger.isEnabledFor(20):
            logger.info("cuFFT plan %s %s n=%s batch=%d workspace=%d B callbacks=%s in %.3f ms",
                        spec.fft_type, spec.dtype, spec.layout.n, spec.layout.batch,
                        self.workspace_size, self.has_callbacks,
                        1e3 * (time.perf_counter() - t0))

    def _create(self, spec, prolog, epilog, scale, logger) -> None:
        prolog, epilog, self.unfused_scale = _resolve_callbacks(spec, prolog, epilog, scale,
                                                                logger)
        if prolog is not None or epilog is not None:
            _preload_jit_dependencies()
        # Callbacks go in under cuFFT's default symbol (NULL name): compile_prolog/epilog and
        # scale_callback emit exactly that name; DeviceCallable.symbol overrides it.
        for kind, c in (("prolog", prolog), ("epilog", epilog)):
            if c is not None and c.data:
                _check_user_data(c.data, spec.device_id, kind)
        self.handle = cufft.create()
        self._keep = []
        try:
            cufft.set_auto_allocation(self.handle, False)
            self._attach("prolog", prolog, spec.dtype)
            self._attach("epilog", epilog, spec.out_dtype)
            self.workspace_size = self._make(spec)
        except BaseException:
            cufft.destroy(self.handle)
            self.handle = None
            raise
        self.exec_bare = cufft.bare("cufftXtExec")
        self.has_callbacks = prolog is not None or epilog is not None

    def _attach(self, kind, c, dtype) -> None:
        if c is None:
            return
        cb_type = cb.callback_type(kind, dtype)
        symbol = c.symbol
        self._keep.extend(cufft.xt_set_jit_callback(
            self.handle, symbol, c.ltoir, c.size, cb_type, c.data))

    def _make(self, spec) -> int:
        return make_plan(self.handle, spec)

    def set_stream(self, stream: int) -> None:
        cufft.set_stream(self.handle, stream)

    def set_work_area(self, ptr: int) -> None:
        cufft.set_work_area(self.handle, ptr)

    def destroy(self) -> None:
        h, self.handle = self.handle, None
        self._keep = []
        if h is not None:
            cufft.destroy(h)


def make_plan(handle: int, spec) -> int:
    """``cufftXtMakePlanMany`` for ``spec`` (``fft_type``, ``dtype``, ``out_dtype``,
    ``layout``; every precision, the entry point LTO callbacks work with); the work size."""
    lay = spec.layout
    in_embed, out_embed = (None, None) if _basic(spec) else (lay.inp.embed, lay.out.embed)
    exec_t = DATA_TYPE[_EXEC_TYPE.get(spec.dtype, spec.dtype)]
    return cufft.xt_make_plan_many(
        handle, len(lay.n), lay.n, in_embed, lay.inp.stride, lay.inp.dist,
        DATA_TYPE[spec.dtype], out_embed, lay.out.stride, lay.out.dist,
        DATA_TYPE[spec.out_dtype], lay.batch, exec_t)


def estimate_workspace(device_id: int, spec) -> int:
    """Work-area bytes of a plan for ``spec``: a plan made on a fresh handle with automatic
    allocation off (nothing allocated), then destroyed."""
    with on_device(device_id):
        handle = cufft.create()
        try:
            cufft.set_auto_allocation(handle, False)
            return int(make_plan(handle, spec))
        finally:
            cufft.destroy(handle)


def _check_user_data(ptr: int, device_id: int, kind: str) -> None:
    """A callback's ``user_info`` is dereferenced inside cuFFT's kernels: it must be memory
    the GPU can read (device, managed or pinned host memory), never a pageable host pointer."""
    where, ordinal = cuda.pointer_space(ptr)
    if where is None or (where == "device" and ordinal != device_id):
        got = ("memory CUDA does not know (pageable host memory?)" if where is None else
               f"device memory of cuda:{ordinal}")
        raise InvalidOptionError(
            f"{kind}.data must be a pointer to device, managed or pinned memory readable by "
            f"cuda:{device_id}, got {ptr:#x} ({got})")
