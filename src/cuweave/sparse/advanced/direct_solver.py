"""The sparse direct solver: :class:`DirectSolver` (stateful) and :func:`direct_solver`.

As nvmath-python 1.0's ``nvmath.sparse.advanced``: specify (``DirectSolver(a, b)``), plan
(reordering and symbolic factorization), factorize, solve; :meth:`~DirectSolver.reset_operands`
for new values or right-hand sides; :meth:`~DirectSolver.release_operands`;
:meth:`~DirectSolver.free` or a ``with`` block. Under CUDA execution cuDSS runs
(``_cuda.py``); with ``execution="cpu"``, or when no GPU is usable, the CPU engine
(``_cpu.py``). The solver object is a thin holder of the engine (what the plan determines)
and the current operands (``_layout.Problem``).
"""

from __future__ import annotations

from ..._internal import cuda
from ..._internal.errors import InvalidOptionError, InvalidStateError, LibraryNotFoundError
from ..._internal.lifecycle import StatefulObject
from ..._internal.logging import get_logger
from ..._internal.options import ExecutionCPU, coerce_options
from ._configs import (
    FactorizationConfig,
    FactorizationInfo,
    PlanConfig,
    PlanInfo,
    SolutionConfig,
)
from ._layout import (
    SparseOperandError,
    check_structure,
    check_values,
    host_copy,
    make_problem,
    same_structure,
    wrap_lhs,
    wrap_rhs,
)
from ._options import (
    DirectSolverFactorizationPreferences,
    DirectSolverOptions,
    DirectSolverPlanPreferences,
    DirectSolverSolutionPreferences,
    ExecutionCUDA,
    parse_execution,
    preferences_items,
)

__all__ = ["DirectSolver", "direct_solver"]

_log = get_logger("sparse")


def _name(problem, i: int) -> str:
    return "a" if problem.lhs_form == "single" else f"a[{i}]"


def _check_problem(problem, stream=None) -> list:
    """Structure and values of every matrix, values of every right-hand side; returns the
    host copies of each matrix's ``(indptr, indices)``."""
    structures = [check_structure(m, _name(problem, i), stream)
                  for i, m in enumerate(problem.matrices)]
    for i, m in enumerate(problem.matrices):
        check_values(m.values, _name(problem, i))
    for i, op in enumerate(problem.rhs):
        check_values(op, "b" if problem.rhs_form == "single" else f"b[{i}]")
    return structures


def _cudss_usable() -> bool:
    if not cuda.is_available():
        return False
    try:
        from ..._bindings import cudss

        cudss.load()
        return True
    except LibraryNotFoundError as e:
        _log.info("cuDSS is not usable (%s)", e)
        return False


def _choose_space(execution, problem):
    """The execution space object for ``problem``'s operands."""
    if execution is None:
        if problem.device == "cuda":
            return ExecutionCUDA(device_id=problem.device_id or 0)
        if _cudss_usable():
            return ExecutionCUDA()
        _log.info("no usable GPU with cuDSS (%s): the sparse solver runs on the CPU",
                  cuda.unavailable_reason() or "cuDSS missing")
        return ExecutionCPU()
    if isinstance(execution, ExecutionCPU) and problem.device == "cuda":
        raise InvalidOptionError("execution must be 'cuda' or 'hybrid' for operands in device "
                                 "memory, got CPU execution; copy a and b to the host to run "
                                 "on the CPU")
    return execution


def _same_lhs(old, a) -> None:
    """The new ``a`` of reset_operands matches the planned one (before anything changes)."""
    form, shape, package, mats = wrap_lhs(a)
    nnz = tuple(m.nnz for m in mats) if form == "explicit" else mats[0].nnz
    checks = (("package", old.lhs_package, package), ("batching", old.lhs_form, form),
              ("shape", old.lhs_shape, shape), ("dtype", old.dtype, mats[0].values.dtype),
              ("index type", old.index_type, mats[0].indptr.dtype),
              ("number of nonzeros", old.nnz, nnz))
    _compare("a", checks)


def _same_rhs(old, b) -> None:
    form, shape, package, ops = wrap_rhs(b)
    checks = (("package", old.rhs_package, package), ("batching", old.rhs_form, form),
              ("shape", old.rhs_shape, shape), ("dtype", old.dtype, ops[0].dtype))
    _compare("b", checks)


def _compare(name, checks) -> None:
    for what, was, got in checks:
        if was != got:
            raise SparseOperandError(f"{name} must match the planned operand's {what} {was!r}, "
                                     f"got {got!r}")


class DirectSolver(StatefulObject):
    """Solve ``a @ x = b`` for sparse ``a``, reusing the plan and the factorization.

    Parameters
    ----------
    a : CSR matrix or sequence of CSR matrices
        SciPy ``csr_matrix``/``csr_array``, CuPy ``cupyx.scipy.sparse.csr_matrix``, or a torch
        tensor with ``layout=torch.sparse_csr`` (3-D or more: a batch); a sequence of them is
        an explicit batch (sizes may differ). Indices int32 or int64, sorted, no duplicates.
    b : dense array or sequence of arrays
        NumPy/CuPy/torch, matching ``a``'s package: ``(N,)``, ``(N, K)`` (K right-hand sides),
        ``(..., N, K)`` (a batch) or a sequence. The solution has ``b``'s form and shape.
    options : DirectSolverOptions or dict, optional
    execution : {"cuda", "hybrid", "cpu"}, ExecutionCUDA, ExecutionHybrid, ExecutionCPU or dict
        Default: CUDA; the CPU when no GPU with cuDSS is usable (host operands only).
    stream : optional
        CUDA stream (int handle, ``__cuda_stream__`` object, torch/CuPy stream); default the
        package's current one.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from cuweave.sparse.advanced import DirectSolver
    >>> a = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(6, 6), format="csr")
    >>> b = np.ones(6)
    >>> with DirectSolver(a, b, execution="cpu") as solver:
    ...     plan_info = solver.plan()
    ...     fac_info = solver.factorize()
    ...     x = solver.solve()
    >>> bool(np.allclose(a @ x, b))
    True
    """

    def __init__(self, a, b, *, options=None, execution=None, stream=None):
        self.options = coerce_options(options, DirectSolverOptions, "options")
        self.logger = self.options.logger or _log
        execution = parse_execution(execution)
        problem = make_problem(a, b)
        structures = _check_problem(problem, stream)
        self.execution_options = _choose_space(execution, problem)
        self._problem = problem
        self._structures = structures
        self._engine = self._make_engine(problem, stream)
        store = self._engine.store
        alive = self._alive
        self._plan_config = PlanConfig(store, alive, self._engine.host_threads_ok)
        self._factorization_config = FactorizationConfig(store, alive)
        self._solution_config = SolutionConfig(store, alive)
        self._plan_info = PlanInfo(self._engine.data, alive, problem.batched)
        self._factorization_info = FactorizationInfo(self._engine.data, alive, problem.batched)
        self._factorized = False
        self._released = False
        self.logger.info("DirectSolver: %s %s matrix of %s, %s execution", problem.lhs_form,
                         problem.dtype, problem.lhs_package, self._engine.space)

    def _make_engine(self, problem, stream):
        o = self.options
        if isinstance(self.execution_options, ExecutionCPU):
            from ._cpu import CpuEngine

            return CpuEngine(problem, o.sparse_system_type, o.sparse_system_view,
                             self.execution_options, self.logger)
        from ._cuda import CudaEngine

        return CudaEngine(problem, o, self.execution_options, self.logger, stream)

    def _alive(self) -> bool:
        return not self._freed

    # ---- accessors -----------------------------------------------------------------------
    @property
    def plan_config(self) -> PlanConfig:
        """Settings of :meth:`plan` (reordering, pivoting, matching, ...)."""
        return self._plan_config

    @property
    def factorization_config(self) -> FactorizationConfig:
        """Settings of :meth:`factorize`."""
        return self._factorization_config

    @property
    def solution_config(self) -> SolutionConfig:
        """Settings of :meth:`solve` (iterative refinement steps, ...)."""
        return self._solution_config

    @property
    def plan_info(self) -> PlanInfo:
        """What :meth:`plan` found (permutations, memory estimates)."""
        return self._plan_info

    @property
    def factorization_info(self) -> FactorizationInfo:
        """What :meth:`factorize` found (nonzeros of the factors, pivots, inertia)."""
        return self._factorization_info

    @property
    def execution_space(self) -> str:
        """``"cuda"``, ``"hybrid"`` or ``"cpu"`` (cuweave's addition)."""
        return self._engine.space

    # ---- phases --------------------------------------------------------------------------
    def _require_operands(self, what: str) -> None:
        self._require_valid(what)
        if self._released:
            raise InvalidStateError(f"{what}() cannot run after release_operands(); give new "
                                    "operands with reset_operands(a=..., b=...)")

    def plan(self, *, stream=None) -> PlanInfo:
        """Reorder to limit fill-in and factorize symbolically; returns :attr:`plan_info`.

        Parameters
        ----------
        stream : optional
            The CUDA stream to run on (default: the one given at construction's package's
            current stream); ignored on the CPU.

        Returns
        -------
        DirectSolverPlanInfo
        """
        self._require_operands("plan")
        self._planned = self._factorized = False
        self._engine.plan(self._problem, self._structures, stream)
        self._mark_planned()
        return self._plan_info

    def factorize(self, *, stream=None) -> FactorizationInfo:
        """Factorize numerically (reusing the plan); returns :attr:`factorization_info`.

        A singular matrix (not positive definite for SPD/HPD) raises
        :class:`SingularMatrixError` (a ``ValueError``); nothing is left factorized.

        Parameters
        ----------
        stream : optional
            The CUDA stream to run on (default: the one given at construction's package's
            current stream); ignored on the CPU.

        Returns
        -------
        DirectSolverFactorizationInfo
        """
        self._require_operands("factorize")
        self._require_planned("factorize")
        self._factorized = False
        self._engine.factorize(self._problem, stream)
        self._factorized = True
        return self._factorization_info

    def solve(self, *, stream=None):
        """Solve with the factorization; the result has ``b``'s package, form and shape.

        Parameters
        ----------
        stream : optional
            The CUDA stream to run on (default: the one given at construction's package's
            current stream); ignored on the CPU.

        Returns
        -------
        array or tuple of arrays
            ``x`` with ``a @ x = b``: a new array of ``b``'s package in ``b``'s memory space
            (a tuple for an explicitly batched ``b``).
        """
        self._require_operands("solve")
        self._require_planned("solve")
        if not self._factorized:
            raise InvalidStateError("DirectSolver.solve() requires factorize() to be called "
                                    "first")
        return self._engine.solve(self._problem, stream)

    # ---- operands ------------------------------------------------------------------------
    def reset_operands(self, *, a=None, b=None, stream=None) -> None:
        """Give new values (``a`` with the planned shape, dtype and nonzero count) and/or new
        right-hand sides (``b`` with the planned shape); checked like the constructor's.

        A new ``a`` needs :meth:`factorize` again; if its sparsity pattern differs from the
        planned one, :meth:`plan` too (cuweave keeps the plan when the pattern is unchanged:
        a Newton loop refactorizes without reordering).

        Parameters
        ----------
        a : CSR matrix or sequence of them, optional
            New left-hand side(s), as the constructor takes them.
        b : array or sequence of arrays, optional
            New right-hand side(s), as the constructor takes them.
        stream : optional
            The CUDA stream for the copies and pointer updates (ignored on the CPU).
        """
        self._require_valid("reset_operands")
        if self._released and (a is None or b is None):
            raise SparseOperandError("reset_operands() after release_operands() needs both a and "
                                     "b")
        if a is None and b is None:
            raise SparseOperandError("reset_operands() needs a, b or both, got neither")
        old = self._problem
        if a is not None:
            _same_lhs(old, a)
        if b is not None:
            _same_rhs(old, b)
        new = make_problem(a if a is not None else self._lhs_objects(),
                           b if b is not None else old.rhs_obj)
        if (new.device, new.device_id) != (old.device, old.device_id):
            raise SparseOperandError(f"a and b must stay on the planned device {old.device!r} "
                                     f"({old.device_id}), got {new.device!r} ({new.device_id})")
        structures = self._structures
        if a is not None:
            structures = [check_structure(m, _name(new, i), stream)
                          for i, m in enumerate(new.matrices)]
            for i, m in enumerate(new.matrices):
                check_values(m.values, _name(new, i))
        if b is not None:
            for i, op in enumerate(new.rhs):
                check_values(op, "b" if new.rhs_form == "single" else f"b[{i}]")
        self._install(new, structures, a is not None, b is not None, stream)

    def reset_operands_unchecked(self, *, a=None, b=None, stream=None) -> None:
        """:meth:`reset_operands` without the checks (the caller guarantees shapes, dtypes and
        finite values); a new ``a`` needs :meth:`plan` and :meth:`factorize` again.

        Parameters
        ----------
        a : CSR matrix or sequence of them, optional
            New left-hand side(s).
        b : array or sequence of arrays, optional
            New right-hand side(s).
        stream : optional
            The CUDA stream (ignored on the CPU).
        """
        self._require_valid("reset_operands_unchecked")
        old = self._problem
        new = make_problem(a if a is not None else self._lhs_objects(),
                           b if b is not None else old.rhs_obj)
        self._install(new, None if a is not None else self._structures, a is not None,
                      b is not None, stream)

    def _lhs_objects(self):
        p = self._problem
        if self._released:
            raise SparseOperandError("reset_operands() after release_operands() needs both a "
                                     "and b")
        return p.lhs_obj

    def _install(self, new, structures, new_a: bool, new_b: bool, stream) -> None:
        """Make ``new`` the current problem: the plan survives an unchanged pattern."""
        same = structures is not None and _same_structures(self._structures, structures)
        if new_a and structures is None:  # unchecked: what the plan reads, unchecked
            structures = [(m.indptr.obj, m.indices.obj) if m.indptr.device == "cuda" else
                          (host_copy(m.indptr, stream), host_copy(m.indices, stream))
                          for m in new.matrices]
        self._engine.update(new, new_a, new_b, same, stream)
        self._problem = new
        if new_a:
            self._factorized = False
            self._structures = structures
            if not same:
                self._planned = False
        self._released = False

    def release_operands(self) -> None:
        """Drop the references to ``a`` and ``b`` (and their device copies); the plan and the
        factorization stay. :meth:`reset_operands` with both gives new ones."""
        self._require_valid("release_operands")
        if self._released:
            return
        self._engine.release_operands()
        self._problem = self._problem.without_arrays()
        self._released = True

    def _release(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            engine.release()
        self._problem = None

    def __repr__(self) -> str:
        if self._freed:
            return "DirectSolver(freed)"
        p = self._problem
        return (f"DirectSolver({p.lhs_form} {p.dtype} {p.lhs_package} matrix {p.lhs_shape}, "
                f"b {p.rhs_shape}, {self._engine.space})")


def _same_structures(old, new) -> bool:
    if old is None or new is None or len(old) != len(new):
        return False
    return all(same_structure(o, n) for o, n in zip(old, new))


def direct_solver(a, b, /, *, options=None, plan_preferences=None,
                  factorization_preferences=None, solution_preferences=None, execution=None,
                  stream=None):
    """Solve ``a @ x = b`` once (plan, factorize and solve with a fresh :class:`DirectSolver`).

    Parameters
    ----------
    a : CSR matrix or sequence of CSR matrices
        As :class:`DirectSolver` takes it.
    b : dense array or sequence of arrays
        As :class:`DirectSolver` takes it.
    options : DirectSolverOptions or dict, optional
    plan_preferences : DirectSolverPlanPreferences or dict, optional
        Settings of the plan phase.
    factorization_preferences : DirectSolverFactorizationPreferences or dict, optional
        Settings of the factorization.
    solution_preferences : DirectSolverSolutionPreferences or dict, optional
        Settings of the solve.
    execution : str, ExecutionCUDA, ExecutionHybrid, ExecutionCPU or dict, optional
        Where to run (default CUDA; the CPU without a usable GPU and cuDSS).
    stream : optional
        The CUDA stream.

    Returns
    -------
    array or tuple of arrays
        ``x`` with ``a @ x = b``, in ``b``'s package, form and memory space.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from cuweave.sparse.advanced import direct_solver
    >>> a = sp.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(5, 5), format="csr")
    >>> x = direct_solver(a, np.arange(5.0), execution="cpu")
    >>> bool(np.allclose(a @ x, np.arange(5.0)))
    True
    """
    prefs = [(plan_preferences, DirectSolverPlanPreferences, "plan_preferences", "plan_config"),
             (factorization_preferences, DirectSolverFactorizationPreferences,
              "factorization_preferences", "factorization_config"),
             (solution_preferences, DirectSolverSolutionPreferences, "solution_preferences",
              "solution_config")]
    settings = [(attr, preferences_items(value, cls, name))
                for value, cls, name, attr in prefs if value is not None]
    with DirectSolver(a, b, options=options, execution=execution, stream=stream) as solver:
        for attr, items in settings:
            config = getattr(solver, attr)
            for field, value in items:
                setattr(config, field, value)
        solver.plan(stream=stream)
        solver.factorize(stream=stream)
        return solver.solve(stream=stream)

