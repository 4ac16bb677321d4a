"""``cuweave.linalg``: dense linear algebra (nvmath-python's ``nvmath.linalg``).

``advanced``: cuBLASLt matmul with compute types and epilogs. The generic layer, exported here:
``matmul`` / ``Matmul`` with matrix qualifiers (general, diagonal, symmetric, Hermitian,
triangular) and the dense direct solver ``direct_solver`` / ``DirectSolver``, on cuBLAS and
cuSOLVER or, without a GPU, the CPU's BLAS and LAPACK.
"""

from . import advanced, generic
from .generic import (
    ComputeType,
    DiagonalMatrixQualifier,
    DiagType,
    DirectSolver,
    DirectSolverOptions,
    ExecutionCPU,
    ExecutionCUDA,
    FactorizationError,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    InvalidDirectSolverState,
    InvalidMatmulState,
    Matmul,
    MatmulOptions,
    MatrixQualifier,
    SideMode,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    direct_solver,
    matmul,
    matrix_qualifiers_dtype,
)

__all__ = [
    "advanced",
    "generic",
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
