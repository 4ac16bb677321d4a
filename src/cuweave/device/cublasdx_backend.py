"""nvmath-python's ``nvmath.device.cublasdx_backend`` names: ``MAX_ALIGNMENT`` and the knob
tuples of a device GEMM."""

from __future__ import annotations

from ._blas_options import (
    MAX_ALIGNMENT,
    Alignment,
    Arrangement,
    LeadingDimension,
    Precision,
    TransposeMode,
)

__all__ = ["MAX_ALIGNMENT", "Alignment", "Arrangement", "LeadingDimension", "Precision",
           "TransposeMode"]
