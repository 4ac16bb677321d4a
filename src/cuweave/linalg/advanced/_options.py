"""Options, preferences and enums of :mod:`cuweave.linalg.advanced`.

Every options argument also accepts a ``dict``; validation happens in ``__post_init__`` (no
side effects: nothing is allocated or loaded).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from ..._bindings.cublaslt import ReductionScheme
from ..._bindings.library_types import ComputeType, CudaDataType
from ..._internal.dtypes import canonical_name
from ..._internal.errors import InvalidOperandError, InvalidOptionError
from ..._internal.memory import check_allocator, parse_memory_limit
from ..._internal.options import check_enum, coerce_options

__all__ = [
    "MatmulOptions",
    "MatmulPlanPreferences",
    "MatmulEpilogPreferences",
    "MatmulQuantizationScales",
    "MatmulComputeType",
    "MatmulReductionScheme",
    "MatmulNumericalImplFlags",
    "MatmulInnerShape",
    "MatrixQualifier",
    "matrix_qualifiers_dtype",
    "CudaDataType",
]

#: the compute types of cuBLAS (``cublasComputeType_t``)
MatmulComputeType = ComputeType
MatmulReductionScheme = ReductionScheme


class MatmulNumericalImplFlags(IntEnum):
    """Bits of ``MatmulPlanPreferences.numerical_impl_mask``: which kinds of kernel the
    heuristics may return (``cublasLtNumericalImplFlags_t``, under nvmath-python's names).

    Combine them with ``|``, e.g. ``OP_TYPE_FMA | OP_TYPE_TENSOR_HMMA``; ``ALL`` allows every
    kernel (the default).

    Examples
    --------
    >>> from cuweave.linalg.advanced import MatmulNumericalImplFlags as F
    >>> hex(F.OP_TYPE_TENSOR_HMMA | F.ACCUMULATOR_32F)
    '0x202'
    """

    OP_TYPE_FMA = 0x01
    OP_TYPE_TENSOR_HMMA = 0x02
    OP_TYPE_TENSOR_IMMA = 0x04
    OP_TYPE_TENSOR_DMMA = 0x08
    OP_TYPE_TENSOR_MASK = 0xFE
    OP_TYPE_MASK = 0xFF
    ACCUMULATOR_16F = 0x01 << 8
    ACCUMULATOR_32F = 0x02 << 8
    ACCUMULATOR_64F = 0x04 << 8
    ACCUMULATOR_32I = 0x08 << 8
    ACCUMULATOR_TYPE_MASK = 0xFF << 8
    INPUT_TYPE_16F = 0x01 << 16
    INPUT_TYPE_16BF = 0x02 << 16
    INPUT_TYPE_TF32 = 0x04 << 16
    INPUT_TYPE_32F = 0x08 << 16
    INPUT_TYPE_64F = 0x10 << 16
    INPUT_TYPE_8I = 0x20 << 16
    INPUT_TYPE_8F_E4M3 = 0x40 << 16
    INPUT_TYPE_8F_E5M2 = 0x80 << 16
    INPUT_TYPE_MASK = 0xFF << 16
    GAUSSIAN = 0x01 << 32
    ALL = (1 << 64) - 1

#: structured dtype of the ``qualifiers`` argument: one record per operand ``a``, ``b``, ``c``
matrix_qualifiers_dtype = np.dtype([("structure", np.int32), ("is_conjugate", np.bool_)])


class OptionKeywordError(InvalidOptionError, TypeError):
    """An options dataclass got a keyword it does not have (a ``TypeError``, as the plain
    dataclass raises, and a typed cuweave error)."""


class AllocatorTypeError(InvalidOptionError, TypeError):
    """``allocator`` does not follow the memory-manager protocol (a ``TypeError``, as in
    nvmath-python, and a typed cuweave error)."""


def _keywords_checked(cls):
    """``cls`` whose constructor names the accepted fields when given an unknown keyword."""
    init = cls.__init__
    names = tuple(cls.__dataclass_fields__)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise OptionKeywordError(f"{cls.__name__} keywords must be among {list(names)}, got "
                                     f"unknown {unknown!r}")
        init(self, *args, **kwargs)

    cls.__init__ = __init__
    return cls


class MatrixQualifier(IntEnum):
    """Values of the ``structure`` field of :data:`matrix_qualifiers_dtype`."""

    GENERAL = 0


class MatmulInnerShape(IntEnum):
    """``cublasLtMatmulInnerShape_t``."""

    UNDEFINED = 0
    MMA884 = 1
    MMA1684 = 2
    MMA1688 = 3
    MMA16816 = 4


_BLOCKING = (True, "auto")


def _dtype_or_none(value, name):
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool | CudaDataType):
        try:  # a CudaDataType's value, as nvmath-python takes it
            value = CudaDataType(value)
        except ValueError:
            raise InvalidOptionError(f"{name} must be a dtype name or a CudaDataType, got "
                                     f"{value!r}") from None
    if isinstance(value, CudaDataType):
        from ..._bindings.library_types import DATA_TYPE

        for k, v in DATA_TYPE.items():
            if v == value:
                return k
        raise InvalidOptionError(f"{name} must be a supported data type, got {value!r}")
    try:
        return canonical_name(value)
    except InvalidOperandError as e:
        raise InvalidOptionError(f"{name} must be a dtype name such as 'float8_e4m3fn' or "
                                 f"'bfloat16', got {value!r}") from e


@_keywords_checked
@dataclass
class MatmulOptions:
    """Options of :class:`~cuweave.linalg.advanced.Matmul` and
    :func:`~cuweave.linalg.advanced.matmul`.

    Attributes
    ----------
    inplace : bool
        Write the result into ``c`` (requires ``c`` of the result's shape and dtype).
    compute_type : MatmulComputeType, int, str or None
        ``None`` picks the default for the operands' dtype (``COMPUTE_32F`` for 16/32-bit
        real and fp8, ``COMPUTE_64F`` for float64/complex128, ``COMPUTE_32F`` for complex64).
    scale_type : CudaDataType, int, str or None
        Type of ``alpha``/``beta``; ``None`` derives it from the compute type.
    result_type : dtype name, CudaDataType or None
        Result dtype (fp8 operands only; default: ``c``'s dtype, else the operands' dtype).
    result_amax : bool
        fp8: also return the maximum absolute value of the result as aux ``"result_amax"``.
    block_scaling : bool
        Block-scaled fp8/fp4 (needs compute capability >= 10.0; rejected on older GPUs).
    sm_count_target : int
        Number of SMs the heuristics should target (0: all).
    fast_accumulation : bool
        fp8 fast accumulation (no periodic promotion to higher precision).
    device_id : int
        CUDA device for host operands.
    handle : int or None
        An existing cuBLASLt handle to use (not destroyed by cuweave).
    logger : logging.Logger or None
    memory_limit : int, str or float
        Workspace bound: bytes, ``"1GiB"`` or a percentage of device memory (``"80%"``).
    blocking : True or "auto"
        ``"auto"``: device operands return without synchronizing; host operands always block.
    allocator : BaseCUDAMemoryManager, BaseCUDAMemoryManagerAsync or None
        Where workspaces come from (:mod:`cuweave.memory`; default: the operands' package
        pool, else cuda.core). Results come from the operands' package.
    """

    inplace: bool = False
    compute_type: Any = None
    scale_type: Any = None
    result_type: Any = None
    result_amax: bool = False
    block_scaling: bool = False
    sm_count_target: int = 0
    fast_accumulation: bool = False
    device_id: int = 0
    handle: int | None = None
    logger: logging.Logger | None = None
    memory_limit: int | str | float = "80%"
    blocking: bool | str = "auto"
    allocator: Any = None

    def __post_init__(self):
        for flag in ("inplace", "result_amax", "block_scaling", "fast_accumulation"):
            if not isinstance(getattr(self, flag), bool | np.bool_):
                raise InvalidOptionError(f"{flag} must be a bool, got {getattr(self, flag)!r}")
        self.compute_type = check_enum(self.compute_type, ComputeType, "compute_type",
                                       allow_none=True)
        self.scale_type = check_enum(self.scale_type, CudaDataType, "scale_type",
                                     allow_none=True)
        self.result_type = _dtype_or_none(self.result_type, "result_type")
        for name in ("sm_count_target", "device_id"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InvalidOptionError(f"{name} must be a non-negative int, got {v!r}")
        if self.handle is not None and (not isinstance(self.handle, int) or self.handle <= 0):
            raise InvalidOptionError(f"handle must be a cuBLASLt handle (int) or None, "
                                     f"got {self.handle!r}")
        if self.logger is not None and not isinstance(self.logger, logging.Logger):
            raise InvalidOptionError(f"logger must be a logging.Logger or None, "
                                     f"got {self.logger!r}")
        # validates ints, fractions, sizes and percentages (in (0, 100], as nvmath-python)
        parse_memory_limit(self.memory_limit, total=1 << 40)
        if self.blocking not in _BLOCKING or (isinstance(self.blocking, int)
                                              and self.blocking is not True):
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")
        try:
            check_allocator(self.allocator)
        except InvalidOptionError as e:  # nvmath-python raises TypeError there
            raise AllocatorTypeError(str(e)) from None


@_keywords_checked
@dataclass
class MatmulEpilogPreferences:
    """Epilog preferences: ``aux_type`` (dtype of ``gelu_aux`` for fp8) and ``aux_amax``.

    Given as the ``epilog`` field of :class:`MatmulPlanPreferences` (or a dict there).

    Parameters
    ----------
    aux_type : dtype name, numpy.dtype, CudaDataType or None, optional
        The dtype of the epilog's auxiliary output (``gelu_aux``). ``None`` (the default)
        lets it follow the operand and result types. Another type is supported only for fp8
        matmuls and some epilogs (cuBLASLt's ``CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE``
        rules); with an fp8 type, ``epilog_inputs`` must also give the auxiliary output's
        scale as ``"aux_quantization_scale"``.
    aux_amax : bool, optional
        ``True`` also returns the absolute maximum of the auxiliary output among the
        auxiliary outputs; only with an fp8 ``aux_type``. The default is ``False``.

    Examples
    --------
    >>> from cuweave.linalg.advanced import MatmulPlanPreferences
    >>> MatmulPlanPreferences(epilog={"aux_type": "float8_e4m3fn", "aux_amax": True}).epilog
    MatmulEpilogPreferences(aux_type='float8_e4m3fn', aux_amax=True)
    """

    aux_type: Any = None
    aux_amax: bool = False

    def __post_init__(self):
        self.aux_type = _dtype_or_none(self.aux_type, "aux_type")
        if not isinstance(self.aux_amax, bool):
            raise InvalidOptionError(f"aux_amax must be a bool, got {self.aux_amax!r}")


@_keywords_checked
@dataclass
class MatmulPlanPreferences:
    """Preferences of :meth:`Matmul.plan` (filters of the cuBLASLt heuristics).

    Attributes
    ----------
    reduction_scheme_mask : MatmulReductionScheme
        Allowed split-K reduction schemes (default: all).
    max_waves_count : float
        Exclude algorithms with more waves than this (0: no limit).
    numerical_impl_mask : int
        Allowed :class:`MatmulNumericalImplFlags` (default: all).
    limit : int
        Number of algorithms to request from the heuristics (1..128).
    epilog : MatmulEpilogPreferences
    """

    reduction_scheme_mask: int = ReductionScheme.MASK
    max_waves_count: float = 0.0
    numerical_impl_mask: int = (1 << 64) - 1
    limit: int = 8
    epilog: MatmulEpilogPreferences = field(default_factory=MatmulEpilogPreferences)

    def __post_init__(self):
        m = self.reduction_scheme_mask
        if not isinstance(m, int) or isinstance(m, bool) or not 0 <= m <= ReductionScheme.MASK:
            raise InvalidOptionError(f"reduction_scheme_mask must be an int in [0, 7], got {m!r}")
        w = self.max_waves_count
        if not isinstance(w, int | float) or isinstance(w, bool) or not 0 <= w < float("inf"):
            raise InvalidOptionError(
                f"max_waves_count must be a finite non-negative number, got {w!r}")
        mask = self.numerical_impl_mask
        if not isinstance(mask, int) or isinstance(mask, bool) or not 0 <= mask < 1 << 64:
            raise InvalidOptionError(f"numerical_impl_mask must be a 64-bit mask, got {mask!r}")
        lim = self.limit
        if not isinstance(lim, int) or isinstance(lim, bool) or not 1 <= lim <= 128:
            raise InvalidOptionError(f"limit must be an int in [1, 128], got {lim!r}")
        self.epilog = coerce_options(self.epilog, MatmulEpilogPreferences, "epilog")


@_keywords_checked
@dataclass
class MatmulQuantizationScales:
    """fp8 per-tensor scales of ``a``, ``b``, ``c`` and ``d`` (``quantization_scales=``).

    Each is a Python/NumPy scalar or a 1-element float32 device array (torch/CuPy/...), read
    at execution time. The product computed is, as cuBLASLt defines it,
    ``d = scale_d * (alpha * scale_a * scale_b * (a @ b) + beta * scale_c * c)``: the ``a``
    and ``b`` scales turn the stored fp8 values back into real ones, the ``d`` scale turns the
    result into the range of its fp8 type. As nvmath-python, fp8 operands need the scales of
    ``a`` and ``b`` (and of ``d`` for an fp8 result); other operands ignore them, with a
    warning. Block scaling (MXFP8, NVFP4) is not supported yet.

    Parameters
    ----------
    a : scalar or array, optional
        The scale of ``a`` (required for fp8 operands). ``None`` (the default): not given.
    b : scalar or array, optional
        The scale of ``b`` (required for fp8 operands). ``None`` (the default): not given.
    c : scalar or array, optional
        The scale of ``c``. ``c`` is never fp8 here (float16, bfloat16 or float32), so a
        matmul refuses it: leave it ``None`` (the default).
    d : scalar or array, optional
        The scale of the result: required for an fp8 result, refused for a wider one.
        ``None`` (the default): not given.

    Raises
    ------
    InvalidOptionError
        If a scale is neither ``None``, a scalar nor a 1-element array.

    Examples
    --------
    >>> from cuweave.linalg.advanced import MatmulQuantizationScales
    >>> MatmulQuantizationScales(a=2.0, b=0.5)
    MatmulQuantizationScales(a=2.0, b=0.5, c=None, d=None)
    """

    a: Any = None
    b: Any = None
    c: Any = None
    d: Any = None

    def __post_init__(self):
        for name in ("a", "b", "c", "d"):
            v = getattr(self, name)
            if v is None or isinstance(v, int | float | np.floating | np.integer):
                continue
            shape = getattr(v, "shape", None)
            if shape is None or int(np.prod(shape)) != 1:
                raise InvalidOptionError(
                    f"quantization_scales.{name} must be a scalar or a 1-element array, "
                    f"got {v!r}")
