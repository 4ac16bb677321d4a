"""``cuweave.device.FFT``: a cuFFTDx FFT callable inside a user's numba ``@cuda.jit`` kernel.

Building an :class:`FFT` validates the knobs, then finds the configuration in the on-disk cache
or compiles it once with NVRTC (C++ generated from the knobs; see ``_codegen``). The compile
yields the LTO-IR of an ``extern "C"`` wrapper and the traits, so traits are known without a
GPU. ``fft.execute`` is a numba device function that links that LTO-IR itself: the user never
passes ``link=``.

A kernel using a block FFT::

    fft = FFT("c2c", size=256, precision=np.float32, direction="forward",
              ffts_per_block="suggested")
    execute, ept, stride = fft.execute, fft.elements_per_thread, fft.stride
    storage, fpb, vt = fft.storage_size, fft.ffts_per_block, fft.value_type

    @cuda.jit
    def kernel(data):
        td = cuda.local.array(storage, dtype=vt)
        smem = cuda.shared.array(0, dtype=vt)
        batch = cuda.blockIdx.x * fpb + cuda.threadIdx.y
        for i in range(ept):
            td[i] = data[batch, cuda.threadIdx.x + i * stride]
        execute(td, smem)
        ...

    kernel[batches // fpb, fft.block_dim, 0, fft.shared_memory_size](data)

numba aligns ``complex64`` array elements to 4 bytes, so ``data[b, j]`` reads and writes each
element as two 4-byte accesses. Viewing the array as the 8-byte vector type inside the kernel,
``v = data.view(float32x2_type)``, moves each element in one access (``td[i] = v[b, j]``,
``v[b, j] = td[i]``: the vector converts to and from complex exactly); on the H200 that took
65536 FFTs of 256 points from 0.95x to 0.98x cuFFT's throughput, and the fused convolution
from 3.1x to 3.3x CuPy's three passes (``benchmarks/results/device_fft.md``).
"""

from __future__ import annotations

import threading

import numpy as np

from .._internal.errors import InvalidOptionError
from .._internal.logging import get_logger
from . import _cache, _codegen
from ._kernel_object import KernelObject, ensure_registered, register_kernel_type
from ._options import (
    Execution,
    FFTSpec,
    FFTType,
    RealMode,
    default_sm,
    max_size,
)
from ._options import require_numba as _require_numba
from ._parallel import generate_in_processes, with_sm
from .common_cuda import Dim3

__all__ = ["FFT", "Dim3", "valid_sizes", "warm_fft_cache", "default_sm"]

_log = get_logger("device.fft")
_executes: dict[str, object] = {}
_executes_lock = threading.Lock()
# Approximate dynamic shared memory per block by architecture (bytes), for valid() bounds.
_SMEM_LIMIT = {700: 96, 720: 96, 750: 64, 800: 163, 860: 99, 870: 163, 890: 99, 900: 227,
               1000: 227, 1010: 227, 1030: 227, 1200: 99, 1210: 99}


def _nearest(values, target, n=3):
    return sorted(sorted(values, key=lambda v: abs(v - target))[:n])


def _check_size(spec: FFTSpec) -> None:
    sizes = _codegen.database_sizes(spec.precision)
    n = spec.execution_size
    if n in sizes:
        return
    what = "size // 2" if spec.real_mode is RealMode.folded else "size"
    raise InvalidOptionError(
        f"{what} must be one of the sizes cuFFTDx implements without a workspace in "
        f"{spec.precision} (nearest: {_nearest(sizes, n)}; see cuweave.device.valid_sizes()), "
        f"got {spec.size!r}"
    )


def _entry_for(spec: FFTSpec) -> dict:
    """Cached or freshly compiled ``{'traits', 'symbol', 'ltoir', 'error'}`` for ``spec``."""
    key = _cache.make_key([list(spec.key()), _codegen.toolchain_versions()])
    entry = _cache.load(key)
    if entry is None:
        symbol = f"cuweave_dx_fft_{key}"
        try:
            entry = _codegen.compile_spec(spec, symbol)
            entry["error"] = None
        except InvalidOptionError as e:
            entry = {"traits": None, "symbol": symbol, "ltoir": None, "error": str(e)}
        _cache.store(key, entry)
    return entry


def _resolve(spec: FFTSpec) -> dict:
    """Validated entry for ``spec``; raises InvalidOptionError naming the offending knob."""
    _check_size(spec)
    entry = _entry_for(spec)
    traits = entry["traits"]
    if entry.get("error") is None and traits["ok"] and not traits["requires_workspace"]:
        return entry
    ept = spec.elements_per_thread
    if isinstance(ept, int):
        base = _resolve(FFTSpec(**{**spec.__dict__, "elements_per_thread": None,
                                   "ffts_per_block": None}))
        valid = base["traits"]["valid_elements_per_thread"]
        raise InvalidOptionError(
            f"elements_per_thread must be one of {valid} for a size-{spec.size} "
            f"{spec.fft_type.name} {spec.precision} FFT on sm_{spec.sm // 10}, got {ept!r}"
        )
    if traits and traits["requires_workspace"]:
        raise InvalidOptionError(
            f"size must not need a Bluestein workspace (unsupported), got {spec.size!r}"
        )
    raise InvalidOptionError(entry.get("error") or f"the configuration {spec.key()!r} is not "
                             "supported by cuFFTDx")


# Attributes a kernel may read from an FFT object (compile-time constants) or call (execute).
_KERNEL_ATTRIBUTES = frozenset({
    "size", "precision", "ffts_per_block", "elements_per_thread", "storage_size",
    "shared_memory_size", "stride", "input_ept", "output_ept", "input_length", "output_length",
    "implicit_type_batching", "suggested_ffts_per_block", "requires_workspace",
    "workspace_size", "value_type", "input_type", "output_type", "block_dim", "execute",
})
_KERNEL_ALIASES = {"__call__": "execute"}  # fft(thread_data, smem) is fft.execute(...)


class FFT(KernelObject):
    """An FFT computed inside a numba CUDA kernel by a thread block or a single thread.

    Parameters
    ----------
    fft_type : {'c2c', 'r2c', 'c2r'}
        Transform type. (nvmath-python's positional order ``FFT(size, precision, fft_type,
        execution)`` is accepted too: a first positional int is taken as the size.)
    size : int
        Transform length; see :func:`valid_sizes`.
    precision : numpy.float16, numpy.float32 or numpy.float64
        Real precision of the data. Half precision computes two FFTs at once per
        ``value_type`` element (``implicit_type_batching == 2``).
    direction : {'forward', 'inverse'}, optional
        Defaults to 'forward' for c2c and r2c and 'inverse' for c2r.
    execution : {'Block', 'Thread'}
        Whether a thread block or a single thread computes one FFT.
    sm : int or tuple, optional
        Target compute capability (90, (9, 0), 'sm_90'); default: the current device's.
    ffts_per_block : int or 'suggested', optional
        FFTs per block (Block execution). Default 1.
    elements_per_thread : int or 'suggested', optional
        Elements each thread holds (Block execution). Default: cuFFTDx's suggestion.
    real_fft_options : dict, optional
        ``{'complex_layout': 'natural'|'packed'|'full', 'real_mode': 'normal'|'folded'}``.

    Notes
    -----
    A kernel may refer to the FFT object itself (as nvmath-python's device API does): its
    traits are compile-time constants there and ``fft.execute(...)`` is a direct call of the
    linked cuFFTDx code. Copying traits into locals first works too.

    Inside a kernel allocate ``cuda.local.array(fft.storage_size, fft.value_type)``; element
    ``i`` of the thread's share of FFT data sits at index ``threadIdx.x + i * fft.stride``
    (``i < fft.elements_per_thread``, or ``input_ept``/``output_ept`` for real FFTs, whose real
    side is read through ``thread_data.view(fft.precision)``). Launch with ``fft.block_dim``
    threads and ``fft.shared_memory_size`` bytes of dynamic shared memory (Block execution).
    numba-cuda launches with at most 48 KiB of dynamic shared memory, so choose
    ``ffts_per_block`` (see :meth:`valid`) to keep ``shared_memory_size`` below that. Two FFTs
    sharing one ``shared_memory`` array in a kernel need a ``cuda.syncthreads()`` between them.
    """

    def __init__(self, fft_type="c2c", size=None, precision=np.float32, direction=None,
                 execution="Block", *, sm=None, ffts_per_block=None, elements_per_thread=None,
                 real_fft_options=None):
        if isinstance(fft_type, (int, np.integer)) and not isinstance(fft_type, bool):
            # nvmath-python's positional order: FFT(size, precision, fft_type, execution)
            fft_type, size, precision, direction, execution = (
                precision, fft_type, size, None, execution if direction is None else direction)
        spec = FFTSpec.from_knobs(
            fft_type, size, precision, direction, execution,
            sm=default_sm() if sm is None else sm, ffts_per_block=ffts_per_block,
            elements_per_thread=elements_per_thread, real_fft_options=real_fft_options,
        )
        _require_numba()
        entry = _resolve(spec)
        self._spec = spec
        self._symbol = entry["symbol"]
        self._ltoir = entry["ltoir"]
        self._traits = entry["traits"]
        register_kernel_type(FFT)

    # ----- inside kernels ---------------------------------------------------------------------
    def _kernel_key(self) -> tuple:
        return (self._symbol,)

    def _kernel_attribute(self, name: str):
        name = _KERNEL_ALIASES.get(name, name)
        if name not in _KERNEL_ATTRIBUTES:
            raise AttributeError(name)
        return getattr(self, name)

    # ----- knobs ------------------------------------------------------------------------------
    @property
    def fft_type(self) -> str:
        """``'c2c'``, ``'r2c'`` or ``'c2r'``."""
        return self._spec.fft_type.name

    @property
    def size(self) -> int:
        """The length of one FFT."""
        return self._spec.size

    @property
    def precision(self):
        """The real precision as a NumPy scalar type."""
        return np.dtype(self._spec.precision).type

    @property
    def direction(self) -> str:
        """``'forward'`` or ``'inverse'``."""
        return self._spec.direction.name

    @property
    def execution(self) -> str:
        """``'Block'`` (a thread block computes the FFTs) or ``'Thread'`` (each thread one)."""
        return self._spec.execution.name

    @property
    def sm(self) -> int:
        """Target compute capability as cuFFTDx's SM value (900 for 9.0)."""
        return self._spec.sm

    @property
    def real_fft_options(self) -> dict | None:
        """``{'complex_layout': ..., 'real_mode': ...}`` of a real FFT, ``None`` for c2c."""
        if self._spec.fft_type is FFTType.c2c:
            return None
        return {"complex_layout": self._spec.complex_layout.name,
                "real_mode": self._spec.real_mode.name}

    # ----- traits -----------------------------------------------------------------------------
    @property
    def value_type(self):
        """Element type of the register storage, usable as ``dtype=`` in kernels:
        :data:`~cuweave.device.types.complex64` / ``complex128`` (numba complex numbers there), or
        :data:`~cuweave.device.types.half4` (``float16x4``: two FFTs batched) in half precision."""
        from . import types as element_types

        ensure_registered(FFT)
        return {"float16": element_types.half4, "float32": element_types.complex64,
                "float64": element_types.complex128}[self._spec.precision]

    def _real_type(self):
        from . import types as element_types

        if self._spec.precision == "float16":
            return element_types.half2
        return self.precision

    @property
    def input_type(self):
        """Type of input elements: real (``precision``, ``half2`` for float16) for an r2c FFT
        in normal mode, else :attr:`value_type`."""
        if self._spec.fft_type is FFTType.r2c and self._spec.real_mode is RealMode.normal:
            return self._real_type()
        return self.value_type

    @property
    def output_type(self):
        """Type of output elements: real for a c2r FFT in normal mode, else :attr:`value_type`."""
        if self._spec.fft_type is FFTType.c2r and self._spec.real_mode is RealMode.normal:
            return self._real_type()
        return self.value_type

    @property
    def block_dim(self) -> Dim3 | None:
        """Threads of the block (Block execution); None for Thread execution, as in
        nvmath-python."""
        if self._spec.execution is Execution.Thread:
            return None
        t = self._traits
        return Dim3(t["block_dim_x"], t["block_dim_y"], t["block_dim_z"])

    def _trait(name, block_only=False):  # noqa: N805 - descriptor factory (class body only)
        def get(self):
            if block_only and self._spec.execution is Execution.Thread:
                return None
            return int(self._traits[name])

        get.__name__ = name
        what = " (None for Thread execution, as in nvmath-python)" if block_only else ""
        return property(get, doc=f"cuFFTDx trait ``{name}``{what}.")

    storage_size = _trait("storage_size")
    shared_memory_size = _trait("shared_memory_size", block_only=True)
    stride = _trait("stride")
    elements_per_thread = _trait("elements_per_thread")
    ffts_per_block = _trait("ffts_per_block", block_only=True)
    input_ept = _trait("input_ept")
    output_ept = _trait("output_ept")
    input_length = _trait("input_length")
    output_length = _trait("output_length")
    implicit_type_batching = _trait("implicit_type_batching")
    suggested_ffts_per_block = _trait("suggested_ffts_per_block")
    del _trait

    @property
    def requires_workspace(self) -> bool:
        """Whether cuFFTDx needs a global workspace (never: such sizes are refused)."""
        return bool(self._traits["requires_workspace"])

    @property
    def workspace_size(self) -> int:
        """Bytes of global workspace the FFT needs: 0 (sizes needing one are refused)."""
        return 0

    @property
    def files(self) -> list:
        """Files to pass to ``cuda.jit(link=...)``: none (``execute`` links its code itself;
        nvmath-python's earlier kernels pass ``link=FFT.files``)."""
        return []

    # ----- execution --------------------------------------------------------------------------
    @property
    def execute(self):
        """numba device function: ``execute(thread_data, shared_memory)`` (Block) or
        ``execute(thread_data)`` (Thread). Arrays are passed by their data pointer."""
        ensure_registered(FFT)
        fn = _executes.get(self._symbol)
        if fn is None:
            from ._numba_ext import make_execute

            with _executes_lock:
                fn = _executes.get(self._symbol)
                if fn is None:
                    from ._codegen import extern_twiddles

                    fn = make_execute(self._symbol, self._ltoir,
                                      self._spec.execution is Execution.Block,
                                      self._spec.sm if extern_twiddles() else None)
                    _executes[self._symbol] = fn
        return fn

    def __call__(self, *args):
        raise RuntimeError("an FFT object is called (or its execute used) inside a numba CUDA "
                           "kernel only")

    # ----- queries ----------------------------------------------------------------------------
    def valid(self, *knobs):
        """Valid values of ``'elements_per_thread'`` and/or ``'ffts_per_block'``, as
        nvmath-python gives them: a sorted list of tuples, one value per knob asked, in that
        order (``valid("elements_per_thread")`` gives 1-tuples).

        Parameters
        ----------
        *knobs : str
            ``'elements_per_thread'`` and/or ``'ffts_per_block'``.

        Block execution lists the combinations cuFFTDx's database holds a tuned implementation
        of for this FFT (read from the database's records: nothing is compiled), restricted to
        this object's ``elements_per_thread`` when that was given; these are the candidates
        worth timing. An architecture or size without records falls back to every supported
        ``elements_per_thread`` with the ``ffts_per_block`` values that fit 1024 threads and
        the architecture's shared memory per block.
        """
        allowed = ("elements_per_thread", "ffts_per_block")
        if not knobs or any(k not in allowed for k in knobs):
            raise InvalidOptionError(f"knobs must be among {allowed!r}, got {knobs!r}")
        if self._spec.execution is Execution.Thread:
            combos = [(self.elements_per_thread, 1)]
        else:
            combos = self._block_combos()
        index = [allowed.index(k) for k in knobs]
        return sorted({tuple(c[i] for i in index) for c in combos})

    def _block_combos(self) -> list[tuple[int, int]]:
        spec = self._spec
        fixed = None if spec.elements_per_thread is None else self.elements_per_thread
        # folded real FFTs run a complex FFT of half the size: twice the real elements
        scale = 2 if spec.real_mode is RealMode.folded else 1
        combos = [(scale * e, f) for e, f in
                  _codegen.database_knobs(spec.precision, spec.sm, spec.execution_size)
                  if fixed is None or scale * e == fixed]
        if combos:
            return combos
        smem_per_fft = self.shared_memory_size / max(self.ffts_per_block, 1)
        limit = _SMEM_LIMIT.get(spec.sm, 48) * 1024
        for ept in self._traits["valid_elements_per_thread"]:
            if fixed is not None and ept != fixed:
                continue
            threads = -(-spec.execution_size // ept)
            top = 1024 // threads
            if smem_per_fft:
                top = min(top, int(limit // smem_per_fft))
            step = 2 if spec.precision == "float16" else 1  # FFT pairs in half
            combos += [(ept, f) for f in range(step, max(top, 1) + 1, step)]
        return combos

    def __repr__(self):
        s = self._spec
        return (f"FFT({s.fft_type.name!r}, size={s.size}, precision={s.precision}, "
                f"direction={s.direction.name!r}, execution={s.execution.name!r}, "
                f"sm={s.sm // 10}, ffts_per_block={self.ffts_per_block}, "
                f"elements_per_thread={self.elements_per_thread})")


def valid_sizes(fft_type="c2c", precision=np.float32, execution="Block", *, sm=None,
                real_fft_options=None) -> list[int]:
    """Sizes a device FFT of this kind supports (without a Bluestein workspace).

    Parameters
    ----------
    fft_type : {'c2c', 'r2c', 'c2r'}
        The kind of transform.
    precision : numpy.float16, numpy.float32 or numpy.float64
        The real precision.
    execution : {'Block', 'Thread'}
        Who computes one FFT: a thread block or a single thread.
    sm : int, optional
        Target architecture as cuFFTDx's SM value (900 for 9.0); default: the current
        device's.
    real_fft_options : dict, optional
        ``{'complex_layout': ..., 'real_mode': ...}`` of real FFTs (the folded real mode
        doubles the sizes).

    Returns
    -------
    list of int
        The sizes, ascending.
    """
    probe = FFTSpec.from_knobs(fft_type, 2 if not real_fft_options else 4, precision, None,
                               execution, sm=default_sm() if sm is None else sm,
                               real_fft_options=real_fft_options)
    real = probe.fft_type is not FFTType.c2c
    top = max_size(probe.precision, probe.execution, probe.sm, real)
    folded = probe.real_mode is RealMode.folded
    out = []
    for n in _codegen.database_sizes(probe.precision):
        size = 2 * n if folded else n
        if size <= top and (probe.execution is Execution.Block or n <= top):
            out.append(size)
    return out


def _compile_worker(spec: FFTSpec) -> str | None:
    """Process-pool worker: compile ``spec`` into the disk cache; returns an error or None."""
    try:
        _resolve(spec)
    except Exception as e:  # reported again (typed) when the parent builds the FFT
        return f"{type(e).__name__}: {e}"
    return None


def warm_fft_cache(configs, max_workers=None) -> list[FFT]:
    """Build several FFTs at once (see :func:`cuweave.device.warm_cache`).

    Parameters
    ----------
    configs : iterable of dict
        :class:`FFT`'s keyword arguments, one dict per FFT.
    max_workers : int, optional
        Worker processes generating the missing code (default: one per core).

    Returns
    -------
    list of FFT
        The FFTs, in the order of ``configs``.
    """
    configs = with_sm(configs)
    specs = [FFTSpec.from_knobs(**kw) for kw in configs]
    if not configs:
        return []
    _require_numba()
    versions = _codegen.toolchain_versions()
    missing = list({s.key(): s for s in specs
                    if _cache.load(_cache.make_key([list(s.key()), versions])) is None}.values())
    generate_in_processes(_compile_worker, missing, max_workers, "device FFT")
    return [FFT(**kw) for kw in configs]
