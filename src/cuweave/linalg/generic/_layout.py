"""Shapes, strides and qualifiers of a generic matmul, planned into BLAS's column-major frame.

Every problem ``D = alpha * op_a(A) @ op_b(B) + beta * C`` (``op``: the qualifier's structure
and conjugation) is written once, at plan time, as BLAS calls on column-major matrices:

* an operand's *memory matrix* is its last two axes read column-major: a column-major operand
  is its own memory matrix (``trans=False``), a row-major one the transpose of it
  (``trans=True``); ``ld`` is the memory matrix's leading dimension;
* the result is computed in one of two frames: ``D`` (frame F, a column-major result) or
  ``D^T = B^T A^T`` (frame T, a row-major result, ``a`` and ``b`` swapped, sides flipped);
* what BLAS cannot express is turned into a *preparation* of an operand, run before the
  product: ``("T",)`` / ``("C",)`` writes the transpose / conjugate transpose of the memory
  matrix into a new column-major buffer (cuBLAS ``geam``); ``("dense",)`` copies a layout
  without a unit stride into a dense one first.

The same :class:`Plan` drives the CPU (Fortran BLAS) and GPU (cuBLAS) runs (``_execute.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..._internal.errors import InvalidOperandError, InvalidOptionError
from ._options import DiagType, FillMode, SideMode
from ._qualifiers import Qualifier

__all__ = ["Matrix", "Plan", "plan_matmul", "matrix_view", "batch_offsets", "DTYPES"]

#: dtypes of the generic layer (cuBLAS's S, D, C, Z)
DTYPES = ("float32", "float64", "complex64", "complex128")

N, T, C = 0, 1, 2  # cublasOperation_t


def matrix_view(rows: int, cols: int, sr: int, sc: int):
    """``(trans, ld)`` of a ``rows x cols`` matrix with element strides ``(sr, sc)`` read as a
    column-major memory matrix, or ``None`` when it has no unit stride (a copy is needed)."""
    if rows <= 1 and cols <= 1:
        return False, 1
    col = (sr == 1 or rows == 1) and (cols == 1 or sc >= max(rows, 1))
    row = (sc == 1 or cols == 1) and (rows == 1 or sr >= max(cols, 1))
    if col and (not row or rows > 1):
        return False, (sc if cols > 1 else max(rows, 1))
    if row:
        return True, (sr if rows > 1 else max(cols, 1))
    return None


def batch_offsets(batch_shape, strides) -> np.ndarray:
    """Element offsets of every matrix of a batch (C order over ``batch_shape``)."""
    if not batch_shape:
        return np.zeros(1, np.int64)
    idx = np.indices(batch_shape, dtype=np.int64).reshape(len(batch_shape), -1)
    return (idx * np.asarray(strides, np.int64)[:, None]).sum(axis=0)


@dataclass
class Matrix:
    """One operand as the BLAS calls see it (after its preparations, if any).

    ``rows x cols`` is the user's logical matrix (a diagonal: ``n x n``); ``trans``/``ld`` its
    memory matrix; ``conj`` whether its values are conjugated; ``vstride``: a diagonal's element
    stride; ``offsets``: element offsets of each batch matrix (broadcast to the product's batch).
    """

    name: str
    rows: int
    cols: int
    trans: bool = False
    ld: int = 1
    conj: bool = False
    vector: bool = False
    vstride: int = 1
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    preps: tuple = ()
    source: Matrix | None = None  # the operand before its last preparation step

    @property
    def mem_shape(self) -> tuple[int, int]:
        """Rows and columns of the memory matrix."""
        if self.vector:
            return 1, self.rows
        return (self.cols, self.rows) if self.trans else (self.rows, self.cols)

    def prepared(self, step: str) -> Matrix:
        """This operand after a preparation ``step`` ("T" or "C") into a dense buffer."""
        if self.vector:  # a diagonal: only conjugation is ever prepared
            return Matrix(self.name, self.rows, self.cols, vector=True, vstride=1,
                          conj=self.conj ^ (step == "C"), offsets=self.offsets,
                          preps=self.preps + (step,), source=self)
        mr, mc = self.mem_shape
        return Matrix(self.name, self.rows, self.cols, trans=not self.trans, ld=max(mc, 1),
                      conj=self.conj ^ (step == "C"), offsets=self.offsets,
                      preps=self.preps + (step,), source=self)

    def densified(self) -> Matrix:
        """This operand after a dense copy (row-major; a diagonal: unit stride)."""
        if self.vector:
            return Matrix(self.name, self.rows, self.cols, vector=True, vstride=1,
                          conj=self.conj, preps=self.preps + ("dense",))
        return Matrix(self.name, self.rows, self.cols, trans=True, ld=max(self.cols, 1),
                      conj=self.conj, preps=self.preps + ("dense",))


@dataclass
class Plan:
    """A generic matmul planned into BLAS calls (see the module docstring)."""

    kind: str                 # "gemm", "symm", "hemm", "trmm", "dgmm"
    dtype: str
    frame_t: bool             # the result's memory matrix is D^T (a row-major result)
    m: int
    n: int
    k: int
    first: Matrix             # BLAS's A (gemm) or the structured operand
    second: Matrix            # BLAS's B (gemm) or the general operand
    op_first: int = N
    op_second: int = N
    side: int = SideMode.LEFT
    uplo: int = FillMode.LOWER
    diag: int = DiagType.NON_UNIT
    incx: int = 1
    c: Matrix | None = None   # the addend, as read (None: no c)
    c_op: int = N             # c's memory matrix relative to the result's (N or T)
    inplace: bool = False
    count: int = 1            # matrices in the batch
    batch_shape: tuple = ()
    result_shape: tuple = ()  # the user's result shape (after squeezing 1-D operands)
    result_perm: tuple = ()   # axis order of a new result (outermost first)
    user_order: tuple = (0, 1)  # which user operand is ``first`` / ``second``
    squeezed: tuple = ()      # axes of ``batch + (M, N)`` dropped from the result (1-D a, b)
    dense: int = -1           # >= 0: a GEMM on the structured operand's dense form, this mode
    notes: list = field(default_factory=list)

    @property
    def uses_beta(self) -> bool:
        """Whether the BLAS routine itself adds ``beta * C`` (gemm, symm, hemm)."""
        return self.kind in ("gemm", "symm", "hemm")


def _check_dtype(op, name):
    if op.dtype not in DTYPES:
        raise InvalidOperandError(f"{name} dtype must be one of {list(DTYPES)}, got "
                                  f"{op.dtype!r}")


def _matrix_of(op, name, q: Qualifier, batch_ndim_hint=None):
    """``(Matrix, batch_shape, batch_strides)`` of a user operand (1-D general operands are
    promoted as in NumPy: ``a`` to a row, ``b`` to a column)."""
    shape, strides = op.shape, op.strides
    if q.kind == "dg":
        if len(shape) < 1:
            raise InvalidOperandError(f"{name} must be the 1-D diagonal of a diagonal matrix "
                                      f"(DiagonalMatrixQualifier), got shape {shape}")
        n, s = shape[-1], strides[-1]
        mat = Matrix(name, n, n, vector=True, vstride=s, conj=q.conjugate)
        if not (s > 0 or n <= 1):
            return mat.densified(), shape[:-1], _dense_batch_strides(shape[:-1], n)
        return mat, shape[:-1], strides[:-1]
    if len(shape) == 1:
        raise AssertionError("1-D operands are promoted by the caller")
    rows, cols = shape[-2:]
    if q.kind in ("sy", "he", "tr") and rows != cols:
        what = {"sy": "symmetric", "he": "Hermitian", "tr": "triangular"}[q.kind]
        raise InvalidOperandError(f"{name} must be square for a {what} qualifier, got shape "
                                  f"{shape}")
    view = matrix_view(rows, cols, *strides[-2:])
    mat = Matrix(name, rows, cols, conj=q.conjugate)
    if view is None:
        return mat.densified(), shape[:-2], _dense_batch_strides(shape[:-2], rows * cols)
    mat.trans, mat.ld = view
    return mat, shape[:-2], strides[:-2]


def _dense_batch_strides(batch_shape, size) -> tuple:
    """Batch strides of a C-ordered copy whose matrices hold ``size`` elements each."""
    out, acc = [], size
    for s in reversed(batch_shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _promote(op, axis):
    """Shape and strides of a 1-D operand seen as a row (axis 0) or column (axis 1)."""
    (n,), (s,) = op.shape, op.strides
    if axis == 0:
        return (1, n), (max(n * abs(s), 1), s)
    return (n, 1), (s, max(n * abs(s), 1))


class _Shaped:
    """Shape and strides of an operand as planned (1-D promoted)."""

    def __init__(self, op, shape=None, strides=None):
        self.shape = op.shape if shape is None else shape
        self.strides = op.strides if strides is None else strides
        self.dtype = op.dtype


def plan_matmul(a, b, c, quals, *, inplace: bool = False, dense: bool | str = False) -> Plan:
    """Plan ``alpha * qa(a) @ qb(b) + beta * c`` (operands: :class:`Operand` or anything with
    ``shape``/``strides``/``dtype``/``conj``; ``quals``: three :class:`Qualifier`; ``dense``:
    a GEMM on the structured operand's dense form, ``"batch"`` for batches only)."""
    qa, qb, _ = quals
    for op, name in ((a, "a"), (b, "b")) + (((c, "c"),) if c is not None else ()):
        _check_dtype(op, name)
    if b.dtype != a.dtype or (c is not None and c.dtype != a.dtype):
        raise InvalidOperandError(
            f"a, b and c must have one dtype, got {a.dtype!r}, {b.dtype!r}"
            + (f" and {c.dtype!r}" if c is not None else ""))
    dtype = a.dtype
    complex_ = dtype.startswith("complex")
    lazy = [bool(getattr(x, "conj", False)) for x in (a, b)]
    if c is not None and getattr(c, "conj", False):
        raise InvalidOperandError("c must not be a lazily conjugated tensor (conjugation of c "
                                  "is not supported), got one; call c.resolve_conj()")
    qa = Qualifier(qa.kind, (qa.conjugate ^ lazy[0]) and complex_, qa.lower, qa.unit, qa.incx)
    qb = Qualifier(qb.kind, (qb.conjugate ^ lazy[1]) and complex_, qb.lower, qb.unit, qb.incx)
    if not complex_:  # a real Hermitian matrix is symmetric
        qa = Qualifier("sy", False, qa.lower) if qa.kind == "he" else qa
        qb = Qualifier("sy", False, qb.lower) if qb.kind == "he" else qb
    squeeze = []
    sa, sb = _Shaped(a), _Shaped(b)
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise InvalidOperandError("a and b must have at least one dimension, got shapes "
                                  f"{a.shape} and {b.shape}")
    if qa.kind != "dg" and len(a.shape) == 1:
        sa = _Shaped(a, *_promote(a, 0))
        squeeze.append(-2)
    if qb.kind != "dg" and len(b.shape) == 1:
        sb = _Shaped(b, *_promote(b, 1))
        squeeze.append(-1)
    ma, a_bs, a_bst = _matrix_of(sa, "a", qa)
    mb, b_bs, b_bst = _matrix_of(sb, "b", qb)
    M, K = ma.rows, ma.cols
    K2, N_ = mb.rows, mb.cols
    if K != K2:
        raise InvalidOperandError(f"a and b must have matching inner dimensions, got a of shape "
                                  f"{a.shape} ({M} x {K}) and b of shape {b.shape} "
                                  f"({K2} x {N_})")
    try:
        batch = np.broadcast_shapes(tuple(a_bs), tuple(b_bs))
    except ValueError:
        raise InvalidOperandError(f"a and b batch dimensions must broadcast, got {a_bs} and "
                                  f"{b_bs}") from None
    full = tuple(batch) + (M, N_)
    result_shape = tuple(s for i, s in enumerate(full)
                         if i - len(full) not in squeeze)
    ma.offsets = _broadcast_offsets(a_bs, a_bst, batch)
    mb.offsets = _broadcast_offsets(b_bs, b_bst, batch)
    mc = None
    if c is not None:
        if tuple(c.shape) != result_shape:
            raise InvalidOperandError(f"c must have the result's shape {result_shape}, got "
                                      f"{tuple(c.shape)}")
        sc = _Shaped(c, *_unsqueeze(c, squeeze, len(batch))) if squeeze else _Shaped(c)
        mc, _, c_bst = _matrix_of(sc, "c", Qualifier("ge"))
        mc.offsets = batch_offsets(batch, c_bst)
    elif inplace:
        raise InvalidOptionError("options.inplace must be False when c is not given, got True")
    plan = Plan("gemm", dtype, True, 0, 0, 0, ma, mb, count=int(np.prod(batch, dtype=np.int64)),
                batch_shape=tuple(batch), result_shape=result_shape, inplace=inplace,
                squeezed=tuple(len(full) + ax for ax in sorted(squeeze)))
    if inplace and mc is not None and mc.preps:
        raise InvalidOperandError("c must have a unit stride in one of its last two dimensions "
                                  "for an in-place product, got strides "
                                  f"{tuple(c.strides)}")
    plan.c = mc
    if qa.kind == "ge" and qb.kind == "ge":
        _plan_gemm(plan, ma, mb, mc)
    else:
        _plan_structured(plan, ma, mb, mc, qa, qb)
    if dense == "batch":  # dense for batches of matrices of order <= 1024 only
        dense = plan.count > 1 and plan.k <= 1024
    if dense and plan.kind in ("trmm", "symm", "hemm") and not plan.first.preps \
            and not plan.first.conj:  # a conjugated triangle stays with trmm's op C
        from ._densify import MODES

        kind = (qa if qa.kind != "ge" else qb)
        plan.dense = MODES["tr_unit" if kind.kind == "tr" and kind.unit else
                           {"trmm": "tr", "symm": "sy", "hemm": "he"}[plan.kind]]
    nb = len(batch)
    plan.result_perm = tuple(range(nb)) + ((nb, nb + 1) if plan.frame_t else (nb + 1, nb))
    if plan.c is not None:
        plan.c_op = N if plan.c.trans == plan.frame_t else T
    return plan


def _broadcast_offsets(bs, bst, batch) -> np.ndarray:
    nb = len(batch)
    strides = (0,) * (nb - len(bs)) + tuple(0 if s == 1 else st for s, st in zip(bs, bst))
    return batch_offsets(tuple(batch), strides)


def _unsqueeze(c, squeeze, nb):
    """Shape and strides of ``c`` (the squeezed result's shape) with the squeezed unit axes of
    the full ``batch + (M, N)`` result restored."""
    bs, bst = tuple(c.shape[:nb]), tuple(c.strides[:nb])
    rest, rst = tuple(c.shape[nb:]), tuple(c.strides[nb:])
    if len(rest) == 0:
        return bs + (1, 1), bst + (1, 1)
    (n,), (s,) = rest, rst
    wide = max(n * abs(s), 1)
    if -2 in squeeze:
        return bs + (1, n), bst + (wide, s)
    return bs + (n, 1), bst + (s, wide)


def _frame_op(mat: Matrix, frame_t: bool) -> int:
    """The BLAS operation reading ``mat``'s memory matrix as the frame's factor (-1: a
    conjugation without transposition, which BLAS cannot express)."""
    flip = mat.trans ^ frame_t
    if mat.conj:
        return C if flip else -1
    return T if flip else N


def _plan_gemm(plan: Plan, ma: Matrix, mb: Matrix, mc: Matrix | None) -> None:
    fixed = plan.inplace  # an in-place result is c, whose orientation is then the frame's
    if mc is not None and (fixed or not mc.preps):
        frame_t = mc.trans
    else:  # a row-major result unless both operands are column-major
        frame_t = ma.trans or mb.trans or bool(ma.preps) or bool(mb.preps)

    def copies(ft):  # conjugated operands BLAS would read untransposed: copies needed
        return sum(_frame_op(x, ft) < 0 for x in (ma, mb))

    if not fixed and copies(not frame_t) < copies(frame_t):
        frame_t = not frame_t
    ma = ma.prepared("C") if _frame_op(ma, frame_t) < 0 else ma
    mb = mb.prepared("C") if _frame_op(mb, frame_t) < 0 else mb
    plan.kind, plan.frame_t = "gemm", frame_t
    M, K, N_ = ma.rows, ma.cols, mb.cols
    if frame_t:  # D^T = B^T A^T
        plan.first, plan.second, plan.user_order = mb, ma, (1, 0)
        plan.m, plan.n, plan.k = N_, M, K
    else:
        plan.first, plan.second, plan.user_order = ma, mb, (0, 1)
        plan.m, plan.n, plan.k = M, N_, K
    plan.op_first = _frame_op(plan.first, frame_t)
    plan.op_second = _frame_op(plan.second, frame_t)


def _plan_structured(plan, ma, mb, mc, qa, qb) -> None:
    s_is_a = qa.kind != "ge"
    q = qa if s_is_a else qb
    ms, mg = (ma, mb) if s_is_a else (mb, ma)
    # the general operand is read untransposed and unconjugated: its orientation is the frame
    if mg.conj:
        mg = mg.prepared("C")
    if plan.inplace and mc is not None and mg.trans != mc.trans:
        mg = mg.prepared("T")
    frame_t = mg.trans
    # the structured operand is on the left in frame F when it is a; frame T swaps sides
    left = s_is_a ^ frame_t
    kind = {"sy": "symm", "he": "hemm", "tr": "trmm", "dg": "dgmm"}[q.kind]
    if kind == "symm" and ms.conj:
        ms = ms.prepared("C")
    elif kind == "hemm" and (frame_t ^ ms.trans ^ ms.conj):
        ms = ms.prepared("T")
    elif kind == "trmm" and _frame_op(ms, frame_t) < 0:
        ms = ms.prepared("C")
    elif kind == "dgmm" and ms.conj:
        ms = ms.prepared("C")
    plan.kind, plan.frame_t = kind, frame_t
    plan.first, plan.second = ms, mg
    plan.user_order = (0, 1) if s_is_a else (1, 0)
    M, N_ = ma.rows, mb.cols
    plan.m, plan.n = (N_, M) if frame_t else (M, N_)
    plan.k = plan.m if left else plan.n
    plan.side = SideMode.LEFT if left else SideMode.RIGHT
    if kind == "dgmm":
        plan.incx = q.incx * ms.vstride
        return
    # the triangle holding the data, in the memory matrix
    plan.uplo = FillMode.LOWER if (q.lower ^ ms.trans) else FillMode.UPPER
    if kind == "trmm":
        plan.op_first = _frame_op(ms, frame_t)
        plan.diag = DiagType.UNIT if q.unit else DiagType.NON_UNIT
