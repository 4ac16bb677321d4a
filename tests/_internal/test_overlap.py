"""Self-overlap detection (``cuweave._internal.overlap``) against brute force."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuweave._internal import overlap
from cuweave._internal.errors import InvalidOperandError
from cuweave._internal.overlap import check_no_self_overlap, has_self_overlap
from cuweave._internal.packages import wrap_operand


def brute_force(shape, strides) -> bool:
    seen = set()
    for idx in itertools.product(*(range(n) for n in shape)):
        addr = sum(i * s for i, s in zip(idx, strides))
        if addr in seen:
            return True
        seen.add(addr)
    return False


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(-12, 12)), min_size=0, max_size=4))
def test_matches_brute_force(dims):
    shape = tuple(n for n, _ in dims)
    strides = tuple(s for _, s in dims)
    assert has_self_overlap(shape, strides) == brute_force(shape, strides)


@pytest.mark.parametrize(("shape", "strides", "want"), [
    ((4, 3), (3, 1), False),
    ((4, 3), (1, 4), False),
    ((4, 3), (0, 1), True),
    ((1, 4), (0, 1), False),  # a zero stride on an extent of 1 aliases nothing
    ((5,), (0,), True),
    ((3, 3), (1, 1), True),
    ((3, 3), (3, 2), False),
    ((2, 2, 2), (4, 2, 1), False),
    ((2, 2, 2), (-4, 2, -1), False),
    ((4, 4), (2, 3), True),   # 2*3 == 3*2
    ((0, 3), (0, 0), False),  # empty
    ((), (), False),
])
def test_cases(shape, strides, want):
    assert has_self_overlap(shape, strides) is want


def test_too_large_to_enumerate_counts_as_overlap(monkeypatch):
    monkeypatch.setattr(overlap, "ENUMERATION_LIMIT", 8)
    assert has_self_overlap((3, 3), (3, 2))  # undecided by the cheap rules: the safe side
    assert not has_self_overlap((30, 30), (30, 1))  # the cheap rules still decide


def test_check_names_the_parameter():
    base = np.zeros(16)
    window = np.lib.stride_tricks.as_strided(base, shape=(4, 4), strides=(8, 8))
    with pytest.raises(InvalidOperandError, match=r"^operand must not overlap itself") as e:
        check_no_self_overlap(wrap_operand(window, "operand"), "operand")
    assert isinstance(e.value, ValueError)
    check_no_self_overlap(wrap_operand(base.reshape(4, 4).T, "operand"), "operand")
    bcast = np.broadcast_to(np.zeros(3), (5, 3))
    with pytest.raises(ValueError, match="c must not overlap itself"):
        check_no_self_overlap(wrap_operand(bcast, "c"), "c")


def test_docstring_examples():
    res = doctest.testmod(overlap, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
