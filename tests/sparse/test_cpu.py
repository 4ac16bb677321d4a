"""cuweave.sparse.advanced on the CPU against SciPy's spsolve (float64/complex128 references):
every matrix type and view on every installed backend, multiple right-hand sides, explicit and
implicit batches, refactorization with new values, new right-hand sides, torch CPU operands."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cuweave.sparse.advanced import DirectSolver, DirectSolverOptions, _cpu_backends, direct_solver
from cuweave.sparse.advanced import DirectSolverMatrixType as T
from cuweave.sparse.advanced import DirectSolverMatrixViewType as V

from .systems import TYPES, random_matrix, reference, rel_err, rhs, view_of

BACKENDS = _cpu_backends.available()
TOL = {np.float64: 1e-10, np.complex128: 1e-10, np.float32: 2e-4, np.complex64: 2e-4}


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    monkeypatch.setenv(_cpu_backends.ENV_CHOICE, request.param)
    return request.param


def _applies(backend, mtype) -> bool:
    return backend != "cholmod" or mtype in (T.SPD, T.HPD)


@pytest.mark.parametrize("mtype,cplx", TYPES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("view", list(V), ids=lambda v: v.name)
def test_every_type_and_view(backend, mtype, cplx, view):
    if not _applies(backend, mtype):
        pytest.skip("CHOLMOD factors SPD/HPD matrices only")
    if mtype == T.GENERAL and view != V.FULL:
        pytest.skip("a general matrix is given in full")
    n = 40
    a = random_matrix(n, mtype, cplx, seed=3)
    b = rhs(n, None, cplx)
    opts = DirectSolverOptions(sparse_system_type=mtype, sparse_system_view=view)
    x = direct_solver(view_of(a, view), b, options=opts, execution="cpu")
    assert type(x) is np.ndarray and x.shape == b.shape and x.dtype == b.dtype
    assert rel_err(x, reference(a, b)) < TOL[np.complex128 if cplx else np.float64]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_dtypes_multiple_rhs(backend, dtype):
    cplx = np.dtype(dtype).kind == "c"
    mtype = T.SPD if backend == "cholmod" and not cplx else T.HPD if backend == "cholmod" \
        else T.GENERAL
    a = random_matrix(30, mtype, cplx, seed=5, dtype=dtype)
    b = rhs(30, 3, cplx, dtype=dtype)
    x = direct_solver(a, b, options={"sparse_system_type": mtype}, execution="cpu")
    assert x.dtype == dtype and x.shape == (30, 3) and x.flags.f_contiguous
    assert rel_err(x, reference(a, b)) < TOL[dtype]


def test_refactorize_new_values_keeps_plan(backend):
    mtype = T.SPD
    a = random_matrix(50, mtype, False, seed=7)
    b = rhs(50, None, False)
    with DirectSolver(a, b, options={"sparse_system_type": mtype}, execution="cpu") as s:
        s.plan()
        s.factorize()
        x1 = s.solve()
        a2 = a.copy()
        a2.data = a.data * 1.5 + 0.25 * (a.indices == np.repeat(np.arange(50), np.diff(a.indptr)))
        s.reset_operands(a=a2)
        s.factorize()  # the pattern is unchanged: no new plan() needed
        x2 = s.solve()
        b3 = rhs(50, None, False, seed=9)
        s.reset_operands(b=b3)
        x3 = s.solve()  # new right-hand side: no new factorization
    assert rel_err(x1, reference(a, b)) < 1e-10
    assert rel_err(x2, reference(a2, b)) < 1e-10
    assert rel_err(x3, reference(a2, b3)) < 1e-10


def test_new_pattern_needs_plan():
    n = 20
    upper = sp.diags([4.0, -1.0], [0, 1], shape=(n, n), format="csr")
    lower = sp.diags([4.0, -1.0], [0, -1], shape=(n, n), format="csr")  # same nnz, new pattern
    b = rhs(n, None, False)
    from cuweave import InvalidStateError

    with DirectSolver(upper, b, execution="cpu") as s:
        s.plan()
        s.factorize()
        shuffled = sp.csr_matrix((upper.data, upper.indices.copy(), upper.indptr), shape=(n, n))
        shuffled.indices[:2] = shuffled.indices[1::-1]  # row 0 unsorted: refused, nothing changes
        with pytest.raises(ValueError, match="sorted"):
            s.reset_operands(a=shuffled)
        assert rel_err(s.solve(), reference(upper, b)) < 1e-12
        s.reset_operands(a=lower)
        with pytest.raises(InvalidStateError, match="plan"):
            s.factorize()
        s.plan()
        s.factorize()
        assert rel_err(s.solve(), reference(lower, b)) < 1e-12


def test_explicit_batch_of_sizes():
    mats = [random_matrix(n, T.GENERAL, True, seed=n) for n in (5, 12, 8)]
    bs = [rhs(5, None, True), rhs(12, 2, True), rhs(8, None, True)]
    xs = direct_solver(mats, bs, execution="cpu")
    assert isinstance(xs, list | tuple) and len(xs) == 3
    for a, b, x in zip(mats, bs, xs):
        assert x.shape == b.shape
        assert rel_err(x, reference(a, b)) < 1e-10


def test_explicit_lhs_implicit_rhs():
    mats = [random_matrix(10, T.SYMMETRIC, False, seed=s) for s in range(4)]
    # (4, 10, 3): a batch of column-major (10, 3) samples
    b = np.random.default_rng(0).standard_normal((4, 3, 10)).transpose(0, 2, 1)
    x = direct_solver(mats, b, options={"sparse_system_type": T.SYMMETRIC}, execution="cpu")
    assert x.shape == b.shape
    for i, a in enumerate(mats):
        assert rel_err(x[i], reference(a, b[i])) < 1e-10


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_cpu_operands_and_implicit_batch():
    torch = pytest.importorskip("torch")
    pattern = random_matrix(9, T.GENERAL, False, seed=0, density=0.3)  # one pattern, 3 samples
    rng = np.random.default_rng(2)
    vals = np.stack([pattern.data * rng.uniform(0.5, 1.5, pattern.nnz) for _ in range(3)])
    dense = [sp.csr_matrix((v, pattern.indices, pattern.indptr)).toarray() for v in vals]
    a = torch.sparse_csr_tensor(torch.tensor(np.stack([pattern.indptr] * 3)),
                                torch.tensor(np.stack([pattern.indices] * 3)),
                                torch.tensor(vals), size=(3, 9, 9))
    b = torch.randn(3, 2, 9, dtype=torch.float64).permute(0, 2, 1)
    x = direct_solver(a, b, execution="cpu")
    assert isinstance(x, torch.Tensor) and x.shape == b.shape
    for i in range(3):
        assert rel_err(x[i].numpy(), np.linalg.solve(dense[i], b[i].numpy())) < 1e-10


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_iterative_refinement_and_plan_info():
    a = random_matrix(40, T.GENERAL, False, seed=11)
    b = rhs(40, None, False)
    with DirectSolver(a, b, execution="cpu") as s:
        s.plan_config.reordering_algorithm = "amd"
        s.solution_config.ir_num_steps = 2
        info = s.plan()
        est = info.memory_estimates
        assert est.dtype.names[0] == "permanent_device_memory"
        f = s.factorize()
        assert f.info == 0
        x = s.solve()
    assert rel_err(x, reference(a, b)) < 1e-12


@pytest.mark.parametrize("cplx", [False, True])
def test_general_matrix_equal_to_its_transpose(cplx, monkeypatch, caplog):
    """PARDISO factors a GENERAL matrix whose values equal its transpose's (conjugate's) as
    SYMMETRIC (HERMITIAN); new values that break the symmetry switch back to an LU."""
    if "pardiso" not in BACKENDS:
        pytest.skip("MKL PARDISO is not installed")
    monkeypatch.setenv(_cpu_backends.ENV_CHOICE, "pardiso")
    sym = T.HERMITIAN if cplx else T.SYMMETRIC
    a = random_matrix(40, sym, cplx, seed=12)
    b = rhs(40, 2, cplx)
    import logging

    with caplog.at_level(logging.INFO, logger="cuweave.sparse"), \
            DirectSolver(a, b, execution="cpu") as s:
        s.plan()
        s.factorize()
        assert f"PARDISO factors it as {sym.name}" in caplog.text
        assert rel_err(s.solve(), reference(a, b)) < 1e-10
        a2 = a.copy()
        a2.data = a2.data * np.linspace(1.0, 2.0, a2.nnz)  # same pattern, not symmetric
        s.reset_operands(a=a2)
        s.factorize()
        assert rel_err(s.solve(), reference(a2, b)) < 1e-10


def test_in_place_updates_are_read_at_each_phase():
    """On the CPU the operands are read where they are at each phase: a right-hand side
    changed in place is solved as changed; a matrix changed in place is used by iterative
    refinement (no refactorization) and by the next factorize()."""
    a = random_matrix(30, T.GENERAL, False, seed=21)
    b = rhs(30, None, False)
    with DirectSolver(a, b, execution="cpu") as s:
        s.plan()
        s.factorize()
        b *= 3.0
        assert rel_err(s.solve(), reference(a, b)) < 1e-12
        s.solution_config.ir_num_steps = 40
        a.data *= 1.05
        assert rel_err(s.solve(), reference(a, b)) < 1e-10
        a.data *= 1.05  # again: refinement reads the matrix as it is now
        assert rel_err(s.solve(), reference(a, b)) < 1e-10
        s.solution_config.ir_num_steps = 0
        a.data *= 4.0
        s.factorize()
        assert rel_err(s.solve(), reference(a, b)) < 1e-12


def test_automatic_backend_choice(monkeypatch):
    monkeypatch.delenv(_cpu_backends.ENV_CHOICE, raising=False)
    small = _cpu_backends.SMALL_SYSTEM - 1
    assert _cpu_backends.choose(T.GENERAL, largest=small) == "superlu"
    big = _cpu_backends.choose(T.SPD, largest=_cpu_backends.SMALL_SYSTEM)
    assert big == _cpu_backends.available()[0]
    assert _cpu_backends.choose(T.GENERAL, largest=10**6) != "cholmod"
    monkeypatch.setenv(_cpu_backends.ENV_CHOICE, "superlu")
    assert _cpu_backends.choose(T.SPD, largest=10**6) == "superlu"
    monkeypatch.setenv(_cpu_backends.ENV_CHOICE, "umfpack")
    with pytest.raises(ValueError, match="CUWEAVE_CPU_SPARSE must be one of"):
        _cpu_backends.choose(T.SPD)
