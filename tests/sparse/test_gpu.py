"""cuweave.sparse.advanced on the GPU with cuDSS, against SciPy's spsolve (float64/complex128
references): SciPy (mirrored), CuPy and torch operands, every matrix type and view, dtypes,
batches, refactorization with new values (the symbolic phase reused), new right-hand sides on
a caller's stream, hybrid execution and hybrid memory, singular matrices.

libcudss comes from the nvidia-cudss-cu13 wheel or from ``CUWEAVE_CUDSS_PATH``; where neither
exists these tests skip, and where the variable is set but the library does not load they fail.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp

from cuweave.sparse.advanced import (
    DirectSolver,
    DirectSolverOptions,
    ExecutionCUDA,
    ExecutionHybrid,
    SingularMatrixError,
    direct_solver,
)
from cuweave.sparse.advanced import DirectSolverMatrixType as T
from cuweave.sparse.advanced import DirectSolverMatrixViewType as V

from .systems import TYPES, random_matrix, reference, rel_err, rhs, view_of

pytestmark = pytest.mark.gpu
TOL = {np.float64: 1e-10, np.complex128: 1e-10, np.float32: 1e-4, np.complex64: 1e-4}


@pytest.fixture(scope="module", autouse=True)
def library():
    from cuweave._bindings import cudss

    try:
        cudss.load()
    except Exception as e:
        if os.environ.get(cudss.ENV_PATH):
            raise
        pytest.skip(f"cuDSS is not installed (the sparse extra) and {cudss.ENV_PATH} is unset: "
                    f"{e}")
    return cudss


def _cupy():
    return pytest.importorskip("cupy")


def _to_cupyx(a):
    cp = _cupy()
    import cupyx.scipy.sparse as csp

    return csp.csr_matrix((cp.asarray(a.data), cp.asarray(a.indices), cp.asarray(a.indptr)),
                          shape=a.shape)


def test_library_version(library):
    assert library.version() >= (1, 0, 0)


@pytest.mark.parametrize("mtype,cplx", TYPES, ids=lambda v: getattr(v, "name", str(v)))
@pytest.mark.parametrize("view", list(V), ids=lambda v: v.name)
def test_scipy_operands_every_type_and_view(mtype, cplx, view):
    if mtype == T.GENERAL and view != V.FULL:
        pytest.skip("a general matrix is given in full")
    a = random_matrix(200, mtype, cplx, seed=3, density=0.03)
    b = rhs(200, 3, cplx)
    x = direct_solver(view_of(a, view), b, execution="cuda",
                      options=DirectSolverOptions(sparse_system_type=mtype,
                                                  sparse_system_view=view))
    assert type(x) is np.ndarray and x.shape == b.shape
    assert rel_err(x, reference(a, b)) < TOL[np.complex128 if cplx else np.float64]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cupy_operands_dtypes(dtype):
    cp = _cupy()
    cplx = np.dtype(dtype).kind == "c"
    a = random_matrix(300, T.GENERAL, cplx, seed=1, density=0.02, dtype=dtype)
    b = rhs(300, 2, cplx, dtype=dtype)
    x = direct_solver(_to_cupyx(a), cp.asfortranarray(cp.asarray(b)))
    assert isinstance(x, cp.ndarray) and x.dtype == dtype and x.device.id == 0
    assert rel_err(cp.asnumpy(x), reference(a, b)) < TOL[dtype]


def test_cupy_explicit_batch_and_implicit_rhs():
    cp = _cupy()
    mats = [random_matrix(50, T.SPD, False, seed=s, density=0.05) for s in range(4)]
    b = np.random.default_rng(0).standard_normal((4, 3, 50)).transpose(0, 2, 1)
    x = direct_solver([_to_cupyx(m) for m in mats], cp.asarray(b),
                      options={"sparse_system_type": T.SPD})
    assert isinstance(x, cp.ndarray) and x.shape == b.shape
    for i, m in enumerate(mats):
        assert rel_err(cp.asnumpy(x[i]), reference(m, b[i])) < 1e-10
    sizes = (10, 40, 25)
    mats = [random_matrix(n, T.GENERAL, True, seed=n) for n in sizes]
    bs = [cp.asarray(rhs(n, None, True)) for n in sizes]
    xs = direct_solver([_to_cupyx(m) for m in mats], bs)
    for m, bb, xx in zip(mats, bs, xs):
        assert rel_err(cp.asnumpy(xx), reference(m, cp.asnumpy(bb))) < 1e-10


def test_torch_operands_batched_and_int64():
    torch = pytest.importorskip("torch")
    pattern = random_matrix(60, T.GENERAL, False, seed=2, density=0.05)
    rng = np.random.default_rng(1)
    vals = np.stack([pattern.data * rng.uniform(0.5, 1.5, pattern.nnz) for _ in range(3)])
    a = torch.sparse_csr_tensor(torch.tensor(np.stack([pattern.indptr] * 3), dtype=torch.int32),
                                torch.tensor(np.stack([pattern.indices] * 3), dtype=torch.int32),
                                torch.tensor(vals), size=(3, 60, 60), device="cuda")
    b = torch.randn(3, 2, 60, dtype=torch.float64, device="cuda").permute(0, 2, 1)
    x = direct_solver(a, b)
    assert x.is_cuda and x.shape == b.shape
    for i in range(3):
        ai = sp.csr_matrix((vals[i], pattern.indices, pattern.indptr))
        assert rel_err(x[i].cpu().numpy(), reference(ai, b[i].cpu().numpy())) < 1e-10
    single = torch.sparse_csr_tensor(torch.tensor(pattern.indptr, dtype=torch.int64),
                                     torch.tensor(pattern.indices, dtype=torch.int64),
                                     torch.tensor(pattern.data), size=(60, 60), device="cuda")
    y = direct_solver(single, b[0].contiguous())  # row-major b: copied column-major
    assert rel_err(y.cpu().numpy(), reference(pattern, b[0].cpu().numpy())) < 1e-10


def test_refactorization_reuses_the_plan_and_new_rhs_on_a_stream():
    cp = _cupy()
    a = random_matrix(400, T.GENERAL, False, seed=5, density=0.01)
    ad = _to_cupyx(a)
    b = cp.asarray(rhs(400, None, False))
    stream = cp.cuda.Stream(non_blocking=True)
    with DirectSolver(ad, b, stream=stream) as s:
        s.plan(stream=stream)
        for step in range(3):  # a Newton loop: new values, one pattern, one plan
            values = a.data * (1.0 + 0.1 * step)
            ad.data[...] = cp.asarray(values)
            s.reset_operands(a=ad, stream=stream)
            s.factorize(stream=stream)
            x = s.solve(stream=stream)
            stream.synchronize()
            ai = sp.csr_matrix((values, a.indices, a.indptr), shape=a.shape)
            assert rel_err(cp.asnumpy(x), reference(ai, cp.asnumpy(b))) < 1e-10
        b2 = cp.asarray(rhs(400, None, False, seed=8))
        s.reset_operands(b=b2, stream=stream)
        x2 = s.solve(stream=stream)
        stream.synchronize()
        assert rel_err(cp.asnumpy(x2), reference(ai, cp.asnumpy(b2))) < 1e-10
        est = s.plan_info.memory_estimates
        assert est.peak_device_memory > 0
        perm = np.sort(s.plan_info.col_permutation)
        assert np.array_equal(perm, np.arange(400))
        assert s.factorization_info.lu_nnz >= a.nnz


def test_hybrid_execution_and_hybrid_memory():
    a = random_matrix(300, T.SPD, False, seed=9, density=0.02)
    b = rhs(300, None, False)
    x = direct_solver(a, b, execution=ExecutionHybrid(), options={"sparse_system_type": "spd"})
    assert rel_err(x, reference(a, b)) < 1e-10
    ex = ExecutionCUDA(hybrid_memory_mode_options={"hybrid_memory_mode": True})
    y = direct_solver(a, rhs(300, 2, False), execution=ex)
    assert rel_err(y, reference(a, rhs(300, 2, False))) < 1e-10


def test_iterative_refinement_setting():
    a = random_matrix(200, T.GENERAL, False, seed=4, density=0.03)
    b = rhs(200, None, False)
    x = direct_solver(a, b, execution="cuda", solution_preferences={"ir_num_steps": 2},
                      factorization_preferences={"pivot_eps": 1e-14})
    assert rel_err(x, reference(a, b)) < 1e-12


def test_singular_spd():
    a = sp.csr_matrix(np.array([[1.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    with pytest.raises(SingularMatrixError, match="a must be positive definite"):
        direct_solver(a, np.ones(3), execution="cuda", options={"sparse_system_type": T.SPD})
