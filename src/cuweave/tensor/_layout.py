"""Shapes and strides of a contraction: each operand's modes as the engines see them, the
result's layout, and the overlap checks of in-place targets.

An operand's *view* is its list of ``(mode, extent, stride)`` after three rewrites that move no
data: a repeated mode becomes its diagonal (one mode, the strides summed), and modes of extent 1
and modes of stride 0 (broadcast) are left out (an element's address does not depend on
them). cuTENSOR broadcasts a mode an operand lacks, and the CPU path sums or broadcasts it, so
views are what both engines take.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .._internal.errors import InvalidOperandError

__all__ = ["operand_view", "result_perm", "perm_of", "perm_strides", "check_writable",
           "overlaps", "byte_span"]


def operand_view(modes, shape, strides) -> tuple:
    """``((mode, extent, stride), ...)`` of one operand (module docstring)."""
    merged: dict = {}
    for m, n, s in zip(modes, shape, strides):
        if m in merged:
            merged[m] = (n, merged[m][1] + s)
        else:
            merged[m] = (n, s)
    return tuple((m, n, s) for m, (n, s) in merged.items() if n != 1 and s != 0)


def perm_strides(shape, perm) -> tuple:
    """Element strides of a dense array of ``shape`` whose axes lie in ``perm`` order
    (outermost first)."""
    strides = [0] * len(shape)
    step = 1
    for axis in reversed(perm):
        strides[axis] = step
        step *= shape[axis]
    return tuple(strides)


def perm_of(shape, strides):
    """The axis order (outermost first) of a dense array with these strides, or ``None`` when
    the strides are not those of a dense array (gaps, overlaps, negative or zero strides)."""
    order = sorted(range(len(shape)), key=lambda i: (-abs(strides[i]), -i))
    perm = tuple(order)
    if all(s > 0 or n == 1 for s, n in zip(strides, shape)) and all(
            strides[i] == e or shape[i] == 1
            for i, e in zip(range(len(shape)), perm_strides(shape, perm))):
        return perm
    return None


def result_perm(layout, bound, addend_op=None) -> tuple:
    """The memory order (outermost first) of new results, for ``options.result_layout``
    ``layout`` (already resolved from ``"auto"``: ``"C"``, ``"F"``, ``"optimized"`` or
    ``"natural"``, the addend's own order)."""
    out, n = bound.out, len(bound.out)
    if layout == "C":
        return tuple(range(n))
    if layout == "F":
        return tuple(reversed(range(n)))
    if layout == "natural":
        perm = None if addend_op is None else perm_of(addend_op.shape, addend_op.strides)
        if perm is None or addend_op.shape != bound.out_shape:
            return tuple(range(n))
        return perm
    # optimized (binary): batch modes, then the larger group of free modes, then the other;
    # each group in its operand's order
    ta, tb = bound.terms[0], bound.terms[1]
    a_modes, b_modes = list(dict.fromkeys(ta)), list(dict.fromkeys(tb))
    outs = set(out)
    hyper = [m for m in a_modes if m in outs and m in tb]
    a_rest = [m for m in a_modes if m in outs and m not in tb]
    b_rest = [m for m in b_modes if m in outs and m not in hyper]
    size_a = math.prod(bound.extents[m] for m in a_rest)
    size_b = math.prod(bound.extents[m] for m in b_rest)
    order = hyper + (a_rest + b_rest if size_a >= size_b else b_rest + a_rest)
    return tuple(out.index(m) for m in order)


def byte_span(op) -> tuple:
    """``(first, last + 1)`` byte addresses ``op`` touches."""
    lo, hi = op.span()
    return op.ptr + lo * op.itemsize, op.ptr + hi * op.itemsize


def _stand_in(op, base: int, buf):
    """A uint8 NumPy array over ``op``'s bytes inside ``buf`` (which starts at address
    ``base``): only address arithmetic is done on it, no byte is read."""
    return np.ndarray(op.shape + (op.itemsize,), np.uint8, buffer=buf, offset=op.ptr - base,
                      strides=tuple(s * op.itemsize for s in op.strides) + (1,))


def overlaps(x, y) -> bool:
    """Whether operands ``x`` and ``y`` share an element's bytes (same memory space): their
    address ranges first, then NumPy's exact test on stand-ins (bounded work; undecided counts
    as overlapping)."""
    if x.place != y.place or x.size == 0 or y.size == 0:
        return False
    (a0, a1), (b0, b1) = byte_span(x), byte_span(y)
    if not (a0 < b1 and b0 < a1):
        return False
    base, end = min(a0, b0), max(a1, b1)
    buf = (ctypes.c_char * (end - base)).from_address(base)  # no byte of it is read
    try:
        return bool(np.shares_memory(_stand_in(x, base, buf), _stand_in(y, base, buf),
                                     max_work=1 << 16))
    except (np.exceptions.TooHardError, ValueError):
        return True


def check_writable(op, name: str) -> None:
    """``op`` can hold a result: no element is reachable twice (no stride 0 over extent > 1,
    no overlapping axes)."""
    dims = sorted((abs(s), n) for s, n in zip(op.strides, op.shape) if n > 1)
    reach = 1
    for s, n in dims:
        if s < reach:
            raise InvalidOperandError(
                f"{name} must not reach an element twice (a broadcast or overlapping layout "
                f"cannot hold a result), got strides {op.strides} for shape {op.shape}")
        reach = s * n
