"""Einstein-summation expressions: parsing, and binding to the operands' shapes.

An expression such as ``"ij,jk->ik"`` (explicit) or ``"ij,jk"`` (implicit: the output is the
labels that appear once, sorted) names each operand's modes by one character; ``...`` stands
for the remaining leading modes of an operand (aligned from the right across operands, as
NumPy broadcasts). A mode of extent 1 broadcasts against any extent. A label repeated within
one operand takes its diagonal (an addition: cuTENSOR has no repeated modes; the diagonal is a
strided view, no copy).

:func:`parse` reads the text (cached); :func:`bind` checks it against the shapes and gives
each mode an integer id (cuTENSOR's mode labels) and an extent.
"""

from __future__ import annotations

import functools
from collections import Counter

from .._internal.errors import InvalidOperandError

__all__ = ["parse", "bind", "Bound"]

_FORBIDDEN = frozenset(".->,")
_ELLIPSIS = "..."


def _term(text: str, where: str, expr: str) -> tuple:
    """One term's labels (``...`` as the ``Ellipsis`` object)."""
    text = text.strip()
    parts = text.split(_ELLIPSIS)
    if len(parts) > 2:
        raise InvalidOperandError(f"expr must have at most one '...' per term, got {expr!r} "
                                  f"({where} {text!r})")
    out = []
    for i, part in enumerate(parts):
        if i:
            out.append(Ellipsis)
        for ch in part:
            if ch.isspace() or ch in _FORBIDDEN:
                raise InvalidOperandError(
                    f"expr must name modes by single characters other than whitespace and "
                    f"'.', '-', '>', ',', got {expr!r} ({where} {text!r} holds {ch!r})")
            out.append(ch)
    return tuple(out)


@functools.lru_cache(maxsize=256)
def parse(expr, n_inputs: int) -> tuple:
    """``(inputs, output)`` of ``expr``: a tuple of label tuples, and a label tuple or ``None``
    (implicit form). ``n_inputs`` is the number of terms the caller needs (2 or 3)."""
    if not isinstance(expr, str):
        raise InvalidOperandError(f"expr must be an einsum expression string, got {expr!r}")
    if expr.count("->") > 1:
        raise InvalidOperandError(f"expr must contain at most one '->', got {expr!r}")
    lhs, arrow, rhs = expr.partition("->")
    terms = lhs.split(",")
    if len(terms) != n_inputs:
        kind = {2: "binary", 3: "ternary"}[n_inputs]
        raise InvalidOperandError(
            f"expr must have exactly {n_inputs} comma-separated input terms for a {kind} "
            f"contraction, got {len(terms)} in {expr!r}")
    inputs = tuple(_term(t, f"input {i}", expr) for i, t in enumerate(terms))
    output = _term(rhs, "output", expr) if arrow else None
    if output is not None:
        seen = Counter(x for x in output if x is not Ellipsis)
        twice = sorted(k for k, v in seen.items() if v > 1)
        if twice:
            raise InvalidOperandError(f"expr must name each output mode once, got {expr!r} "
                                      f"(repeated: {twice})")
        known = {x for t in inputs for x in t}
        extra = sorted(x for x in output if x is not Ellipsis and x not in known)
        if extra:
            raise InvalidOperandError(f"expr output modes must appear in an input, got {expr!r} "
                                      f"({extra} appear in no input)")
        if Ellipsis in output and not any(Ellipsis in t for t in inputs):
            raise InvalidOperandError(f"expr output may have '...' only where an input has "
                                      f"one, got {expr!r}")
    return inputs, output


class Bound:
    """An expression bound to shapes.

    Attributes
    ----------
    terms : tuple of tuples of int
        Each input's mode id per axis (repeats mean a diagonal).
    out : tuple of int
        The output's mode ids.
    extents : dict
        Mode id -> extent.
    labels : dict
        Mode id -> the user's label (generated ``...`` modes are named ``'...0'``, ...).
    """

    __slots__ = ("terms", "out", "extents", "labels")

    def __init__(self, terms, out, extents, labels):
        self.terms, self.out, self.extents, self.labels = terms, out, extents, labels

    @property
    def out_shape(self) -> tuple:
        return tuple(self.extents[m] for m in self.out)


def bind(parsed, shapes, names) -> Bound:
    """Check ``parsed`` (from :func:`parse`) against the input ``shapes`` and give each mode an
    id and an extent; ``names`` are the operands' parameter names for messages."""
    inputs, output = parsed
    ell = [0] * len(inputs)
    for i, (term, shape) in enumerate(zip(inputs, shapes)):
        named = len(term) - (Ellipsis in term)
        if (Ellipsis in term and named > len(shape)) or (Ellipsis not in term and
                                                        named != len(shape)):
            want = f"at least {named}" if Ellipsis in term else f"{named}"
            raise InvalidOperandError(
                f"{names[i]} must have {want} dimensions for the term "
                f"{_text(term)!r}, got shape {tuple(shape)}")
        ell[i] = len(shape) - named if Ellipsis in term else 0
    n_ell = max(ell)
    ids: dict = {}
    for term in inputs:
        for x in term:
            if x is not Ellipsis and x not in ids:
                ids[x] = len(ids)
    ell_ids = [len(ids) + k for k in range(n_ell)]  # right-aligned: the last is innermost
    labels = {v: k for k, v in ids.items()}
    labels.update({m: f"...{k}" for k, m in enumerate(ell_ids)})
    terms = []
    for term, n in zip(inputs, ell):
        modes = []
        for x in term:
            modes += ell_ids[n_ell - n:] if x is Ellipsis else [ids[x]]
        terms.append(tuple(modes))
    extents: dict = {}
    for i, (modes, shape) in enumerate(zip(terms, shapes)):
        own: dict = {}
        for m, n in zip(modes, shape):
            if m in own and own[m] != n:
                raise InvalidOperandError(
                    f"{names[i]} must have equal extents along its repeated mode "
                    f"{labels[m]!r} (its diagonal), got {own[m]} and {n}")
            own[m] = n
            known = extents.get(m)
            if known is None or known == 1:
                extents[m] = n
            elif n not in (1, known):
                raise InvalidOperandError(
                    f"{names[i]} must have extent {known} (or 1) along mode {labels[m]!r} as "
                    f"the operands before it, got {n} (shape {tuple(shape)})")
    if output is None:
        counts = Counter(m for t in terms for m in set(t) if m not in ell_ids)
        once = sorted((labels[m], m) for m, c in counts.items() if c == 1 and
                      sum(t.count(m) for t in terms) == 1)
        out = tuple(ell_ids) + tuple(m for _, m in once)
    else:
        out = []
        for x in output:
            out += ell_ids if x is Ellipsis else [ids[x]]
        out = tuple(out)
        widths = {n for t, n in zip(inputs, ell) if Ellipsis in t}
        if Ellipsis not in output and len(widths) > 1:
            raise InvalidOperandError(
                "expr must expand '...' to the same number of modes in every input when the "
                f"output has none, got {sorted(widths)}")
    return Bound(tuple(terms), out, extents, labels)


def _text(term) -> str:
    return "".join(_ELLIPSIS if x is Ellipsis else x for x in term)
