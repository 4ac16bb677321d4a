"""Sparse direct solver on cuDSS, as nvmath-python 1.0's ``nvmath.sparse.advanced``.

:func:`direct_solver` solves ``a @ x = b`` once; :class:`DirectSolver` keeps the plan
(reordering and symbolic factorization) and the factorization for new values or right-hand
sides. ``a``: SciPy/CuPy/torch CSR matrices (or batches), ``b``: dense NumPy/CuPy/torch arrays;
results come back in ``b``'s package and memory space. cuDSS runs on the GPU (the ``sparse``
extra, loaded on first use); ``execution="cpu"`` - and machines without a usable GPU - run the
same calls on MKL PARDISO, CHOLMOD or SciPy's SuperLU.
"""

from ._configs import (
    FactorizationConfig as DirectSolverFactorizationConfig,
)
from ._configs import (
    FactorizationInfo as DirectSolverFactorizationInfo,
)
from ._configs import (
    PlanConfig as DirectSolverPlanConfig,
)
from ._configs import (
    PlanInfo as DirectSolverPlanInfo,
)
from ._configs import (
    SolutionConfig as DirectSolverSolutionConfig,
)
from ._configs import memory_estimates_dtype
from ._cpu_backends import SingularMatrixError
from ._layout import SparseOperandError
from ._options import (
    DirectSolverAlgType,
    DirectSolverFactorizationAlg,
    DirectSolverFactorizationPreferences,
    DirectSolverMatchingAlg,
    DirectSolverMatrixType,
    DirectSolverMatrixViewType,
    DirectSolverOptions,
    DirectSolverPivotEpsilonAlg,
    DirectSolverPivotType,
    DirectSolverPlanPreferences,
    DirectSolverReorderingAlg,
    DirectSolverSolutionPreferences,
    DirectSolverSolveAlg,
    ExecutionCPU,
    ExecutionCUDA,
    ExecutionHybrid,
    HybridMemoryModeOptions,
)
from .direct_solver import DirectSolver, direct_solver

__all__ = [
    "direct_solver",
    "DirectSolver",
    "DirectSolverOptions",
    "DirectSolverMatrixType",
    "DirectSolverMatrixViewType",
    "DirectSolverReorderingAlg",
    "DirectSolverFactorizationAlg",
    "DirectSolverSolveAlg",
    "DirectSolverPivotEpsilonAlg",
    "DirectSolverMatchingAlg",
    "DirectSolverPivotType",
    "DirectSolverAlgType",
    "DirectSolverPlanConfig",
    "DirectSolverFactorizationConfig",
    "DirectSolverSolutionConfig",
    "DirectSolverPlanInfo",
    "DirectSolverFactorizationInfo",
    "DirectSolverPlanPreferences",
    "DirectSolverFactorizationPreferences",
    "DirectSolverSolutionPreferences",
    "ExecutionCUDA",
    "ExecutionHybrid",
    "ExecutionCPU",
    "HybridMemoryModeOptions",
    "memory_estimates_dtype",
    "SingularMatrixError",
    "SparseOperandError",
]
