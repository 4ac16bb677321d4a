"""Operands of the dense direct solver: shapes, batches and how each is copied for LAPACK.

``a`` is a square matrix, a batch ``(*batch, n, n)`` or a sequence of ``(n, n)`` matrices;
``b`` a vector ``(n,)``, a matrix ``(n, nrhs)``, a batch ``(*batch, n)`` / ``(*batch, n,
nrhs)`` or a sequence of vectors / matrices. Both sides hold the same number of systems.
The factor buffer holds column-major matrices (``trans``: it holds ``A^T``, the memory of a
row-major ``a`` copied as is, solved with ``op = T``); the right-hand sides are column-major.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..._internal.errors import InvalidOperandError
from ..._internal.packages import wrap_operand
from ._layout import DTYPES, batch_offsets

__all__ = ["Side", "parse_side", "is_batch"]


def is_batch(x) -> bool:
    return isinstance(x, Sequence) and not isinstance(x, str | bytes)


@dataclass
class Side:
    """One side (``a`` or ``b``) of the system(s)."""

    name: str
    ops: list            # wrapped operands (one, or one per explicit batch entry)
    explicit: bool
    batch_shape: tuple   # implicit batch shape (() for explicit or single)
    count: int
    n: int
    nrhs: int            # b only (1 for vectors)
    vector: bool         # b only: the right-hand sides are vectors
    mat_shape: tuple     # shape of one system's matrix / vector
    offsets: np.ndarray  # element offsets of each matrix (implicit batches)

    @property
    def op(self):
        return self.ops[0]

    def signature(self) -> tuple:
        return tuple((o.package, o.dtype, o.shape, o.strides, o.device, o.device_id)
                     for o in self.ops)

    def dense_order(self) -> str | None:
        """"C" / "F" when every matrix is C- / F-contiguous and the batch is dense (one
        ``memcpy`` copies the side), else None. Vectors: "C" when contiguous."""
        if self.explicit:
            return None
        op = self.op
        shape, st = op.shape, op.strides
        if self.vector:
            ok = op.is_dense() and (len(st) == 0 or st[-1] == 1) and _c_batch(shape, st, 1)
            return "C" if ok else None
        r, c = shape[-2:]
        sr, sc = st[-2:]
        size = r * c
        if not _c_batch(shape[:-2], st[:-2], size):
            return None
        if (sc == 1 or c == 1) and (sr == c or r == 1):
            return "C"
        if (sr == 1 or r == 1) and (sc == r or c == 1):
            return "F"
        return None

    def matrix_view(self, i: int = 0):
        """``(trans, ld)`` of every matrix of this side read column-major, or None when they
        have no unit stride."""
        from ._layout import matrix_view

        op = self.ops[i if self.explicit else 0]
        if self.vector:
            s = op.strides[-1]
            return (False, max(self.n, 1)) if s == 1 or self.n <= 1 else None
        return matrix_view(*op.shape[-2:], *op.strides[-2:])


def _c_batch(shape, strides, size) -> bool:
    expect = size
    for n, s in zip(reversed(shape), reversed(strides)):
        if n > 1 and s != expect:
            return False
        expect *= n
    return True


def parse_side(x, name: str, *, square: bool) -> Side:
    explicit = is_batch(x)
    items = list(x) if explicit else [x]
    if explicit and not items:
        raise InvalidOperandError(f"{name} must be a non-empty sequence of arrays, got an "
                                  "empty one")
    ops = [wrap_operand(v, f"{name}[{i}]" if explicit else name) for i, v in enumerate(items)]
    first = ops[0]
    for i, o in enumerate(ops[1:], 1):
        if (o.package, o.dtype, o.shape, o.place) != (first.package, first.dtype, first.shape,
                                                      first.place):
            raise InvalidOperandError(
                f"{name}[{i}] must match {name}[0]'s package, dtype, shape and device "
                f"({first.package}, {first.dtype}, {first.shape}, {first.place}), got "
                f"({o.package}, {o.dtype}, {o.shape}, {o.place})")
    if first.dtype not in DTYPES:
        raise InvalidOperandError(f"{name} dtype must be one of {list(DTYPES)}, got "
                                  f"{first.dtype!r}")
    shape = first.shape
    if square:
        if len(shape) < 2 or (explicit and len(shape) != 2) or shape[-1] != shape[-2]:
            what = "(n, n) matrices" if explicit else "a square matrix or a batch (..., n, n)"
            raise InvalidOperandError(f"{name} must be {what}, got shape {shape}")
        n = shape[-1]
        batch = () if explicit else shape[:-2]
        return Side(name, ops, explicit, batch, len(ops) if explicit else _prod(batch), n, n,
                    False, shape[-2:], batch_offsets(batch, first.strides[:-2]))
    if explicit and len(shape) not in (1, 2):
        raise InvalidOperandError(f"{name} entries must be vectors (n,) or matrices (n, nrhs), "
                                  f"got shape {shape}")
    if len(shape) == 0:
        raise InvalidOperandError(f"{name} must be a vector or a matrix, got a scalar")
    return Side(name, ops, explicit, (), len(ops), shape[0] if len(shape) else 0,
                1, len(shape) == 1, shape, np.zeros(1, np.int64))


def _prod(shape) -> int:
    p = 1
    for s in shape:
        p *= s
    return p


def match_rhs(a: Side, b: Side) -> Side:
    """Interpret ``b``'s shape against ``a`` (vectors or matrices per system, batch shape)."""
    op = b.op
    shape = op.shape
    if b.explicit:
        if b.count != a.count:
            raise InvalidOperandError(f"b must hold as many systems as a ({a.count}), got "
                                      f"{b.count}")
        n = shape[0]
        nrhs = 1 if len(shape) == 1 else shape[1]
        vector = len(shape) == 1
        batch = ()
        offsets = np.zeros(1, np.int64)
    else:
        nb = len(a.batch_shape)
        if a.explicit:  # an implicit b beside an explicit a: its leading axis is the batch
            nb = 1
            if len(shape) not in (2, 3) or shape[0] != a.count:
                raise InvalidOperandError(
                    f"b must be shaped ({a.count}, n) or ({a.count}, n, nrhs) beside a "
                    f"sequence of {a.count} matrices, got {shape}")
        if len(shape) == nb + 1:
            vector, n, nrhs = True, shape[-1], 1
        elif len(shape) == nb + 2:
            vector, n, nrhs = False, shape[-2], shape[-1]
        else:
            raise InvalidOperandError(
                f"b must be shaped (*batch, n) or (*batch, n, nrhs) with a's batch "
                f"{a.batch_shape}, got {shape}")
        batch = shape[:nb]
        if not a.explicit and tuple(batch) != tuple(a.batch_shape):
            raise InvalidOperandError(f"b's batch shape must be a's {a.batch_shape}, got "
                                      f"{tuple(batch)}")
        offsets = batch_offsets(batch, op.strides[:nb])
    if n != a.n:
        raise InvalidOperandError(f"b must have n = {a.n} rows (a is {a.n} x {a.n}), got "
                                  f"shape {shape}")
    b.batch_shape, b.n, b.nrhs, b.vector = tuple(batch), n, nrhs, vector
    b.mat_shape = (n,) if vector else (n, nrhs)
    b.offsets = offsets
    if not b.explicit:
        b.count = _prod(batch)
    return b
