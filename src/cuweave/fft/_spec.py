"""Specification of one FFT problem: validated operand metadata, types, layouts and the key.

:func:`build_spec` turns an operand (already wrapped), ``axes``, options and the execution space
into a :class:`Spec`; :func:`spec_key` gives the hashable key the function forms cache plans by
(computed from metadata only, without layout analysis, so a cache hit stays cheap).
"""

from __future__ import annotations

import math

from .._internal.cache import operand_key, plan_key
from .._internal.errors import InvalidOperandError, InvalidOptionError, UnsupportedLayoutError
from .._internal.options import ExecutionCPU, OptionTypeError, resolve_execution
from .._internal.overlap import check_inplace_target
from .._internal.packages import adapter, resolve_stream, wrap_operand
from ._layout import (
    LayoutPlan,
    c_strides,
    dense_strides,
    fft_lengths,
    normalize_axes,
    plan_layouts,
    supported_order,
)
from ._options import DeviceCallable, FFTDirection, callback_key

__all__ = ["Spec", "wrap", "build_spec", "spec_key", "execution_space", "result_dtype",
           "infer_fft_type", "default_direction", "coerce_callable",
           "callback_fast_key", "public_key", "OperandTypeError", "ComplexForRealError"]


class OperandTypeError(InvalidOperandError, TypeError):
    """An operand of the wrong kind (a masked array, another package than the planned one):
    also a ``TypeError``, as nvmath-python raises there."""

_REAL = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}
_COMPLEX = {v: k for k, v in _REAL.items()}


def wrap(operand, name: str = "operand", inplace: bool = False):
    """``wrap_operand`` with torch's lazy conjugation resolved (FFTs need the logical values);
    an in-place target with that bit is refused (its resolved copy, not the caller's tensor,
    would receive the result)."""
    if getattr(operand, "mask", None) is not None and _is_masked(operand):
        raise OperandTypeError(
            f"{name} must be a plain array (masked arrays are not supported: their mask would "
            f"be ignored), got {type(operand).__name__}; pass x.filled(value) or x.data")
    op = wrap_operand(operand, name)
    if op.conj:
        if inplace:
            check_inplace_target(op, name)  # raises: a conjugated view is no in-place target
        op = wrap_operand(op.obj.resolve_conj(), name)
    return op


_DTYPES = ("float16", "float32", "float64", "complex32", "complex64", "complex128")


def metadata_operand(shape, dtype, memory_space, strides=None, execution=None):
    """An :class:`Operand` with no data, from metadata (:meth:`FFT.create_key_from_metadata`)."""
    from .._internal.arrays import Operand
    from .._internal.options import ExecutionCUDA

    if not (isinstance(memory_space, str) and memory_space in ("cpu", "cuda")):
        raise InvalidOptionError(f"memory_space must be 'cpu' or 'cuda', got {memory_space!r}")
    shape = _int_tuple(shape, "shape", 0)
    if not shape:
        raise InvalidOperandError(f"shape must have at least one dimension, got {shape!r}")
    if not (isinstance(dtype, str) and dtype in _DTYPES):
        raise InvalidOperandError(f"dtype must be one of {list(_DTYPES)}, got {dtype!r}")
    if strides is None:
        strides = c_strides(shape)
    strides = _int_tuple(strides, "strides", None)
    if len(strides) != len(shape):
        raise InvalidOperandError(
            f"strides must have one entry per dimension of shape {shape!r}, got {strides!r}")
    device_id = None
    if memory_space == "cuda":
        device_id = 0
        if isinstance(execution, ExecutionCUDA):
            device_id = execution.device_id
        elif isinstance(execution, dict) and isinstance(execution.get("device_id"), int):
            device_id = execution["device_id"]
    return Operand(None, "metadata", 0, shape, strides, dtype, memory_space, device_id)


def _int_tuple(values, name: str, low) -> tuple[int, ...]:
    import operator

    try:
        out = tuple(operator.index(v) for v in values if not isinstance(v, bool))
        ok = len(out) == len(values) and (low is None or all(v >= low for v in out))
    except TypeError:
        ok = False
    if not ok:
        what = "non-negative ints" if low == 0 else "ints"
        raise InvalidOperandError(f"{name} must be a sequence of {what}, got {values!r}")
    return out


def check_inplace_operand(op) -> None:
    """The operand of an in-place transform can take its result (:func:`check_inplace_target`,
    the self-overlap error in nvmath-python's words)."""
    check_inplace_target(op, "operand", overlap_lead=(
        f"In-place transform is not supported because the tensor with shape "
        f"{tuple(op.shape)} and strides {tuple(op.strides)} overlaps in memory: "))


class ComplexForRealError(InvalidOperandError, RuntimeError):
    """A complex operand given to a real-input (R2C) transform: also a ``RuntimeError``, as
    nvmath-python's ``rfft`` raises."""


def _is_masked(x) -> bool:
    import numpy as np

    return isinstance(x, np.ma.MaskedArray)


def infer_fft_type(dtype: str, fft_type: str | None) -> str:
    """The transform type for ``dtype``, checking an explicit ``fft_type`` against it."""
    if fft_type is None:
        if dtype in _COMPLEX:
            return "C2C"
        if dtype in _REAL:
            return "R2C"
    elif fft_type == "R2C" and dtype in _REAL:
        return fft_type
    elif fft_type in ("C2C", "C2R") and dtype in _COMPLEX:
        return fft_type
    want = {"R2C": "a real floating type (float16/32/64)", "C2C": "a complex type",
            "C2R": "a complex type", None: "a floating or complex type"}[fft_type]
    if fft_type == "R2C" and dtype in _COMPLEX:
        raise ComplexForRealError(
            f"rfft expects a real input, but got {dtype}: operand dtype must be {want} for "
            f"fft_type 'R2C' (rfft), got {dtype!r}; use fft for complex input")
    lead = (f"This function expects complex operand, found {dtype}: "
            if fft_type in ("C2C", "C2R") else "")
    raise InvalidOperandError(
        f"{lead}operand dtype must be {want} for fft_type {fft_type!r}, got {dtype!r}")


def result_dtype(dtype: str, fft_type: str) -> str:
    if fft_type == "R2C":
        return _REAL[dtype]
    if fft_type == "C2R":
        return _COMPLEX[dtype]
    return dtype


def default_direction(fft_type: str) -> FFTDirection:
    return FFTDirection.INVERSE if fft_type == "C2R" else FFTDirection.FORWARD


def coerce_callable(value, name: str) -> DeviceCallable | None:
    if value is None or isinstance(value, DeviceCallable):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"ltoir", "size", "data", "symbol"})
        if unknown:
            raise OptionTypeError(  # a TypeError too, as DeviceCallable(**value) in nvmath
                f"{name} keys must be among ['data', 'ltoir', 'size', 'symbol'], got {unknown!r}")
        try:
            return DeviceCallable(**value)
        except InvalidOptionError as e:  # name the parameter: "prolog.ltoir must be ..."
            raise type(e)(f"{name}.{e}") from None
    raise OptionTypeError(f"{name} must be a DeviceCallable, a dict or None, got {value!r}")


def execution_space(execution, op):
    """Resolve ``execution`` for operand ``op`` (default: follows the operand's memory)."""
    if execution is None and op.device == "cpu":
        return _DEFAULT_CPU
    return resolve_execution(execution, operand_device=op.device,
                             operand_device_id=op.device_id, host_default="cpu",
                             cpu_for_device=True, name_from_operands=True)


_DEFAULT_CPU = ExecutionCPU()


class Spec:
    """Everything fixed about one FFT problem (see :func:`build_spec`)."""

    __slots__ = ("package", "device", "space", "device_id", "cuda", "staged", "shape", "strides",
                 "dtype", "out_dtype", "axes", "fft_type", "lengths", "out_shape", "inplace",
                 "options", "layout", "dev_strides", "n_points", "stage_perm", "to_host")

    def stream(self, stream):
        """``stream`` (any accepted stream object; ``None``: the current one of a device
        operand's package) as a :class:`Stream`: the one place a stream argument is resolved."""
        package = self.package if self.device == "cuda" else None
        return resolve_stream(stream, package=package, device_id=self.device_id)

    def __repr__(self) -> str:
        return (f"Spec({self.fft_type}, {self.dtype}->{self.out_dtype}, shape={self.shape}, "
                f"axes={self.axes}, {'cuda' if self.cuda else 'cpu'})")


def _staged_layout(s: Spec) -> tuple[tuple[int, ...], tuple | None]:
    """(strides, permutation) of the device copy of a host operand (what the stager uploads).

    The copy keeps the operand's order when it is dense in C or Fortran order and cuFFT can
    express it (one straight upload); otherwise it is laid out with the batch axes outermost
    and the transformed axes innermost (``perm``: the upload transposes into that order).
    """
    f_strides = dense_strides(s.shape, tuple(reversed(range(len(s.shape)))))
    c_order = c_strides(s.shape)
    # the stager uploads a host array in its own order when it is Fortran- but not C-dense
    fortran = _dense_as(s.shape, s.strides, f_strides) and not _dense_as(s.shape, s.strides,
                                                                         c_order)
    keep = f_strides if fortran else c_order
    try:
        _layout_for(s, keep)
        return keep, None
    except UnsupportedLayoutError:
        perm = supported_order(s.shape, s.strides, s.axes, s.fft_type)
        return dense_strides(s.shape, perm), perm


def build_spec(op, axes, options, execution) -> Spec:
    """Validate operand ``op`` against ``axes``/``options``/``execution``; plan layouts."""
    s = Spec()
    s.package, s.device, s.shape, s.strides, s.dtype = (op.package, op.device, op.shape,
                                                        op.strides, op.dtype)
    s.options = options
    # the types first (the operand's record alone), then where it runs, then its layout
    s.fft_type = infer_fft_type(op.dtype, options.fft_type)
    if options.inplace and s.fft_type != "C2C":
        raise InvalidOptionError(
            f"inplace must be False for a {s.fft_type} transform (in-place is C2C only), got True")
    s.out_dtype = result_dtype(op.dtype, s.fft_type)
    if s.out_dtype == "complex32" and not adapter(op.package).has_complex32:
        raise OperandTypeError(  # a TypeError, as nvmath-python raises
            f"operand dtype must not be float16 for a {op.package} R2C transform ({op.package} "
            "has no complex32 for the result), got 'float16'; use a torch tensor or float32")
    s.space = execution_space(execution, op)
    s.cuda = s.space.name == "cuda"
    s.device_id = s.space.device_id if s.cuda else op.device_id  # None for host operands
    s.staged = s.cuda and op.device == "cpu"
    s.axes = normalize_axes(axes, len(op.shape))
    s.lengths, s.out_shape = fft_lengths(op.shape, s.axes, s.fft_type, options.last_axis_parity)
    if any(n == 0 for n in op.shape):
        raise InvalidOperandError(f"operand must not be empty, got shape {op.shape!r}")
    s.n_points = math.prod(s.lengths)
    s.inplace = options.inplace
    if s.inplace:  # the result overwrites the operand: every element needs its own address
        check_inplace_operand(op)
    s.layout, s.stage_perm = None, None
    s.to_host = op.device == "cuda" and not s.cuda  # CPU execution of a device operand
    s.dev_strides = op.strides
    if s.cuda:
        if s.staged:
            s.dev_strides, s.stage_perm = _staged_layout(s)
        s.layout = _layout_for(s, s.dev_strides)
    return s


def _dense_as(shape, strides, want) -> bool:
    """NumPy's contiguity flags from strides (axes of length 1 ignored)."""
    return all(a == b for a, b, n in zip(strides, want, shape) if n > 1)


def _layout_for(s: Spec, strides) -> LayoutPlan:
    return plan_layouts(s.shape, strides, s.axes, s.fft_type, s.out_shape,
                        inplace=s.inplace, result_layout=s.options.result_layout,
                        out_strides=strides if s.inplace else None)


def _plan_args(s: Spec, layout: LayoutPlan) -> tuple:
    lay = layout
    return (s.fft_type, s.dtype, s.out_dtype, s.inplace, lay.n, lay.batch,
            (lay.inp.embed, lay.inp.stride, lay.inp.dist),
            (lay.out.embed, lay.out.stride, lay.out.dist))


def plan_args(s: Spec) -> tuple:
    """What the transform library is asked to do for ``s``: the type, dtypes, lengths, batch
    and both sides' (embed, stride, dist), whatever the operand's axis names. Operands whose
    batch axes are rearranged (``(2, 3, 64)`` and ``(3, 2, 64)``, axes ``(2,)``) give equal
    arguments. Taken from the operand's own layout (from the copy the transform reads when
    cuFFT cannot express it; from shape, strides and axes when neither can be planned)."""
    if s.layout is not None and not s.staged:
        return _plan_args(s, s.layout)
    try:
        return _plan_args(s, _layout_for(s, s.strides))
    except UnsupportedLayoutError:
        if s.layout is not None:
            return ("copy",) + _plan_args(s, s.layout)
        return ("strided", s.fft_type, s.dtype, s.inplace, s.shape, s.strides, s.axes,
                s.out_shape)


def public_key(s: Spec, prolog=None, epilog=None) -> tuple:
    """:meth:`FFT.create_key`'s key: ``(plan arguments, callbacks, execution space)``."""
    callbacks = None
    if prolog is not None or epilog is not None:
        callbacks = (_callable_key(prolog, "prolog"), _callable_key(epilog, "epilog"))
    where = ("cuda", s.space.device_id) if s.cuda else ("cpu", s.space.num_threads)
    return plan_args(s), callbacks, where


def _callable_key(c, name: str) -> tuple | None:
    if c is None:
        return None
    return coerce_callable(c, name).key()


def spec_key(op, axes, options, space, prolog=None, epilog=None) -> tuple:
    """Hashable key of everything that shapes a plan (never the data pointer), by the one
    key builder (:func:`~cuweave._internal.cache.plan_key`).

    ``axes`` enter normalized (``None``, ``1``, ``(1,)`` and ``(-1,)`` of a 2-D operand give one
    key), so :meth:`FFT.get_key` equals :meth:`FFT.create_key` of the same arguments.
    """
    if space.name == "cuda":
        where = ("cuda", space.device_id)
    else:
        where = ("cpu", space.num_threads)
    # the options that shape a plan, field by field (freezing the whole dataclass costs more
    # than the rest of the key), the allocator by identity
    axes = normalize_axes(axes, len(op.shape))
    return plan_key(operand_key(op, aligned=False), axes, options.fft_type, options.inplace,
                    options.last_axis_parity, options.result_layout, options.blocking,
                    id(options.allocator) if options.allocator is not None else None, where,
                    _callable_key(prolog, "prolog"), _callable_key(epilog, "epilog"))


def callback_fast_key(c):
    """The part of a function-form key naming a callback as given, equal to
    :meth:`~cuweave.fft.DeviceCallable.key` for the same callback as a dict: equal keys mean
    the same validated callback, so a hit skips re-validating it. A dict with other entries or
    any other object gets a key of its own identity, which misses: the full path reports it."""
    if c is None:
        return None
    if type(c) is dict:
        if c.keys() <= _CALLBACK_KEYS:
            return callback_key(c.get("ltoir"), c.get("size"), c.get("data"), c.get("symbol"))
        return ("unknown", id(c))
    key = getattr(c, "key", None)
    return key() if callable(key) else ("unknown", id(c))


_CALLBACK_KEYS = frozenset(["ltoir", "size", "data", "symbol"])
