"""The cuDSS engine on a CPU machine, through the numeric fake of cuDSS and the CUDA runtime
(fake_cudss.py): what the engine hands cuDSS (pointers, batches, sizes, mirrors, phases) is
checked through the solutions that come back, against SciPy's spsolve."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from cuweave.sparse.advanced import (
    DirectSolver,
    DirectSolverOptions,
    ExecutionCUDA,
    ExecutionHybrid,
    SingularMatrixError,
    SparseOperandError,
    direct_solver,
)
from cuweave.sparse.advanced import DirectSolverMatrixType as T
from cuweave.sparse.advanced import DirectSolverMatrixViewType as V

from .fake_cudss import fake_gpu
from .systems import TYPES, random_matrix, reference, rel_err, rhs, view_of

ANALYSIS, FACTORIZATION, SOLVE = 3, 4, 1008


@pytest.mark.parametrize("mtype,cplx", TYPES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("view", [V.FULL, V.LOWER, V.UPPER], ids=lambda v: v.name)
def test_host_operands_mirrored(mtype, cplx, view):
    if mtype == T.GENERAL and view != V.FULL:
        pytest.skip("a general matrix is given in full")
    a = random_matrix(12, mtype, cplx, seed=2)
    b = rhs(12, 2, cplx)
    with fake_gpu() as fake:
        x = direct_solver(view_of(a, view), b, execution="cuda",
                          options=DirectSolverOptions(sparse_system_type=mtype,
                                                      sparse_system_view=view))
    assert type(x) is np.ndarray and x.shape == b.shape and x.flags.f_contiguous
    assert rel_err(x, reference(a, b)) < 1e-10
    assert fake.phases == [ANALYSIS, FACTORIZATION, SOLVE]
    assert not fake.live  # every handle, config, data and matrix object destroyed


def test_refactorization_and_new_rhs_reuse_the_plan():
    a = random_matrix(20, T.GENERAL, False, seed=4)
    b = rhs(20, None, False)
    with fake_gpu() as fake, DirectSolver(a, b, execution=ExecutionCUDA()) as s:
        s.plan()
        s.factorize()
        x1 = s.solve()
        a2 = a.copy()
        a2.data *= 2.0
        s.reset_operands(a=a2)
        s.factorize()
        x2 = s.solve()
        b3 = rhs(20, None, False, seed=5)
        s.reset_operands(b=b3)
        x3 = s.solve()
        assert fake.phases == [ANALYSIS, FACTORIZATION, SOLVE, FACTORIZATION, SOLVE, SOLVE]
        assert s.plan_info.memory_estimates.peak_device_memory == 2048
        assert np.array_equal(s.plan_info.col_permutation, np.arange(20))
        assert s.factorization_info.info == 0
    assert rel_err(x1, reference(a, b)) < 1e-12
    assert rel_err(x2, reference(a2, b)) < 1e-12
    assert rel_err(x3, reference(a2, b3)) < 1e-12


def test_explicit_batches_of_sizes():
    mats = [random_matrix(n, T.SYMMETRIC, True, seed=n) for n in (4, 9, 6)]
    bs = [rhs(4, None, True), rhs(9, 3, True), rhs(6, 2, True)]
    with fake_gpu() as fake:
        xs = direct_solver(mats, bs, execution="cuda",
                           options={"sparse_system_type": T.SYMMETRIC})
    assert fake.calls["cudssMatrixCreateBatchCsr"] == 1
    for a, b, x in zip(mats, bs, xs):
        assert rel_err(x, reference(a, b)) < 1e-10


def test_implicit_rhs_batch_from_numpy():
    mats = [random_matrix(7, T.GENERAL, False, seed=s) for s in range(3)]
    b = np.random.default_rng(0).standard_normal((3, 2, 7)).transpose(0, 2, 1)
    with fake_gpu():
        x = direct_solver(mats, b, execution="cuda")
    assert x.shape == b.shape
    for i, a in enumerate(mats):
        assert rel_err(x[i], reference(a, b[i])) < 1e-12


def test_singular_raises_with_nothing_factorized():
    a = sp.csr_matrix(np.array([[1.0, 2.0], [2.0, 4.0]]))
    from cuweave import InvalidStateError

    with fake_gpu(), DirectSolver(a, np.ones(2), execution="cuda") as s:
        s.plan()
        with pytest.raises(SingularMatrixError, match="CUDSS_DATA_INFO = 1"):
            s.factorize()
        with pytest.raises(InvalidStateError, match="factorize"):
            s.solve()


def test_hybrid_execution_reads_host_memory():
    a = random_matrix(10, T.HPD, True, seed=1)
    b = rhs(10, None, True)
    with fake_gpu() as fake:
        x = direct_solver(a, b, execution=ExecutionHybrid(),
                          options={"sparse_system_type": "hpd"})
        assert not [e for e in fake.log if e[0] == "memcpy"]  # no device copies
        with pytest.raises(SparseOperandError, match="b must be a vector under hybrid"):
            direct_solver(a, rhs(10, 2, True), execution="hybrid")
        with pytest.raises(SparseOperandError, match="single matrix under hybrid"):
            direct_solver([a, a], [b, b], execution="hybrid")
    assert rel_err(x, reference(a, b)) < 1e-10


def test_batched_int64_indices_refused():
    a = random_matrix(5, T.GENERAL, False)
    a.indptr, a.indices = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    with fake_gpu(), pytest.raises(SparseOperandError, match="int32 indices for a batched"):
        direct_solver([a, a], [np.ones(5)] * 2, execution="cuda")


def test_hybrid_memory_options_reach_cudss():
    a = random_matrix(8, T.GENERAL, False)
    with fake_gpu() as fake:
        ex = ExecutionCUDA(hybrid_memory_mode_options={"hybrid_memory_mode": True,
                                                       "hybrid_device_memory_limit": "1 GiB"})
        with DirectSolver(a, np.ones(8), execution=ex) as s:
            config = next(iter(fake.configs.values()))
            assert config[11] == 1 and config[12] == 1 << 30 and config[13] == 1
            s.plan_config.reordering_algorithm = "nested_dissection"
            assert config[0] == 4
            assert s.plan_config.reordering_algorithm.name == "NESTED_DISSECTION"


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_device_operands():
    torch = pytest.importorskip("torch")
    pattern = random_matrix(8, T.GENERAL, False, seed=3, density=0.3)
    rng = np.random.default_rng(1)
    vals = np.stack([pattern.data * rng.uniform(0.5, 1.5, pattern.nnz) for _ in range(2)])
    dense = [sp.csr_matrix((v, pattern.indices, pattern.indptr)).toarray() for v in vals]
    a = torch.sparse_csr_tensor(torch.tensor(np.stack([pattern.indptr] * 2)),
                                torch.tensor(np.stack([pattern.indices] * 2)),
                                torch.tensor(vals), size=(2, 8, 8))
    a = torch.sparse_csr_tensor(a.crow_indices().int(), a.col_indices().int(), a.values(),
                                size=a.shape)
    b = torch.randn(2, 8, 3, dtype=torch.float64)  # row-major samples: copied column-major
    with fake_gpu(torch_as_cuda=True) as fake:
        x = direct_solver(a, b)  # device operands: CUDA by default
        assert fake.phases == [ANALYSIS, FACTORIZATION, SOLVE]
        # no mirrors: the queued copies are the batch's pointer arrays (2 pointers each); the
        # synchronous ones (stream None) are the structure checks reading the indices
        queued = [e[1] for e in fake.log if e[0] == "memcpy" and e[2] is not None]
        assert queued and set(queued) == {16}
    assert isinstance(x, torch.Tensor) and x.shape == b.shape
    for i in range(2):
        assert rel_err(x[i].numpy(), np.linalg.solve(dense[i], b[i].numpy())) < 1e-12


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_torch_device_structure_checked_where_it_lives():
    torch = pytest.importorskip("torch")
    a = random_matrix(10, T.GENERAL, False, seed=6, density=0.3)
    ix = a.indices.copy()
    row = int(np.argmax(np.diff(a.indptr) >= 2))
    ix[a.indptr[row] + 1] = ix[a.indptr[row]]  # a duplicate column in that row
    bad = torch.sparse_csr_tensor(torch.tensor(a.indptr), torch.tensor(ix),
                                  torch.tensor(a.data), size=(10, 10))
    good = torch.sparse_csr_tensor(torch.tensor(a.indptr), torch.tensor(a.indices),
                                   torch.tensor(a.data), size=(10, 10))
    b = torch.ones(10, dtype=torch.float64)
    with fake_gpu(torch_as_cuda=True) as fake:
        x = direct_solver(good, b)
        assert not [e for e in fake.log if e[0] == "memcpy"]  # nothing copied to check it
        with pytest.raises(SparseOperandError, match=f"no duplicate entries.*row {row}"):
            direct_solver(bad, b)
    assert rel_err(x.numpy(), reference(a, np.ones(10))) < 1e-12
