"""Operands, layouts and float64 references of the tensor-contraction tests (CPU and GPU).

A case is an expression, the logical shapes of its inputs, and for each input a *layout*:
``"dense"`` (C order), ``"transposed"`` (the axes stored in reverse order), ``"strided"``
(every other element of a larger array) or ``"broadcast"`` (one mode of stride 0, or an
extent-1 axis broadcast against the other operand). Operands are made in NumPy; the GPU tests
move them to their package keeping the layout.
"""

from __future__ import annotations

import numpy as np

from tests.references import rel_l2

DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
#: relative L2 error bound per dtype (data rounded to the dtype; sums of a few dozen terms)
TOL = {"float16": 5e-3, "bfloat16": 3e-2, "float32": 1e-5, "float64": 1e-12,
       "complex64": 1e-5, "complex128": 1e-12}
LAYOUTS = ("dense", "transposed", "strided", "broadcast")


def np_dtype(name):
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def random(shape, dtype, seed):
    """Fresh random data of ``dtype`` (NumPy; bfloat16 through ml_dtypes)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(np_dtype(dtype))


def laid_out(x: np.ndarray, layout: str) -> np.ndarray:
    """``x``'s values in ``layout`` (the same logical array)."""
    if layout == "dense":
        return np.ascontiguousarray(x)
    if layout == "transposed":
        return np.ascontiguousarray(x.T).T
    if layout == "strided":
        big = np.zeros(tuple(2 * n for n in x.shape), x.dtype)
        view = big[tuple(slice(None, None, 2) for _ in x.shape)]
        view[...] = x
        return view
    if layout == "broadcast":  # the first axis of extent > 1 made a stride-0 broadcast
        axis = next((i for i, n in enumerate(x.shape) if n > 1), None)
        if axis is None:
            return x
        row = np.take(x, [0], axis=axis)
        return np.broadcast_to(row, x.shape)
    raise ValueError(layout)


def reference(expr, arrays, conj=(), alpha=1.0, beta=None, addend=None):
    """``alpha * einsum(expr, ...) + beta * addend`` in float64/complex128."""
    wide = []
    for i, x in enumerate(arrays):
        w = np.asarray(x).astype(np.complex128 if np.asarray(x).dtype.kind == "c" else
                                 np.float64)
        wide.append(np.conj(w) if i < len(conj) and conj[i] else w)
    r = alpha * np.einsum(expr, *wide)
    if addend is not None:
        r = r + beta * np.asarray(addend).astype(r.dtype if r.dtype.kind == "c" else
                                                 np.float64)
    return r


def check(got, want, dtype, what=""):
    err = rel_l2(np.asarray(got).astype(np.complex128), want)
    assert err <= TOL[dtype], f"{what}: relative L2 error {err:.2e} > {TOL[dtype]:.0e}"


#: (expression, input shapes): matrix, transpose-heavy, batched, high-order, broadcasting
BINARY = [
    ("ij,jk->ik", [(5, 7), (7, 6)]),
    ("ijk,kjl->li", [(4, 5, 6), (6, 5, 3)]),
    ("bij,bjk->bik", [(3, 4, 5), (3, 5, 2)]),
    ("abcd,cdef->ebfa", [(2, 3, 4, 5), (4, 5, 3, 2)]),
    ("ij,j->i", [(6, 5), (5,)]),
]
TERNARY = [
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)]),
    ("abi,ibc,cd->ad", [(2, 3, 4), (4, 3, 5), (5, 2)]),
]
