"""float64 references of the generic layer's tests: the logical matrix each qualifier
describes, products, and a grid of operands in every layout the tests walk through."""

from __future__ import annotations

import numpy as np

from cuweave.linalg import (
    DiagonalMatrixQualifier,
    DiagType,
    FillMode,
    GeneralMatrixQualifier,
    HermitianMatrixQualifier,
    SymmetricMatrixQualifier,
    TriangularMatrixQualifier,
    matrix_qualifiers_dtype,
)

DTYPES = ("float32", "float64", "complex64", "complex128")
TOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12}


def rand(shape, dtype, rng):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def record(kind, *, conj=False, lower=True, unit=False, incx=1):
    uplo = FillMode.LOWER if lower else FillMode.UPPER
    if kind == "ge":
        return GeneralMatrixQualifier.create(conjugate=conj)
    if kind == "dg":
        return DiagonalMatrixQualifier.create(conjugate=conj, incx=incx)
    if kind == "sy":
        return SymmetricMatrixQualifier.create(conjugate=conj, uplo=uplo)
    if kind == "he":
        return HermitianMatrixQualifier.create(conjugate=conj, uplo=uplo)
    return TriangularMatrixQualifier.create(conjugate=conj, uplo=uplo,
                                            diag=DiagType.UNIT if unit else DiagType.NON_UNIT)


def qualifiers(*records):
    q = np.empty(len(records), dtype=matrix_qualifiers_dtype)
    for i, r in enumerate(records):
        q[i] = r
    return q


def logical(x, kind, *, conj=False, lower=True, unit=False, incx=1):
    """The matrix (or batch of matrices) a qualified operand stands for, in complex128."""
    x = np.asarray(x).astype(np.complex128)
    if kind == "dg":
        d = x[..., ::-1] if incx < 0 else x
        out = d[..., :, None] * np.eye(d.shape[-1])
    elif kind == "ge":
        out = x
    else:
        tri = np.tril(x) if lower else np.triu(x)
        strict = np.tril(x, -1) if lower else np.triu(x, 1)
        if kind == "tr":
            out = tri
            if unit:
                n = x.shape[-1]
                out = out - out * np.eye(n) + np.eye(n)
        elif kind == "sy":
            out = tri + np.swapaxes(strict, -1, -2)
        else:  # he: the diagonal's imaginary part is not read
            diag = np.real(x) * np.eye(x.shape[-1])
            out = strict + np.swapaxes(strict, -1, -2).conj() + diag
    return out.conj() if conj else out


def layout(x, order: str):
    """``x`` with its last two axes stored in ``order``: "C", "F", or "S" (strided: a view
    with a gap in its leading dimension)."""
    if order == "C" or x.ndim < 2:
        return np.ascontiguousarray(x)
    if order == "F":
        return np.swapaxes(np.ascontiguousarray(np.swapaxes(x, -1, -2)), -1, -2)
    pad = np.zeros(x.shape[:-1] + (x.shape[-1] + 3,), x.dtype)
    pad[..., : x.shape[-1]] = x
    return pad[..., : x.shape[-1]]


def rel_err(got, want) -> float:
    got = np.asarray(got, np.complex128)
    want = np.asarray(want, np.complex128)
    assert got.shape == want.shape, (got.shape, want.shape)
    den = np.linalg.norm(want.ravel())
    return float(np.linalg.norm((got - want).ravel()) / (den or 1.0))
