"""Shape and stride analysis: which layouts cuFFT's advanced data layout can express.

cuFFT addresses element ``(b, x, y, z)`` of a batch of rank-``r`` transforms as
``b * dist + ((x * embed[1] + y) * embed[2] + z) * stride``: the transformed axes must nest
(each stride a multiple of the next inner one, leaving room for its length) and all batch axes
must collapse into one evenly strided dimension. For R2C/C2R the halved axis (``axes[-1]``)
must be the innermost transformed axis. Everything here is pure Python on tuples.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from .._internal.arrays import c_strides
from .._internal.errors import InvalidOperandError, InvalidOptionError, UnsupportedLayoutError

__all__ = ["CufftLayout", "LayoutPlan", "coerce_axes", "normalize_axes", "fft_lengths",
           "plan_layouts", "c_strides", "dense_strides", "supported_order"]

MAX_RANK = 3


@dataclass(frozen=True)
class CufftLayout:
    """One side (input or output) of a ``cufftMakePlanMany64`` call."""

    embed: tuple[int, ...]
    stride: int
    dist: int


@dataclass(frozen=True)
class LayoutPlan:
    """Everything the planner needs about the data layout.

    ``order`` lists the transformed axes outermost → innermost (cuFFT's ``n`` order);
    ``n`` the logical (real-side) lengths in that order; ``batch`` the number of transforms;
    ``out_perm`` the memory order (outermost → innermost) of a freshly allocated result.
    """

    order: tuple[int, ...]
    n: tuple[int, ...]
    batch: int
    batch_axes: tuple[int, ...]
    inp: CufftLayout
    out: CufftLayout
    out_perm: tuple[int, ...]
    out_strides: tuple[int, ...]


def coerce_axes(axes) -> tuple | None:
    """``axes`` as a tuple of Python ints (``None`` stays ``None``).

    A single integer is accepted as one transformed axis (an extension: nvmath-python asks for a
    sequence; ``axes=1`` means ``axes=(1,)``, like NumPy's ``axis=1``). Booleans, floats and
    strings are rejected.
    """
    if axes is None:
        return None
    if isinstance(axes, (str, bytes)):
        raise InvalidOptionError(f"axes must be an int or a sequence of ints, got {axes!r}")
    if _is_int(axes):
        return (operator.index(axes),)
    try:
        items = tuple(axes)
    except TypeError:
        raise InvalidOptionError(
            f"axes must be an int or a sequence of ints, got {axes!r}") from None
    if not all(_is_int(a) for a in items):
        raise InvalidOptionError(f"axes must be an int or a sequence of ints, got {axes!r}")
    return tuple(operator.index(a) for a in items)


def _is_int(a) -> bool:
    if isinstance(a, bool) or type(a).__name__ == "bool_":
        return False
    try:
        operator.index(a)
    except TypeError:
        return False
    return True


def normalize_axes(axes, ndim: int) -> tuple[int, ...]:
    """Validate ``axes`` (default: all, at most the last three) against ``ndim``.

    ``axes`` is an int or a sequence of ints (see :func:`coerce_axes`).
    """
    if axes is None:
        if ndim == 0:
            raise InvalidOperandError("operand must have at least one dimension, got a 0-d array")
        if ndim > MAX_RANK:
            raise InvalidOperandError(
                f"The tensor is {ndim}-D and FFTs in number of dimensions > {MAX_RANK} is not "
                f"supported: axes must be given for operands with more than {MAX_RANK} "
                f"dimensions (at most {MAX_RANK} transformed axes), got ndim={ndim}")
        return tuple(range(ndim))
    axes = coerce_axes(axes)
    if not axes or len(axes) > MAX_RANK:
        raise InvalidOperandError(
            f"axes must name between 1 and {MAX_RANK} axes, got {axes!r}")
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise InvalidOperandError(
                f"The specified FFT axes {list(axes)} are out of bounds for a {ndim}-D tensor: "
                f"axes must be in [-{ndim}, {ndim}) for a {ndim}-d operand, got {axes!r}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise InvalidOperandError(
            f"The specified FFT axes = {tuple(axes)} contains duplicate axis IDs, which is not "
            f"supported: axes must not repeat an axis, got {axes!r}")
    return tuple(out)


def fft_lengths(shape, axes, fft_type: str, parity: str) -> tuple[tuple[int, ...], tuple]:
    """(logical transform lengths per axis in ``axes`` order, result shape)."""
    shape = tuple(shape)
    last = axes[-1]
    out = list(shape)
    logical = [shape[a] for a in axes]
    if fft_type == "R2C":
        out[last] = shape[last] // 2 + 1
    elif fft_type == "C2R":
        m = shape[last]
        n = 2 * (m - 1) + (1 if parity == "odd" else 0)
        if n < 1:
            raise InvalidOperandError(
                f"The size of the last FFT axis in the result for FFT type 'C2R' is {n} for "
                f"operand shape {shape}: operand length along axis {last} must give a C2R "
                f"output length >= 1 (last_axis_parity={parity!r}), got {m}")
        out[last] = n
        logical[-1] = n
    for a, n in zip(axes, logical):
        if n < 1:
            raise InvalidOperandError(f"operand must not be empty along axis {a}, got {shape!r}")
    return tuple(logical), tuple(out)



def dense_strides(shape, perm) -> tuple[int, ...]:
    """Element strides of a dense array of ``shape`` whose axes lie in ``perm`` order
    (outermost first)."""
    strides = [0] * len(shape)
    acc = 1
    for a in reversed(perm):
        strides[a] = acc
        acc *= shape[a]
    return tuple(strides)


def _stride_order(shape, strides, axes) -> list[int]:
    """``axes`` sorted outermost → innermost by stride (size-1 axes first, stable)."""
    return sorted(axes, key=lambda a: (shape[a] != 1, -abs(strides[a])))


def _nest(shape, strides, order) -> tuple[tuple[int, ...], int] | None:
    """(embed, stride) for the transformed axes ``order`` of one array, or None if impossible.

    Length-1 axes take whatever stride fits (``_stride_order`` puts them outermost, except the
    halved axis of a real transform, which stays innermost).
    """
    inner = order[-1]
    stride = strides[inner] if shape[inner] > 1 else 1
    if stride <= 0:
        return None
    embed = [0] * len(order)
    embed[0] = shape[order[0]]
    acc = stride
    for i in range(len(order) - 1, 0, -1):
        outer = order[i - 1]
        if shape[outer] == 1:
            embed[i] = shape[order[i]]
            acc *= embed[i]
            continue
        s = strides[outer]
        if s <= 0 or s % acc or s // acc < shape[order[i]]:
            return None
        embed[i] = s // acc
        acc = s
    return tuple(embed), stride


def _collapse_batch(shape, strides, batch_order) -> tuple[int, int] | None:
    """(batch count, dist) when the batch axes form one evenly strided dimension, else None."""
    axes = [a for a in batch_order if shape[a] > 1]
    if not axes:
        return 1, None
    count = 1
    for outer, inner in zip(axes, axes[1:]):
        if strides[outer] != strides[inner] * shape[inner]:
            return None
    for a in axes:
        count *= shape[a]
    dist = strides[axes[-1]]
    if dist <= 0:
        return None
    return count, dist


def _overlaps(shape, strides) -> bool:
    """True if two different indices may address the same element (sufficient check)."""
    dims = sorted((abs(s), n) for s, n in zip(strides, shape) if n > 1)
    extent = 1
    for s, n in dims:
        if s < extent:
            return True
        extent = s * (n - 1) + extent
    return False


def supported_order(shape, strides, axes, fft_type: str) -> tuple[int, ...]:
    """An axis order (outermost first) in which a dense copy is always expressible: the batch
    axes outermost, then the transformed ones (the halved axis innermost for R2C/C2R), each
    group in the operand's own stride order (so the copy reads it as sequentially as it can)."""
    batch = _stride_order(shape, strides, [a for a in range(len(shape)) if a not in axes])
    if fft_type in ("R2C", "C2R"):
        inner = _stride_order(shape, strides, axes[:-1]) + [axes[-1]]
    else:
        inner = _stride_order(shape, strides, axes)
    return tuple(batch) + tuple(inner)


def _unsupported(ndim, axes, fft_type, why) -> UnsupportedLayoutError:
    """The error, with nvmath-python's attributes: ``permutation`` (apply to the operand, and
    copy) and ``axes`` (the transformed axes of the permuted copy); ``message``."""
    batch = [a for a in range(ndim) if a not in axes]
    perm = tuple(batch) + tuple(axes)
    k = len(axes)
    new_axes = tuple(range(ndim - k, ndim))
    msg = (f"the operand layout cannot be expressed for cuFFT ({why}); copy the operand with "
           f"the axes permuted to {perm} (e.g. x.transpose({perm}).copy()) and transform "
           f"axes {new_axes}")
    err = UnsupportedLayoutError(msg, permutation=perm)
    err.axes, err.message = new_axes, msg
    return err


def plan_layouts(shape, strides, axes, fft_type: str, out_shape, *, inplace: bool,
                 result_layout: str, out_strides=None) -> LayoutPlan:
    """Plan cuFFT's view of input and output; raise :class:`UnsupportedLayoutError` if none.

    ``out_strides`` fixes the output layout (in-place); otherwise a dense result is laid out
    per ``result_layout``.
    """
    ndim = len(shape)
    halved = fft_type in ("R2C", "C2R")
    if any(s <= 0 for s, n in zip(strides, shape) if n > 1) or _overlaps(shape, strides):
        raise _unsupported(ndim, axes, fft_type, "negative, zero or overlapping strides")
    if halved:
        order = _stride_order(shape, strides, axes[:-1]) + [axes[-1]]
    else:
        order = _stride_order(shape, strides, axes)
    batch_order = _stride_order(shape, strides, [a for a in range(ndim) if a not in axes])
    in_shape_log = list(shape)
    nest = _nest(in_shape_log, strides, order)
    if nest is None:
        why = ("the halved axis axes[-1] must have the smallest stride of the transformed "
               "axes" if halved else "the transformed axes do not nest")
        raise _unsupported(ndim, axes, fft_type, why)
    coll = _collapse_batch(shape, strides, batch_order)
    if coll is None:
        raise _unsupported(ndim, axes, fft_type, "the batch axes do not form one strided "
                                                 "dimension")
    batch, idist = coll
    if out_strides is None:
        out_perm = _result_perm(shape, strides, axes, fft_type, result_layout)
        out_strides = dense_strides(out_shape, out_perm)
        if not _expressible(out_shape, out_strides, order, batch_order):
            out_perm = tuple(batch_order) + tuple(order)
            out_strides = dense_strides(out_shape, out_perm)
    else:
        out_perm = tuple(_stride_order(out_shape, out_strides, range(ndim)))
    onest = _nest(out_shape, out_strides, order)
    ocoll = _collapse_batch(out_shape, out_strides, batch_order)
    if onest is None or ocoll is None:
        raise _unsupported(ndim, axes, fft_type, "the result layout cannot be expressed")
    odist = ocoll[1]
    span_in = _span(shape, strides)
    span_out = _span(out_shape, out_strides)
    n = []
    for a in order:
        n.append(out_shape[a] if fft_type == "C2R" and a == axes[-1] else shape[a])
    return LayoutPlan(
        order=tuple(order), n=tuple(n), batch=batch, batch_axes=tuple(batch_order),
        inp=CufftLayout(nest[0], nest[1], idist if idist is not None else span_in),
        out=CufftLayout(onest[0], onest[1], odist if odist is not None else span_out),
        out_perm=tuple(out_perm), out_strides=tuple(out_strides))


def _span(shape, strides) -> int:
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides) if n > 1)


def _expressible(shape, strides, order, batch_order) -> bool:
    return (_nest(shape, strides, order) is not None
            and _collapse_batch(shape, strides, batch_order) is not None)


def result_perm(shape, strides, axes, fft_type: str, result_layout: str) -> tuple[int, ...]:
    """The axis order (outermost first) of a dense result as nvmath-python lays it out:
    ``'natural'`` keeps the operand's order in memory; ``'optimized'`` puts the transformed
    axes innermost (the same order unless batch and transformed axes interleave)."""
    return _result_perm(shape, strides, axes, fft_type, result_layout)


def _memory_order(shape, strides, axes) -> list[int]:
    """``axes`` outermost → innermost in the operand's memory, as nvmath-python orders them:
    by stride, then by extent (so a size-1 axis sits where a fresh C-order array of the
    same shape has it), equal keys keeping their order innermost-first."""
    inner_first = sorted(axes, key=lambda a: (abs(strides[a]), shape[a]))
    return inner_first[::-1]


def _result_perm(shape, strides, axes, fft_type, result_layout):
    """The result's axis order (outermost first): ``'natural'`` the operand's memory order;
    ``'optimized'`` the batch axes, then the transformed ones (the halved axis of a real
    transform innermost), each group in memory order."""
    ndim = len(shape)
    if result_layout == "natural":
        return tuple(_memory_order(shape, strides, range(ndim)))
    batch = _memory_order(shape, strides, [a for a in range(ndim) if a not in axes])
    if fft_type in ("R2C", "C2R"):
        inner = _memory_order(shape, strides, axes[:-1]) + [axes[-1]]
    else:
        inner = _memory_order(shape, strides, axes)
    return tuple(batch) + tuple(inner)
