"""Shape and stride analysis of a matmul: canonicalization into cuBLASLt's frame.

cuBLASLt is always driven with column-major layouts: every operand is described by a
column-major *storage* matrix ``S`` (``rows × cols``, leading dimension ``ld``) and an operation
``op`` (N, T or C) so that ``op(S)`` is the logical operand. The result ``D`` (``m × n``) is
column-major too. When the user's result is row-major the engine computes ``D^T = B^T A^T``
(``swap=True``): ``m`` is then the user's ``N``, lt ``A`` is the user's ``B^T`` and lt ``B`` the
user's ``A^T``. Everything here is pure Python on shapes and strides (elements): it runs, and is
tested, without a GPU.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from ..._bindings.cublaslt import Operation
from ..._internal.errors import InvalidOperandError, UnsupportedLayoutError
from ._epilogs import aux_layout

__all__ = ["lt_layout_ok", "LtOperand", "Problem", "promote", "broadcast_batch", "batch_stride",
           "lt_operand", "bias_axis", "bias_layout", "aux_frames", "choose_swap", "analyze",
           "host_view", "remember_aux_frame", "recall_aux_frame"]


@dataclass(frozen=True)
class LtOperand:
    """Column-major storage ``rows × cols`` with ``ld``, ``op``, and a strided batch."""

    rows: int
    cols: int
    ld: int
    op: Operation
    batch_stride: int


@dataclass(frozen=True)
class Problem:
    """A matmul canonicalized into cuBLASLt's frame (see the module docstring).

    ``user_*`` fields describe the user's (promoted, 2-D-or-more) view; ``squeeze`` lists the
    result axes removed at the end (1-D operands). ``result_perm`` orders the result's axes
    outermost → innermost (``operands.empty(perm=...)``).
    """

    m: int
    n: int
    k: int
    batch_shape: tuple
    batch_count: int
    swap: bool
    a: LtOperand
    b: LtOperand
    d: LtOperand
    c: LtOperand | None
    c_broadcast: bool
    user_m: int
    user_n: int
    result_shape: tuple
    result_perm: tuple
    squeeze: tuple

    @property
    def lt_users(self) -> tuple:
        """The user operands (``"a"``/``"b"``) that are cuBLASLt's A and B in this frame:
        swapped, cuBLASLt's A is the user's ``b``. Every per-operand attribute handed to
        cuBLASLt (data type, scale pointer, alignment) must be read through this."""
        return ("b", "a") if self.swap else ("a", "b")


def promote(shape, strides, which: str):
    """NumPy 1-D promotion: ``a`` (K,) → (1, K); ``b`` (K,) → (K, 1). Returns (shape, strides,
    squeezed) where ``squeezed`` tells the result axis to drop (-2 for a, -1 for b) or None."""
    shape, strides = tuple(shape), tuple(strides)
    if len(shape) == 0:
        raise InvalidOperandError(f"{which} must have at least one dimension, got a scalar")
    if len(shape) > 1:
        return shape, strides, None
    (k,), (s,) = shape, strides
    if which == "a":
        return (1, k), (s * max(k, 1), s), -2
    return (k, 1), (s, s * max(k, 1)), -1


def broadcast_batch(*shapes, names=("A", "B")) -> tuple:
    """NumPy broadcast of batch shapes (raises with the offending shapes, named ``names``)."""
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError as e:
        shown = " and ".join(f"{name} {list(shape)}" for name, shape in zip(names, shapes))
        raise InvalidOperandError(
            f"The batch dimensions of operands {shown} must match: batch dimensions must be "
            f"equal or broadcast as NumPy's, got {list(shapes)!r}") from e


def batch_stride(shape, strides, batch_shape, name: str) -> int:
    """Single stride of ``name``'s batch dims broadcast to ``batch_shape`` (0: broadcast).

    Raises :class:`UnsupportedLayoutError` when the batch cannot be addressed with one stride.
    """
    pad = len(batch_shape) - len(shape)
    shape = (1,) * pad + tuple(shape)
    strides = (0,) * pad + tuple(strides)
    eff = [(n, 0 if s_op == 1 and n > 1 else st)
           for n, s_op, st in zip(batch_shape, shape, strides) if n > 1]
    if not eff:
        return 0
    if all(st == 0 for _, st in eff):
        return 0
    for (_, outer), (n_in, inner) in zip(eff, eff[1:]):
        if inner == 0 or outer != inner * n_in:
            raise UnsupportedLayoutError(
                f"{name} batch dimensions must be addressable with a single stride, got shape "
                f"{tuple(shape)} and strides {tuple(strides)}; pass a contiguous copy")
    if eff[-1][1] < 0:
        raise UnsupportedLayoutError(f"{name} batch stride must be non-negative, got {strides}")
    return eff[-1][1]


def _storages(rows, cols, sr, sc):
    """Column-major storage interpretations of a ``rows × cols`` matrix: [(is_col, ld)]."""
    found = []
    if (rows == 1 or sr == 1) and (cols == 1 or sc >= max(rows, 1)):
        found.append((True, sc if cols > 1 else max(rows, 1)))
    if (cols == 1 or sc == 1) and (rows == 1 or sr >= max(cols, 1)):
        found.append((False, sr if rows > 1 else max(cols, 1)))
    return found


def lt_operand(rows, cols, sr, sc, *, transposed: bool, conj: bool, bstride: int,
               name: str, prefer_op: Operation | None = None) -> LtOperand:
    """Describe the user matrix ``X`` (``rows × cols``, strides ``sr, sc``) as a cuBLASLt operand
    whose logical value is ``X^T`` if ``transposed`` else ``X`` (conjugated if ``conj``)."""
    cands = []
    for is_col, ld in _storages(rows, cols, sr, sc):
        s_rows, s_cols = (rows, cols) if is_col else (cols, rows)
        same = is_col != transposed  # op(S) == logical without transposition
        op = Operation.N if same else Operation.T
        if conj:
            if same:
                continue
            op = Operation.C
        cands.append(LtOperand(s_rows, s_cols, ld, op, bstride))
    if not cands:
        if conj and _storages(rows, cols, sr, sc):
            raise UnsupportedLayoutError(
                f"{name} must be stored so that its conjugate is a conjugate-transpose in "
                f"cuBLASLt's column-major frame, got strides {(sr, sc)}; pass a copy in the "
                "other memory order (or conjugate it yourself)", permutation=(1, 0))
        raise UnsupportedLayoutError(
            f"{name} must be row- or column-major in its last two dimensions with a unit "
            f"stride and a non-overlapping leading dimension, got shape {(rows, cols)} and "
            f"strides {(sr, sc)}", permutation=(1, 0) if sr == 1 or sc == 1 else None)
    if prefer_op is not None:
        for c in cands:
            if c.op == prefer_op:
                return c
    return cands[0]


def bias_axis(shape, m: int, n: int, batch_shape) -> str:
    """``"m"`` (added to every column, nvmath's convention) or ``"n"`` (a cuweave extension:
    added to every row)."""
    shape = tuple(shape)
    expected = (f"(M,)=({m},), (M, 1)=({m}, 1), (*batch, M, 1), or (a cuweave extension, "
                f"torch Linear's bias) (1, N)=(1, {n}) or (*batch, 1, N)")
    if len(shape) == 1 and shape[0] == m:  # always along M, whatever N is (nvmath's meaning)
        return "m"
    if len(shape) >= 2:
        if shape[-2:] == (m, 1):
            return "m"
        if shape[-2:] == (1, n):
            return "n"
    got = shape[0] if len(shape) == 1 else shape[-2]
    hint = (f"; a bias along N (one value per column) is spelled (1, N)=(1, {n})"
            if len(shape) == 1 and shape[0] == n else "")
    raise InvalidOperandError(
        f"The M dimension of the bias vector ({got}) must match the M dimension of A: "
        f"epilog_inputs['bias'] shape must be {expected}, got {shape!r}{hint}")


def bias_layout(shape, strides, axis: str, batch_shape) -> int:
    """Validate bias strides (unit stride along its length); return its batch stride."""
    shape, strides = tuple(shape), tuple(strides)
    if len(shape) == 1:
        vec_len, vec_stride, bshape, bstr = shape[0], strides[0], (), ()
    else:
        i = -2 if axis == "m" else -1
        vec_len, vec_stride = shape[i], strides[i]
        bshape, bstr = shape[:-2], strides[:-2]
    if vec_len > 1 and vec_stride != 1:
        raise UnsupportedLayoutError(
            f"epilog_inputs['bias'] must be contiguous along its length, got strides {strides}")
    if (bshape and tuple(bshape) != tuple(batch_shape)[-len(bshape):]
            and any(x != 1 for x in bshape)):
        raise InvalidOperandError(
            f"epilog_inputs['bias'] batch shape must be {tuple(batch_shape)} (or absent), got "
            f"{tuple(bshape)}")
    return batch_stride(bshape, bstr, batch_shape, "epilog_inputs['bias']")


def aux_frames(name: str, shape, strides, user_m, user_n, batch_shape, result_dtype) -> list:
    """Frames (``swap`` values) in which the aux input ``name`` has the expected layout."""
    found = []
    for swap in (False, True):
        m, n = (user_n, user_m) if swap else (user_m, user_n)
        eshape, estrides, _ = aux_layout(name, m, n, batch_shape, result_dtype)
        if tuple(shape) == eshape and _same_strides(shape, strides, estrides):
            found.append(swap)
    if not found:
        e1 = aux_layout(name, user_m, user_n, batch_shape, result_dtype)[:2]
        e2 = aux_layout(name, user_n, user_m, batch_shape, result_dtype)[:2]
        raise InvalidOperandError(
            f"epilog_inputs[{name!r}] must be the {name} output of the forward pass (shape and "
            f"strides {e1} or {e2}), got {tuple(shape)} with strides {tuple(strides)}")
    return found


def _same_strides(shape, a, b) -> bool:
    return all(x == y for n, x, y in zip(shape, a, b) if n > 1)


# Frames of aux arrays produced in this process, so an ambiguous (M == N) backward pass uses the
# forward pass's frame. Keyed by (data pointer, shape) and valid only while the array produced
# there is alive (a caching allocator hands a freed address out again). An entry lives exactly
# as long as its array: dead ones are dropped as the table grows, live ones are never evicted
# (an evicted live entry would make a backward pass guess). Arrays without weak references are
# kept for the last _UNREFERENCED of them.
_AUX_FRAMES: dict = {}
_UNREFERENCED: OrderedDict = OrderedDict()
_UNREFERENCED_MAX = 256
_sweep_at = [512]


def remember_aux_frame(arr, ptr: int, shape, swap: bool) -> None:
    """Remember that the aux output ``arr`` (at ``ptr``, of ``shape``) is in frame ``swap``."""
    key = (int(ptr), tuple(shape))
    try:
        ref = weakref.ref(arr)
    except TypeError:  # an object without weak references: valid until evicted
        _UNREFERENCED[key] = swap
        _UNREFERENCED.move_to_end(key)
        while len(_UNREFERENCED) > _UNREFERENCED_MAX:
            _UNREFERENCED.popitem(last=False)
        return
    _AUX_FRAMES[key] = (ref, swap)
    if len(_AUX_FRAMES) > _sweep_at[0]:
        for k in [k for k, (r, _) in _AUX_FRAMES.items() if r() is None]:
            del _AUX_FRAMES[k]
        _sweep_at[0] = max(512, 2 * len(_AUX_FRAMES))


def aux_frames_of(inputs) -> tuple | None:
    """``((name, frame), ...)`` of the aux inputs among the epilog inputs ``inputs`` (records
    by name): the frame each one's forward pass produced it in (:func:`recall_aux_frame`), a
    part of a plan's key (a square aux input's layout does not tell it); ``None`` without
    inputs."""
    if not inputs or ("relu_aux" not in inputs and "gelu_aux" not in inputs):
        return None
    return tuple(sorted((k, recall_aux_frame(v.ptr, v.shape)) for k, v in inputs.items()
                        if k in ("relu_aux", "gelu_aux")))


def recall_aux_frame(ptr: int, shape) -> bool | None:
    """The frame of an aux output at ``ptr`` of ``shape`` still alive, else None."""
    key = (int(ptr), tuple(shape))
    entry = _AUX_FRAMES.get(key)
    if entry is None:
        return _UNREFERENCED.get(key)
    ref, swap = entry
    if ref() is None:  # that array is gone: the address means nothing
        del _AUX_FRAMES[key]
        return None
    return swap


def choose_swap(*, forced: dict, a_col_major: bool) -> bool:
    """Pick the frame from constraints ``{reason: swap}`` (first entry wins; conflicts raise)."""
    values = set(forced.values())
    if len(values) > 1:
        raise UnsupportedLayoutError(
            "the result layout constraints conflict: " + ", ".join(
                f"{why} needs a {'row' if s else 'column'}-major result"
                for why, s in forced.items()))
    if values:
        return values.pop()
    return not a_col_major


def _matrix_orientation(rows, cols, sr, sc):
    """``True`` row-major, ``False`` column-major, ``None`` either (degenerate)."""
    st = _storages(rows, cols, sr, sc)
    kinds = {is_col for is_col, _ in st}
    if len(kinds) != 1:
        return None
    return not kinds.pop()


def analyze(a_shape, a_strides, b_shape, b_strides, *, c_shape=None, c_strides=None,
            conj_a=False, conj_b=False, forced=None, inplace=False, fp8=False,
            bgrad=None) -> Problem:
    """Canonicalize ``a @ b (+ c)`` into cuBLASLt's frame.

    ``forced`` maps reasons (e.g. ``"a bias along N"``) to a required ``swap``. ``inplace``
    writes into ``c``. ``fp8`` prefers the TN operand form cuBLASLt's fp8 kernels need;
    ``bgrad`` (``"bgrada"``/``"bgradb"``: the user's epilog) the operation cuBLASLt needs for
    that epilog where an operand admits both (a degenerate ``(K, 1)`` matrix).
    """
    forced = dict(forced or {})
    a_shape, a_strides, sq_a = promote(a_shape, a_strides, "a")
    b_shape, b_strides, sq_b = promote(b_shape, b_strides, "b")
    M, K = a_shape[-2:]
    K2, N = b_shape[-2:]
    if K != K2:
        raise InvalidOperandError(
            f"b must have {K} rows to match a's columns (a @ b), got a {a_shape} and b {b_shape}")
    batch_shape = broadcast_batch(a_shape[:-2], b_shape[:-2])
    count = int(np.prod(batch_shape, dtype=np.int64)) if batch_shape else 1
    if 0 in (M, N, K, count):
        raise InvalidOperandError(
            "a and b must not have empty dimensions (empty products are not supported), got "
            f"M={M}, N={N}, K={K} and batch shape {batch_shape}")
    a_bs = batch_stride(a_shape[:-2], a_strides[:-2], batch_shape, "a")
    b_bs = batch_stride(b_shape[:-2], b_strides[:-2], batch_shape, "b")
    c_bcast, c_orient, c_bs = False, None, 0
    if c_shape is not None:
        c_shape, c_strides = tuple(c_shape), tuple(c_strides)
        c_bcast, c_orient, c_bs = _analyze_c(c_shape, c_strides, M, N, batch_shape, inplace)
    if inplace:
        if c_shape is None or c_bcast or tuple(c_shape[:-2]) != batch_shape or (
                batch_shape and c_bs == 0 and count > 1):
            raise InvalidOperandError(
                f"c must have the result's shape {batch_shape + (M, N)} for inplace=True, got "
                f"{c_shape!r}")
        if c_orient is not None:
            forced = {"inplace=True (c's layout)": c_orient, **forced}
    if c_orient is not None and not inplace and not forced:
        forced = {"c's layout": c_orient}
    a_orient = _matrix_orientation(M, K, a_strides[-2], a_strides[-1])
    swap = choose_swap(forced=forced, a_col_major=a_orient is False)
    frames = (swap,) if forced or not (conj_a or conj_b) else (swap, not swap)
    for i, swap in enumerate(frames):
        try:
            lt_a, lt_b = _lt_operands(swap, M, N, K, a_strides, b_strides, a_bs, b_bs,
                                      conj_a, conj_b, fp8, bgrad)
            break
        except UnsupportedLayoutError:
            if i == len(frames) - 1:
                raise
    m, n = (N, M) if swap else (M, N)
    nb = len(batch_shape)
    if inplace:
        d = _result_storage(M, N, c_strides[-2], c_strides[-1], swap, c_bs)
        perm = None
    else:
        perm = tuple(range(nb)) + ((nb + 1, nb) if not swap else (nb, nb + 1))
        d = LtOperand(m, n, max(m, 1), Operation.N, m * n if count > 1 else 0)
    c_lt = None
    if c_shape is not None and not c_bcast:
        c_lt = _result_storage(M, N, c_strides[-2], c_strides[-1], swap, c_bs)
        if c_lt is None:
            if inplace:
                raise UnsupportedLayoutError(
                    f"c must be {'row' if swap else 'column'}-major for inplace=True here, got "
                    f"strides {c_strides}")
            c_bcast = True
    squeeze = tuple(ax for ax in (sq_a, sq_b) if ax is not None)
    return Problem(m, n, K, batch_shape, count, swap, lt_a, lt_b, d, c_lt, c_bcast, M, N,
                   batch_shape + (M, N), perm, squeeze)


def _analyze_c(c_shape, c_strides, M, N, batch_shape, inplace):
    """``(c_broadcast, c_orientation, c_batch_stride)`` of ``c`` (see :func:`analyze`)."""
    if len(c_shape) < 2 or c_shape[-2:] not in ((M, N), (M, 1)):
        lead = ""
        if len(c_shape) >= 2:
            lead = (f"The M dimension of the C matrix ({c_shape[-2]}) must match the M "
                    "dimension of A: " if c_shape[-2] != M else
                    f"The N dimension of the C matrix ({c_shape[-1]}) must match the N "
                    "dimension of B: ")
        raise InvalidOperandError(
            f"{lead}c shape must be (M, N)=({M}, {N}) or (M, 1)=({M}, 1), optionally batched "
            f"as {batch_shape}, got {c_shape!r}")
    broadcast_batch(c_shape[:-2], batch_shape, names=("C", "of the product"))
    if len(c_shape) - 2 > len(batch_shape) or (
            c_shape[:-2] and tuple(np.broadcast_shapes(c_shape[:-2], batch_shape))
            != batch_shape):
        raise InvalidOperandError(
            f"The batch dimension of operand C {tuple(c_shape[:-2])} must match with that of "
            f"the other operands {tuple(batch_shape)}: c batch shape must broadcast to "
            f"{batch_shape} (the result's), got {tuple(c_shape[:-2])}")
    c_bcast, c_orient, c_bs = c_shape[-1] != N, None, 0
    if c_bcast:
        return c_bcast, c_orient, c_bs
    c_orient = _matrix_orientation(M, N, c_strides[-2], c_strides[-1])
    try:
        c_bs = batch_stride(c_shape[:-2], c_strides[:-2], batch_shape, "c")
    except UnsupportedLayoutError:
        if inplace:
            raise
        c_bcast = True  # materialized into the result first
    if c_orient is None and not c_bcast and not _storages(M, N, c_strides[-2], c_strides[-1]):
        if inplace:
            raise UnsupportedLayoutError(
                f"c must be row- or column-major for inplace=True, got strides {c_strides}")
        c_bcast = True
    return c_bcast, c_orient, c_bs


#: the operation cuBLASLt needs of its operands for BGRADA / BGRADB, by (user epilog, swap):
#: its BGRADA needs its A untransposed, its BGRADB its B transposed (the user's epilogs trade
#: places when swapped)
_BGRAD_OPS = {("bgrada", False): ("a", Operation.N), ("bgradb", False): ("b", Operation.T),
              ("bgrada", True): ("b", Operation.T), ("bgradb", True): ("a", Operation.N)}


def _lt_operands(swap, M, N, K, a_strides, b_strides, a_bs, b_bs, conj_a, conj_b, fp8,
                 bgrad=None):
    pa = Operation.T if fp8 else None
    pb = Operation.N if fp8 else None
    need = _BGRAD_OPS.get((bgrad, swap))
    if need is not None:
        pa, pb = (need[1], pb) if need[0] == "a" else (pa, need[1])
    if not swap:
        return (lt_operand(M, K, a_strides[-2], a_strides[-1], transposed=False, conj=conj_a,
                           bstride=a_bs, name="a", prefer_op=pa),
                lt_operand(K, N, b_strides[-2], b_strides[-1], transposed=False, conj=conj_b,
                           bstride=b_bs, name="b", prefer_op=pb))
    return (lt_operand(K, N, b_strides[-2], b_strides[-1], transposed=True, conj=conj_b,
                       bstride=b_bs, name="b", prefer_op=pa),
            lt_operand(M, K, a_strides[-2], a_strides[-1], transposed=True, conj=conj_a,
                       bstride=a_bs, name="a", prefer_op=pb))


def _result_storage(M, N, sr, sc, swap, bstride):
    """The (M, N) matrix as lt ``D``/``C`` (column-major ``m × n``, op N) or None."""
    for is_col, ld in _storages(M, N, sr, sc):
        if is_col != swap:  # column-major storage matches the unswapped frame
            rows = N if swap else M
            return LtOperand(rows, M if swap else N, ld, Operation.N, bstride)
    return None


def host_view(arr: np.ndarray, lt: LtOperand, count: int) -> np.ndarray:
    """NumPy view ``(count, *op_shape)`` of a cuBLASLt operand stored in ``arr`` (no copy).

    The view is the logical ``op(S)`` without conjugation (the caller passes ``conj``).
    """
    item = arr.itemsize
    dtype = arr.dtype
    if type(dtype).__module__ != "numpy.dtypes" or dtype.kind == "V":
        # ml_dtypes (bfloat16, fp8) have array-interface type strings NumPy cannot parse
        # ("<f1"): stride over raw unsigned ints of the same size and view back
        arr = arr.view(np.dtype(f"u{item}"))
    base = np.lib.stride_tricks.as_strided(
        arr, shape=(count, lt.cols, lt.rows),
        strides=(lt.batch_stride * item, lt.ld * item, item))  # S^T (C-order view of storage)
    if base.dtype != dtype:
        base = base.view(dtype)
    if lt.op == Operation.N:
        return base.transpose(0, 2, 1)
    return base


def lt_layout_ok(lt_spec, p) -> bool:
    """Whether the problem ``p`` meets the cuBLASLt-frame epilog's operand-layout restriction."""
    req = lt_spec.layout_requirement
    if req is None:
        return True
    from ..._bindings.cublaslt import Operation

    which, needs_n = req[:2]
    return (getattr(p, which).op == Operation.N) == needs_n


def _check_lt_layout(lt_spec, user_spec, p) -> None:
    """The epilog's operand-layout restriction (``EpilogSpec.layout_requirement``): checked on
    the cuBLASLt-frame epilog, worded for the user's epilog (BGRADA/BGRADB trade places when
    swapped)."""
    if lt_layout_ok(lt_spec, p):
        return
    from ..._internal.errors import UnsupportedLayoutError

    need, fix = user_spec.layout_requirement[2:]
    raise UnsupportedLayoutError(
        f"{need} for epilog {user_spec.name} on the GPU (a cuBLASLt restriction); pass {fix}",
        permutation=(1, 0))
