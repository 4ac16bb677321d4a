"""What a matrix product is before it is planned: the validated operands' :class:`Spec`.

A :class:`Spec` is made once from the first operands (``Matmul(a, b, c, ...)`` or a function-form
call that missed the plan cache): their package and memory space, the execution space, the
dtypes and compute type, conjugation, and the layouts they are computed on (:mod:`._fit`). It
never changes after; the plan (:mod:`._plan`) is made from it, and every later operand is
checked against it. It is also where a stream argument is resolved, for every path.
"""

from __future__ import annotations

import numpy as np

from ..._internal.arrays import check_same_place
from ..._internal.errors import InvalidOperandError
from ..._internal.options import ExecutionCPU, coerce_options, resolve_execution
from ..._internal.overlap import check_inplace_target
from ..._internal.packages import adapter, resolve_stream, wrap_operand
from ._checks import (
    _check_same_package,
    _conj_flags,
    _scalar,
    _signature,
    check_aux_scale,
    check_scales,
    ignored,
)
from ._fit import fit_layouts
from ._options import MatmulQuantizationScales
from ._types import resolve_types

__all__ = ["Spec"]


class Spec:
    """The validated, fixed part of one matrix product (see the module docstring).

    Attributes are read by the plan and the run; nothing writes them after ``__init__``.
    """

    def __init__(self, ops: dict, qualifiers, options, execution, log):
        self.options = options
        self.log = log
        _check_same_package(ops)
        device, device_id, self.package = check_same_place(ops)
        self.adapter = adapter(self.package)
        self.host = device == "cpu"  # the operands live in host memory
        #: the adapter's pointer reader of arrays its records hold as they are (the unchecked
        #: reset's fast path, device operands only)
        self.plain_pointer = None if self.host else getattr(self.adapter, "plain_pointer",
                                                            None)
        self.ab_shapes = (ops["a"].shape, ops["b"].shape)
        if "c" in ops:
            ops["c"] = self.matrix_c(ops["c"])
        self.space = resolve_execution(
            execution, operand_device=device, operand_device_id=device_id,
            host_default="cuda", default_device_id=options.device_id)
        self.on_cpu = isinstance(self.space, ExecutionCPU)
        self.device_id = None if self.on_cpu else self.space.device_id
        conj = _conj_flags(qualifiers, ops)
        c = ops.get("c")
        self.types = resolve_types(ops["a"].dtype, ops["b"].dtype,
                                   c.dtype if c is not None else None, options, log=log)
        self.complex = self.types["a"].startswith("complex")
        self.conj = conj if self.complex else (False, False)  # conjugating reals: a no-op
        if options.inplace and c is not None:
            check_inplace_target(c, "c")
        self.place = ops["a"].place
        self.signatures = {k: _signature(op) for k, op in ops.items()}
        self.fp8_result = self.types["d"] in ("float8_e4m3fn", "float8_e5m2")
        #: how each operand is computed on, and the problem of those layouts (no epilog yet)
        self.fit = fit_layouts(ops, host=self.host,
                               can_copy=not self.on_cpu and self.adapter.can_copy,
                               conj=self.conj, inplace=options.inplace, fp8=self.types["fp8"],
                               log=log)

    @property
    def execution_space(self) -> str:
        return "cpu" if self.on_cpu else f"cuda:{self.device_id}"

    def stream(self, stream):
        """``stream`` (any accepted stream object) as a :class:`Stream` of the operands'
        package, validated on the CPU too: the one place a stream argument is resolved."""
        return resolve_stream(stream, package=self.package, device_id=self.device_id or 0)

    def matrix_c(self, c):
        """A 1-D ``c`` is taken only where the result is a vector of its length (``a`` or
        ``b`` 1-D): it is then the result's shape, read as that vector's matrix. For matrix
        results nvmath-python 1.0 refuses a 1-D ``c`` (NumPy would add ``(N,)`` to every row,
        older nvmath added ``(M,)`` to every column: for square results the two disagree)."""
        if len(c.shape) != 1 or self.options.inplace:
            return c
        a_shape, b_shape = self.ab_shapes
        if len(a_shape) >= 2 and len(b_shape) >= 2:
            raise InvalidOperandError(
                f"c must be at least 2-D for a matrix result ((M, 1) adds a column to every "
                f"column, (M, N) is the whole matrix), got shape {tuple(c.shape)!r}")
        row = len(a_shape) == 1 and len(b_shape) >= 2
        want = b_shape[-1] if row else (a_shape[-2] if len(a_shape) >= 2 else 1)
        if c.shape[0] != want:
            raise InvalidOperandError(
                f"c shape must be the result's, ({want},), got {tuple(c.shape)!r}")
        view = self.adapter.new_axis(c.obj, 0 if row else 1, "c")
        return wrap_operand(view, "c")

    def scalars(self, alpha, beta, c_given: bool) -> tuple:
        """``(alpha, beta)`` of a call, checked: ``beta`` with ``c`` only (ignored with a
        warning without it, as nvmath-python), real for real operands."""
        if c_given and beta is None:
            raise InvalidOperandError("beta must be given when c is given, got None")
        if not c_given and beta is not None:
            beta = ignored(self.log, "beta", beta)
        alpha, beta = _scalar(alpha, 1.0, "alpha"), _scalar(beta, 0.0, "beta")
        if not self.complex and (isinstance(alpha, complex | np.complexfloating) or
                                 isinstance(beta, complex | np.complexfloating)):
            raise InvalidOperandError(f"alpha and beta must be real for real operands, got "
                                      f"{alpha!r}, {beta!r}")
        return alpha, beta

    def call_scales(self, quantization_scales) -> tuple:
        """``(options, checked scales)`` of a call's ``quantization_scales`` (ignored with a
        warning for operands other than fp8, as nvmath-python)."""
        if quantization_scales is not None and not self.types["fp8"]:
            quantization_scales = ignored(self.log, "quantization_scales", quantization_scales)
        scales = coerce_options(quantization_scales, MatmulQuantizationScales,
                                "quantization_scales")
        return scales, self.scales(scales)

    def scales(self, scales) -> dict:
        """The checked fp8 scales (``{name: float or Operand}``) of coerced ``scales``."""
        return check_scales(scales, self.place, self.fp8_result)

    def aux_scale(self, value, aux_type, required: bool = True):
        """The checked scale of an fp8 aux output (a float, an Operand or None)."""
        return check_aux_scale(value, aux_type, self.place, required)
