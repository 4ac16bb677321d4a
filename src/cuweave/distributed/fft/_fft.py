"""Distributed FFTs (nvmath-python's ``nvmath.distributed.fft``) over slab and box distributions.

A d-D transform (d = 2 or 3; as a cuweave extension, d = 1) is done as two local multi-axis
transforms and all-to-all exchanges between them (the slab/"pencil-free" decomposition cuFFTMp
also uses):

- route A (C2C, R2C): to ``Slab.X`` → transform axes 1..d-1 (R2C: the last axis halves) →
  ``Slab.Y`` → transform axis 0 → output distribution;
- route B (C2R, and C2C whose input already is ``Slab.Y``): to ``Slab.Y`` → transform axis 0 →
  ``Slab.X`` → transform axes 1..d-1 (C2R: the last axis grows) → output distribution.

Exchanges between equal layouts are skipped, so ``Slab.X`` in and ``Slab.Y`` out
(``redistribute=False``) costs one exchange, as on cuFFTMp. 1-D transforms (a cuweave
extension) are gathered on process 0, transformed there and scattered back. The inverse is
unnormalized (as cuFFT).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..._internal.errors import InvalidOperandError, InvalidOptionError, InvalidStateError
from ..._internal.logging import get_logger
from ..._internal.packages import package_adapter
from ...fft import FFTDirection  # one enum for both (cuFFT's values)
from .._distributions import Box, Distribution, Layout, Slab
from .._exchange import ExchangePlan
from .._runtime import agree, require_context
from .._spec import (
    check_same,
    check_same_space,
    coerce_options,
    dtype_name,
    local_operand,
    resolve_layout,
)

__all__ = ["FFTDirection", "FFTOptions", "FFT", "fft", "ifft", "rfft", "irfft",
           "allocate_operand"]

_log = get_logger("distributed.fft")
_COMPLEX = {"float32": np.complex64, "float64": np.complex128, "complex64": np.complex64,
            "complex128": np.complex128}
_REAL = {"complex64": np.float32, "complex128": np.float64, "float32": np.float32,
         "float64": np.float64}


@dataclass
class FFTOptions:
    """Options of the distributed :class:`FFT` and its function forms.

    Attributes
    ----------
    fft_type : {None, 'C2C', 'R2C', 'C2R'}
        Default: ``'C2C'`` for complex operands, ``'R2C'`` for real ones.
    redistribute : bool
        With a Slab distribution: the result has the input's slab distribution (``True``,
        default) or the complementary one (``False``: ``Slab.X`` ↔ ``Slab.Y``; 1-D: ``Slab.X``).
        Ignored with boxes. nvmath-python 0.x's name ``reshape`` is accepted too.
    last_axis_parity : {'even', 'odd'}
        C2R: the global output length of the last axis is ``2*(m-1)`` or ``2*(m-1)+1``.
    logger : logging.Logger or None
    blocking : {True, 'auto'}
        Host operands always block; GPU results are ordered on the package's current stream.
    reshape : bool, optional
        nvmath-python 0.x's name of ``redistribute`` (sets it when given).
    """

    fft_type: Literal["C2C", "C2R", "R2C"] | None = None
    redistribute: bool = True
    last_axis_parity: Literal["even", "odd"] = "even"
    logger: object = None
    blocking: Literal[True, "auto"] = "auto"
    reshape: bool | None = None

    def __post_init__(self):
        if isinstance(self.fft_type, str):
            self.fft_type = self.fft_type.upper()
        if self.fft_type not in (None, "C2C", "C2R", "R2C"):
            raise InvalidOptionError(
                f"fft_type must be None, 'C2C', 'C2R' or 'R2C', got {self.fft_type!r}")
        if self.reshape is not None:
            if not isinstance(self.reshape, bool):
                raise InvalidOptionError(f"reshape must be a bool, got {self.reshape!r}")
            self.redistribute = self.reshape
        if not isinstance(self.redistribute, bool):
            raise InvalidOptionError(f"redistribute must be a bool, got {self.redistribute!r}")
        if self.last_axis_parity not in ("even", "odd"):
            raise InvalidOptionError(
                f"last_axis_parity must be 'even' or 'odd', got {self.last_axis_parity!r}")
        if self.blocking not in (True, "auto"):
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")

    def _key(self):
        return (self.fft_type, self.redistribute, self.last_axis_parity, self.blocking)


def _direction(direction, fft_type: str) -> FFTDirection:
    if direction is None:
        return FFTDirection.INVERSE if fft_type == "C2R" else FFTDirection.FORWARD
    try:
        if isinstance(direction, str):
            d = FFTDirection[direction.strip().upper()]
        elif isinstance(direction, (int, np.integer)) and not isinstance(direction, bool):
            d = FFTDirection(int(direction))
        else:
            raise KeyError(direction)
    except (KeyError, ValueError):
        raise InvalidOptionError(
            "direction must be an FFTDirection, 'forward', 'inverse', -1 or 1, got "
            f"{direction!r}") from None
    if (fft_type == "C2R" and d != FFTDirection.INVERSE) or (
            fft_type == "R2C" and d != FFTDirection.FORWARD):
        need = "INVERSE" if fft_type == "C2R" else "FORWARD"
        raise InvalidOptionError(f"direction must be {need} for a {fft_type} FFT, got {d.name}")
    return d


def _fft_type(dtype: str, requested) -> str:
    if dtype_name(dtype) not in _COMPLEX:
        raise InvalidOperandError(
            "operand dtype must be float32, float64, complex64 or complex128, got "
            f"{dtype_name(dtype)}")
    is_complex = np.dtype(dtype).kind == "c"
    kind = requested or ("C2C" if is_complex else "R2C")
    if kind == "R2C" and is_complex:
        raise InvalidOperandError(
            f"operand must be real for an R2C FFT, got {np.dtype(dtype).name}")
    if kind in ("C2C", "C2R") and not is_complex:
        raise InvalidOperandError(
            f"operand must be complex for a {kind} FFT, got {np.dtype(dtype).name}")
    return kind


def _coerce_fft_distribution(value):
    """``Slab`` (or a Slab-convertible distribution) or an (input box, output box) pair."""
    if isinstance(value, Slab):
        return value
    if isinstance(value, Distribution):
        return value.to(Slab)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return (Box.coerce(value[0], "distribution[0] (the input box)"),
                Box.coerce(value[1], "distribution[1] (the output box)"))
    raise InvalidOptionError(
        "distribution must be Slab.X, Slab.Y or a pair (input box, output box), where a box is "
        f"a Box or a (lower, upper) pair, got {value!r}")


class FFT:
    """A planned distributed FFT: construct, :meth:`plan`, :meth:`execute` (repeatedly), free.

    Collective: every process makes the same calls. Inputs are checked on all processes before
    any data moves. Results are new arrays in the operand's package, on its device.

    Parameters
    ----------
    operand : array
        This process's local array: NumPy or CPU torch (CPU ranks), CuPy or CUDA torch on the
        process's device (NCCL exchanges, cuFFT through :mod:`cuweave.fft`).
    distribution : Slab or (input box, output box)
        ``Slab.X`` / ``Slab.Y``: the operand is this process's slab (uneven splits allowed);
        a box pair: this process's input and output boxes, each a
        :class:`~cuweave.distributed.distribution.Box` or a ``(lower, upper)`` pair.
    options : FFTOptions or dict, optional
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream (enter
        ``torch.cuda.stream(s)`` / ``with s:`` for another).

    Examples
    --------
    >>> # mpiexec -n 4 python prog.py  # doctest: +SKIP
    >>> a = np.ones(Slab.X.shape(rank, (32, 32, 32)), np.complex128)  # doctest: +SKIP
    >>> with FFT(a, distribution=Slab.X) as f:  # doctest: +SKIP
    ...     f.plan()
    ...     b = f.execute()
    """

    def __init__(self, operand, /, distribution=None, *, options=None, stream=None):
        self._ctx = require_context()
        self._group = self._ctx.process_group
        self.options = coerce_options(options, FFTOptions)
        self._log = self.options.logger or _log
        self._plans = {}
        self._planned = False
        self._freed = False
        agree(self._group, self._resolve, agree(self._group, self._describe, operand,
                                                distribution))

    # -- specification --------------------------------------------------------------------
    def _describe(self, operand, distribution):
        op = local_operand(operand, "operand", "distributed FFT")
        if distribution is None:
            raise InvalidOptionError("distribution must be given (Slab.X, Slab.Y or a box "
                                     "pair), got None")
        dist = _coerce_fft_distribution(distribution)
        if not 1 <= len(op.shape) <= 3:
            raise InvalidOperandError(
                f"operand must be 1-D, 2-D or 3-D, got {len(op.shape)}-D shape {op.shape}")
        _fft_type(op.dtype, self.options.fft_type)
        if isinstance(dist, Slab):
            if dist.partition_dim not in ((0,) if len(op.shape) == 1 else (0, 1)):
                raise InvalidOptionError(
                    f"distribution must be Slab.X or Slab.Y (Slab.X for 1-D), got {dist.name}")
        else:
            for box, name in zip(dist, ("input", "output")):
                if box.ndim != len(op.shape):
                    raise InvalidOptionError(
                        f"distribution's {name} box must be {len(op.shape)}-D, got {box!r}")
        self._local = op
        return (op.describe(), dist, self.options._key())

    def _resolve(self, gathered):
        descs = [g[0] for g in gathered]
        check_same(descs, 1, "operand dtype")
        check_same(descs, 2, "operand package")
        check_same_space(descs)
        check_same(gathered, 2, "options")
        if len({len(d[0]) for d in descs}) != 1:
            raise InvalidOperandError("operand must have one dimensionality on every process")
        dists = [g[1] for g in gathered]
        if len({isinstance(d, Slab) for d in dists}) != 1:
            raise InvalidOptionError("distribution must be a Slab on every process or a box "
                                     "pair on every process, not a mix")
        n, shapes = self._group.nranks, [d[0] for d in descs]
        dtype = np.dtype(descs[0][1])
        self.fft_type = _fft_type(dtype.str, self.options.fft_type)
        if isinstance(dists[0], Slab):
            src = resolve_layout("distribution", dists, shapes, n)
        else:
            src = resolve_layout("distribution (input boxes)", [d[0] for d in dists], shapes, n)
        g = src.global_shape
        if self.fft_type == "R2C":
            gout = g[:-1] + (g[-1] // 2 + 1,)
        elif self.fft_type == "C2R":
            gout = g[:-1] + (2 * (g[-1] - 1) + (self.options.last_axis_parity == "odd"),)
        else:
            gout = g
        if min(g) == 0 or min(gout) == 0:
            raise InvalidOperandError(f"the global shape must have no empty axis, got {g} "
                                      f"(result {gout})")
        if isinstance(dists[0], Slab):
            keep = self.options.redistribute or len(g) == 1
            out_dist = dists[0] if keep else Slab(1 - dists[0].partition_dim)
            dst = resolve_layout("distribution", [out_dist] * n, None, n, global_shape=gout)
            self.result_distribution = out_dist
        else:
            outs = [d[1] for d in dists]
            dst = resolve_layout("distribution (output boxes)", outs,
                                 [b.box_shape for b in outs], n, global_shape=gout)
            self.result_distribution = outs[self._group.rank]
        self._src, self._dst, self._dtype = src, dst, dtype
        self._layouts, self._plans = {}, {}
        self.global_shape, self.global_result_shape = g, gout

    @property
    def result_shape(self) -> tuple[int, ...]:
        """This process's local result shape (a cuweave extension)."""
        return self._dst.local_shape(self._group.rank)

    # -- lifecycle ------------------------------------------------------------------------
    def _check_live(self):
        if self._freed:
            raise InvalidStateError("this FFT was freed; create a new one")

    def plan(self, *, stream=None):
        """Plan the exchanges (cheap on CPU ranks; the local transforms cache their plans).

        Parameters
        ----------
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()
        self._planned = True
        self._log.info("distributed %s FFT planned: global %s -> %s on %d processes",
                       self.fft_type, self.global_shape, self.global_result_shape,
                       self._group.nranks)

    def reset_operand(self, operand, *, distribution=None, stream=None):
        """Use a new operand (same dtype, package and global shape; the distribution may change,
        e.g. ``Slab.Y`` for the inverse of a ``redistribute=False`` forward). Collective.

        Parameters
        ----------
        operand : array
            This process's new local array.
        distribution : Slab or (input box, output box), optional
            Its distribution (default: the previous one).
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        """
        self._check_live()
        old = (self._dtype, self._local.package, self.global_shape, self.fft_type)
        agree(self._group, self._resolve, agree(self._group, self._describe, operand,
                                                distribution))
        new = (self._dtype, self._local.package, self.global_shape, self.fft_type)
        if new != old:
            self._freed = True
            raise InvalidOperandError(
                f"operand must keep the dtype, package and global shape {old[:3]}, got "
                f"{new[:3]}; this FFT is now unusable")

    def release_operand(self):
        """Drop the reference to the operand."""
        self._local = None

    def free(self):
        """Release everything; the object cannot be used afterwards."""
        self._plans.clear()
        self._freed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    # -- execution ------------------------------------------------------------------------
    def _layout(self, name: str) -> Layout:
        """The named layouts of the transform, built once per resolved problem."""
        if name == "src":
            return self._src
        if name == "dst":
            return self._dst
        layout = self._layouts.get(name)
        if layout is None:
            n = self._group.nranks
            g = self.global_result_shape if name.endswith("o") else self.global_shape
            if name.startswith("whole"):
                layout = Layout.gathered(g, n)
            else:
                layout = Layout.of(Slab(int(name[4])), g, n)
            self._layouts[name] = layout
        return layout

    def _exchange(self, backend, x, src: str, dst: str):
        a, b = self._layout(src), self._layout(dst)
        if a is b or a.same_as(b):
            return x
        plan = self._plans.get((src, dst))
        if plan is None:
            plan = self._plans[(src, dst)] = ExchangePlan(a, b, self._group.rank)
        return backend.exchange(self._group, plan, x)

    def execute(self, *, direction=None, stream=None, release_workspace=False,
                sync_symmetric_memory=True):
        """Run the transform; returns this process's share of the result (a new array).

        Parameters
        ----------
        direction : {'forward', 'inverse'} or FFTDirection, optional
            Default: forward for C2C and R2C, inverse for C2R.
        stream : optional
            Accepted for compatibility: GPU work runs on the package's current stream.
        release_workspace : bool
            Accepted for compatibility (the exchanges keep no workspace between calls).
        sync_symmetric_memory : bool
            Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
            NCCL's).

        Returns
        -------
        array
        """
        self._check_live()
        if not self._planned:
            raise InvalidStateError("execute() needs plan() first")
        if self._local is None:
            raise InvalidStateError("execute() needs an operand: call reset_operand() first")
        d = _direction(direction, self.fft_type)
        op = self._local
        result = self._run(op.backend, op.array, d)
        return op.backend.wrap(result, op.package)

    def _run(self, backend, x, d: FFTDirection):
        cdtype = _COMPLEX[self._dtype.name]
        c2c = "ifft" if d == FFTDirection.INVERSE else "fft"
        rest = list(range(1, len(self.global_shape)))
        if len(self.global_shape) == 1:
            y = self._exchange(backend, x, "src", "whole")
            kind = {"R2C": "rfft", "C2R": "irfft"}.get(self.fft_type, c2c)
            y = self._local_fft(backend, kind, y, [0], "wholeo")
            return self._exchange(backend, y, "wholeo", "dst")
        route_b = self.fft_type == "C2R" or (
            self.fft_type == "C2C" and self._src.same_as(self._layout("slab1")))
        if not route_b:
            y = self._exchange(backend, x, "src", "slab0")
            y = self._local_fft(backend, "rfft" if self.fft_type == "R2C" else c2c, y, rest,
                                "slab0o")
            y = self._exchange(backend, y, "slab0o", "slab1o")
            y = self._local_fft(backend, c2c, y, [0], "slab1o")
            return self._exchange(backend, y, "slab1o", "dst")
        y = self._exchange(backend, x, "src", "slab1")
        y = self._local_fft(backend, c2c, y, [0], "slab1", cdtype)
        y = self._exchange(backend, y, "slab1", "slab0")
        y = self._local_fft(backend, "irfft" if self.fft_type == "C2R" else c2c, y, rest,
                            "slab0o")
        return self._exchange(backend, y, "slab0o", "dst")

    def _local_fft(self, backend, kind, y, axes, out_layout: str, dtype=None):
        if dtype is None:
            dtype = _REAL[self._dtype.name] if kind == "irfft" else _COMPLEX[self._dtype.name]
        shape = self._layout(out_layout).local_shape(self._group.rank)
        return backend.fft_local(kind, y, axes, shape, dtype,
                                 self.options.last_axis_parity)


def _run_function(operand, distribution, direction, options, stream, fft_type, check):
    opts = coerce_options(options, FFTOptions)
    if fft_type is not None:
        if opts.fft_type not in (None, fft_type) and check:
            raise InvalidOptionError(f"options.fft_type must be {fft_type!r} here, got "
                                     f"{opts.fft_type!r}")
        opts = FFTOptions(fft_type=fft_type if opts.fft_type is None else opts.fft_type,
                          redistribute=opts.redistribute,
                          last_axis_parity=opts.last_axis_parity, logger=opts.logger,
                          blocking=opts.blocking)
    with FFT(operand, distribution=distribution, options=opts, stream=stream) as f:
        f.plan(stream=stream)
        return f.execute(direction=direction, stream=stream)


def fft(operand, /, distribution=None, *, direction=None, sync_symmetric_memory=True, options=None,
        stream=None):
    """Distributed N-D C2C FFT (forward unless ``direction`` says otherwise). Collective.

    Parameters
    ----------
    operand : array
        This process's local array (NumPy or CPU torch on CPU ranks; CuPy or CUDA torch on
        the process's device).
    distribution : Slab or (input box, output box)
        As for :class:`FFT`.
    direction : {'forward', 'inverse'} or FFTDirection, optional
        Default: forward.
    sync_symmetric_memory : bool
        Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
        NCCL's).
    options : FFTOptions or dict, optional
        See :class:`FFTOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array
        This process's share of the result, a new array of the operand's package.

    Examples
    --------
    >>> b = fft(a, distribution=Slab.X)  # doctest: +SKIP
    """
    return _run_function(operand, distribution, direction, options, stream, "C2C", True)


def ifft(operand, /, distribution=None, *, sync_symmetric_memory=True, options=None, stream=None):
    """Distributed N-D inverse C2C FFT (unnormalized). Collective.

    Parameters
    ----------
    operand : array
        This process's local array (NumPy or CPU torch on CPU ranks; CuPy or CUDA torch on
        the process's device).
    distribution : Slab or (input box, output box)
        As for :class:`FFT`.
    sync_symmetric_memory : bool
        Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
        NCCL's).
    options : FFTOptions or dict, optional
        See :class:`FFTOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array
        This process's share of the result, a new array of the operand's package.
    """
    return _run_function(operand, distribution, FFTDirection.INVERSE, options, stream, "C2C",
                         True)


def rfft(operand, /, distribution=None, *, sync_symmetric_memory=True, options=None, stream=None):
    """Distributed N-D R2C FFT of a real operand (the last global axis becomes ``n//2+1``).

    Parameters
    ----------
    operand : array
        This process's local array (NumPy or CPU torch on CPU ranks; CuPy or CUDA torch on
        the process's device).
    distribution : Slab or (input box, output box)
        As for :class:`FFT`.
    sync_symmetric_memory : bool
        Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
        NCCL's).
    options : FFTOptions or dict, optional
        See :class:`FFTOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array
        This process's share of the result, a new array of the operand's package.
    """
    return _run_function(operand, distribution, FFTDirection.FORWARD, options, stream, "R2C",
                         True)


def irfft(operand, /, distribution=None, *, sync_symmetric_memory=True, options=None, stream=None):
    """Distributed N-D C2R FFT (unnormalized); see ``FFTOptions.last_axis_parity``.

    Parameters
    ----------
    operand : array
        This process's local array (NumPy or CPU torch on CPU ranks; CuPy or CUDA torch on
        the process's device).
    distribution : Slab or (input box, output box)
        As for :class:`FFT`.
    sync_symmetric_memory : bool
        Accepted for compatibility (no symmetric heap is involved: exchanges are MPI's or
        NCCL's).
    options : FFTOptions or dict, optional
        See :class:`FFTOptions`.
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.

    Returns
    -------
    array
        This process's share of the result, a new array of the operand's package.
    """
    return _run_function(operand, distribution, FFTDirection.INVERSE, options, stream, "C2R",
                         True)


def allocate_operand(shape, package, *, input_dtype=None, distribution, memory_space=None,
                     fft_type=None, logger=None):
    """An uninitialized local operand of ``shape`` for a distributed FFT.

    An ordinary array of the package, on the host or on this process's device (results of the
    FFTs are new arrays, so no room for the output is needed, and NCCL needs no symmetric
    heap).

    Parameters
    ----------
    shape : sequence of int
        The local shape.
    package : module
        ``numpy``, ``cupy`` or ``torch``.
    input_dtype : dtype, optional
        Default complex128.
    distribution : Slab or (input box, output box)
        Checked as for :class:`FFT`.
    memory_space : {'cpu', 'cuda'}, optional
        Default: ``'cpu'`` for NumPy and torch, ``'cuda'`` for CuPy.
    fft_type : {'C2C', 'R2C', 'C2R'}, optional
        Checked only.
    logger : logging.Logger, optional
        Accepted for compatibility.

    Returns
    -------
    array
    """
    require_context()
    _coerce_fft_distribution(distribution)
    from .._symmetric import allocate_symmetric_memory

    dtype = input_dtype if input_dtype is not None else np.complex128
    if fft_type is not None and str(fft_type).upper() not in ("C2C", "C2R", "R2C"):
        raise InvalidOptionError(f"fft_type must be 'C2C', 'C2R' or 'R2C', got {fft_type!r}")
    if memory_space is None:
        ad = package_adapter(package)  # CuPy arrays live on the device, the others on the host
        memory_space = "cuda" if ad is not None and ad.device_memory else "cpu"
    if not math.prod(shape) >= 0:
        raise InvalidOperandError(f"shape must be non-negative, got {shape!r}")
    return allocate_symmetric_memory(shape, package, dtype=dtype, memory_space=memory_space)
