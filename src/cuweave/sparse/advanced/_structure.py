"""The sparsity structure a CPU backend needs, derived once from the user's CSR matrix.

Users give a CSR matrix, a matrix type and a view (which triangle of a symmetric/Hermitian
matrix is meaningful). Backends want one of three forms: the full matrix (SuperLU), its upper
triangle in CSR (PARDISO's symmetric types; read as CSC it is the lower triangle CHOLMOD
wants). :func:`derive` computes the target structure once per sparsity pattern together with a
*gather map*: the target's values are ``user_values[src]`` (conjugated where ``conj``; zero where
``src < 0``, a structural diagonal PARDISO needs). New values with the same pattern then cost
one gather (:meth:`Derived.values`), not a new derivation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..._bindings.cudss import MatrixType, MatrixViewType

__all__ = ["Derived", "derive", "transpose_map"]

_SYMMETRIC_TYPES = (MatrixType.SYMMETRIC, MatrixType.SPD)
_HERMITIAN_TYPES = (MatrixType.HERMITIAN, MatrixType.HPD)


@dataclass(frozen=True)
class Derived:
    """A target structure (CSR ``indptr``/``indices``, int32 or int64) and its gather map."""

    indptr: np.ndarray
    indices: np.ndarray
    src: np.ndarray        # index into the user's values, -1 for an added zero
    conj: np.ndarray | None  # per target entry, whether to conjugate (None: never)
    has_fill: bool         # whether some src is -1

    def values(self, user_values: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The target's values for ``user_values`` (one gather)."""
        if self.has_fill:
            v = np.where(self.src >= 0, user_values[np.maximum(self.src, 0)],
                         user_values.dtype.type(0))
        else:
            v = user_values[self.src]
        if self.conj is not None:
            v = np.where(self.conj, np.conj(v), v)
        if out is not None:
            out[...] = v
            return out
        return np.ascontiguousarray(v)


def _rows_of(indptr: np.ndarray, n: int) -> np.ndarray:
    return np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr).astype(np.int64))


def derive(n: int, indptr: np.ndarray, indices: np.ndarray, mtype: MatrixType,
           view: MatrixViewType, want: str, *, complex_values: bool,
           diagonal: bool = False, conj_all: bool = False,
           index_dtype=np.int32) -> Derived:
    """The ``want`` form (``"full"`` or ``"upper"``) of the user's matrix.

    ``mtype``/``view`` say what the user's arrays mean: GENERAL matrices are taken as given
    (``want`` must be ``"full"``); for the other types the ``view`` triangle (FULL: the upper
    one, which equals the lower one's transpose) defines the matrix, the other entries are
    ignored. ``diagonal``: every diagonal entry exists in the result (zero where absent).
    ``conj_all``: conjugate every value (CHOLMOD reads upper CSR as lower CSC).
    """
    fast = _without_sorting(n, indptr, indices, mtype, view, want, complex_values, diagonal,
                            conj_all, index_dtype)
    if fast is not None:
        return fast
    rows = _rows_of(indptr, n)
    cols = indices.astype(np.int64, copy=False)
    src = np.arange(cols.size, dtype=np.int64)
    hermitian = complex_values and mtype in _HERMITIAN_TYPES
    conj = np.zeros(cols.size, dtype=bool)
    if mtype == MatrixType.GENERAL:
        if want != "full":
            raise ValueError("a general matrix is only available in full")
    else:
        # the triangle that defines the matrix, as (row, col, src, conj) in the upper form
        if view == MatrixViewType.LOWER:
            keep = rows >= cols
            r, c = cols[keep], rows[keep]   # transposed into the upper triangle
            s, cj = src[keep], np.full(int(keep.sum()), hermitian)
        else:  # UPPER, or FULL (whose upper triangle is the matrix)
            keep = rows <= cols
            r, c, s, cj = rows[keep], cols[keep], src[keep], conj[keep]
        cj = cj & (r != c)  # a Hermitian diagonal is real: never conjugated
        if want == "full":
            off = r != c
            rows = np.concatenate([r, c[off]])
            cols = np.concatenate([c, r[off]])
            src = np.concatenate([s, s[off]])
            conj = np.concatenate([cj, ~cj[off] if hermitian else cj[off]])
        else:
            rows, cols, src, conj = r, c, s, cj
    if diagonal:
        present = np.zeros(n, dtype=bool)
        present[rows[rows == cols]] = True
        missing = np.flatnonzero(~present)
        if missing.size:
            rows = np.concatenate([rows, missing])
            cols = np.concatenate([cols, missing])
            src = np.concatenate([src, np.full(missing.size, -1, np.int64)])
            conj = np.concatenate([conj, np.zeros(missing.size, bool)])
    if conj_all and complex_values:
        conj = ~conj
    order = np.lexsort((cols, rows))
    rows, cols, src, conj = rows[order], cols[order], src[order], conj[order]
    counts = np.bincount(rows, minlength=n)
    new_indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(counts, out=new_indptr[1:])
    return Derived(new_indptr, cols.astype(index_dtype), src,
                   conj if complex_values and conj.any() else None, bool((src < 0).any()))


def _without_sorting(n, indptr, indices, mtype, view, want, complex_values, diagonal, conj_all,
                     index_dtype) -> Derived | None:
    """The common forms that keep the user's (sorted) order, so need no sort: a general matrix
    as given (with its whole diagonal where ``diagonal``), and the upper triangle of a FULL or
    UPPER view (with its whole diagonal where ``diagonal``).
    ``None`` where a sort is needed."""
    if conj_all and complex_values:
        return None
    if mtype == MatrixType.GENERAL:
        if diagonal and np.count_nonzero(_rows_of(indptr, n) == indices) != n:
            return None
        return Derived(indptr.astype(index_dtype), indices.astype(index_dtype),
                       np.arange(indices.size, dtype=np.int64), None, False)
    if want != "upper" or view == MatrixViewType.LOWER:
        return None
    rows = _rows_of(indptr, n)
    keep = rows <= indices
    if diagonal and np.count_nonzero(rows[keep] == indices[keep]) != n:
        return None
    counts = np.bincount(rows[keep], minlength=n)
    new_indptr = np.zeros(n + 1, dtype=index_dtype)
    np.cumsum(counts, out=new_indptr[1:])
    return Derived(new_indptr, indices[keep].astype(index_dtype), np.flatnonzero(keep), None,
                   False)


def transpose_map(n: int, indptr: np.ndarray, indices: np.ndarray) -> np.ndarray | None:
    """For a matrix whose pattern is symmetric (sorted CSR): ``t`` with ``values[t]`` the values
    of the transpose in the matrix's own order; ``None`` where the pattern is not symmetric."""
    rows = _rows_of(indptr, n)
    cols = indices.astype(np.int64, copy=False)
    order = np.lexsort((rows, cols))  # entries sorted by (column, row): the transpose's order
    if not (np.array_equal(cols[order], rows) and np.array_equal(rows[order], cols)):
        return None
    return order
