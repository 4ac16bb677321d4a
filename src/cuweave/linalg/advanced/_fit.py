"""The layouts operands are computed on: their own, or a copy where cuBLASLt cannot address them.

cuBLASLt addresses a batch with one stride per operand and each matrix as row- or column-major
with a unit stride; BGRADA/BGRADB also fix the memory order of one operand. Where a user's
layout is NumPy-valid but not expressible (batches of F-ordered matrices, batch axes no single
stride addresses such as ``(2, 1, M, K) @ (3, K, N)``, an order BGRAD refuses) the operand is
computed on a dense copy: host operands in their staged array (the copy made when the operand
is bound, :func:`stage`), device operands by a copy on each run's stream
(``Adapter.dense_copy``: torch or CuPy). A ``c`` with more batch axes than the product is
refused, as nvmath-python refuses it (the result cannot take them). Copies are size-checked
first.

A :class:`Fit` records the decision; :func:`fit_layouts` makes it at construction time and
:func:`fit_bgrad_layout` revises it at plan time. Neither changes its input.
"""

from __future__ import annotations

import os

import numpy as np

from ..._internal.errors import InvalidOperandError, UnsupportedLayoutError
from ._epilogs import lt_epilog
from ._layout import analyze, broadcast_batch, lt_layout_ok

__all__ = ["Fit", "fit_layouts", "fit_bgrad_layout", "dense_strides", "stage", "staged",
           "dense_bytes", "check_copy_size", "OperandTooLargeError"]


# ---- host arrays as they go to the device ------------------------------------------------------
def is_dense(arr: np.ndarray) -> bool:
    """Whether ``arr``'s elements fill its memory exactly, in any axis order."""
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return True
    dims = sorted((s, n) for s, n in zip(arr.strides, arr.shape) if n > 1)
    expect = arr.itemsize
    for s, n in dims:
        if s != expect:
            return False
        expect *= n
    return True


def dense_bytes(arr: np.ndarray) -> np.ndarray | None:
    """Flat uint8 view over a dense host array's memory (any axis order), else ``None``."""
    if arr.size == 0:
        return np.empty(0, np.uint8)
    if not is_dense(arr):
        return None
    # the axes in memory order make a dense array C-contiguous, so reshape gives a view (its
    # base chain leads to the memory's owner, which the staging asks whether it is pinned)
    order = sorted(range(arr.ndim), key=lambda i: -arr.strides[i] if arr.shape[i] > 1 else 0)
    return arr.transpose(order).reshape(-1).view(np.uint8)


class OperandTooLargeError(InvalidOperandError, MemoryError):
    """A dense copy of an operand (a broadcast or strided view) would not fit in memory."""


def physical_memory() -> int:
    """Bytes of physical memory of this machine (0 when unknown)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return 0


def check_copy_size(name: str, shape, itemsize: int) -> None:
    """Refuse, before allocating, a dense copy of ``name`` larger than physical memory."""
    nbytes = int(np.prod(shape, dtype=np.float64)) * itemsize
    limit = physical_memory()
    if limit and nbytes > limit:
        raise OperandTooLargeError(
            f"{name} must fit in memory as a dense copy (its layout needs one), got shape "
            f"{tuple(shape)} of {nbytes / 2**30:.1f} GiB with {limit / 2**30:.1f} GiB of "
            "physical memory; pass a smaller or contiguous operand")


def staged(op, name: str = "operand"):
    """(host array, strides in elements) of a host operand as it will live on the device."""
    arr = op.host_array()
    if arr.size == 0 or is_dense(arr):
        return arr, op.strides
    check_copy_size(name, arr.shape, arr.itemsize)
    arr = np.ascontiguousarray(arr)
    return arr, tuple(s // arr.itemsize for s in arr.strides)


class Fit:
    """How each operand is computed on, and the problem those layouts give.

    ``copies``: host operand name -> function deriving the array computed on from the staged
    one; ``dev_copies``: device operand name -> ``(shape, order)`` of its per-run copy;
    ``problem``: the :class:`~._layout.Problem` of those layouts.
    """

    __slots__ = ("copies", "dev_copies", "problem")

    def __init__(self, copies, dev_copies, problem):
        self.copies = copies
        self.dev_copies = dev_copies
        self.problem = problem


class _Layouts:
    """What the analysis reads of the operands: the fixed inputs of :func:`analyze`."""

    __slots__ = ("ops", "host", "conj", "inplace", "fp8")

    def __init__(self, ops, host, conj, inplace, fp8):
        self.ops, self.host, self.conj, self.inplace, self.fp8 = ops, host, conj, inplace, fp8

    def problem(self, copies, dev_copies, forced=None, bgrad=None):
        """The problem of the operands computed as ``copies``/``dev_copies`` say."""
        ops = self.ops
        shapes, strides = {}, {}
        for k, op in ops.items():
            if self.host:
                arr, st = stage_one(op, k, copies)
                shapes[k], strides[k] = arr.shape, st
            else:
                shapes[k], strides[k] = op.shape, op.strides
        for k, (shape, order) in dev_copies.items():
            shapes[k], strides[k] = shape, dense_strides(shape, order)
        c = "c" in ops
        return analyze(shapes["a"], strides["a"], shapes["b"], strides["b"],
                       c_shape=shapes["c"] if c else None, c_strides=strides.get("c"),
                       conj_a=self.conj[0], conj_b=self.conj[1], forced=forced or {},
                       inplace=self.inplace, fp8=self.fp8, bgrad=bgrad)


def dense_strides(shape, order: str) -> tuple:
    """Element strides of a dense array of ``shape``: batch axes C-ordered outermost, the last
    two axes row-major (``"C"``) or column-major (``"F"``)."""
    shape = tuple(shape)
    if order == "F" and len(shape) >= 2:
        m, n = shape[-2:]
        inner = (1, max(m, 1))
        acc = m * n
    else:
        inner, acc = (), 1
    strides = []
    head = shape[:-2] if inner else shape
    for extent in reversed(head):
        strides.append(acc)
        acc *= extent
    return tuple(reversed(strides)) + inner


def stage_one(op, k, copies):
    """(host array, element strides) of host operand ``k`` as computed on: the operand, a
    dense copy of a non-dense one, or what ``copies`` derives from it."""
    arr, strides = staged(op, k)
    derive = copies.get(k)
    if derive is not None:
        arr = derive(arr)
        strides = tuple(x // arr.itemsize for x in arr.strides)
    return arr, strides


def stage(fit, ops) -> dict:
    """``{name: (host array, element strides)}`` of the host operands ``ops`` under ``fit``."""
    copies = fit.copies
    return {k: stage_one(op, k, copies) for k, op in ops.items()}


def _dense_copy(arr, name, full):
    """``arr`` broadcast to ``full`` as a new C-ordered array (its size checked first)."""
    check_copy_size(name, full, arr.itemsize)
    return np.ascontiguousarray(np.broadcast_to(arr, full))


def _other_order(arr, name):
    """``arr`` copied into the other memory order of its last two axes (C <-> F)."""
    check_copy_size(name, arr.shape, arr.itemsize)
    if arr.ndim >= 2 and arr.strides[-1] == arr.itemsize and arr.shape[-1] > 1:
        return np.ascontiguousarray(arr.swapaxes(-1, -2)).swapaxes(-1, -2)
    return np.ascontiguousarray(arr)


def _order_of(shape, strides) -> str:
    """``"C"`` when the last axis has the unit stride (and is not degenerate), else ``"F"``."""
    return "C" if len(shape) >= 2 and strides[-1] == 1 and shape[-1] > 1 else "F"


def _with_copy(lay, copies, dev_copies, k, full, order=None):
    """``(copies, dev_copies)`` with operand ``k`` computed on a copy broadcast to ``full`` (in
    ``order``, or the other order when ``order`` is ``"flip"``)."""
    copies, dev_copies = dict(copies), dict(dev_copies)
    op = lay.ops[k]
    if lay.host:
        old = copies.get(k)
        if order == "flip":
            copies[k] = lambda x, old=old, k=k: _other_order(old(x) if old else x, k)
        else:
            copies[k] = lambda x, k=k, full=full: _dense_copy(x, k, full)
        return copies, dev_copies
    check_copy_size(k, full, op.itemsize)
    if order == "flip":
        shape, cur = dev_copies.get(k, (op.shape, _order_of(op.shape, op.strides)))
        dev_copies[k] = (shape, "F" if cur == "C" else "C")
    else:
        dev_copies[k] = (full, "C")
    return copies, dev_copies


def fit_layouts(ops, *, host, can_copy, conj, inplace, fp8, log) -> Fit:
    """The :class:`Fit` of the operands ``ops`` (name -> Operand): their own layouts, or
    copies where cuBLASLt cannot address a NumPy-valid layout (see the module docstring).
    ``can_copy``: device operands may be copied per run (torch, CuPy; CUDA execution)."""
    lay = _Layouts(ops, host, conj, inplace, fp8)
    copies = {}
    try:
        return Fit(copies, {}, lay.problem(copies, {}))
    except UnsupportedLayoutError as e:
        first = e
    if not host and not can_copy:
        raise first
    batch = broadcast_batch(*(op.shape[:-2] for k, op in ops.items() if k != "c"))
    base = {k: v for k, v in copies.items() if k not in ("a", "b")}
    for names in (("a",), ("b",), ("a", "b")):
        names = [k for k in names if len(ops[k].shape) >= 2]
        if not names:
            continue
        tried, dev = base, {}
        for k in names:
            tried, dev = _with_copy(lay, tried, dev, k, batch + ops[k].shape[-2:])
        try:
            problem = lay.problem(tried, dev)
        except UnsupportedLayoutError:
            continue
        log.info("Matmul: %s computed on dense copies (layouts outside cuBLASLt's frame)",
                 ", ".join(names))
        return Fit(tried, dev, problem)
    raise first


def fit_bgrad_layout(fit, ops, epi, forced, *, host, can_copy, conj, inplace, fp8,
                     log) -> Fit:
    """``fit`` revised for a BGRADA/BGRADB epilog ``epi`` on CUDA: ``a`` or ``b`` in the other
    memory order where cuBLASLt's restriction refuses the user's (nvmath accepts any order);
    ``fit`` itself when nothing helps (the plan's layout check then words the error)."""
    p = fit.problem
    if lt_layout_ok(lt_epilog(epi, p.swap), p):
        return fit
    if not host and not can_copy:
        return fit
    lay = _Layouts(ops, host, conj, inplace, fp8)
    bgrad = epi.name.lower()
    for k in ("a", "b"):
        if len(ops[k].shape) < 2:
            continue
        copies, dev = _with_copy(lay, fit.copies, fit.dev_copies, k, ops[k].shape, "flip")
        try:
            q = lay.problem(copies, dev, forced, bgrad)
        except UnsupportedLayoutError:
            continue
        if lt_layout_ok(lt_epilog(epi, q.swap), q):
            log.info("Matmul: %s copied into the other memory order for epilog %s (a "
                     "cuBLASLt restriction)", k, epi.name)
            return Fit(copies, dev, q)
    return fit


def refit(fit, ops, forced, bgrad, *, host, conj, inplace, fp8) -> Fit:
    """``fit`` with its problem analyzed again under the epilog's frame ``forced``."""
    lay = _Layouts(ops, host, conj, inplace, fp8)
    return Fit(fit.copies, fit.dev_copies, lay.problem(fit.copies, fit.dev_copies, forced,
                                                        bgrad))
