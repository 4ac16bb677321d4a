"""Knobs of a device GEMM (cuBLASDx): named tuples, enums with libmathdx's C values, and the
validated, hashable :class:`MatmulSpec`.

Pure Python and NumPy: nothing here loads libmathdx, numba or CUDA.

Examples
--------
>>> import numpy as np
>>> spec = MatmulSpec.from_knobs((32, 16, 64), np.float32, "real",
...                              arrangement=("row_major", "col_major", "col_major"), sm=90)
>>> spec.a_dim, spec.b_dim, spec.c_dim
((32, 64), (64, 16), (32, 16))
>>> spec.precision
Precision(a='float32', b='float32', c='float32')
"""

from __future__ import annotations

import enum
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .._internal.errors import InvalidOptionError
from ._options import normalize_sm

__all__ = ["Precision", "Arrangement", "TransposeMode", "LeadingDimension", "Alignment",
           "MAX_ALIGNMENT", "MatmulSpec", "ArrangementKind", "TransposeKind", "COMMONDX_PRECISION",
           "VALUE_TYPE_CODES", "SUPPORTED_PRECISIONS", "value_type_code"]


class Precision(NamedTuple):
    """Precisions of ``A``, ``B`` and ``C`` (NumPy dtype names)."""

    a: str
    b: str
    c: str


class Arrangement(NamedTuple):
    """Storage order of ``A``, ``B`` and ``C``: ``'row_major'`` or ``'col_major'``."""

    a: str
    b: str
    c: str


class TransposeMode(NamedTuple):
    """Operation on ``A`` and ``B`` (deprecated in favour of :class:`Arrangement`):
    ``'non_transposed'``, ``'transposed'`` or ``'conj_transposed'``."""

    a: str
    b: str


class LeadingDimension(NamedTuple):
    """Leading dimensions (in elements) of ``A``, ``B`` and ``C`` in shared memory."""

    a: int
    b: int
    c: int


class Alignment(NamedTuple):
    """Alignment in bytes of ``A``, ``B`` and ``C`` in shared memory."""

    a: int
    b: int
    c: int


MAX_ALIGNMENT = Alignment(16, 16, 16)


class ArrangementKind(enum.IntEnum):
    """``cublasdxArrangement`` values."""

    col_major = 0
    row_major = 1


class TransposeKind(enum.IntEnum):
    """``cublasdxTransposeMode`` values."""

    non_transposed = 0
    transposed = 1
    conj_transposed = 2


# commondxPrecision values of the precisions supported here (nvmath-python 1.0's set: NumPy's
# half/single/double floats and its signed and unsigned integers of 8 to 64 bits).
_INTEGERS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
COMMONDX_PRECISION = {"float16": 3, "float32": 5, "float64": 6,
                      **{name: code for name, code in zip(_INTEGERS, range(7, 15))}}
SUPPORTED_PRECISIONS = tuple(COMMONDX_PRECISION)
# commondxValueType values -> (dtype name, complex?)
VALUE_TYPE_CODES = {7: ("float16", False), 8: ("float16", True), 12: ("float32", False),
                    13: ("float32", True), 14: ("float64", False), 15: ("float64", True),
                    **{16 + 2 * i: (name, False) for i, name in enumerate(_INTEGERS)},
                    **{17 + 2 * i: (name, True) for i, name in enumerate(_INTEGERS)}}


_VALUE_TYPE_BY_NAME = {"float16": 7, "float32": 12, "float64": 14, "complex64": 13,
                       "complex128": 15, **{name: 16 + 2 * i for i, name in enumerate(_INTEGERS)}}


def value_type_code(dtype) -> int:
    """commondxValueType of a NumPy dtype (float16/32/64, complex64/128, (u)int8-64)."""
    return _VALUE_TYPE_BY_NAME[np.dtype(dtype).name]


def _precision_name(value, name: str) -> str:
    try:
        dt = np.dtype(value)
    except TypeError:
        dt = None
    if dt is None or dt.name not in COMMONDX_PRECISION:
        raise InvalidOptionError(
            f"{name} must be one of numpy.float16, numpy.float32, numpy.float64 or a signed or "
            f"unsigned integer type of 8 to 64 bits, got {value!r}")
    return dt.name


def _triple(value, name: str, cls, check):
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) != len(cls._fields):
        raise InvalidOptionError(
            f"{name} must be a {len(cls._fields)}-sequence ({cls.__name__}), got {value!r}")
    return cls(*(check(v, f"{name}.{f}") for v, f in zip(value, cls._fields)))


def _choice(values):
    def check(v, name):
        if v not in values:
            raise InvalidOptionError(f"{name} must be one of {sorted(values)}, got {v!r}")
        return v

    return check


def _positive_int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v <= 0:
        raise InvalidOptionError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def _block_dim(block_size, block_dim):
    if block_size is not None and block_dim is not None:
        raise InvalidOptionError(
            f"block_size and block_dim must not both be given, got block_size={block_size!r}, "
            f"block_dim={block_dim!r}")
    if block_size is not None:
        if block_size == "suggested":
            return "suggested"
        return (_positive_int(block_size, "block_size"), 1, 1)
    if block_dim is None or block_dim == "suggested":
        return block_dim
    if isinstance(block_dim, (int, np.integer)) and not isinstance(block_dim, bool):
        block_dim = (block_dim,)
    if isinstance(block_dim, str) or not isinstance(block_dim, Sequence) \
            or not 1 <= len(block_dim) <= 3:
        raise InvalidOptionError(f"block_dim must be a Dim3, a 1-3 sequence of positive "
                                 f"integers or 'suggested', got {block_dim!r}")
    dims = tuple(_positive_int(v, "block_dim") for v in block_dim) + (1,) * (3 - len(block_dim))
    if dims[0] * dims[1] * dims[2] > 1024:
        raise InvalidOptionError(f"block_dim must hold at most 1024 threads, got {block_dim!r}")
    return dims


@dataclass(frozen=True)
class MatmulSpec:
    """Validated knobs of one cuBLASDx GEMM (hashable; ``key()`` feeds the cache)."""

    size: tuple
    precision: Precision
    data_type: str
    sm: int
    arrangement: Arrangement | None
    transpose_mode: TransposeMode | None
    leading_dimension: LeadingDimension | str | None
    alignment: Alignment | None
    block_dim: tuple | str | None
    static_block_dim: bool
    execution: str = "Block"
    function: str = "MM"
    with_pipeline: bool = False
    enable_input_streaming: bool = False

    @classmethod
    def from_knobs(cls, size, precision, data_type="real", *, sm=None, block_size=None,
                   block_dim=None, leading_dimension=None, transpose_mode=None,
                   arrangement=None, alignment=None, function="MM", static_block_dim=False,
                   execution="Block", with_pipeline=False, enable_input_streaming=False):
        """Validate nvmath-python's ``Matmul`` knobs (raises InvalidOptionError, a ValueError)."""
        if isinstance(size, str) or not isinstance(size, Sequence) or len(size) != 3:
            raise InvalidOptionError(f"size must be a sequence (m, n, k), got {size!r}")
        size = tuple(_positive_int(v, "size") for v in size)
        if isinstance(precision, str) or not isinstance(precision, Sequence):
            precision = (precision,) * 3
        if len(precision) != 3:
            raise InvalidOptionError(
                f"precision must be one dtype or a 3-sequence (a, b, c), got {precision!r}")
        precision = Precision(*(_precision_name(p, f"precision.{f}")
                                for p, f in zip(precision, Precision._fields)))
        _choice({"real", "complex"})(data_type, "data_type")
        if data_type == "complex" and any(p in _INTEGERS for p in precision):
            raise InvalidOptionError(f"precision must be floating-point for complex GEMMs (NumPy "
                                     f"has no complex integers), got {tuple(precision)!r}")
        if execution != "Block":
            raise InvalidOptionError(f"execution must be 'Block' (the only execution cuBLASDx "
                                     f"offers for GEMMs), got {execution!r}")
        if function != "MM":
            raise InvalidOptionError(f"function must be 'MM', got {function!r}")
        for name, flag in (("static_block_dim", static_block_dim),
                           ("with_pipeline", with_pipeline),
                           ("enable_input_streaming", enable_input_streaming)):
            if not isinstance(flag, (bool, np.bool_)):
                raise InvalidOptionError(f"{name} must be a bool, got {flag!r}")
        if transpose_mode is not None:
            warnings.warn("transpose_mode is deprecated; use arrangement instead",
                          DeprecationWarning, stacklevel=3)
        transpose_mode = _triple(transpose_mode, "transpose_mode", TransposeMode,
                                 _choice(set(TransposeKind.__members__)))
        arrangement = _triple(arrangement, "arrangement", Arrangement,
                              _choice(set(ArrangementKind.__members__)))
        if (arrangement is None) == (transpose_mode is None):
            raise InvalidOptionError(
                "exactly one of arrangement and transpose_mode must be given, got "
                f"arrangement={arrangement!r}, transpose_mode={transpose_mode!r}")
        if leading_dimension != "suggested":
            leading_dimension = _triple(leading_dimension, "leading_dimension",
                                        LeadingDimension, _positive_int)
        alignment = _triple(alignment, "alignment", Alignment, _positive_int)
        if alignment is not None:
            cplx = 2 if data_type == "complex" else 1
            for f, a, p in zip(Alignment._fields, alignment, precision):
                item = np.dtype(p).itemsize * cplx
                if a > 16 or a % item:
                    raise InvalidOptionError(
                        f"alignment.{f} must be a multiple of {item} (the element size) and at "
                        f"most 16, got {a!r}")
        return cls(size=size, precision=precision, data_type=data_type, sm=normalize_sm(sm),
                   arrangement=arrangement, transpose_mode=transpose_mode,
                   leading_dimension=leading_dimension, alignment=alignment,
                   block_dim=_block_dim(block_size, block_dim),
                   static_block_dim=bool(static_block_dim), execution=execution,
                   function=function, with_pipeline=bool(with_pipeline),
                   enable_input_streaming=bool(enable_input_streaming))

    # ----- derived ----------------------------------------------------------------------------
    @property
    def is_complex(self) -> bool:
        return self.data_type == "complex"

    def _op(self, which: str) -> str:
        return self.transpose_mode._asdict()[which] if self.transpose_mode else "non_transposed"

    @property
    def a_dim(self) -> tuple:
        m, _, k = self.size
        return (k, m) if self._op("a") != "non_transposed" else (m, k)

    @property
    def b_dim(self) -> tuple:
        _, n, k = self.size
        return (n, k) if self._op("b") != "non_transposed" else (k, n)

    @property
    def c_dim(self) -> tuple:
        return self.size[:2]

    def storage_orders(self) -> tuple:
        """Effective ``(a, b, c)`` orders ('row_major'/'col_major') of the shared-memory data:
        with ``transpose_mode`` the matrices are column-major as stored (``a_dim``)."""
        if self.arrangement is not None:
            return tuple(self.arrangement)
        return ("col_major",) * 3

    def with_(self, **changes) -> MatmulSpec:
        return MatmulSpec(**{**self.__dict__, **changes})

    def key(self) -> tuple:
        return ("matmul", self.size, tuple(self.precision), self.data_type, self.sm,
                self.arrangement and tuple(self.arrangement),
                self.transpose_mode and tuple(self.transpose_mode),
                self.leading_dimension if isinstance(self.leading_dimension, str | None)
                else tuple(self.leading_dimension),
                self.alignment and tuple(self.alignment),
                self.block_dim if isinstance(self.block_dim, str | None) else tuple(self.block_dim),
                self.static_block_dim, self.execution, self.function,
                # pipelined descriptions only: the keys (and disk cache) of the others unchanged
                *((("pipeline", self.with_pipeline, self.enable_input_streaming),)
                  if self.with_pipeline or self.enable_input_streaming else ()))
