"""nvmath-python's ``nvmath.device.cublasdx`` names (the device GEMM): :class:`Matmul`, the
``matmul`` factory, :class:`SharedStorageCalc`, ``MAX_ALIGNMENT`` and the knob tuples."""

from __future__ import annotations

from ._blas_options import Alignment, Arrangement, LeadingDimension, Precision, TransposeMode
from .matmul import MAX_ALIGNMENT, Layout, Matmul, SharedStorageCalc, matmul

__all__ = ["Matmul", "matmul", "SharedStorageCalc", "MAX_ALIGNMENT", "Layout", "Alignment",
           "Arrangement", "LeadingDimension", "Precision", "TransposeMode"]
