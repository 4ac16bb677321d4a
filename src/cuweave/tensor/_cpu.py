"""The CPU path of :mod:`cuweave.tensor`: contractions as batched BLAS matrix products.

A binary contraction is one ``numpy.matmul``: each operand's modes are grouped into batch
modes (in both operands and the output), contracted modes (in both, not in the output) and
free modes (in one operand and the output); a mode in one operand only and not kept is summed
first. The operands are laid out as ``(batch, free, contracted)`` / ``(batch, contracted,
free)`` stacks (a copy only where a view cannot be), multiplied, and the product is read back
as the output's modes. The product's modes come out as ``"optimized"`` results are laid out
(batch modes, the larger free group, the other), so such results need no copy.

A ternary contraction is two binary ones, the pair chosen by the smaller operation count.

Half-precision data is computed in float32 (NumPy has no half-precision BLAS), and the
compute type decides the precision as on the GPU (``COMPUTE_32F`` on float64 data computes in
float32). Measured against ``numpy.einsum(optimize=True)`` in
``benchmarks/results/tensor_cpu.md``.
"""

from __future__ import annotations

import math

import numpy as np

from .._internal.dtypes import ITEMSIZE, to_float32
from ._options import DOUBLE_COMPUTE

__all__ = ["CpuPlan", "host_view"]


def host_view(arr: np.ndarray, view) -> np.ndarray:
    """The array ``arr`` seen through its :func:`~._layout.operand_view` ``view`` (a strided
    view: diagonals, broadcast and unit modes left out)."""
    item = arr.itemsize
    return np.lib.stride_tricks.as_strided(
        arr, shape=tuple(n for _, n, _ in view), strides=tuple(s * item for _, _, s in view),
        writeable=False)


def _compute_dtype(dtype: str, compute) -> np.dtype:
    double = compute in DOUBLE_COMPUTE
    if dtype.startswith("complex"):
        return np.dtype(np.complex128 if double else np.complex64)
    return np.dtype(np.float64 if double else np.float32)


def _as_compute(x: np.ndarray, dtype: str, cdt: np.dtype) -> np.ndarray:
    if dtype in ("float16", "bfloat16"):
        return to_float32(x, dtype)
    return x.astype(cdt, copy=False)


class PairStep:
    """One binary contraction of the CPU path, its every choice made once (at plan time).

    ``mx``/``my``: the two operands' modes; ``keep``: the modes that must survive (the output's,
    or those the next step needs); ``extents``: mode -> extent. Calling it with the two arrays
    returns the product, a new array whose axes are :attr:`modes`: batch modes, the larger free
    group, the other free group (the layout of "optimized" results).
    """

    __slots__ = ("sum_x", "sum_y", "perm_x", "perm_y", "shape_x", "shape_y", "swap", "shape",
                 "modes")

    def __init__(self, mx, my, keep, extents):
        mx, my = tuple(mx), tuple(my)
        sx = tuple(i for i, m in enumerate(mx) if m not in my and m not in keep)
        sy = tuple(i for i, m in enumerate(my) if m not in mx and m not in keep)
        self.sum_x, self.sum_y = sx or None, sy or None
        mx = tuple(m for i, m in enumerate(mx) if i not in sx)
        my = tuple(m for i, m in enumerate(my) if i not in sy)
        batch = [m for m in mx if m in my and m in keep]
        con = [m for m in mx if m in my and m not in keep]
        fx = [m for m in mx if m not in my]
        fy = [m for m in my if m not in mx]
        nb, m, n, k = (math.prod(extents[i] for i in g) for g in (batch, fx, fy, con))
        self.perm_x = tuple(mx.index(i) for i in batch + fx + con)
        self.perm_y = tuple(my.index(i) for i in batch + con + fy)
        # one product (no batch mode): 2-D operands and numpy.dot, BLAS's gemm directly
        self.shape_x, self.shape_y = ((m, k), (k, n)) if nb == 1 else ((nb, m, k), (nb, k, n))
        self.swap = m < n  # the larger free group outermost after the batch modes
        modes = batch + (fy + fx if self.swap else fx + fy)
        self.modes, self.shape = tuple(modes), tuple(extents[i] for i in modes)

    def __call__(self, x, y):
        if self.sum_x is not None:
            x = x.sum(axis=self.sum_x)
        if self.sum_y is not None:
            y = y.sum(axis=self.sum_y)
        xs = x.transpose(self.perm_x).reshape(self.shape_x)
        ys = y.transpose(self.perm_y).reshape(self.shape_y)
        if xs.ndim == 2:
            r = np.dot(ys.T, xs.T) if self.swap else np.dot(xs, ys)
        elif self.swap:
            r = np.matmul(ys.transpose(0, 2, 1), xs.transpose(0, 2, 1))
        else:
            r = np.matmul(xs, ys)
        return r.reshape(self.shape)


def _cost(ma, mb, keep, extents) -> int:
    """Multiply-adds of contracting operands with modes ``ma`` and ``mb``."""
    return math.prod(extents[m] for m in set(ma) | set(mb))


class CpuPlan:
    """What the CPU path fixes at plan time: views, orders, the pair order of ternary ones.

    Parameters
    ----------
    views : list
        Each input's :func:`~._layout.operand_view`.
    out_modes : tuple of int
        The output's mode per axis.
    extents : dict
        Mode -> extent.
    dtype : str
        The data type; ``compute`` the :class:`~._options.TensorComputeType`.
    conj : tuple of bool
        Whether each input is conjugated (its qualifier).
    """

    def __init__(self, views, out_modes, extents, dtype, compute, conj):
        self.views, self.out_modes, self.extents = views, tuple(out_modes), extents
        self.dtype, self.conj = dtype, conj
        self.cdt = _compute_dtype(dtype, compute)
        self.modes = [tuple(m for m, _, _ in v) for v in views]
        keep = set(out_modes)
        if len(views) == 2:
            self.order = (0, 1)
            self.steps = (PairStep(self.modes[0], self.modes[1], keep, extents),)
        else:  # the pair to contract first: the cheapest
            best = None
            for i, j, o in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
                inner = (keep | set(self.modes[o])) & (set(self.modes[i]) | set(self.modes[j]))
                cost = (_cost(self.modes[i], self.modes[j], inner, extents) +
                        _cost(inner, self.modes[o], keep, extents))
                if best is None or cost < best[0]:
                    best = (cost, (i, j, o), inner)
            _, self.order, inner = best
            i, j, o = self.order
            first = PairStep(self.modes[i], self.modes[j], inner, extents)
            self.steps = (first, PairStep(first.modes, self.modes[o], keep, extents))
        self.result_modes = self.steps[-1].modes
        self.cplx = self.cdt.kind == "c"
        item = ITEMSIZE[dtype]
        # an input whose array already is its view (no diagonal, nothing left out) is used as
        # it is: its byte strides are the view's
        self.own = [tuple(s * item for _, _, s in v) for v in views]
        #: the memory order of the product as the output's axes (outermost first), and whether
        #: some output mode is held by no input (the product is then broadcast and copied)
        self.product_perm = [self.out_modes.index(m) for m in self.result_modes]
        self.fills = any(m not in self.result_modes and extents[m] != 1
                         for m in self.out_modes)

    def product(self, arrays):
        """``(product, modes)`` of the inputs ``arrays`` (host arrays of the data type): a new
        array in the compute dtype whose axes are ``modes`` (the output's modes of extent > 1,
        in the product's order)."""
        xs = []
        for arr, view, own, conj in zip(arrays, self.views, self.own, self.conj):
            if arr.strides != own or len(view) != arr.ndim:
                arr = host_view(arr, view)  # a diagonal, or broadcast/unit modes left out
            x = _as_compute(arr, self.dtype, self.cdt)
            xs.append(np.conj(x) if conj else x)
        if len(xs) == 2:
            r = self.steps[0](xs[0], xs[1])
        else:
            i, j, o = self.order
            r = self.steps[1](self.steps[0](xs[i], xs[j]), xs[o])
        return r, self.result_modes

    def as_output(self, r, modes):
        """The product ``r`` (axes ``modes``) as an array of the output's shape (a view)."""
        order = [modes.index(m) for m in self.out_modes if m in modes]
        r = r.transpose(order)
        axes = [i for i, m in enumerate(self.out_modes) if m not in modes]
        if not axes:
            return r
        r = np.expand_dims(r, tuple(axes))
        shape = tuple(self.extents[m] for m in self.out_modes)
        # a mode no input holds (each broadcast along it) repeats the values
        return r if r.shape == shape else np.ascontiguousarray(np.broadcast_to(r, shape))

    def run(self, arrays, alpha, beta, addend):
        """``alpha * product + beta * addend`` (``addend`` None: no addend) as an array of the
        output's shape in the compute dtype (a view of a new array)."""
        r, modes = self.product(arrays)
        cplx = self.cplx
        if alpha != 1:
            r *= alpha if cplx else np.real(alpha)
        v = self.as_output(r, modes)
        if addend is not None and beta != 0:
            c = _as_compute(addend, self.dtype, self.cdt)
            v += (beta if cplx else np.real(beta)) * c
        return v
