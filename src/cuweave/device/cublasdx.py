"""nvmath-python's ``nvmath.device.cublasdx`` names (the device GEMM): :class:`Matmul`, the
``matmul`` factory (its result type also as ``BlasOptionsComplete``), :class:`SharedStorageCalc`,
``MAX_ALIGNMENT``, the knob tuples and the pipelines (:class:`DevicePipeline`,
:class:`TilePipeline`)."""

from __future__ import annotations

from ._blas_options import Alignment, Arrangement, LeadingDimension, Precision, TransposeMode
from ._blas_pipeline import DevicePipeline, TilePipeline
from .matmul import MAX_ALIGNMENT, Layout, Matmul, SharedStorageCalc, matmul

#: The type ``matmul(...)`` returns (nvmath-python's name, for annotations).
BlasOptionsComplete = Matmul

__all__ = ["Matmul", "matmul", "SharedStorageCalc", "MAX_ALIGNMENT", "Layout", "Alignment",
           "Arrangement", "LeadingDimension", "Precision", "TransposeMode", "DevicePipeline",
           "TilePipeline", "BlasOptionsComplete"]
