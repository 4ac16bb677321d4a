"""cuweave.linalg (generic matmul with qualifiers, direct solver) on a real GPU: cuBLAS and
cuSOLVER against float64 NumPy references, with torch and CuPy device arrays (exact layouts,
gaps included, rebuilt on the device), NumPy operands with ``execution="cuda"``, torch's lazy
conjugation, caller streams, and factorization failures as cuSOLVER/cuBLAS report them.
Run on the GPU machine: ``PARTS=tests PYTEST_ARGS="tests/linalg/generic" bash
scripts/gpu-check.sh``."""

from __future__ import annotations

import numpy as np
import pytest

from cuweave.linalg import DirectSolver, FactorizationError, direct_solver, matmul
from tests.linalg.generic._reference import (
    DTYPES,
    layout,
    logical,
    qualifiers,
    rand,
    record,
    rel_err,
)
from tests.linalg.generic.test_matmul_cpu import KINDS, _run_case, _sample, structured_factors

pytestmark = pytest.mark.gpu


def _torch():
    return pytest.importorskip("torch")


def to_torch(x):
    """``x`` on the GPU as a torch tensor with exactly ``x``'s strides (gaps included)."""
    torch = _torch()
    if x is None:
        return None
    isz = x.itemsize
    t = torch.empty_strided(x.shape, tuple(s // isz for s in x.strides),
                            dtype=getattr(torch, x.dtype.name), device="cuda")
    t.copy_(torch.from_numpy(np.ascontiguousarray(x)))
    return t


def to_cupy(x):
    cp = pytest.importorskip("cupy")
    if x is None:
        return None
    base = cp.empty(max(x.size, 1) * 4 + 64, x.dtype)
    out = cp.ndarray(x.shape, x.dtype, base.data, strides=x.strides)
    out[...] = cp.asarray(np.ascontiguousarray(x))
    return out


def from_device(y):
    mod = type(y).__module__.split(".")[0]
    if mod == "torch":
        return y.resolve_conj().cpu().numpy()
    if mod == "cupy":
        return y.get()
    return np.asarray(y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_structured_products_torch(dtype, kind):
    _torch()
    rng = np.random.default_rng(21)
    for side in "ab":
        for case in _sample(structured_factors(dtype, kind), 16, seed=sum(map(ord, kind + side))):
            _run_case(dtype, kind, side, case, rng, execution=None, wrap=to_torch,
                      unwrap=from_device)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_structured_products_torch(dtype):
    """``structured="dense"``: the densify kernel (NVRTC) and a GEMM, on the device."""
    _torch()
    rng = np.random.default_rng(27)
    for kind in ("tr", "sy", "he"):
        for side in "ab":
            factors = structured_factors(dtype, kind)
            factors["conj_s"] = [False]
            for case in _sample(factors, 8, seed=sum(map(ord, kind + side + "dense"))):
                _run_case(dtype, kind, side, case, rng, execution=None, wrap=to_torch,
                          unwrap=from_device, options={"structured": "dense"})
    n = 333  # tiles cut by the matrix edge, a batch
    s, g = rand((3, n, n), dtype, rng), rand((3, n, 70), dtype, rng)
    q = qualifiers(record("he" if dtype.startswith("complex") else "sy", lower=False),
                   record("ge"))
    got = matmul(to_torch(s), to_torch(g), qualifiers=q, options={"structured": "dense"})
    kind = "he" if dtype.startswith("complex") else "sy"
    want = logical(s, kind, lower=False) @ g
    assert rel_err(from_device(got), want) < (1e-4 if dtype in ("float32", "complex64")
                                              else 1e-11)


@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_structured_products_cupy_and_numpy_on_the_gpu(dtype):
    rng = np.random.default_rng(22)
    for kind in KINDS:
        for case in _sample(structured_factors(dtype, kind), 6, seed=sum(map(ord, kind))):
            _run_case(dtype, kind, "a", case, rng, execution="cuda")  # NumPy, staged
            try:
                import cupy  # noqa: F401
            except ImportError:
                continue
            _run_case(dtype, kind, "b", case, rng, wrap=to_cupy, unwrap=from_device)


def test_general_batched_products_and_lazy_conjugation():
    torch = _torch()
    rng = np.random.default_rng(23)
    a, b = rand((8, 64, 48), "complex64", rng), rand((8, 48, 32), "complex64", rng)
    ta, tb = to_torch(a), to_torch(b)
    got = matmul(ta.conj(), tb)  # torch's lazy conjugation is honoured
    assert rel_err(from_device(got), a.conj() @ b) < 2e-5
    q = qualifiers(record("tr", conj=True), record("ge"))
    s = rand((48, 48), "complex64", rng)
    got = matmul(to_torch(s), tb[0], qualifiers=q)
    assert rel_err(from_device(got), np.tril(s).conj() @ b[0]) < 2e-5
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        c = torch.zeros((8, 64, 32), dtype=torch.complex64, device="cuda")
    got = matmul(ta, tb, c, beta=1.0, options={"inplace": True}, stream=stream)
    stream.synchronize()
    assert got is c and rel_err(from_device(c), a @ b) < 2e-5


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fac", ["LU", "Cholesky"])
def test_solver_torch(dtype, fac):
    _torch()
    rng = np.random.default_rng(24)
    n = 33
    tol = 2e-3 if dtype in ("float32", "complex64") else 1e-9
    for bs in ((), (5,), (2, 3)):
        for order_a in ("C", "F"):
            for rhs in ("vec", "C", "F"):
                a = rand(bs + (n, n), dtype, rng)
                if fac == "Cholesky":
                    a = a @ np.swapaxes(a, -1, -2).conj()
                a = layout((a + n * np.eye(n)).astype(dtype), order_a)
                b = layout(rand(bs + ((n,) if rhs == "vec" else (n, 4)), dtype, rng),
                           "C" if rhs == "vec" else rhs)
                want = np.linalg.solve(a.astype(np.complex128),
                                       b[..., None] if rhs == "vec" else b)
                want = want[..., 0] if rhs == "vec" else want
                got = direct_solver(to_torch(a), to_torch(b), options={"factorization": fac})
                assert rel_err(from_device(got), want) < tol, (bs, order_a, rhs)


def test_solver_reuse_host_operands_and_failures():
    torch = _torch()
    rng = np.random.default_rng(25)
    a = rand((10000, 32, 32), "float64", rng) + 32 * np.eye(32)
    b = rand((10000, 32, 1), "float64", rng)
    with DirectSolver(to_torch(a), to_torch(b)) as s:
        s.plan()
        s.factorize()
        x1 = from_device(s.solve())
        b2 = rand((10000, 32, 1), "float64", rng)
        s.reset_operands(b=to_torch(b2))
        x2 = from_device(s.solve())
    assert rel_err(x1, np.linalg.solve(a, b)) < 1e-10
    assert rel_err(x2, np.linalg.solve(a, b2)) < 1e-10
    # NumPy operands solved on the GPU (nvmath's default), results back in NumPy
    x = direct_solver(a[:3], b[:3, :, 0])
    assert isinstance(x, np.ndarray) and rel_err(x, np.linalg.solve(a[:3], b[:3])[..., 0]) < 1e-10
    sing = a[:4].copy()
    sing[2] = 0
    with pytest.raises(FactorizationError) as e:
        direct_solver(to_torch(sing), to_torch(b[:4]))
    assert e.value.batch_indices == ((2,),) or e.value.batch_indices == (2,)
    with pytest.raises(FactorizationError, match="LU"):
        direct_solver(torch.zeros((5, 5), dtype=torch.float32, device="cuda"),
                      torch.ones(5, dtype=torch.float32, device="cuda"))
    nspd = np.eye(6)
    nspd[4, 4] = -1
    with pytest.raises(FactorizationError, match="order 5"):
        direct_solver(to_torch(nspd), to_torch(np.ones(6)), options={"factorization":
                                                                     "Cholesky"})


def test_large_products_against_a_dense_reference():
    torch = _torch()
    rng = np.random.default_rng(26)
    n = 1024
    for dtype in ("float32", "float64"):
        s, g = rand((n, n), dtype, rng), rand((n, 512), dtype, rng)
        for kind in ("tr", "sy"):
            q = qualifiers(record(kind, lower=False), record("ge"))
            got = matmul(to_torch(s), to_torch(g), qualifiers=q)
            want = logical(s, kind, lower=False) @ g
            assert rel_err(from_device(got), want) < (1e-4 if dtype == "float32" else 1e-12)
    torch.cuda.synchronize()
