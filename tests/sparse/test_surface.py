"""cuweave.sparse mirrors nvmath-python 1.0.0's nvmath.sparse.advanced surface (the names of its
``__all__`` and the fields of its options), so programs run with the import renamed."""

from __future__ import annotations

import dataclasses

import cuweave.sparse as S
import cuweave.sparse.advanced as A

# nvmath-python 1.0.0: nvmath/sparse/advanced/{_configuration,direct_solver}.py __all__
NVMATH_ADVANCED = [
    "DirectSolverOptions", "DirectSolverMatrixType", "DirectSolverMatrixViewType",
    "ExecutionCUDA", "ExecutionHybrid", "HybridMemoryModeOptions", "DirectSolverPlanPreferences",
    "DirectSolverFactorizationPreferences", "DirectSolverSolutionPreferences", "direct_solver",
    "DirectSolver", "DirectSolverReorderingAlg", "DirectSolverFactorizationAlg",
    "DirectSolverSolveAlg", "DirectSolverPivotEpsilonAlg", "DirectSolverMatchingAlg",
    "DirectSolverFactorizationConfig", "DirectSolverFactorizationInfo", "DirectSolverPlanConfig",
    "DirectSolverPlanInfo", "DirectSolverSolutionConfig", "memory_estimates_dtype",
]


def test_names():
    missing = [n for n in NVMATH_ADVANCED if not hasattr(A, n)]
    assert not missing
    assert set(NVMATH_ADVANCED) <= set(A.__all__)
    assert S.ExecutionCUDA(device_id=0).device_id == 0 and S.advanced is A


def test_option_fields_and_defaults():
    o = A.DirectSolverOptions()
    assert (o.sparse_system_type, o.sparse_system_view, o.blocking) == (
        A.DirectSolverMatrixType.GENERAL, A.DirectSolverMatrixViewType.FULL, "auto")
    assert {f.name for f in dataclasses.fields(A.DirectSolverOptions)} == {
        "sparse_system_type", "sparse_system_view", "multithreading_lib", "logger", "blocking",
        "handle"}
    assert {f.name for f in dataclasses.fields(A.HybridMemoryModeOptions)} == {
        "hybrid_memory_mode", "hybrid_device_memory_limit", "register_cuda_memory"}
    assert {f.name for f in dataclasses.fields(A.DirectSolverPlanPreferences)} == {
        "host_nthreads", "reordering_algorithm", "pivot_type", "pivot_threshold", "max_nnz",
        "matching_algorithm", "nd_min_levels", "use_superpanels"}
    assert {f.name for f in dataclasses.fields(A.DirectSolverFactorizationPreferences)} == {
        "factorization_algorithm", "pivot_eps_algorithm", "pivot_eps"}
    assert {f.name for f in dataclasses.fields(A.DirectSolverSolutionPreferences)} == {
        "solution_algorithm", "ir_num_steps"}
    assert A.ExecutionHybrid().name == "hybrid" and A.ExecutionCUDA().name == "cuda"
    assert isinstance(A.ExecutionCUDA().hybrid_memory_mode_options, A.HybridMemoryModeOptions)
    assert A.memory_estimates_dtype.names[:2] == ("permanent_device_memory",
                                                  "peak_device_memory")


def test_enum_values_are_cudss():
    assert int(A.DirectSolverMatrixType.SPD) == 3 and int(A.DirectSolverMatrixType.HPD) == 4
    assert int(A.DirectSolverReorderingAlg.NESTED_DISSECTION) == 4
    assert int(A.DirectSolverMatchingAlg.AUTO) == 6


def test_nvmath_0x_algorithm_names():
    """Programs written against nvmath-python 0.x set ``config.algorithm`` to a
    ``DirectSolverAlgType``; the value goes to that phase's cuDSS 1.0 algorithm."""
    import numpy as np
    import scipy.sparse as sp

    a = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(6, 6), format="csr")
    with A.DirectSolver(a, np.ones(6), execution="cpu") as s:
        s.plan_config.algorithm = A.DirectSolverAlgType.ALG_3
        assert s.plan_config.reordering_algorithm == A.DirectSolverReorderingAlg.AMD
        s.factorization_config.algorithm = A.DirectSolverAlgType.DEFAULT
        s.solution_config.algorithm = A.DirectSolverAlgType.ALG_1
        assert s.solution_config.solution_algorithm == A.DirectSolverSolveAlg.GENERAL
        s.plan()
        s.factorize()
        assert np.allclose(a @ s.solve(), 1.0)
