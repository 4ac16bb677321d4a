"""``cuweave.linalg``'s generic dense layer (nvmath-python's ``nvmath.linalg.generic``):
``matmul`` / ``Matmul`` with matrix qualifiers on cuBLAS (gemm, symm, hemm, trmm, dgmm) or the
CPU's BLAS, and the dense direct solver ``direct_solver`` / ``DirectSolver`` (LU, Cholesky) on
cuSOLVER / cuBLAS or LAPACK.

Examples
--------
>>> import numpy as np
>>> from cuweave.linalg.generic import matmul
>>> matmul(np.ones((2, 3)), np.ones((3, 2)), execution="cpu").tolist()
[[3.0, 3.0], [3.0, 3.0]]
"""

from ..._bindings.library_types import ComputeType
from ..._internal.options import ExecutionCPU, ExecutionCUDA
from ._options import (
    DiagType,
    DirectSolverOptions,
    FactorizationError,
    FillMode,
    InvalidDirectSolverState,
    InvalidMatmulState,
    MatmulOptions,
    SideMode,
)
from ._qualifiers import (
    DiagonalMatrixQualifier,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    MatrixQualifier,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    matrix_qualifiers_dtype,
)
from .matmul import Matmul, matmul
from .solver import DirectSolver, direct_solver

__all__ = [
    "ComputeType",
    "DiagonalMatrixQualifier",
    "DiagType",
    "DirectSolver",
    "DirectSolverOptions",
    "ExecutionCPU",
    "ExecutionCUDA",
    "FactorizationError",
    "FillMode",
    "GeneralMatrixQualifier",
    "HermitianMatrixQualifier",
    "InvalidDirectSolverState",
    "InvalidMatmulState",
    "Matmul",
    "MatmulOptions",
    "MatrixQualifier",
    "SideMode",
    "SymmetricMatrixQualifier",
    "TriangularMatrixQualifier",
    "direct_solver",
    "matmul",
    "matrix_qualifiers_dtype",
]
