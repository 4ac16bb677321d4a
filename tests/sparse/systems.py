"""Test systems for cuweave.sparse: random sparse matrices of every matrix type, with sorted
indices, and their float64/complex128 dense references (SciPy's spsolve)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from cuweave.sparse.advanced import DirectSolverMatrixType as T
from cuweave.sparse.advanced import DirectSolverMatrixViewType as V

#: (matrix type, complex) pairs that make sense; real HERMITIAN/HPD equal SYMMETRIC/SPD
TYPES = [(T.GENERAL, False), (T.GENERAL, True), (T.SYMMETRIC, False), (T.SYMMETRIC, True),
         (T.SPD, False), (T.HERMITIAN, True), (T.HPD, True)]


def random_matrix(n: int, mtype, complex_values: bool, seed: int = 0, density: float = 0.2,
                  dtype=None) -> sp.csr_matrix:
    """A well-conditioned random ``n x n`` CSR matrix of ``mtype`` (full storage)."""
    rng = np.random.default_rng(seed)
    m = sp.random(n, n, density=density, random_state=rng, format="csr")
    m.data = rng.standard_normal(m.nnz)
    if complex_values:
        m = m.astype(np.complex128)
        m.data = m.data + 1j * rng.standard_normal(m.nnz)
    if mtype == T.GENERAL:
        a = m + sp.diags(np.full(n, 2.0 + n * density))
    elif mtype == T.SYMMETRIC:
        a = m + m.T + sp.diags(rng.choice([-1.0, 1.0], n) * (3.0 + 2 * n * density))
    elif mtype == T.HERMITIAN:
        a = m + m.conj().T + sp.diags(rng.choice([-1.0, 1.0], n) * (3.0 + 2 * n * density))
    else:  # SPD / HPD: diagonally dominant with a positive diagonal
        a = m + m.conj().T
        a = a + sp.diags(np.asarray(abs(a).sum(axis=1)).ravel() + 1.0)
    a = sp.csr_matrix(a)
    if dtype is not None:
        a = a.astype(dtype)
    a.sum_duplicates()
    a.sort_indices()
    return a


def view_of(a: sp.csr_matrix, view) -> sp.csr_matrix:
    """The triangle of ``a`` a view reads (FULL: all of it)."""
    if view == V.LOWER:
        t = sp.tril(a, format="csr")
    elif view == V.UPPER:
        t = sp.triu(a, format="csr")
    else:
        return a
    t.sort_indices()
    return t


def reference(a, b) -> np.ndarray:
    """SciPy's spsolve in float64/complex128 (the independent reference)."""
    wide = np.complex128 if np.iscomplexobj(a.data) or np.iscomplexobj(b) else np.float64
    x = sla.spsolve(sp.csc_matrix(a.astype(wide)), np.asarray(b, dtype=wide))
    return np.asarray(x).reshape(np.shape(b))


def rhs(n: int, k: int | None, complex_values: bool, seed: int = 1, dtype=None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (n,) if k is None else (k, n)
    b = rng.standard_normal(shape)
    if complex_values:
        b = b + 1j * rng.standard_normal(shape)
    if dtype is not None:
        b = b.astype(dtype)
    return b if k is None else b.T  # column-major (N, K), as nvmath-python asks


def rel_err(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))
