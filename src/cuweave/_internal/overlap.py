"""Self-overlap of strided layouts: do two index tuples of one array address one element?

A written operand (an in-place FFT, a matmul result) must not alias itself: a zero stride on an
extent > 1 (``np.broadcast_to``), or strides that make two index tuples hit one address
(``as_strided`` views), give undefined results. :func:`has_self_overlap` decides it exactly in
the common cases in microseconds and, for the rest, enumerates the addresses (bounded work); a
layout too large to enumerate that no cheap rule settles counts as overlapping (refusing a
write is the safe side). :func:`check_no_self_overlap` raises the typed error naming the
parameter.
"""

from __future__ import annotations

import numpy as np

from .errors import InvalidOperandError

__all__ = ["has_self_overlap", "check_no_self_overlap", "check_inplace_target",
           "ENUMERATION_LIMIT"]

#: Largest number of elements whose addresses the exact fallback enumerates (8 bytes each).
ENUMERATION_LIMIT = 1 << 22


def _dims(shape, strides) -> list[tuple[int, int]]:
    """(|stride|, extent) of the axes with extent > 1, innermost (smallest stride) first."""
    return sorted((abs(int(s)), int(n)) for n, s in zip(shape, strides) if n > 1)


def has_self_overlap(shape, strides) -> bool:
    """True when two different index tuples of ``shape`` address one element.

    ``strides`` are in elements (any sign: a negative stride mirrors an axis, which does not
    change whether addresses collide). Empty arrays never overlap.

    >>> has_self_overlap((4, 3), (3, 1))      # C order
    False
    >>> has_self_overlap((4, 3), (0, 1))      # a broadcast row
    True
    >>> has_self_overlap((4, 3), (1, 1))      # a sliding window
    True
    >>> has_self_overlap((3, 3), (3, 2))      # interleaved, yet every address distinct
    False
    """
    if any(int(n) == 0 for n in shape):
        return False
    dims = _dims(shape, strides)
    if not dims:
        return False
    if dims[0][0] == 0:
        return True  # a zero stride on an extent > 1
    extent = 1  # exact "no": each stride steps past everything the inner axes span
    for s, n in dims:
        if s < extent:
            break
        extent += s * (n - 1)
    else:
        return False
    for i, (si, ni) in enumerate(dims):  # exact "yes": s_j = k * s_i with k < n_i
        for sj, _ in dims[i + 1:]:
            if sj % si == 0 and sj // si < ni:
                return True
    size = 1
    for _, n in dims:
        size *= n
    if size > ENUMERATION_LIMIT:
        return True  # undecided cheaply: count it as overlapping (the safe side)
    offsets = np.zeros(1, dtype=np.int64)
    for s, n in dims:
        offsets = (offsets[None, :] + s * np.arange(n, dtype=np.int64)[:, None]).ravel()
    offsets.sort()
    return bool((offsets[1:] == offsets[:-1]).any())


def check_no_self_overlap(op, name: str, lead: str = "") -> None:
    """Raise :class:`InvalidOperandError` (a ``ValueError``) naming ``name`` when the elements
    of ``op`` (an :class:`~cuweave._internal.arrays.Operand`, or anything with ``shape`` and
    element ``strides``) alias each other.

    >>> import numpy as np
    >>> from cuweave._internal.packages import wrap_operand
    >>> x = np.lib.stride_tricks.as_strided(np.zeros(4), shape=(3, 2), strides=(8, 8))
    >>> check_no_self_overlap(wrap_operand(x, "out"), "out")
    Traceback (most recent call last):
    ...
    cuweave._internal.errors.InvalidOperandError: out must not overlap itself ...
    """
    if has_self_overlap(op.shape, op.strides):
        raise InvalidOperandError(
            f"{lead}{name} must not overlap itself (every element at its own address) to be "
            f"written, got shape {tuple(op.shape)!r} with element strides "
            f"{tuple(op.strides)!r}; pass a copy (e.g. x.copy())")


def check_inplace_target(op, name: str, overlap_lead: str = "") -> None:
    """``op``, the target of an in-place result (matmul's ``c``, an in-place FFT's operand):
    writable (not an immutable package's array, not a read-only NumPy array) and no two of its
    elements at one address. Checked before any work: a write must never land outside the
    target's own elements, nor in memory its owner declared read-only. ``overlap_lead`` starts
    the self-overlap error (an engine's own phrase for it)."""
    from .packages import adapter

    if not adapter(op.package).writable:
        raise InvalidOperandError(
            f"{name} must be writable for inplace=True (the result is written into it), got an "
            f"immutable {op.package} array; use inplace=False")
    check_no_self_overlap(op, name, overlap_lead)
    if getattr(op, "conj", False):  # torch's lazy conjugation: memory holds the conjugates
        raise InvalidOperandError(
            f"{name} must not carry torch's lazy conjugation bit to be written in place (the "
            "result would be stored conjugated, or not at all), got a conjugated view; pass "
            f"{name}.resolve_conj() or use inplace=False")
    if getattr(op, "readonly", False):  # the producer declared its memory read-only
        raise InvalidOperandError(
            f"{name} must be writable for inplace=True (the result is written into it), got "
            "memory its producer exports as read-only (DLPack's READ_ONLY flag or the CUDA "
            "array interface's read-only bit); pass a writable copy or use inplace=False")
    flags = getattr(op.obj, "flags", None)  # NumPy's (host) arrays
    if flags is not None and getattr(flags, "writeable", True) is False:
        raise InvalidOperandError(
            f"{name} must be writable for inplace=True (the result is written into it), got a "
            "read-only array (np.broadcast_to views and frozen arrays are read-only; pass a "
            "copy or use inplace=False)")
