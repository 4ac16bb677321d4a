"""Operand layouts outside cuBLASLt's frame, computed on copies (NumPy accepts them).

cuBLASLt addresses a batch with one stride per operand and each matrix as row- or column-major
with a unit stride; BGRADA/BGRADB also fix the memory order of one operand. Where a user's
layout is NumPy-valid but not expressible — batches of F-ordered matrices, batch axes no single
stride addresses (partial broadcasting, ``(2, 1, M, K) @ (3, K, N)``), an order BGRAD refuses —
the operand is computed on a dense copy: host operands in their staged array (copied with the
staging, :meth:`Matmul._stage`), device operands by a per-run copy on the run's stream
(``Adapter.dense_copy``: torch or CuPy; ``_run``). A ``c`` with leading unit axes beyond the
operands' batch (``(1, M, N)`` for 2-D operands) is a view. Copies are size-checked first.
"""

from __future__ import annotations

import numpy as np

from ..._internal.errors import UnsupportedLayoutError
from ._binding import check_copy_size, lt_epilog
from ._checks import lt_layout_ok
from ._layout import broadcast_batch

__all__ = ["fit_layouts", "fit_bgrad_layout", "dense_strides"]


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


def _dense_copy(arr, name, full):
    """``arr`` broadcast to ``full`` as a new C-ordered array (its size checked first)."""
    check_copy_size(name, full, arr.itemsize)
    return np.ascontiguousarray(np.broadcast_to(arr, full))


def _other_order(arr, name):
    """``arr`` copied into the other memory order of its last two axes (C ↔ F)."""
    check_copy_size(name, arr.shape, arr.itemsize)
    if arr.ndim >= 2 and arr.strides[-1] == arr.itemsize and arr.shape[-1] > 1:
        return np.ascontiguousarray(arr.swapaxes(-1, -2)).swapaxes(-1, -2)
    return np.ascontiguousarray(arr)


def _order_of(shape, strides) -> str:
    """``"C"`` when the last axis has the unit stride (and is not degenerate), else ``"F"``."""
    return "C" if len(shape) >= 2 and strides[-1] == 1 and shape[-1] > 1 else "F"


def _set_copy(mm, k, full, order=None):
    """Compute operand ``k`` on a copy broadcast to ``full`` (in ``order``, or the other order
    when ``order`` is ``"flip"``)."""
    op = mm._ops[k]
    if mm._host:
        old = mm._copies.get(k)
        if order == "flip":
            mm._copies[k] = lambda x, old=old, k=k: _other_order(old(x) if old else x, k)
        else:
            mm._copies[k] = lambda x, k=k, full=full: _dense_copy(x, k, full)
        return
    check_copy_size(k, full, op.itemsize)
    if order == "flip":
        shape, cur = mm._dev_copies.get(k, (op.shape, _order_of(op.shape, op.strides)))
        mm._dev_copies[k] = (shape, "F" if cur == "C" else "C")
    else:
        mm._dev_copies[k] = (full, "C")


def _rebind(mm):
    if mm._host:
        mm._bind_operands(mm._ops)


def fit_layouts(mm):
    """The problem of ``mm``'s operands, computed on copies where cuBLASLt cannot address a
    NumPy-valid layout (see the module docstring)."""
    ops = mm._ops
    nb = max(len(ops["a"].shape), len(ops["b"].shape), 2) - 2
    c = ops.get("c")
    extra = len(c.shape) - 2 - nb if c is not None else 0
    if mm._host and extra > 0 and all(n == 1 for n in c.shape[:extra]):
        mm._copies["c"] = lambda x, e=extra: x.reshape(x.shape[e:])
        mm._bind_operands(ops)
    try:
        return mm._analyze({})
    except UnsupportedLayoutError as e:
        first = e
    if not mm._host and (mm._on_cpu or not mm._adapter.can_copy):
        raise first
    batch = broadcast_batch(*(op.shape[:-2] for k, op in ops.items() if k != "c"))
    for names in (("a",), ("b",), ("a", "b")):
        names = [k for k in names if len(ops[k].shape) >= 2]
        if not names:
            continue
        mm._copies.pop("a", None), mm._copies.pop("b", None)
        mm._dev_copies.clear()
        for k in names:
            _set_copy(mm, k, batch + ops[k].shape[-2:])
        _rebind(mm)
        try:
            problem = mm._analyze({})
        except UnsupportedLayoutError:
            continue
        mm._log.info("Matmul: %s computed on dense copies (layouts outside cuBLASLt's "
                     "frame)", ", ".join(names))
        return problem
    mm._copies.pop("a", None), mm._copies.pop("b", None)
    mm._dev_copies.clear()
    _rebind(mm)
    raise first


def fit_bgrad_layout(mm, spec, p, forced):
    """CUDA runs: ``a`` or ``b`` in the other memory order where cuBLASLt's BGRADA/BGRADB
    restriction refuses the user's (nvmath accepts any order); ``p`` when nothing helps (the
    plan's layout check then words the error)."""
    if lt_layout_ok(lt_epilog(spec, p.swap), p):
        return p
    if not mm._host and not mm._adapter.can_copy:
        return p
    for k in ("a", "b"):
        op = mm._ops[k]
        if len(op.shape) < 2:
            continue
        saved = mm._copies.get(k), mm._dev_copies.get(k)
        _set_copy(mm, k, op.shape, "flip")
        _rebind(mm)
        try:
            q = mm._analyze(forced)
        except UnsupportedLayoutError:
            q = None
        if q is not None and lt_layout_ok(lt_epilog(spec, q.swap), q):
            mm._log.info("Matmul: %s copied into the other memory order for epilog %s (a "
                         "cuBLASLt restriction)", k, spec.name)
            return q
        for table, value in zip((mm._copies, mm._dev_copies), saved):
            table.pop(k, None)
            if value is not None:
                table[k] = value
        _rebind(mm)
    return p
