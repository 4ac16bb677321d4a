"""cuweave.linalg's generic layer (cuBLAS symm/trmm, cuSOLVER) vs torch, CuPy and
nvmath-python on the GPU, side by side in one process.

Cases (issue #37's targets):

* triangular and symmetric products ``qa(a) @ b`` of 8192^2 fp32/fp64 matrices: cuweave's
  ``matmul`` with a TriangularMatrixQualifier / SymmetricMatrixQualifier (cuBLAS trmm / symm,
  reading one triangle; and, EXT, ``structured="dense"``: one kernel writing the operand's
  dense form, then cuBLAS GEMM) against torch's best way to get the same result (the dense
  product of a masked copy: ``torch.tril(a) @ b``; ``tril(a) + tril(a, -1).mT`` then
  ``@ b``), CuPy's same, and ``nvmath.linalg.matmul`` with the same qualifiers. GPU time of
  queued calls (CUDA events), implementations interleaved round by round; the masking is part
  of the peers' time, as it is part of what their users run.
* the dense solve of an 8192^2 fp64 system and of 10,000 batched 32^2 fp64 systems:
  ``direct_solver`` against ``torch.linalg.solve`` (and ``nvmath.linalg.direct_solver``,
  ``cupy.linalg.solve``): wall time per call, each call synchronizing (both check the
  factorization's status).

``--quick`` shrinks the sizes (2048^2, 1,000 systems).
"""

from __future__ import annotations

import numpy as np
from harness import gpu_times_interleaved, host_us_interleaved, peer

from cuweave.linalg import (
    GeneralMatrixQualifier,
    MatmulOptions,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    direct_solver,
    matmul,
    matrix_qualifiers_dtype,
)

#: the EXT strategy: the operand's dense form (one kernel pass) and a GEMM
DENSE = MatmulOptions(structured="dense")


def _q(kind):
    cls = TriangularMatrixQualifier if kind == "triangular" else SymmetricMatrixQualifier
    q = np.empty(2, matrix_qualifiers_dtype)
    q[0], q[1] = cls.create(), GeneralMatrixQualifier.create()
    return q


def _torch_dense(torch, kind):
    if kind == "triangular":
        return lambda a, b: torch.tril(a) @ b
    return lambda a, b: (torch.tril(a) + torch.tril(a, -1).mT) @ b


def _cupy_dense(cp, kind):
    if kind == "triangular":
        return lambda a, b: cp.tril(a) @ b
    return lambda a, b: (cp.tril(a) + cp.tril(a, -1).T) @ b


def structured_products(res, torch, cp, nvmath, quick):
    n = 2048 if quick else 8192
    iters = 3 if quick else 5
    for dtype in ("float32", "float64"):
        tdt = getattr(torch, dtype)
        a = torch.randn(n, n, device="cuda", dtype=tdt)
        b = torch.randn(n, n, device="cuda", dtype=tdt)
        for kind in ("triangular", "symmetric"):
            q = _q(kind)
            case = f"{kind} {dtype} {n}^2 @ {n}^2"
            dense = _torch_dense(torch, kind)
            got = matmul(a, b, qualifiers=q)
            ref = dense(a.double(), b.double())
            err = float(torch.linalg.norm(got.double() - ref) / torch.linalg.norm(ref))
            print(f"   {case}: cuweave relative error vs a float64 dense product {err:.2e}")
            impls = {"cuweave": lambda a=a, b=b, q=q: matmul(a, b, qualifiers=q),
                     "cuweave structured=dense": lambda a=a, b=b, q=q: matmul(
                         a, b, qualifiers=q, options=DENSE),
                     "torch masked + matmul": lambda a=a, b=b, f=dense: f(a, b)}
            if cp is not None:
                ca, cb = cp.asarray(a), cp.asarray(b)
                cdense = _cupy_dense(cp, kind)
                impls["cupy masked + matmul"] = lambda ca=ca, cb=cb, f=cdense: f(ca, cb)
            if nvmath is not None:
                impls["nvmath-python"] = lambda a=a, b=b, q=q: nvmath.linalg.matmul(
                    a, b, qualifiers=q)
            times = gpu_times_interleaved(impls, iters=iters, warmup=2, rounds=5)
            flops = 2.0 * n ** 3
            for impl, ms in times.items():
                res.add(case=case, impl=impl, metric="time", value=ms, unit="ms",
                        dense_tflops=flops / (ms * 1e-3) / 1e12)
            for num in ("cuweave", "cuweave structured=dense"):
                for den in ("torch masked + matmul", "cupy masked + matmul", "nvmath-python"):
                    res.add_ratio(case=case, metric="time", num=num, den=den,
                                  higher_is_better=False, target=1.0)
            del impls
        del a, b
        torch.cuda.empty_cache()


def _solve_case(res, torch, cp, nvmath, case, a, b, calls, rounds):
    x = direct_solver(a, b)
    ref = torch.linalg.solve(a, b)
    err = float(torch.linalg.norm(x - ref) / torch.linalg.norm(ref))
    print(f"   {case}: cuweave vs torch relative difference {err:.2e}")
    impls = {"cuweave": lambda: direct_solver(a, b),
             "torch.linalg.solve": lambda: torch.linalg.solve(a, b)}
    if cp is not None:
        ca, cb = cp.asarray(a), cp.asarray(b)
        impls["cupy.linalg.solve"] = lambda: cp.linalg.solve(ca, cb)
    if nvmath is not None:
        impls["nvmath-python"] = lambda: nvmath.linalg.direct_solver(a, b)
    us = host_us_interleaved(impls, calls=calls, warmup=2, sync=torch.cuda.synchronize,
                             rounds=rounds)
    for impl, t in us.items():
        res.add(case=case, impl=impl, metric="time", value=t / 1e3, unit="ms")
    for den in ("torch.linalg.solve", "cupy.linalg.solve", "nvmath-python"):
        res.add_ratio(case=case, metric="time", num="cuweave", den=den,
                      higher_is_better=False, target=1.0)


def solves(res, torch, cp, nvmath, quick):
    n = 2048 if quick else 8192
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.float64, generator=g)
    a += n ** 0.5 * torch.eye(n, device="cuda", dtype=torch.float64)
    b = torch.randn(n, 1, device="cuda", dtype=torch.float64, generator=g)
    _solve_case(res, torch, cp, nvmath, f"solve float64 {n}^2, 1 right-hand side", a, b,
                calls=3, rounds=5)
    del a, b
    count = 1000 if quick else 10000
    a = torch.randn(count, 32, 32, device="cuda", dtype=torch.float64, generator=g)
    a += 32 * torch.eye(32, device="cuda", dtype=torch.float64)
    b = torch.randn(count, 32, 1, device="cuda", dtype=torch.float64, generator=g)
    _solve_case(res, torch, cp, nvmath, f"solve float64 {count} x 32^2 batched", a, b,
                calls=20, rounds=7)


def run(res, quick: bool) -> None:
    torch = peer("torch")
    if torch is None or not torch.cuda.is_available():
        print("   torch with CUDA is needed for the linalg GPU cases")
        return
    cp = peer("cupy")
    nvmath = peer("nvmath")
    if nvmath is not None and not hasattr(nvmath.linalg, "direct_solver"):
        nvmath = None
    structured_products(res, torch, cp, nvmath, quick)
    solves(res, torch, cp, nvmath, quick)
