"""The plan/factorization/solution configuration and the plan/factorization information.

As in nvmath-python, :attr:`DirectSolver.plan_config` (and its factorization and solution
siblings) are objects whose attributes read and write the solver's settings, and
:attr:`DirectSolver.plan_info` / :attr:`DirectSolver.factorization_info` report what a phase
found. Both sit on an engine-neutral *store*: under CUDA execution it is cuDSS's config and
data objects; on the CPU a dictionary holding cuDSS's defaults, of which the CPU backends use
the reordering, the pivot epsilon, the iterative refinement steps and the thread count.
"""

from __future__ import annotations

import numpy as np

from ..._bindings.cudss import (
    ConfigParam,
    DataParam,
    FactorizationAlg,
    MatchingAlg,
    PivotEpsilonAlg,
    PivotType,
    ReorderingAlg,
    SolveAlg,
)
from ..._internal.errors import InvalidOptionError, InvalidStateError
from ..._internal.options import check_enum

__all__ = ["PlanConfig", "FactorizationConfig", "SolutionConfig", "PlanInfo",
           "FactorizationInfo", "DictStore", "memory_estimates_dtype", "cpu_defaults"]

#: cuDSS's CUDSS_DATA_MEMORY_ESTIMATES record (bytes), as nvmath-python exposes it
memory_estimates_dtype = np.dtype([
    ("permanent_device_memory", "<u8"),
    ("peak_device_memory", "<u8"),
    ("permanent_host_memory", "<u8"),
    ("peak_host_memory", "<u8"),
    ("hybrid_min_device_memory", "<u8"),
    ("hybrid_max_device_memory", "<u8"),
    ("reserved", "<u8", (10,)),
])


def cpu_defaults(dtype: str) -> dict:
    """cuDSS 1.0's default settings, as a new cuDSS config reports them (the CPU store starts
    from them; -1 means "the library decides")."""
    return {
        ConfigParam.HOST_NTHREADS: -1, ConfigParam.REORDERING_ALG: ReorderingAlg.DEFAULT,
        ConfigParam.PIVOT_TYPE: PivotType.PIVOT_AUTO, ConfigParam.PIVOT_THRESHOLD: 1.0,
        ConfigParam.MAX_LU_NNZ: -1, ConfigParam.MATCHING_ALG: MatchingAlg.AUTO,
        ConfigParam.ND_NLEVELS: 10, ConfigParam.USE_SUPERPANELS: 1,
        ConfigParam.FACTORIZATION_ALG: FactorizationAlg.DEFAULT,
        ConfigParam.PIVOT_EPSILON_ALG: PivotEpsilonAlg.DEFAULT,
        ConfigParam.PIVOT_EPSILON: -1.0,
        ConfigParam.SOLVE_ALG: SolveAlg.DEFAULT, ConfigParam.IR_N_STEPS: 0,
    }


class DictStore:
    """A settings store in a dictionary (the CPU engine's)."""

    def __init__(self, values: dict):
        self._values = dict(values)

    def get(self, param):
        return self._values[param]

    def set(self, param, value) -> None:
        self._values[param] = value


def _enum(cls):
    def convert(value, name):
        if isinstance(value, np.integer):
            value = int(value)
        return check_enum(value, cls, name)
    return convert


def _int(low: int):
    def convert(value, name):
        if isinstance(value, bool | np.bool_):
            value = int(value)
        if not isinstance(value, int | np.integer) or value < low:
            raise InvalidOptionError(f"{name} must be an int >= {low}, got {value!r}")
        return int(value)
    return convert


def _float(value, name):
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer) \
            or not np.isfinite(value) or value < 0:
        raise InvalidOptionError(f"{name} must be a non-negative finite float, got {value!r}")
    return float(value)


def _setting(name: str, param: ConfigParam, convert, doc: str, kind=None):
    """The property ``name`` reading/writing ``param`` in the owner's store (``kind`` converts
    reads)."""

    def fget(self):
        self._check()
        value = self._store.get(param)
        return kind(value) if kind is not None else value

    def fset(self, value):
        self._check()
        self._before_set(param, value)
        self._store.set(param, convert(value, name))

    fget.__name__ = fset.__name__ = name
    return property(fget, fset, doc=doc)


class _Settings:
    """Base of the three configuration objects (not meant to be created by users)."""

    __slots__ = ("_store", "_alive", "_host_threads_ok")

    def __init__(self, store, alive, host_threads_ok=True):
        """Made by :class:`DirectSolver` (its ``plan_config`` and siblings), not by users.

        Parameters
        ----------
        store : object
            The engine's settings store (``get(param)``/``set(param, value)``).
        alive : callable
            ``alive()`` is false once the solver is freed (the object then refuses use).
        host_threads_ok : bool
            Whether ``host_nthreads`` may be set (CUDA execution needs a threading layer).
        """
        self._store = store
        self._alive = alive
        self._host_threads_ok = host_threads_ok

    def _check(self):
        if not self._alive():
            raise InvalidStateError(f"{type(self).__name__} cannot be used after its solver's "
                                    "free()")

    def _before_set(self, param, value):
        if param == ConfigParam.HOST_NTHREADS and not self._host_threads_ok:
            raise InvalidOptionError(
                "host_nthreads can only be set with a multithreading library "
                "(DirectSolverOptions.multithreading_lib or CUDSS_THREADING_LIB)")

    def __repr__(self):
        fields = [n for n in dir(type(self)) if isinstance(getattr(type(self), n), property)]
        try:
            body = ", ".join(f"{n}={getattr(self, n)!r}" for n in fields)
        except InvalidStateError:
            body = "freed"
        return f"{type(self).__name__}({body})"


_P = ConfigParam


class PlanConfig(_Settings):
    """Settings of :meth:`DirectSolver.plan` (reordering and symbolic factorization)."""

    __slots__ = ()
    host_nthreads = _setting("host_nthreads", _P.HOST_NTHREADS, _int(0),
                             "Host threads (needs a multithreading library under CUDA).")
    reordering_algorithm = _setting("reordering_algorithm", _P.REORDERING_ALG,
                                    _enum(ReorderingAlg), "The fill-reducing reordering.",
                                    ReorderingAlg)
    matching_algorithm = _setting("matching_algorithm", _P.MATCHING_ALG, _enum(MatchingAlg),
                                  "The matching (large entries to the diagonal).", MatchingAlg)
    pivot_type = _setting("pivot_type", _P.PIVOT_TYPE, _enum(PivotType), "The pivoting.",
                          PivotType)
    pivot_threshold = _setting("pivot_threshold", _P.PIVOT_THRESHOLD, _float,
                               "The pivot threshold.")
    max_nnz = _setting("max_nnz", _P.MAX_LU_NNZ, _int(0),
                       "Upper bound of the factors' nonzeros (COLAMD reorderings).")
    nd_min_levels = _setting("nd_min_levels", _P.ND_NLEVELS, _int(0),
                             "Minimum levels of nested dissection.")
    use_superpanels = _setting("use_superpanels", _P.USE_SUPERPANELS, _int(0),
                               "Whether superpanels are used (0 or 1).")
    algorithm = _setting("algorithm", _P.REORDERING_ALG, _enum(ReorderingAlg),
                         "nvmath-python 0.x's name of :attr:`reordering_algorithm`.",
                         ReorderingAlg)


class FactorizationConfig(_Settings):
    """Settings of :meth:`DirectSolver.factorize`."""

    __slots__ = ()
    factorization_algorithm = _setting("factorization_algorithm", _P.FACTORIZATION_ALG,
                                       _enum(FactorizationAlg), "The factorization algorithm.",
                                       FactorizationAlg)
    pivot_eps_algorithm = _setting("pivot_eps_algorithm", _P.PIVOT_EPSILON_ALG,
                                   _enum(PivotEpsilonAlg), "How the pivot epsilon is applied.",
                                   PivotEpsilonAlg)
    pivot_eps = _setting("pivot_eps", _P.PIVOT_EPSILON, _float,
                         "Pivots smaller than this are replaced by it.")
    algorithm = _setting("algorithm", _P.FACTORIZATION_ALG, _enum(FactorizationAlg),
                         "nvmath-python 0.x's name of :attr:`factorization_algorithm`.",
                         FactorizationAlg)


class SolutionConfig(_Settings):
    """Settings of :meth:`DirectSolver.solve`."""

    __slots__ = ()
    solution_algorithm = _setting("solution_algorithm", _P.SOLVE_ALG, _enum(SolveAlg),
                                  "The solve algorithm.", SolveAlg)
    ir_num_steps = _setting("ir_num_steps", _P.IR_N_STEPS, _int(0),
                            "Iterative refinement steps after the triangular solves.")
    algorithm = _setting("algorithm", _P.SOLVE_ALG, _enum(SolveAlg),
                         "nvmath-python 0.x's name of :attr:`solution_algorithm`.", SolveAlg)


class _Info:
    """Base of the information objects: each attribute asks the engine (``source(param)``)."""

    __slots__ = ("_source", "_alive", "_batched")

    def __init__(self, source, alive, batched: bool):
        """Made by :class:`DirectSolver` (its ``plan_info``/``factorization_info``).

        Parameters
        ----------
        source : callable
            ``source(param)``: the engine's value of a ``DataParam``.
        alive : callable
            ``alive()`` is false once the solver is freed (the object then refuses use).
        batched : bool
            Whether the solver holds a batch (per-system values are then refused).
        """
        self._source = source
        self._alive = alive
        self._batched = batched

    def _get(self, param: DataParam, what: str, per_system: bool = False):
        if not self._alive():
            raise InvalidStateError(f"{type(self).__name__} cannot be used after its solver's "
                                    "free()")
        if per_system and self._batched:
            raise InvalidStateError(f"{what} is not available for batched systems")
        return self._source(param)


class PlanInfo(_Info):
    """What :meth:`DirectSolver.plan` found."""

    __slots__ = ()

    @property
    def memory_estimates(self):
        """Device and host memory the factorization needs (bytes; :data:`memory_estimates_dtype`
        record: permanent/peak device and host memory, hybrid min/max device memory)."""
        return self._get(DataParam.MEMORY_ESTIMATES, "memory_estimates")

    @property
    def col_permutation(self):
        """The column permutation of the reordering."""
        return self._get(DataParam.PERM_REORDER_COL, "col_permutation", True)

    @property
    def row_permutation(self):
        """The row permutation of the reordering."""
        return self._get(DataParam.PERM_REORDER_ROW, "row_permutation", True)

    @property
    def matching_col_permutation(self):
        """The column permutation of the matching (when matching is enabled)."""
        return self._get(DataParam.PERM_MATCHING, "matching_col_permutation", True)

    @property
    def num_superpanels(self):
        """The number of superpanels of the symbolic factorization."""
        return self._get(DataParam.NSUPERPANELS, "num_superpanels")


class FactorizationInfo(_Info):
    """What :meth:`DirectSolver.factorize` found."""

    __slots__ = ()

    @property
    def info(self):
        """0 when the factorization succeeded; otherwise cuDSS's error indicator."""
        return self._get(DataParam.INFO, "info")

    @property
    def lu_nnz(self):
        """Nonzeros of the factors."""
        return self._get(DataParam.LU_NNZ, "lu_nnz")

    @property
    def npivots(self):
        """Pivots encountered (perturbed pivots on the CPU's PARDISO)."""
        return self._get(DataParam.NPIVOTS, "npivots")

    @property
    def inertia(self):
        """Numbers of positive and negative pivots (symmetric/Hermitian indefinite types)."""
        return self._get(DataParam.INERTIA, "inertia")

    @property
    def col_permutation(self):
        """The final column permutation (COLAMD reorderings)."""
        return self._get(DataParam.PERM_COL, "col_permutation", True)

    @property
    def row_permutation(self):
        """The final row permutation (COLAMD reorderings)."""
        return self._get(DataParam.PERM_ROW, "row_permutation", True)

    @property
    def diag(self):
        """The diagonal of the factorized system."""
        return self._get(DataParam.DIAG, "diag", True)

    @property
    def row_scale_factors(self):
        """Row scaling of the matching (when matching is enabled)."""
        return self._get(DataParam.SCALE_ROW, "row_scale_factors", True)

    @property
    def col_scale_factors(self):
        """Column scaling of the matching (when matching is enabled)."""
        return self._get(DataParam.SCALE_COL, "col_scale_factors", True)
