"""Sparse linear algebra (as nvmath-python 1.0's ``nvmath.sparse``).

:mod:`cuweave.sparse.advanced` holds the sparse direct solver (cuDSS on the GPU, PARDISO /
CHOLMOD / SuperLU on the CPU). :class:`ExecutionCUDA` is the execution space shared with
cuweave's other engines (``nvmath.sparse.ExecutionCUDA``).
"""

from .._internal.options import ExecutionCPU, ExecutionCUDA
from . import advanced

__all__ = ["advanced", "ExecutionCUDA", "ExecutionCPU"]
