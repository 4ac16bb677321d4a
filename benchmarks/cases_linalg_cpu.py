"""cuweave.linalg's generic layer on the CPU (BLAS/LAPACK through SciPy's routines) vs NumPy
and scipy.linalg.blas / scipy.linalg.lapack, side by side in one process.

Cases (issue #37's CPU targets, at sizes a shared 2-core host runs in minutes):

* triangular and symmetric products of n^2 fp32/fp64 C-ordered NumPy matrices (n = 4096;
  quick: 1024): cuweave's ``matmul(..., qualifiers=..., execution="cpu")`` (BLAS trmm / symm
  on the arrays as they are) against NumPy's dense product of a masked copy
  (``np.tril(a) @ b``; ``(np.tril(a) + np.tril(a, -1).T) @ b``) and against
  ``scipy.linalg.blas`` ``?trmm`` / ``?symm`` called as a user would (C-ordered arrays, which
  SciPy's wrappers copy into Fortran order);
* the dense solve of an n^2 fp64 system (one right-hand side) and of 10,000 batched 32^2 fp64
  systems: ``direct_solver(..., execution="cpu")`` against ``numpy.linalg.solve`` and
  ``scipy.linalg.solve``.

Implementations are timed in interleaved rounds (the machine is shared); value = the median,
and the fastest round beside it (the least disturbed by the host's other work).
"""

from __future__ import annotations

import statistics

import numpy as np
import scipy.linalg
from harness import cpu_time_ms
from scipy.linalg import blas

from cuweave.linalg import (
    GeneralMatrixQualifier,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    direct_solver,
    matmul,
    matrix_qualifiers_dtype,
)


def _q(kind):
    cls = TriangularMatrixQualifier if kind == "triangular" else SymmetricMatrixQualifier
    q = np.empty(2, matrix_qualifiers_dtype)
    q[0], q[1] = cls.create(), GeneralMatrixQualifier.create()
    return q


def _timed(results, case, impls, rounds, iters, flops=None, target_dens=()):
    times = {name: [] for name in impls}
    for r in range(rounds):
        order = list(impls.items())
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            times[name].append(cpu_time_ms(fn, iters=iters, warmup=1 if r == 0 else 0))
    for name, ts in times.items():
        extra = {"gflops": flops / (statistics.median(ts) * 1e-3) / 1e9} if flops else {}
        results.add(case=case, impl=name, metric="time", value=statistics.median(ts),
                    unit="ms", **extra)
        results.add(case=case, impl=name, metric="fastest", value=min(ts), unit="ms")
    for den in target_dens:  # the median, and the fastest round (the least disturbed one)
        results.add_ratio(case=case, metric="time", num="cuweave", den=den,
                          higher_is_better=False, target=1.0)
        results.add(case=case, impl=f"cuweave vs {den}, fastest rounds", metric="speedup",
                    value=min(times[den]) / min(times["cuweave"]), unit="x")


def _check(got, want, label, tol):
    err = np.linalg.norm(np.asarray(got, np.float64) - want) / np.linalg.norm(want)
    if not err < tol:
        raise AssertionError(f"{label}: relative error {err:.3g}")


def structured(results, quick):
    n = 1024 if quick else 4096
    rng = np.random.default_rng(0)
    for dtype in ("float32", "float64"):
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        t = {"float32": "s", "float64": "d"}[dtype]
        for kind in ("triangular", "symmetric"):
            q = _q(kind)
            case = f"{kind} {dtype} {n}^2 @ {n}^2"
            if kind == "triangular":
                dense = lambda a=a, b=b: np.tril(a) @ b  # noqa: E731
                sp = lambda a=a, b=b, t=t: getattr(blas, t + "trmm")(1.0, a, b, lower=1)  # noqa: E731
            else:
                dense = lambda a=a, b=b: (np.tril(a) + np.tril(a, -1).T) @ b  # noqa: E731
                sp = lambda a=a, b=b, t=t: getattr(blas, t + "symm")(1.0, a, b, lower=1)  # noqa: E731
            cw = lambda a=a, b=b, q=q: matmul(a, b, qualifiers=q, execution="cpu")  # noqa: E731
            want = dense().astype(np.float64)
            tol = 1e-4 if dtype == "float32" else 1e-10
            _check(cw(), want, "cuweave", tol)
            _check(sp(), want, "scipy", tol)
            impls = {"cuweave": cw, "numpy masked + matmul": dense,
                     f"scipy.linalg.blas.{t}{'trmm' if kind == 'triangular' else 'symm'}": sp}
            _timed(results, case, impls, rounds=3, iters=1, flops=2.0 * n ** 3,
                   target_dens=list(impls)[1:])


def solves(results, quick):
    n = 1024 if quick else 4096
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)) + np.sqrt(n) * np.eye(n)
    b = rng.standard_normal((n, 1))
    want = np.linalg.solve(a, b)
    _check(direct_solver(a, b, execution="cpu"), want, "cuweave", 1e-8)
    impls = {"cuweave": lambda: direct_solver(a, b, execution="cpu"),
             "numpy.linalg.solve": lambda: np.linalg.solve(a, b),
             "scipy.linalg.solve": lambda: scipy.linalg.solve(a, b)}
    _timed(results, f"solve float64 {n}^2, 1 right-hand side", impls, rounds=3, iters=1,
           target_dens=["numpy.linalg.solve", "scipy.linalg.solve"])
    count = 1000 if quick else 10000
    a = rng.standard_normal((count, 32, 32)) + 32 * np.eye(32)
    b = rng.standard_normal((count, 32, 1))
    _check(direct_solver(a, b, execution="cpu"), np.linalg.solve(a, b), "cuweave", 1e-10)
    impls = {"cuweave": lambda: direct_solver(a, b, execution="cpu"),
             "numpy.linalg.solve": lambda: np.linalg.solve(a, b)}
    _timed(results, f"solve float64 {count} x 32^2 batched", impls, rounds=9, iters=3,
           target_dens=["numpy.linalg.solve"])


def run(results, quick: bool) -> None:
    structured(results, quick)
    solves(results, quick)
