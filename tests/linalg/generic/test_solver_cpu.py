"""cuweave.linalg.direct_solver / DirectSolver on the CPU (LAPACK) against float64 NumPy:
every dtype x factorization (LU, Cholesky lower / upper) x layout of a (row-, column-major,
strided) x right-hand sides (vector, matrix; row- / column-major) x batch (none, batched,
2-D batch, explicit sequences, mixed) x in-place options; factorization reuse, failures
reported with the factorization, batch indices and position, and validation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cuweave.linalg import (
    DirectSolver,
    DirectSolverOptions,
    FactorizationError,
    InvalidDirectSolverState,
    direct_solver,
)
from tests.linalg.generic._reference import DTYPES, layout, rand, rel_err

TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-10, "complex128": 1e-10}


def _system(shape_batch, n, dtype, rng, spd):
    a = rand(shape_batch + (n, n), dtype, rng)
    if spd:
        a = a @ np.swapaxes(a, -1, -2).conj() + n * np.eye(n, dtype=dtype)
    else:
        a = a + n * np.eye(n, dtype=dtype)
    return a.astype(dtype)


def _garbage_triangle(a, lower, rng):
    """``a`` with the triangle a Cholesky factorization does not read overwritten."""
    junk = rand(a.shape, a.dtype, rng)
    mask = np.triu(np.ones(a.shape[-2:], bool), 1) if lower else np.tril(
        np.ones(a.shape[-2:], bool), -1)
    return np.where(mask, junk, a).astype(a.dtype)


CASES = list(itertools.product(["LU", "CholL", "CholU"], ["C", "F", "S"], ["vec", "C", "F"],
                               ["none", "batch", "batch2", "explicit", "mixed"]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_solves_match_numpy(dtype):
    rng = np.random.default_rng(11)
    n, nrhs = 5, 3
    picks = np.random.default_rng(0).choice(len(CASES), 70, replace=False)
    for fac, order_a, rhs, batch in (CASES[i] for i in picks):
        bs = {"none": (), "batch": (3,), "batch2": (2, 2), "explicit": (3,),
              "mixed": (3,)}[batch]
        spd = fac != "LU"
        full = _system(bs, n, dtype, rng, spd)
        lower = fac != "CholU"
        a_in = _garbage_triangle(full, lower, rng) if spd else full
        a_in = layout(a_in, order_a)
        b_shape = bs + ((n,) if rhs == "vec" else (n, nrhs))
        b = layout(rand(b_shape, dtype, rng), rhs if rhs != "vec" else "C")
        want = (np.linalg.solve(full.astype(np.complex128), b[..., None] if rhs == "vec"
                                else b)[..., 0] if rhs == "vec" else
                np.linalg.solve(full.astype(np.complex128), b.astype(np.complex128)))
        opts = {"factorization": "LU" if fac == "LU" else "Cholesky",
                "fill_mode": "LOWER" if lower else "UPPER"}
        if batch == "explicit":
            got = direct_solver(list(a_in), list(b), options=opts, execution="cpu")
            assert isinstance(got, list) and len(got) == 3
            got = np.stack(got)
        elif batch == "mixed":
            got = direct_solver(list(a_in), b, options=opts, execution="cpu")
        else:
            got = direct_solver(a_in, b, options=opts, execution="cpu")
        assert got.shape == want.shape and got.dtype == np.dtype(dtype)
        err = rel_err(got, want)
        assert err < TOL[dtype], (fac, order_a, rhs, batch, err)


@pytest.mark.parametrize("fac", ["LU", "Cholesky"])
def test_in_place_factors_and_solution(fac):
    rng = np.random.default_rng(3)
    a = _system((2,), 4, "float64", rng, spd=True)
    b_work = layout(rand((2, 4, 2), "float64", rng), "F")  # column-major matrices
    b = b_work.copy()
    a_work = layout(a, "F") if fac == "Cholesky" else a.copy()
    want = np.linalg.solve(a, b)
    opts = DirectSolverOptions(factorization=fac, inplace_a=True, inplace_b=True)
    with DirectSolver(a_work, b_work, options=opts, execution="cpu") as s:
        s.plan()
        s.factorize()
        x = s.solve()
    assert x is b_work
    assert rel_err(b_work, want) < 1e-12
    assert not np.allclose(a_work, a)  # the factors replaced a
    with pytest.raises(ValueError, match="inplace_b"):
        DirectSolver(a, np.ascontiguousarray(rand((2, 4, 2), "float64", rng)),
                     options={"inplace_b": True}, execution="cpu")


def test_factorization_is_reused_and_reset():
    rng = np.random.default_rng(4)
    a = _system((), 6, "complex128", rng, spd=False)
    b1, b2 = rand((6, 2), "complex128", rng), rand((6, 2), "complex128", rng)
    s = DirectSolver(a, b1, execution="cpu")
    with pytest.raises(InvalidDirectSolverState):
        s.plan()
        s.solve()
    s.factorize()
    x1 = s.solve()
    s.reset_operands(b=b2)
    x2 = s.solve()  # the same factors
    assert rel_err(x1, np.linalg.solve(a, b1)) < 1e-12
    assert rel_err(x2, np.linalg.solve(a, b2)) < 1e-12
    a2 = _system((), 6, "complex128", rng, spd=False)
    s.reset_operands(a=a2)
    with pytest.raises(InvalidDirectSolverState, match="factorize"):
        s.solve()
    s.factorize()
    assert rel_err(s.solve(), np.linalg.solve(a2, b2)) < 1e-12
    with pytest.raises(ValueError, match="planned operand"):
        s.reset_operands(b=rand((6, 3), "complex128", rng))
    s.release_operands()
    with pytest.raises(ValueError, match="both"):
        s.reset_operands(b=b1)
    s.free()
    with pytest.raises(InvalidDirectSolverState):
        s.factorize()


def test_failures_name_the_factorization_and_the_systems():
    rng = np.random.default_rng(5)
    a = _system((2, 3), 4, "float64", rng, spd=True)
    a[1, 2, :, 2] = 0  # singular: column 2
    a[1, 2, 2, :] = 0
    b = rand((2, 3, 4), "float64", rng)
    with pytest.raises(FactorizationError, match="LU") as e:
        direct_solver(a, b, execution="cpu")
    assert e.value.batch_indices == ((1, 2),)
    assert isinstance(e.value, RuntimeError) and e.value.factorization == "LU"
    assert e.value.info.tolist().count(0) == 5
    nspd = _system((), 4, "float32", rng, spd=True)
    nspd[3, 3] = -100
    with pytest.raises(FactorizationError, match="order 4") as e:
        direct_solver(nspd, np.ones(4, np.float32), options={"factorization": "cholesky"},
                      execution="cpu")
    assert e.value.batch_indices == () and int(e.value.info[0]) == 4
    lst = [np.eye(3), np.zeros((3, 3)), np.eye(3)]
    with pytest.raises(FactorizationError) as e:
        direct_solver(lst, [np.ones(3)] * 3, execution="cpu")
    assert e.value.batch_indices == (1,)


def test_validation():
    rng = np.random.default_rng(6)
    a, b = _system((), 4, "float64", rng, spd=False), np.ones(4)
    bad = [
        (lambda: direct_solver(np.ones((3, 4)), np.ones(3), execution="cpu"), "square"),
        (lambda: direct_solver(a, np.ones(5), execution="cpu"), "n = 4"),
        (lambda: direct_solver(a, b.astype(np.float32), execution="cpu"), "dtype"),
        (lambda: direct_solver(np.stack([a, a]), np.ones((3, 4)), execution="cpu"), "batch"),
        (lambda: direct_solver(a.astype(np.int64), b, execution="cpu"), "dtype"),
        (lambda: direct_solver(a, b, options={"factorization": "QR"}, execution="cpu"),
         "factorization"),
        (lambda: direct_solver(a, b, options={"fill_mode": "FULL"}, execution="cpu"),
         "fill_mode"),
        (lambda: direct_solver([a, a], [b], execution="cpu"), "systems"),
    ]
    for call, match in bad:
        with pytest.raises(ValueError, match=match):
            call()


def test_function_form_reuses_cached_solvers():
    from cuweave.linalg.generic.solver import solver_cache

    rng = np.random.default_rng(8)
    solver_cache.clear()
    a1 = _system((4,), 6, "float64", rng, spd=True)
    a2 = _system((4,), 6, "float64", rng, spd=True)
    b = rand((4, 6, 2), "float64", rng)
    opts = {"factorization": "Cholesky"}
    x1 = direct_solver(a1, b, options=opts, execution="cpu")
    hits = solver_cache.hits
    x2 = direct_solver(a2, b, options=opts, execution="cpu")
    assert solver_cache.hits == hits + 1
    assert rel_err(x1, np.linalg.solve(a1, b)) < 1e-12
    assert rel_err(x2, np.linalg.solve(a2, b)) < 1e-12
    a2[1] = 0  # a failure leaves the cached solver usable
    with pytest.raises(FactorizationError):
        direct_solver(a2, b, options=opts, execution="cpu")
    assert rel_err(direct_solver(a1, b, options=opts, execution="cpu"),
                   np.linalg.solve(a1, b)) < 1e-12


def test_large_batches_of_small_systems():
    """The function form's NumPy-loop path for batches of small LU systems, vectors and
    matrices, and its fallback that names a singular system."""
    rng = np.random.default_rng(9)
    a = _system((70,), 8, "complex64", rng, spd=False)
    for b in (rand((70, 8), "complex64", rng), rand((70, 8, 3), "complex64", rng)):
        want = np.linalg.solve(a.astype(np.complex128),
                               b[..., None] if b.ndim == 2 else b)
        want = want[..., 0] if b.ndim == 2 else want
        got = direct_solver(a, b, execution="cpu")
        assert got.shape == b.shape and rel_err(got, want) < 1e-5
    a[33] = 0
    with pytest.raises(FactorizationError) as e:
        direct_solver(a, rand((70, 8), "complex64", rng), execution="cpu")
    assert e.value.batch_indices == ((33,),)
