"""``cuweave.linalg.advanced``: matrix products on cuBLASLt with compute types and fused
epilogs (nvmath-python's API), with a CPU backend when there is no GPU.

Examples
--------
>>> import numpy as np
>>> from cuweave.linalg.advanced import matmul
>>> a = np.ones((4, 3), np.float32); b = np.ones((3, 2), np.float32)
>>> matmul(a, b, execution="cpu").tolist()
[[3.0, 3.0], [3.0, 3.0], [3.0, 3.0], [3.0, 3.0]]
"""

from ..._internal.options import ExecutionCPU, ExecutionCUDA
from . import helpers
from ._algorithm import Algorithm
from ._autotune_cache import enable_autotune_cache
from ._epilogs import MatmulEpilog
from ._function import matmul
from ._options import (
    MatmulComputeType,
    MatmulEpilogPreferences,
    MatmulInnerShape,
    MatmulNumericalImplFlags,
    MatmulOptions,
    MatmulPlanPreferences,
    MatmulQuantizationScales,
    MatmulReductionScheme,
    MatrixQualifier,
    matrix_qualifiers_dtype,
)
from .matmul import Matmul

__all__ = [
    "helpers",
    "Algorithm",
    "ExecutionCPU",
    "ExecutionCUDA",
    "Matmul",
    "MatmulComputeType",
    "MatmulEpilog",
    "MatmulEpilogPreferences",
    "MatmulInnerShape",
    "MatmulNumericalImplFlags",
    "MatmulOptions",
    "MatmulPlanPreferences",
    "MatmulQuantizationScales",
    "MatmulReductionScheme",
    "MatrixQualifier",
    "enable_autotune_cache",
    "matmul",
    "matrix_qualifiers_dtype",
]
