"""CPU execution of the sparse direct solver (cuweave's addition: the same calls, no GPU).

One backend object per system (:mod:`._cpu_backends`: PARDISO, CHOLMOD or SuperLU, chosen by
measurement per matrix type); the structure each wants is derived once per sparsity pattern
(:mod:`._structure`), so :meth:`CpuEngine.factorize` after new values with the same pattern
only gathers values and runs the numeric phase, reusing the symbolic one (PARDISO, CHOLMOD).
Iterative refinement (``solution_config.ir_num_steps``) runs here for every backend.
"""

from __future__ import annotations

import numpy as np

from ..._bindings.cudss import ConfigParam, DataParam, MatrixType, MatrixViewType
from ..._internal.errors import InvalidStateError
from ..._internal.packages import adapter, empty
from . import _cpu_backends as backends
from ._configs import DictStore, cpu_defaults, memory_estimates_dtype
from ._layout import Problem, host_copy, result_perm
from ._structure import derive, transpose_map

__all__ = ["CpuEngine"]

_REAL_EQUIVALENT = {MatrixType.HERMITIAN: MatrixType.SYMMETRIC, MatrixType.HPD: MatrixType.SPD}


class _System:
    """One system's derived structure and backend."""

    __slots__ = ("derived", "backend", "full", "info", "n", "mtype", "structure", "tmap")

    def __init__(self, derived, backend, n):
        self.derived, self.backend, self.n = derived, backend, n
        self.full = None   # (Derived, scipy CSR) of the full matrix, for iterative refinement
        self.info = {}
        self.mtype = None  # the type the backend factors (a symmetric GENERAL: SYMMETRIC)
        self.structure = None  # the host (indptr, indices) planned
        self.tmap = None   # GENERAL with a symmetric pattern: the transpose's gather map


class CpuEngine:
    """The sparse direct solver on the host."""

    space = "cpu"
    blocking = True
    host_threads_ok = True

    def __init__(self, problem: Problem, mtype: MatrixType, view, execution, logger):
        self.mtype = mtype
        complex_values = problem.dtype.startswith("complex")
        if not complex_values:
            self.mtype = _REAL_EQUIVALENT.get(mtype, mtype)
        self.view = view
        self.threads = execution.threads
        self.store = DictStore(cpu_defaults(problem.dtype))
        self.logger = logger
        self.backend_name = backends.choose(self.mtype, largest=max(problem.sizes))
        self._systems: list[_System] = []
        self._complex = complex_values
        self._dtype = np.dtype(problem.dtype)
        logger.info("CPU execution with the %s backend (%d threads)", self.backend_name,
                    self.threads)

    # ---- phases --------------------------------------------------------------------------
    def plan(self, problem: Problem, structures: list, stream=None) -> None:
        """Reordering and symbolic factorization of every system (``structures``: the host
        ``(indptr, indices)`` of each matrix, already checked)."""
        self.release()
        systems = []
        try:
            for csr, (indptr, indices) in zip(problem.matrices, structures):
                values = host_copy(csr.values)
                tmap = None
                if self.mtype == MatrixType.GENERAL and self.backend_name == "pardiso":
                    tmap = transpose_map(csr.n, indptr, indices)
                s = self._plan_system(csr, indptr, indices, values, self._as_type(values, tmap))
                s.tmap = tmap
                systems.append(s)
        except BaseException:
            for s in systems:
                s.backend.release()
            raise
        self._systems = systems

    def _as_type(self, values, tmap) -> MatrixType:
        """The type PARDISO factors a GENERAL matrix as: SYMMETRIC (HERMITIAN) when its values
        equal its transpose's (conjugate's) - half the work of an LU, the same solution."""
        if tmap is None:
            return self.mtype
        vt = values[tmap]
        if np.array_equal(values, vt):
            return MatrixType.SYMMETRIC
        if self._complex and np.array_equal(values, np.conj(vt)):
            return MatrixType.HERMITIAN
        return self.mtype

    def _plan_system(self, csr, indptr, indices, values, mtype) -> _System:
        requested = self.store.get(ConfigParam.HOST_NTHREADS)
        threads = requested if requested > 0 else self.threads
        # a GENERAL matrix factored as symmetric is read in full (its upper triangle)
        view = MatrixViewType.FULL if mtype != self.mtype else self.view
        stored = csr.nnz if view == MatrixViewType.FULL else 2 * csr.nnz - csr.n
        be = backends.make(self.backend_name, mtype, csr.n, self._dtype, threads,
                           self.store.get(ConfigParam.REORDERING_ALG),
                           row_length=stored / max(csr.n, 1))
        try:
            if hasattr(be, "set_pivot_eps"):
                be.set_pivot_eps(self.store.get(ConfigParam.PIVOT_EPSILON))
            d = derive(csr.n, indptr, indices, mtype, view, be.want,
                       complex_values=self._complex, diagonal=be.name == "pardiso",
                       conj_all=be.name == "cholmod")
            be.analyze(d.indptr, d.indices, d.values(values))
        except BaseException:
            be.release()
            raise
        if mtype != self.mtype:
            self.logger.info("a GENERAL matrix equal to its transpose: PARDISO factors it as "
                             "%s", mtype.name)
        s = _System(d, be, csr.n)
        s.mtype, s.structure = mtype, (indptr, indices)
        return s

    def factorize(self, problem: Problem, stream=None) -> None:
        for i, csr in enumerate(problem.matrices):
            s = self._systems[i]
            values = host_copy(csr.values)
            if s.tmap is not None:
                mtype = self._as_type(values, s.tmap)
                if mtype != s.mtype:  # new values, no longer (or now) symmetric: re-analyze
                    new = self._plan_system(csr, *s.structure, values, mtype)
                    new.tmap = s.tmap
                    s.backend.release()
                    self._systems[i] = s = new
            if hasattr(s.backend, "set_pivot_eps"):
                s.backend.set_pivot_eps(self.store.get(ConfigParam.PIVOT_EPSILON))
            s.info = s.backend.factorize(s.derived.values(values))

    def solve(self, problem: Problem, stream=None):
        """The solution, allocated here in ``b``'s package (host memory)."""
        steps = self.store.get(ConfigParam.IR_N_STEPS)
        results = self._allocate(problem)
        for i, (s, b_op, x_op) in enumerate(zip(self._systems, problem.rhs, results[1])):
            b = host_copy(b_op)
            x = s.backend.solve(np.asfortranarray(b))
            if steps:
                x = self._refine(i, s, problem, b, x, steps)
            self._check_solution(s, b, x, problem, i)
            adapter(x_op.package).host_array(x_op)[...] = x.reshape(x_op.shape)
        return results[0]

    # ---- pieces --------------------------------------------------------------------------
    def _allocate(self, problem: Problem):
        """``(user-facing result, [Operand per system])``: b's form, package and shape."""
        if problem.rhs_form == "explicit":
            ops = [empty(op, op.shape, op.dtype, perm=result_perm(op.ndim)) for op in problem.rhs]
            return tuple(op.obj for op in ops), ops
        ref = problem.rhs[0]
        shape = tuple(problem.rhs_shape)
        whole = empty(ref, shape, ref.dtype, perm=result_perm(len(shape)))
        if problem.rhs_form == "single":
            return whole.obj, [whole]
        from ..._internal.packages import wrap_operand

        ops = [wrap_operand(whole.obj[idx], "result") for idx in np.ndindex(*shape[:-2])]
        return whole.obj, ops

    def _full_matrix(self, i: int, s: _System, problem: Problem):
        """The full matrix as SciPy CSR with the values ``a`` holds now (refinement and the
        residual check read a matrix changed in place, as the factorization would)."""
        import scipy.sparse as sp

        csr = problem.matrices[i]
        values = host_copy(csr.values)
        if s.full is None:
            indptr, indices = host_copy(csr.indptr), host_copy(csr.indices)
            d = derive(csr.n, indptr, indices, self.mtype, self.view, "full",
                       complex_values=self._complex)
            s.full = (d, sp.csr_matrix((d.values(values), d.indices, d.indptr),
                                       shape=(csr.n, csr.n)))
        else:
            s.full[0].values(values, out=s.full[1].data)
        return s.full[1]

    def _refine(self, i, s, problem, b, x, steps):
        a = self._full_matrix(i, s, problem)
        b2 = b.reshape(b.shape[0], -1)
        x2 = x.reshape(b2.shape)
        for _ in range(steps):
            r = b2 - a @ x2
            x2 = x2 + s.backend.solve(np.asfortranarray(r)).reshape(x2.shape)
        return x2.reshape(x.shape)

    def _check_solution(self, s: _System, b, x, problem, i) -> None:
        """PARDISO perturbs tiny pivots instead of failing: where it did, a residual far above
        the precision's means the matrix is singular (the solution is not returned)."""
        be = s.backend
        if getattr(be, "perturbed_pivots", lambda: 0)() == 0 and np.isfinite(x).all():
            return
        a = self._full_matrix(i, s, problem)
        x2 = x.reshape(x.shape[0], -1)
        b2 = b.reshape(x2.shape)
        res = np.linalg.norm(a @ x2 - b2)
        scale = np.linalg.norm(b2) + 1e-300
        tol = 1e-2 if self._dtype in (np.float32, np.complex64) else 1e-6
        if not np.isfinite(res) or res > tol * scale:
            where = "" if not problem.batched else f" (system {i})"
            raise backends.SingularMatrixError(
                f"a must be non-singular{where}, got a singular or numerically singular matrix "
                f"({be.perturbed_pivots()} perturbed pivots, relative residual "
                f"{res / scale:.2g})")

    # ---- information ---------------------------------------------------------------------
    def data(self, param: DataParam):
        """A plan/factorization information value (:mod:`._configs` asks)."""
        if not self._systems:
            raise InvalidStateError("the information is available after plan()")
        s = self._systems[0]
        if param == DataParam.INFO:
            return 0
        if param == DataParam.MEMORY_ESTIMATES:
            rec = np.zeros((), dtype=memory_estimates_dtype).view(np.recarray)
            factors = sum(x.info.get("lu_nnz", x.derived.indices.size) for x in self._systems)
            nbytes = factors * (self._dtype.itemsize + 4)
            rec.permanent_host_memory = rec.peak_host_memory = nbytes
            return rec
        if param == DataParam.LU_NNZ:
            return sum(x.info.get("lu_nnz", 0) for x in self._systems)
        if param == DataParam.NPIVOTS:
            return sum(x.info.get("npivots", 0) for x in self._systems)
        if param == DataParam.INERTIA:
            return np.asarray(s.info.get("inertia", (0, 0)), dtype=np.int32)
        if param in (DataParam.PERM_REORDER_COL, DataParam.PERM_REORDER_ROW):
            perm = s.backend.permutation()
            if perm is not None:
                return perm
        raise InvalidStateError(f"{param.name.lower()} is not reported by the CPU's "
                                f"{self.backend_name} backend")

    def update(self, problem: Problem, new_a: bool, new_b: bool, same_structure: bool,
               stream=None) -> None:
        """New operands: the CPU reads them at each phase (a new pattern needs plan())."""
        if new_a:
            for s in self._systems:
                s.full = None

    def release_operands(self) -> None:
        for s in self._systems:
            s.full = None

    def release(self) -> None:
        for s in self._systems:
            s.backend.release()
        self._systems = []
