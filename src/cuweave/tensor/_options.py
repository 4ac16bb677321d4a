"""Options, enums and compute descriptors of :mod:`cuweave.tensor` (nvmath-python 1.0's names).

The enums are ``IntEnum``s carrying cuTENSOR's C values. :class:`ComputeDesc` mirrors
nvmath-python's: ``ComputeDesc.COMPUTE_32F()`` names a compute descriptor. cuTENSOR's
descriptors are pointers exported by the library, so cuweave names them by
:class:`TensorComputeType` members (stable without the library, usable on the CPU) and turns
them into the library's pointers when a GPU plan is made; the raw pointer values of a loaded
libcutensor are accepted too.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np

from .._bindings.cutensor import Algo, AutotuneMode, CacheMode, JitMode, Operator
from .._internal.errors import InvalidOptionError
from .._internal.memory import check_allocator, parse_memory_limit
from .._internal.options import ExecutionCPU, ExecutionCUDA

__all__ = [
    "ContractionOptions",
    "ContractionAlgo",
    "ContractionAutotuneMode",
    "ContractionCacheMode",
    "ContractionJitMode",
    "ComputeDesc",
    "TensorComputeType",
    "Operator",
    "tensor_qualifiers_dtype",
    "ExecutionCUDA",
    "ExecutionCPU",
    "compute_type_of",
    "check_operator",
]

ContractionAlgo = Algo
ContractionAutotuneMode = AutotuneMode
ContractionCacheMode = CacheMode
ContractionJitMode = JitMode

#: dtype of the ``qualifiers`` argument: one :class:`Operator` per input, then the addend's
tensor_qualifiers_dtype = np.int32


class TensorComputeType(IntEnum):
    """cuTENSOR's compute descriptors by name (``CUTENSOR_COMPUTE_DESC_<name>``)."""

    COMPUTE_16F = 1
    COMPUTE_16BF = 2
    COMPUTE_TF32 = 3
    COMPUTE_3XTF32 = 4
    COMPUTE_32F = 5
    COMPUTE_64F = 6
    COMPUTE_9X16BF = 7
    COMPUTE_8XINT8 = 8
    COMPUTE_4X16F = 9

    @property
    def c_name(self) -> str:
        """The suffix of the library's symbol (``"32F"`` for ``COMPUTE_32F``)."""
        return self.name.removeprefix("COMPUTE_")


class ComputeDesc:
    """nvmath-python's compute descriptors: ``ComputeDesc.COMPUTE_32F()`` and so on.

    Examples
    --------
    >>> from cuweave.tensor import ComputeDesc, ContractionOptions
    >>> ContractionOptions(compute_type=ComputeDesc.COMPUTE_3XTF32()).compute_type.name
    'COMPUTE_3XTF32'
    """

    @staticmethod
    def COMPUTE_16F():
        return TensorComputeType.COMPUTE_16F

    @staticmethod
    def COMPUTE_16BF():
        return TensorComputeType.COMPUTE_16BF

    @staticmethod
    def COMPUTE_TF32():
        return TensorComputeType.COMPUTE_TF32

    @staticmethod
    def COMPUTE_3XTF32():
        return TensorComputeType.COMPUTE_3XTF32

    @staticmethod
    def COMPUTE_32F():
        return TensorComputeType.COMPUTE_32F

    @staticmethod
    def COMPUTE_64F():
        return TensorComputeType.COMPUTE_64F

    @staticmethod
    def COMPUTE_9X16BF():
        return TensorComputeType.COMPUTE_9X16BF

    @staticmethod
    def COMPUTE_8XINT8():
        return TensorComputeType.COMPUTE_8XINT8

    @staticmethod
    def COMPUTE_4X16F():
        return TensorComputeType.COMPUTE_4X16F


_F32_FAMILY = frozenset({TensorComputeType.COMPUTE_32F, TensorComputeType.COMPUTE_TF32,
                         TensorComputeType.COMPUTE_3XTF32, TensorComputeType.COMPUTE_16F,
                         TensorComputeType.COMPUTE_16BF, TensorComputeType.COMPUTE_4X16F,
                         TensorComputeType.COMPUTE_9X16BF})
_F64_FAMILY = frozenset({TensorComputeType.COMPUTE_32F, TensorComputeType.COMPUTE_64F,
                         TensorComputeType.COMPUTE_8XINT8})
#: dtype -> (default compute type, the compute types cuTENSOR's contraction table accepts)
COMPUTE_TYPES = {
    "float16": (TensorComputeType.COMPUTE_32F, frozenset({TensorComputeType.COMPUTE_32F})),
    "bfloat16": (TensorComputeType.COMPUTE_32F, frozenset({TensorComputeType.COMPUTE_32F})),
    "float32": (TensorComputeType.COMPUTE_32F, _F32_FAMILY),
    "complex64": (TensorComputeType.COMPUTE_32F, _F32_FAMILY - {TensorComputeType.COMPUTE_16F,
                                                                TensorComputeType.COMPUTE_16BF}),
    "float64": (TensorComputeType.COMPUTE_64F, _F64_FAMILY),
    "complex128": (TensorComputeType.COMPUTE_64F, _F64_FAMILY),
}
#: the scalar (alpha, beta) type of each data type
SCALAR_DTYPE = {"float16": np.float32, "bfloat16": np.float32, "float32": np.float32,
                "float64": np.float64, "complex64": np.complex64, "complex128": np.complex128}
#: the compute types whose results the CPU path computes in double precision
DOUBLE_COMPUTE = frozenset({TensorComputeType.COMPUTE_64F, TensorComputeType.COMPUTE_8XINT8})


def _library_pointers() -> dict:
    """Raw compute-descriptor pointer -> member, where libcutensor is already loaded."""
    from .._bindings import cutensor

    if cutensor.library_path() is None:
        return {}
    return {cutensor.compute_descriptor(m.c_name): m for m in TensorComputeType}


def compute_type_of(value, name: str = "compute_type"):
    """``value`` (a member, its int, a name such as ``"COMPUTE_TF32"`` / ``"tf32"``, or a raw
    pointer of the loaded library) as a :class:`TensorComputeType`; ``None`` stays ``None``."""
    if value is None or isinstance(value, TensorComputeType):
        return value
    if isinstance(value, str):
        key = value.strip().upper().removeprefix("CUTENSOR_COMPUTE_DESC_")
        key = key if key.startswith("COMPUTE_") else "COMPUTE_" + key
        if key in TensorComputeType.__members__:
            return TensorComputeType[key]
    elif isinstance(value, int | np.integer) and not isinstance(value, bool):
        if int(value) in TensorComputeType._value2member_map_:
            return TensorComputeType(int(value))
        found = _library_pointers().get(int(value))
        if found is not None:
            return found
    names = ", ".join(f"ComputeDesc.{m.name}()" for m in TensorComputeType)
    raise InvalidOptionError(f"{name} must be None or one of {names}, got {value!r}")


def check_operator(value, name: str) -> Operator:
    """One qualifier as an :class:`Operator` (any int-like value of one)."""
    try:
        return Operator(int(value))
    except (TypeError, ValueError):
        raise InvalidOptionError(
            f"{name} must be an Operator (e.g. Operator.OP_IDENTITY, Operator.OP_CONJ), "
            f"got {value!r}") from None


_LAYOUTS = ("auto", "C", "F", "optimized")


@dataclass
class ContractionOptions:
    """Options of :class:`~cuweave.tensor.BinaryContraction`,
    :class:`~cuweave.tensor.TernaryContraction` and their function forms (a dict is accepted
    wherever these are).

    Attributes
    ----------
    compute_type : ComputeDesc value, optional
        E.g. ``ComputeDesc.COMPUTE_TF32()``; default: 32F for 16/32-bit data, 64F for 64-bit.
        The accepted types per dtype are cuTENSOR's contraction table.
    logger : logging.Logger, optional
        Default: ``logging.getLogger("cuweave.tensor")``.
    blocking : True or "auto"
        ``"auto"``: device operands return without synchronizing; host operands always block.
    handle : int, optional
        A ``cutensorHandle_t`` to use (default: one handle per device, made by cuweave).
    allocator : BaseCUDAMemoryManager or BaseCUDAMemoryManagerAsync, optional
        Where workspaces come from (default: the operands' package pool, else cuda.core).
    memory_limit : int or str
        Workspace bound: bytes, ``"1GiB"`` or a percentage of device memory (``"80%"``).
    result_layout : "auto", "C", "F" or "optimized"
        Strides of new results: ``"optimized"`` orders the output's modes as the contraction
        produces them (batch modes, then the larger free group, then the other); ``"auto"``
        means optimized for binary contractions without an addend, C order for ternary ones,
        and the addend's layout when one is given. Ignored when ``out`` is given.

    Examples
    --------
    >>> ContractionOptions(result_layout="F").result_layout
    'F'
    >>> ContractionOptions(blocking=False)
    Traceback (most recent call last):
    ...
    cuweave._internal.errors.InvalidOptionError: blocking must be True or 'auto', got False
    """

    compute_type: Any = None
    logger: logging.Logger | None = None
    blocking: Any = "auto"
    handle: int | None = None
    allocator: Any = None
    memory_limit: int | str | None = "80%"
    result_layout: str = "auto"

    def __post_init__(self):
        self.compute_type = compute_type_of(self.compute_type)
        if self.blocking is not True and self.blocking != "auto":
            raise InvalidOptionError(f"blocking must be True or 'auto', got {self.blocking!r}")
        if self.result_layout not in _LAYOUTS:
            raise InvalidOptionError(
                f"result_layout must be one of {_LAYOUTS}, got {self.result_layout!r}")
        if self.memory_limit is not None:
            parse_memory_limit(self.memory_limit, 1)  # the form only: the device is unknown
        if self.handle is not None and (not isinstance(self.handle, int) or
                                        isinstance(self.handle, bool) or self.handle <= 0):
            raise InvalidOptionError(f"handle must be a cutensorHandle_t (a positive int) or "
                                     f"None, got {self.handle!r}")
        if self.logger is not None and not isinstance(self.logger, logging.Logger):
            raise InvalidOptionError(f"logger must be a logging.Logger or None, got "
                                     f"{self.logger!r}")
        check_allocator(self.allocator)
