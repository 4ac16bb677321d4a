"""Specification of one FFT problem: validated operand metadata, types, layouts and the key.

:func:`build_spec` turns an operand (already wrapped), ``axes``, options and the execution space
into a :class:`Spec`; :func:`spec_key` gives the hashable key the function forms cache plans by
(computed from metadata only, without layout analysis, so a cache hit stays cheap).
"""

from __future__ import annotations

import math

from .._internal.errors import InvalidOperandError, InvalidOptionError
from .._internal.options import ExecutionCPU, resolve_execution
from .._internal.packages import wrap_operand
from ._layout import (
    LayoutPlan,
    c_strides,
    fft_lengths,
    normalize_axes,
    plan_layouts,
)
from ._options import DeviceCallable, FFTDirection, callback_key

__all__ = ["Spec", "wrap", "build_spec", "spec_key", "execution_space", "result_dtype",
           "infer_fft_type", "default_direction", "norm_scale", "coerce_callable",
           "callback_fast_key"]

_REAL = {"float16": "complex32", "float32": "complex64", "float64": "complex128"}
_COMPLEX = {v: k for k, v in _REAL.items()}


def wrap(operand, name: str = "operand"):
    """``wrap_operand`` with torch's lazy conjugation resolved (FFTs need the logical values)."""
    op = wrap_operand(operand, name)
    if op.conj:
        op = wrap_operand(op.obj.resolve_conj(), name)
    return op


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
    raise InvalidOperandError(
        f"operand dtype must be {want} for fft_type {fft_type!r}, got {dtype!r}")


def result_dtype(dtype: str, fft_type: str) -> str:
    if fft_type == "R2C":
        return _REAL[dtype]
    if fft_type == "C2R":
        return _COMPLEX[dtype]
    return dtype


def default_direction(fft_type: str) -> FFTDirection:
    return FFTDirection.INVERSE if fft_type == "C2R" else FFTDirection.FORWARD


def norm_scale(norm: str | None, direction: FFTDirection, n: int) -> float:
    """The factor NumPy's ``norm`` applies in ``direction`` to a transform of ``n`` points."""
    if norm is None:
        return 1.0
    if norm == "ortho":
        return 1.0 / math.sqrt(n)
    if (norm == "backward") == (direction == FFTDirection.INVERSE):
        return 1.0 / n
    return 1.0


def coerce_callable(value, name: str) -> DeviceCallable | None:
    if value is None or isinstance(value, DeviceCallable):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"ltoir", "size", "data", "symbol"})
        if unknown:
            raise InvalidOptionError(
                f"{name} keys must be among ['data', 'ltoir', 'size', 'symbol'], got {unknown!r}")
        return DeviceCallable(**value)
    raise InvalidOptionError(f"{name} must be a DeviceCallable, a dict or None, got {value!r}")


def execution_space(execution, op):
    """Resolve ``execution`` for operand ``op`` (default: follows the operand's memory)."""
    if execution is None and op.device == "cpu":
        return _DEFAULT_CPU
    return resolve_execution(execution, operand_device=op.device,
                             operand_device_id=op.device_id, host_default="cpu")


_DEFAULT_CPU = ExecutionCPU()


class Spec:
    """Everything fixed about one FFT problem (see :func:`build_spec`)."""

    __slots__ = ("package", "device", "space", "device_id", "cuda", "staged", "shape", "strides",
                 "dtype", "out_dtype", "axes", "fft_type", "lengths", "out_shape", "inplace",
                 "options", "layout", "dev_strides", "n_points")

    def __repr__(self) -> str:
        return (f"Spec({self.fft_type}, {self.dtype}->{self.out_dtype}, shape={self.shape}, "
                f"axes={self.axes}, {'cuda' if self.cuda else 'cpu'})")


def _staged_strides(op) -> tuple[int, ...]:
    """Strides of the device copy of a host operand (what the stager uploads)."""
    arr = op.host_array()
    if not arr.flags.c_contiguous and arr.flags.f_contiguous:
        return op.strides
    return c_strides(op.shape)


def build_spec(op, axes, options, execution) -> Spec:
    """Validate operand ``op`` against ``axes``/``options``/``execution``; plan layouts."""
    s = Spec()
    s.package, s.device, s.shape, s.strides, s.dtype = (op.package, op.device, op.shape,
                                                        op.strides, op.dtype)
    s.options = options
    s.space = execution_space(execution, op)
    s.cuda = s.space.name == "cuda"
    s.device_id = s.space.device_id if s.cuda else None
    s.staged = s.cuda and op.device == "cpu"
    s.axes = normalize_axes(axes, len(op.shape))
    s.fft_type = infer_fft_type(op.dtype, options.fft_type)
    if options.inplace and s.fft_type != "C2C":
        raise InvalidOptionError(
            f"inplace must be False for a {s.fft_type} transform (in-place is C2C only), got True")
    s.out_dtype = result_dtype(op.dtype, s.fft_type)
    s.lengths, s.out_shape = fft_lengths(op.shape, s.axes, s.fft_type, options.last_axis_parity)
    if any(n == 0 for n in op.shape):
        raise InvalidOperandError(f"operand must not be empty, got shape {op.shape!r}")
    s.n_points = math.prod(s.lengths)
    s.inplace = options.inplace
    s.layout = None
    s.dev_strides = op.strides
    if s.cuda:
        if s.staged:
            s.dev_strides = _staged_strides(op)
        s.layout = _cuda_layout(s)
    return s


def _cuda_layout(s: Spec) -> LayoutPlan:
    return plan_layouts(s.shape, s.dev_strides, s.axes, s.fft_type, s.out_shape,
                        inplace=s.inplace, result_layout=s.options.result_layout,
                        out_strides=s.dev_strides if s.inplace else None)


def _callable_key(c) -> tuple | None:
    if c is None:
        return None
    return coerce_callable(c, "callback").key()


def spec_key(op, axes, options, space, prolog=None, epilog=None) -> tuple:
    """Hashable key of everything that shapes a plan (never the data pointer).

    ``axes`` enter normalized (``None``, ``1``, ``(1,)`` and ``(-1,)`` of a 2-D operand give one
    key), so :meth:`FFT.get_key` equals :meth:`FFT.create_key` of the same arguments.
    """
    if space.name == "cuda":
        where = ("cuda", space.device_id)
    else:
        where = ("cpu", space.num_threads)
    return (op.package, op.device, op.shape, op.strides, op.dtype,
            normalize_axes(axes, len(op.shape)), options.fft_type, options.inplace,
            options.last_axis_parity, options.result_layout, options.blocking,
            id(options.allocator) if options.allocator is not None else None, where,
            _callable_key(prolog), _callable_key(epilog))


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
