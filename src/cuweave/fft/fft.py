"""The stateful :class:`FFT` and the function forms :func:`fft`, :func:`ifft`, :func:`rfft`,
:func:`irfft`.

Device operands run on cuFFT unless ``execution="cpu"`` (then, as nvmath-python, they are
copied to the host, transformed there, and the result is copied back to their device); host
operands run on SciPy's pocketfft unless ``execution="cuda"`` (then they are staged through
pinned buffers, in a layout cuFFT expresses, and the result is copied back). Results come back
in the operand's package. No transform scales its result unless ``norm=`` (an extension, NumPy's
meaning) asks for it; on the GPU the scaling is fused into the transform as an LTO callback.
"""

from __future__ import annotations

import dataclasses
import operator
import time

from .._internal.arrays import Operand
from .._internal.cache import PlanCache
from .._internal.errors import (
    InvalidOperandError,
    InvalidOptionError,
    InvalidStateError,
    UnsupportedLayoutError,
)
from .._internal.lifecycle import StatefulObject
from .._internal.logging import get_logger
from .._internal.options import coerce_options
from .._internal.packages import probe
from ._cuda_plan import estimate_workspace
from ._layout import CufftLayout, LayoutPlan, coerce_axes, dense_strides
from ._options import NORMS, FFTDirection, FFTOptions, norm_scale
from ._plan import Call, Plan, cpu_perm, new_call
from ._spec import (
    OperandTypeError,
    build_spec,
    callback_fast_key,
    check_inplace_operand,
    coerce_callable,
    default_direction,
    execution_space,
    metadata_operand,
    plan_args,
    public_key,
    spec_key,
    wrap,
)

__all__ = ["FFT", "fft", "ifft", "rfft", "irfft", "plan_cache", "estimate_workspace_size"]

_log = get_logger("fft")
_DIRECTIONS = {"forward": FFTDirection.FORWARD, "inverse": FFTDirection.INVERSE,
               -1: FFTDirection.FORWARD, 1: FFTDirection.INVERSE}


def _parse_direction(value) -> FFTDirection:
    """``value`` (FFTDirection, 'forward'/'inverse' or -1/1) as an :class:`FFTDirection`."""
    if isinstance(value, FFTDirection):
        return value
    d = None
    if isinstance(value, str):
        d = _DIRECTIONS.get(value.lower())
    elif not isinstance(value, bool):
        try:
            d = _DIRECTIONS.get(operator.index(value))
        except TypeError:
            d = None
    if d is None:
        raise InvalidOptionError(
            "direction must be FFTDirection.FORWARD/INVERSE, 'forward', 'inverse', -1 or 1, "
            f"got {value!r}")
    return d


def _direction(value, fft_type: str) -> FFTDirection:
    if value is None:
        return default_direction(fft_type)
    d = _parse_direction(value)
    if (fft_type == "R2C" and d != FFTDirection.FORWARD) or (
            fft_type == "C2R" and d != FFTDirection.INVERSE):
        raise InvalidOptionError(
            f"direction must be {default_direction(fft_type).name} for a {fft_type} transform, "
            f"got {d.name}")
    return d


def _check_norm(norm):
    """``norm`` validated, as a plain ``str`` (NumPy's ``np.str_`` is accepted, as NumPy
    accepts it) or ``None``."""
    if norm is None or type(norm) is str and norm in NORMS:
        return norm
    if isinstance(norm, str) and norm in NORMS:
        return str(norm)
    raise InvalidOptionError(f"norm must be one of {NORMS}, got {norm!r}")


class FFT(StatefulObject):
    """An N-D FFT (up to 3 transformed axes, the others batched) planned once, run many times.

    Parameters
    ----------
    operand : array
        NumPy/CuPy array or torch tensor (or another DLPack / CUDA array interface producer).
    axes : int or sequence of int, optional
        Transformed axes (default: all, at most 3). For R2C/C2R the last one is halved. A cuweave
        extension: a single int means one axis (``axes=1`` is ``axes=(1,)``).
    options : FFTOptions or dict, optional
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        Default: where the operand lives; a dict without ``'name'`` (``{"num_threads": 2}``)
        names that space too. A device operand with CPU execution is copied to the host and
        its result back to its device.
    stream : optional
        CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) that :meth:`execute` uses
        when given none, for operands without a current stream of their own (host, DLPack, CUDA
        array interface); torch/CuPy operands run on their package's current stream. Kept until
        :meth:`release_operand`. Validated but unused with CPU execution.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.random.rand(4, 16) + 1j * np.random.rand(4, 16)
    >>> with FFT(x, axes=(1,)) as f:
    ...     f.plan()
    ...     y = f.execute()
    >>> bool(np.allclose(y, np.fft.fft(x, axis=1)))
    True
    """

    _plan = None  # the Plan (plan() makes it)
    _call = None  # the current Call (None: no operand bound)
    _ready = None  # the plan's run while a call is bound: execute() calls it unchecked
    _stored = None  # the stream given at construction or reset (kept alive while bound)

    def __init__(self, operand, /, *, axes=None, options=None, execution=None, stream=None):
        self.options = coerce_options(options, FFTOptions, "options")
        self.logger = self.options.logger or _log
        op = operand if _is_operand(operand) else wrap(operand, inplace=self.options.inplace)
        self._spec = build_spec(op, axes, self.options, execution)
        self._set_stream(stream)
        self._bind(op)
        if self.logger.isEnabledFor(20):
            self.logger.info("FFT %r", self._spec)

    # ---- operands ---------------------------------------------------------------------------
    def _bind(self, op) -> None:
        """Make ``op`` the operand of the current call (the stored stream with it)."""
        stored = self._stored
        self._call = Call.of(op, None, None if stored is None else stored.ptr)
        self._ready = self._plan.run if self._plan is not None else None

    def _set_stream(self, stream) -> None:
        """Store ``stream`` for later executions (validated only with CPU execution)."""
        if stream is not None:
            holder = self._spec.stream(stream)
            if self._spec.cuda or self._spec.to_host:  # keep the stream object alive too
                self._stored = holder
                if self._call is not None:
                    self._call.stored = holder.ptr

    def reset_operand(self, operand=None, *, stream=None) -> None:
        """Point the plan at a new operand; ``None`` releases it.

        The new operand must come from the same package (else an ``OperandTypeError``,
        also a ``TypeError``), have the same dtype and live on the same device; its shape and
        strides may differ where the same plan runs it (equal :meth:`create_key`, e.g. batch
        axes rearranged): the result then follows the new operand's shape.

        Parameters
        ----------
        operand : array or None, optional
            The new operand, compatible with the planned one as above. ``None`` (the default)
            releases the current operand, as :meth:`release_operand` does.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) kept for later
            :meth:`execute` calls that name none, as the constructor's ``stream``. Validated
            but unused with CPU execution.

        Examples
        --------
        >>> import numpy as np
        >>> a, b = np.ones((2, 8), np.complex128), np.arange(16.0).reshape(2, 8) + 0j
        >>> with FFT(a, axes=(1,)) as f:
        ...     f.plan()
        ...     f.reset_operand(b)
        ...     y = f.execute()
        >>> bool(np.allclose(y, np.fft.fft(b, axis=1)))
        True
        """
        self._require_valid("reset_operand")
        if operand is None:
            self.release_operand()
            return
        op = wrap(operand, inplace=self.options.inplace)
        s = self._spec
        if op.package != s.package:
            raise OperandTypeError(
                f"operand must come from the planned operand's package {s.package!r}, got "
                f"{op.package!r}")
        got = (op.device, op.device_id if op.device == "cuda" else None, op.dtype)
        want = (s.device, s.device_id if s.device == "cuda" else None, s.dtype)
        if got != want:
            names = ("memory space", "device", "dtype")
            diff = [f"{n} {w!r} vs {g!r}" for n, g, w in zip(names, got, want) if g != w]
            raise InvalidOperandError(
                f"operand must match the planned operand's metadata, got different "
                f"{', '.join(diff)}")
        if (op.shape, op.strides) != (s.shape, s.strides):
            self._respecify(op)
        elif s.inplace:
            check_inplace_operand(op)
        self._set_stream(stream)
        self._bind(op)

    def _respecify(self, op) -> None:
        """Adopt ``op``'s shape and strides when the planned transform runs it unchanged."""
        s = self._spec
        try:
            new = build_spec(op, s.axes, self.options, s.space)
            same = plan_args(new) == plan_args(s) and (
                s.layout is None or _exec_args(new) == _exec_args(s))
        except (InvalidOperandError, UnsupportedLayoutError):
            same = False
        if not same:
            raise InvalidOperandError(
                f"operand must have a layout the planned transform runs (shape {s.shape!r}, "
                f"strides {s.strides!r}, axes {s.axes!r}, or the same with batch axes "
                f"rearranged), got shape {op.shape!r} and strides {op.strides!r}")
        self._spec = new
        if self._plan is not None:
            self._plan = self._plan.respecified(new)

    def reset_operand_unchecked(self, operand=None, *, stream=None) -> None:
        """Like :meth:`reset_operand` without checks: the caller guarantees the package, dtype
        and device, and an operand the plan runs (a rearranged layout is still adopted).

        For hot loops where the operand is known to be compatible; an incompatible one gives
        wrong results or errors from the library rather than a clear error.

        Parameters
        ----------
        operand : array or None, optional
            The new operand, compatible with the planned one. ``None`` (the default) releases
            the current operand, as :meth:`release_operand` does.
        stream : optional
            CUDA stream kept for later :meth:`execute` calls that name none, as for
            :meth:`reset_operand`.
        """
        if operand is None:
            self.release_operand()
            return
        op = operand if _is_operand(operand) else wrap(operand, inplace=self.options.inplace)
        s = self._spec
        if op.shape != s.shape or op.strides != s.strides:
            self._respecify(op)
        self._set_stream(stream)
        self._bind(op)

    def release_operand(self) -> None:
        """Drop the operand and the stored stream (a later execute needs :meth:`reset_operand`)."""
        self._call = self._ready = self._stored = None

    def get_input_layout(self):
        """``(shape, strides)`` of the input as the transform reads it (strides in elements)."""
        return self._spec.shape, self._spec.dev_strides

    def get_output_layout(self):
        """``(shape, strides)`` of the result (strides in elements)."""
        s = self._spec
        if s.cuda:
            return s.out_shape, s.layout.out_strides
        return s.out_shape, (s.strides if s.inplace else dense_strides(s.out_shape,
                                                                       cpu_perm(s)))

    # ---- keys ------------------------------------------------------------------------------
    def get_key(self, *, prolog=None, epilog=None):
        """The key of this object's transform with these callbacks (see :meth:`create_key`).

        Parameters
        ----------
        prolog : DeviceCallable or dict, optional
            The load callback (LTO-IR) the key is for; ``None`` (the default): no prolog.
        epilog : DeviceCallable or dict, optional
            The store callback (LTO-IR) the key is for; ``None`` (the default): no epilog.

        Returns
        -------
        tuple
            A hashable key, equal to :meth:`create_key`'s for this operand, axes, options and
            execution space.

        Examples
        --------
        >>> import numpy as np
        >>> x = np.zeros((4, 32), np.complex64)
        >>> with FFT(x, axes=(1,)) as f:
        ...     f.get_key() == FFT.create_key(x, axes=(1,))
        True
        """
        self._require_valid("get_key")
        return public_key(self._spec, prolog, epilog)

    @staticmethod
    def create_key(operand, *, axes=None, options=None, execution=None, prolog=None,
                   epilog=None):
        """A hashable key of the transform these arguments describe (no planning done).

        The key is ``(plan arguments, callbacks, execution space)``: operands whose layouts
        give the library the same arguments (batch axes rearranged, for instance) share a
        key, and one :class:`FFT` object runs them all (:meth:`reset_operand`). Only the
        operand's metadata is read. For :func:`estimate_workspace_size`; see also
        :meth:`create_key_from_metadata`. The key is for use in this process only (not to be
        saved); a caller using stream-ordered memory pools adds the stream to it.

        Parameters
        ----------
        operand : array
            The operand the transform would run on (only its package, memory space, device,
            dtype, shape and strides are read).
        axes : int or sequence of int, optional
            The transformed axes, as for :class:`FFT`.
        options : FFTOptions or dict, optional
            As for :class:`FFT`.
        execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
            As for :class:`FFT` (default: where the operand lives).
        prolog : DeviceCallable or dict, optional
            The load callback (LTO-IR) the key is for; ``None`` (the default): no prolog.
        epilog : DeviceCallable or dict, optional
            The store callback (LTO-IR) the key is for; ``None`` (the default): no epilog.

        Returns
        -------
        tuple
            A hashable key of the transform.

        Examples
        --------
        >>> import numpy as np
        >>> key = FFT.create_key(np.zeros((8, 64), np.complex64), axes=(1,))
        >>> key == FFT.create_key(np.ones((8, 64), np.complex64), axes=(1,))
        True
        >>> key == FFT.create_key(np.ones((8, 64), np.complex128), axes=(1,))
        False
        """
        options = coerce_options(options, FFTOptions, "options")
        op = wrap(operand, inplace=options.inplace)
        return public_key(build_spec(op, axes, options, execution), prolog, epilog)

    @staticmethod
    def create_key_from_metadata(shape, dtype, memory_space, *, strides=None, axes=None,
                                 options=None, execution=None, prolog=None, epilog=None):
        """:meth:`create_key` from an operand's metadata alone (no array needed).

        Parameters
        ----------
        shape : sequence of int
        dtype : str
            'float16', 'float32', 'float64', 'complex32', 'complex64' or 'complex128'.
        memory_space : {'cpu', 'cuda'}
            Where the operand would live; the default execution space follows it.
        strides : sequence of int, optional
            In elements; default: C order.
        axes, options, execution, prolog, epilog
            As for :meth:`create_key`.

        Examples
        --------
        >>> import numpy as np
        >>> key = FFT.create_key_from_metadata((8, 64), "complex64", "cpu", axes=(1,))
        >>> key == FFT.create_key(np.zeros((8, 64), np.complex64), axes=(1,))
        True
        """
        options = coerce_options(options, FFTOptions, "options")
        op = metadata_operand(shape, dtype, memory_space, strides, execution)
        return public_key(build_spec(op, axes, options, execution), prolog, epilog)

    # ---- planning ---------------------------------------------------------------------------
    def plan(self, *, prolog=None, epilog=None, stream=None, direction=None, norm=None):
        """Plan the transform.

        ``direction`` is the direction the callbacks and ``norm`` (a cuweave extension, NumPy's
        meaning, fused into the transform) are planned for; ``execute`` may use the other direction
        of a C2C plan only when the scaling is the same. Planning again replaces the plan.

        Parameters
        ----------
        prolog : DeviceCallable or dict, optional
            A load callback compiled to LTO-IR (:func:`compile_prolog`), applied to each input
            element as the transform reads it; ``None`` (the default): none. CUDA execution
            only.
        epilog : DeviceCallable or dict, optional
            A store callback compiled to LTO-IR (:func:`compile_epilog`), applied to each
            result element as the transform writes it; ``None`` (the default): none. CUDA
            execution only.
        stream : optional
            CUDA stream (int handle, ``__cuda_stream__``, torch/cupy) to plan on, kept for
            later :meth:`execute` calls that name none. Validated but unused with CPU
            execution.
        direction : FFTDirection, {'forward', 'inverse'} or {-1, 1}, optional
            The direction to plan for. The default is forward for C2C and R2C transforms and
            inverse for C2R ones; R2C plans must be forward and C2R plans inverse.
        norm : {None, 'backward', 'ortho', 'forward'}, optional
            A cuweave extension: NumPy's normalization for the planned ``direction``, fused
            into the transform. ``None`` (the default) never scales, as nvmath-python.

        Examples
        --------
        >>> import numpy as np
        >>> x = np.arange(8, dtype=np.complex128)
        >>> with FFT(x) as f:
        ...     f.plan(direction="inverse", norm="backward")
        ...     y = f.execute(direction="inverse")
        >>> bool(np.allclose(y, np.fft.ifft(x)))
        True
        """
        self._require_valid("plan")
        spec = self._spec
        planned = _direction(direction, spec.fft_type)
        norm = _check_norm(norm)
        prolog = coerce_callable(prolog, "prolog")
        epilog = coerce_callable(epilog, "epilog")
        self._set_stream(stream)
        self._release()
        self._freed = False
        t0 = time.perf_counter()
        self._plan = Plan(spec, planned, norm, prolog, epilog, self.logger, self._call)
        self._ready = self._plan.run if self._call is not None else None
        self._mark_planned()
        if self.logger.isEnabledFor(20):
            self.logger.info("planned in %.3f ms", 1e3 * (time.perf_counter() - t0))

    def _check_exec_direction(self, direction) -> FFTDirection:
        plan = self._plan
        d = _direction(direction, self._spec.fft_type)
        if d != plan.direction and plan.norm is not None:
            n = self._spec.n_points
            if norm_scale(plan.norm, d, n) != norm_scale(plan.norm, plan.direction, n):
                raise InvalidOptionError(
                    f"direction must be {plan.direction.name} (the direction norm="
                    f"{plan.norm!r} was planned for), got {d.name}; plan(direction=...) again")
        return d

    # ---- execution --------------------------------------------------------------------------
    def execute(self, direction=None, stream=None, release_workspace=False):
        """Run the transform; returns the result in the operand's package.

        In-place (``options.inplace``) transforms return the operand itself.

        Parameters
        ----------
        direction : FFTDirection, {'forward', 'inverse'} or {-1, 1}, optional
            The direction to run. ``None`` (the default) runs the direction the plan was made
            for. A C2C plan runs either direction (with ``norm``, only one whose scaling is
            the planned one's); R2C runs forward only and C2R inverse only.
        stream : optional
            CUDA stream of this execution (int handle, ``__cuda_stream__``, torch/cupy).
            ``None`` (the default): the stream given to the constructor, :meth:`plan` or
            :meth:`reset_operand`, else the operand package's current stream. Validated but
            unused with CPU execution.
        release_workspace : bool, optional
            ``True`` returns the work area to the memory pool when the call ends (useful when
            other work needs the memory between executions, at the cost of allocating it again
            next time); ``False`` (the default) keeps it for the next call.

        Returns
        -------
        array
            The result, in the operand's package and memory space (on its device). A C2C
            result has the operand's shape and dtype; an R2C or C2R result differs from it in
            both (the last transformed axis halved or restored, complex or real).
        """
        ready = self._ready  # None unless planned with an operand
        if (ready is not None and direction is None and stream is None
                and release_workspace is False):
            return ready(self._call)
        if not isinstance(release_workspace, bool):
            raise InvalidOptionError(
                f"release_workspace must be a bool, got {release_workspace!r}")
        if not self._planned:
            self._require_planned("execute")
        call = self._call
        if call is None:
            raise InvalidStateError(
                "FFT.execute() needs an operand: it was released; call reset_operand first")
        plan = self._plan
        d = None if direction is None else self._check_exec_direction(direction)
        if stream is not None:
            s = self._spec.stream(stream)  # validated: CPU execution has no stream
            if self._spec.cuda:
                call = call.copy(stream=s.ptr)
        res = plan.run(call, None if d is None else int(d))
        if release_workspace:
            plan.release_workspace()
        return res

    def release_workspace(self) -> None:
        """Return the workspace to the pool (reallocated by the next execute)."""
        if self._plan is not None:
            self._plan.release_workspace()

    # ---- lifecycle --------------------------------------------------------------------------
    def _release(self) -> None:
        self._ready = None
        plan, self._plan = self._plan, None
        if plan is not None:
            plan.free()

    def free(self) -> None:
        """Release the plan and buffers, and drop the operand and the stored stream."""
        super().free()
        self.release_operand()

    @property
    def workspace_size(self) -> int:
        """The size in bytes of the work area cuFFT needs to run the plan: 0 before
        :meth:`plan`, after :meth:`free` and with CPU execution."""
        return self._plan.workspace_size if self._plan is not None else 0


def _is_operand(x) -> bool:
    return isinstance(x, Operand)


def _exec_args(spec) -> tuple:
    """The arguments the cuFFT plan was made with (those of the copy, for staged operands)."""
    lay = spec.layout
    return (lay.n, lay.batch, lay.inp, lay.out)


def estimate_workspace_size(key, *, technique="default", handle=None) -> int:
    """Work-area bytes cuFFT needs for the transform of ``key`` (:meth:`FFT.create_key`,
    :meth:`FFT.create_key_from_metadata` or :meth:`FFT.get_key`); 0 for CPU execution.

    Parameters
    ----------
    key : tuple
    technique : {'default', 'refined'}
        Accepted as nvmath-python does; cuweave answers both by making the plan on a fresh
        handle with automatic allocation off (nothing is allocated) and destroying it, which
        is exact for the plans cuweave makes. Callbacks in the key are not considered.
    handle : int, optional
        Required with ``technique='refined'`` (as nvmath-python); its settings are not read.

    Examples
    --------
    >>> key = FFT.create_key_from_metadata((16, 256), "complex64", "cpu", axes=(1,))
    >>> estimate_workspace_size(key)
    0
    """
    if not (isinstance(technique, str) and technique in ("default", "refined")):
        raise InvalidOptionError(f"technique must be 'default' or 'refined', got {technique!r}")
    args, where = _parse_key(key)
    if where[0] == "cpu":
        return 0
    if technique == "refined" and (handle is None or isinstance(handle, bool)
                                   or not isinstance(handle, int)):
        raise InvalidOptionError(
            f"handle must be a cuFFT handle (int) with technique='refined', got {handle!r}")
    fft_type, dtype, out_dtype, _inplace, n, batch, inp, out = args
    lay = LayoutPlan(order=(), n=n, batch=batch, batch_axes=(), inp=CufftLayout(*inp),
                     out=CufftLayout(*out), out_perm=(), out_strides=())
    spec = _PlanSpec(fft_type, dtype, out_dtype, lay)
    return estimate_workspace(where[1], spec)


class _PlanSpec:
    """What :func:`~cuweave.fft._cuda_plan.make_plan` reads of a spec."""

    __slots__ = ("fft_type", "dtype", "out_dtype", "layout")

    def __init__(self, fft_type, dtype, out_dtype, layout):
        self.fft_type, self.dtype, self.out_dtype, self.layout = (fft_type, dtype, out_dtype,
                                                                  layout)


def _parse_key(key):
    bad = InvalidOptionError(
        f"key must be a key made by FFT.create_key, FFT.create_key_from_metadata or "
        f"FFT.get_key, got {key!r}")
    if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[0], tuple)
            and isinstance(key[2], tuple) and len(key[2]) == 2 and key[2][0] in ("cpu", "cuda")):
        raise bad
    args, where = key[0], key[2]
    if args and args[0] == "copy":
        args = args[1:]
    if where[0] == "cuda" and (len(args) != 8 or args[0] not in ("C2C", "R2C", "C2R")):
        raise bad
    return args, where


# ---- function forms ---------------------------------------------------------------------------
#: Planned FFT objects of the function forms, keyed by spec key + direction + norm.
plan_cache = PlanCache(maxsize=64, max_workspace_bytes=1 << 30)
_TYPED_OPTIONS = {t: FFTOptions(fft_type=t) for t in ("C2C", "R2C", "C2R")}
#: The options of an odd-length C2R (the NumPy layer's ``irfft(x, n=odd)``): this one object
#: takes the keyed fast path like ``options=None`` (any other options object takes the full one).
C2R_ODD = FFTOptions(fft_type="C2R", last_axis_parity="odd")


def _options_for(options, fft_type):
    if fft_type is None:
        return coerce_options(options, FFTOptions, "options")
    if options is None:
        return _TYPED_OPTIONS[fft_type]
    opts = coerce_options(options, FFTOptions, "options")
    if opts.fft_type is None:
        import dataclasses

        return dataclasses.replace(opts, fft_type=fft_type)
    if opts.fft_type != fft_type:
        raise InvalidOptionError(
            f"options.fft_type must be None or {fft_type!r} here, got {opts.fft_type!r}")
    return opts


def _call(operand, axes, options, execution, prolog, epilog, stream, norm, direction,
          fft_type):
    """The function forms: wrap once, key, take or make the cached plan, run a fresh call."""
    norm = _check_norm(norm)  # before it enters a key (an unhashable norm is a user error too)
    fast = plan = None
    if axes is not None and type(axes) is not tuple:
        axes = coerce_axes(axes)
    if (options is None or options is C2R_ODD) and execution is None and stream is None:
        found = probe(operand)
        if found is not None:
            fast = found[0] + (axes, fft_type, direction, norm)
            if options is not None:  # C2R_ODD (one more entry than options=None's key)
                fast += ("odd",)
            if prolog is not None or epilog is not None:
                fast += (callback_fast_key(prolog), callback_fast_key(epilog))
            try:
                plan = plan_cache.pop(fast)
            except TypeError:  # unhashable entries in axes: reported by coerce_axes below
                plan = fast = None
            if plan is not None and not plan.needs_record:
                # planned for `direction`: run on the current stream (nothing wrapped)
                try:
                    return plan.run(Call(operand, found[1]))
                finally:
                    plan_cache.put(fast, plan, plan.workspace_size)
    if fast is None:
        axes = coerce_axes(axes)
    opts = _options_for(options, fft_type)
    op = wrap(operand, inplace=opts.inplace)
    space = execution_space(execution, op)
    key = fast or (spec_key(op, axes, opts, space, prolog, epilog), direction, norm)
    if plan is None:
        plan = plan_cache.pop(key)
    fresh = plan is None
    try:
        if fresh:  # a miss: the plan is made for this operand
            spec = build_spec(op, axes, opts, space)
        else:  # a hit: the operand checked, the plan goes back after
            spec = plan.spec
            if spec.inplace:
                check_inplace_operand(op)
        call = new_call(spec, op, stream)
        if fresh:
            plan = Plan(spec, _direction(direction, spec.fft_type), norm,
                        coerce_callable(prolog, "prolog"), coerce_callable(epilog, "epilog"),
                        opts.logger or _log, call)
        return plan.run(call)
    finally:
        if plan is not None:
            plan_cache.put(key, plan, plan.workspace_size)


def _checked_type(operand, check_dtype, default: str):
    """The transform type a ``check_dtype`` asks for (nvmath-python 1.0's argument of
    ``fft``/``ifft``/``rfft``): ``'complex'`` C2C, ``'real'`` R2C, ``None`` the operand's own
    (``default`` when it is the function's own check); the operand's dtype is checked here."""
    if check_dtype not in ("complex", "real", None):
        raise InvalidOptionError(
            f"check_dtype must be 'complex', 'real' or None, got {check_dtype!r}")
    want = {"complex": "C2C", "real": "R2C", None: None}[check_dtype]
    if want == default or want is None:
        return want
    dtype = getattr(operand, "dtype", None)
    is_complex = dtype is not None and "complex" in str(dtype)
    if is_complex != (check_dtype == "complex"):
        raise InvalidOperandError(
            f"This function expects {check_dtype} operand, found {dtype}: operand dtype must be "
            f"{'a complex' if check_dtype == 'complex' else 'a real floating'} type for "
            f"check_dtype={check_dtype!r}, got {str(dtype)!r}")
    return want


def fft(operand, /, *, axes=None, direction=None, options=None, execution=None, prolog=None,
        epilog=None, stream=None, norm=None, check_dtype="complex"):
    """N-D forward C2C FFT over ``axes`` of a complex operand (real operands: :func:`rfft`,
    as nvmath-python, which raises a ``ValueError`` here too).

    Parameters
    ----------
    operand : array
    axes : int or sequence of int, optional
        At most 3 transformed axes (default: all); the others are batched. A cuweave extension: an
        int is one axis.
    direction : FFTDirection or str, optional
        Compatible with nvmath-python: ``'inverse'`` makes this :func:`ifft`.
    options, execution, prolog, epilog
        See :class:`FFT` and :meth:`FFT.plan`.
    stream : optional
        CUDA stream of this call (default: the operand package's current stream; the legacy
        default stream for host, DLPack and CUDA-array-interface operands). Validated but
        unused with CPU execution.
    norm : {None, 'backward', 'ortho', 'forward'}
        A cuweave extension: NumPy's normalization, fused into the transform. ``None`` never scales.
    check_dtype : {'complex', 'real', None}
        nvmath-python 1.0's argument: the operand type this function expects (``'real'``: an
        R2C transform; ``None``: whatever the operand's dtype gives).

    Returns
    -------
    array
        The result in the operand's package and memory space.

    Examples
    --------
    A batch of 4 signals of 8 points (host operands run on the CPU unless told otherwise):

    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.exp(2j * np.pi * np.arange(8) / 8).astype(np.complex64) * np.ones((4, 1))
    >>> y = F.fft(x.astype(np.complex64), axes=[1])
    >>> np.round(np.abs(y[0]), 4).tolist()
    [0.0, 8.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    >>> z = F.ifft(y, axes=[1], norm="backward")  # norm (a cuweave extension): NumPy's, fused
    >>> bool(np.allclose(z, x, atol=1e-6))
    True
    """
    d = FFTDirection.FORWARD if direction is None else _parse_direction(direction)
    if check_dtype != "complex":
        return _call(operand, axes, options, execution, prolog, epilog, stream, norm, d,
                     _checked_type(operand, check_dtype, "C2C"))
    if options is None:  # the keyed fast path, one frame less
        return _call(operand, axes, None, execution, prolog, epilog, stream, norm, d, "C2C")
    return _complex_call(operand, axes, options, execution, prolog, epilog, stream, norm, d,
                         "fft")


def ifft(operand, /, *, axes=None, direction=None, options=None, execution=None, prolog=None,
         epilog=None, stream=None, norm=None, check_dtype="complex"):
    """N-D inverse C2C FFT (unnormalized unless ``norm`` says otherwise).

    Parameters
    ----------
    operand : array
        A complex array (NumPy, CuPy, torch, or any DLPack / CUDA-array-interface producer).
    axes : int or sequence of int, optional
        At most 3 transformed axes (default: all); the others are batched.
    direction : FFTDirection or str, optional
        Default inverse; accepted as nvmath-python's ``ifft`` accepts it.
    options, execution, prolog, epilog, stream
        As for :func:`fft`.
    norm : {None, 'backward', 'ortho', 'forward'}
        A cuweave extension: NumPy's normalization, fused into the transform.
    check_dtype : {'complex', 'real', None}
        As for :func:`fft`.

    Returns
    -------
    array
        The result in the operand's package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.arange(4, dtype=np.complex64)
    >>> np.round(F.ifft(F.fft(x), norm="backward").real, 4).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    d = FFTDirection.INVERSE if direction is None else _parse_direction(direction)
    if check_dtype != "complex":
        return _call(operand, axes, options, execution, prolog, epilog, stream, norm, d,
                     _checked_type(operand, check_dtype, "C2C"))
    if options is None:
        return _call(operand, axes, None, execution, prolog, epilog, stream, norm, d, "C2C")
    return _complex_call(operand, axes, options, execution, prolog, epilog, stream, norm, d,
                         "ifft")


def _complex_call(operand, axes, options, execution, prolog, epilog, stream, norm, direction,
                  name):
    """:func:`fft` / :func:`ifft` with ``options``: a C2C transform of a complex operand, or
    the C2R ``options.fft_type`` asks for."""
    opts = coerce_options(options, FFTOptions, "options")
    if opts.fft_type == "R2C":
        raise InvalidOptionError(f"options.fft_type must be 'C2C' or 'C2R' for {name}, got "
                                 "'R2C'")
    return _call(operand, axes, opts, execution, prolog, epilog, stream, norm, direction,
                 "C2C" if opts.fft_type is None else None)


def rfft(operand, /, *, axes=None, options=None, execution=None, prolog=None, epilog=None,
         stream=None, norm=None, check_dtype="real"):
    """N-D forward R2C FFT of a real operand (the last transformed axis halved).

    Parameters
    ----------
    operand : array
        A real array (float16 on the GPU, float32, float64).
    axes : int or sequence of int, optional
        At most 3 transformed axes (default: all); ``axes[-1]`` becomes ``n // 2 + 1`` long.
    options, execution, prolog, epilog, stream, norm
        As for :func:`fft`.
    check_dtype : {'real', 'complex', None}
        As for :func:`fft`; ``'real'`` (the default) checks the operand is real.

    Returns
    -------
    array
        The complex result in the operand's package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> F.rfft(np.ones(8, np.float32)).shape
    (5,)
    """
    fft_type = "R2C" if check_dtype == "real" else _checked_type(operand, check_dtype, "R2C")
    return _call(operand, axes, options, execution, prolog, epilog, stream, norm,
                FFTDirection.FORWARD, fft_type)


def irfft(operand, /, *, axes=None, options=None, execution=None, prolog=None, epilog=None,
          stream=None, norm=None):
    """N-D inverse C2R FFT of a complex operand; the input is never overwritten.

    The output length along ``axes[-1]`` is ``2*(m-1)`` (``options.last_axis_parity='odd'``:
    ``2*(m-1)+1``). As nvmath-python, ``options.fft_type`` is taken as ``'C2R'`` whatever it
    says (the caller's options object is not modified).

    Parameters
    ----------
    operand : array
        A complex array (complex32 on the GPU, complex64, complex128) holding the
        non-negative-frequency half of a Hermitian-symmetric signal along ``axes[-1]``.
    axes : int or sequence of int, optional
        At most 3 transformed axes (default: all); the others are batched. ``axes[-1]`` is
        the halved axis of length ``m``.
    options : FFTOptions or dict, optional
        As for :class:`FFT`; ``last_axis_parity`` chooses the output length.
    execution : {'cuda', 'cpu'}, ExecutionCUDA, ExecutionCPU or dict, optional
        As for :class:`FFT` (default: where the operand lives).
    prolog : DeviceCallable or dict, optional
        A load callback compiled to LTO-IR; CUDA execution only.
    epilog : DeviceCallable or dict, optional
        A store callback compiled to LTO-IR; CUDA execution only.
    stream : optional
        CUDA stream of this call, as for :func:`fft`.
    norm : {None, 'backward', 'ortho', 'forward'}, optional
        A cuweave extension: NumPy's normalization, fused into the transform. ``None`` (the
        default) never scales.

    Returns
    -------
    array
        The real result in the operand's package and memory space.

    Examples
    --------
    >>> import numpy as np
    >>> import cuweave.fft as F
    >>> x = np.arange(8, dtype=np.float64)
    >>> y = F.irfft(F.rfft(x), norm="backward")
    >>> y.shape, bool(np.allclose(y, x))
    ((8,), True)
    """
    if options is not None and options is not C2R_ODD:
        options = coerce_options(options, FFTOptions, "options")
        if options.fft_type not in (None, "C2R"):
            options = dataclasses.replace(options, fft_type="C2R")
    return _call(operand, axes, options, execution, prolog, epilog, stream, norm,
                FFTDirection.INVERSE, "C2R")
