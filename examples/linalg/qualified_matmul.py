"""Products with structured operands: ``cuweave.linalg.matmul`` with matrix qualifiers.

A triangular operand runs on BLAS trmm (only its triangle is read), a symmetric one on symm,
a diagonal one (given as its 1-D diagonal) on a diagonal scaling; everything else on gemm.
NumPy operands run on the CPU's BLAS; torch / CuPy GPU operands (used below when torch has CUDA)
on cuBLAS. ``alpha``, ``beta * c``, batches and explicit lists of problems work alike.
"""

import numpy as np

from cuweave.linalg import (
    DiagonalMatrixQualifier,
    FillMode,
    GeneralMatrixQualifier,
    Matmul,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    matmul,
    matrix_qualifiers_dtype,
)


def qualifiers(*records):
    q = np.empty(len(records), dtype=matrix_qualifiers_dtype)
    for i, r in enumerate(records):
        q[i] = r
    return q


def check(what, got, want, bound=1e-10):
    err = float(np.linalg.norm(np.asarray(got) - want) / np.linalg.norm(want))
    print(f"{what}: relative error {err:.1e}")
    if not err < bound:
        raise SystemExit(f"{what}: relative error {err:.1e} exceeds {bound:.0e}")


def main():
    rng = np.random.default_rng(0)
    n, k = 200, 64
    a = rng.standard_normal((n, n))  # only one triangle is read below: the other may be junk
    b = rng.standard_normal((n, k))
    c = rng.standard_normal((n, k))

    # upper-triangular a times b, plus 0.5 c (BLAS trmm, then the addend)
    q = qualifiers(TriangularMatrixQualifier.create(uplo=FillMode.UPPER),
                   GeneralMatrixQualifier.create(), GeneralMatrixQualifier.create())
    check("triu(a) @ b + 0.5 c", matmul(a, b, c, beta=0.5, qualifiers=q),
          np.triu(a) @ b + 0.5 * c)

    # the symmetric matrix whose lower triangle is a's, on the right: b.T @ sym(a)
    sym = np.tril(a) + np.tril(a, -1).T
    q = qualifiers(GeneralMatrixQualifier.create(), SymmetricMatrixQualifier.create())
    check("b.T @ sym(a)", matmul(b.T, a, qualifiers=q), b.T @ sym)

    # a diagonal matrix given by its diagonal, for a batch of 8 matrices
    d = rng.standard_normal(n)
    bb = rng.standard_normal((8, n, k))
    q = qualifiers(DiagonalMatrixQualifier.create(), GeneralMatrixQualifier.create())
    check("diag(d) @ bb", matmul(d, bb, alpha=2.0, qualifiers=q), 2.0 * d[:, None] * bb)

    # a planned product reused with new operands (the plan is kept)
    q = qualifiers(TriangularMatrixQualifier.create(), GeneralMatrixQualifier.create())
    with Matmul(a, b, qualifiers=q) as mm:
        mm.plan()
        for _ in range(3):
            b_new = rng.standard_normal((n, k))
            mm.reset_operands(b=b_new)
            check("planned tril(a) @ b_new", mm.execute(), np.tril(a) @ b_new)

    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        gpu = False
    if gpu:  # the same calls on cuBLAS
        ta = torch.from_numpy(a).cuda()
        tb = torch.from_numpy(b).cuda()
        q = qualifiers(SymmetricMatrixQualifier.create(), GeneralMatrixQualifier.create())
        check("cuBLAS symm", matmul(ta, tb, qualifiers=q).cpu().numpy(), sym @ b)
    print("OK")


if __name__ == "__main__":
    main()
