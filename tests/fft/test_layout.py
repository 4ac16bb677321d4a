"""cuFFT layout analysis: which strided layouts map onto cuFFT's advanced data layout."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cuweave._internal.errors import InvalidOperandError, UnsupportedLayoutError
from cuweave.fft._layout import c_strides, fft_lengths, normalize_axes, plan_layouts


def _elem_strides(x):
    return tuple(s // x.itemsize for s in x.strides)


def _address(idx, embed, stride, dist, b):
    """Element offset cuFFT computes for batch ``b`` and transform index ``idx``."""
    off = 0
    for i, v in enumerate(idx):
        off = off * (embed[i] if i else 1) + v
    return b * dist + off * stride


def _check_mapping(shape, strides, lay, logical_shape):
    """Every element of the operand is addressed exactly as cuFFT's formula says."""
    batch_axes = [a for a in lay.batch_axes if shape[a] > 1]
    bshape = [shape[a] for a in batch_axes]
    seen = set()
    for bidx in np.ndindex(*bshape) if bshape else [()]:
        b = 0
        for a, v in zip(batch_axes, bidx):
            b = b * shape[a] + v
        for tidx in np.ndindex(*[logical_shape[a] for a in lay.order]):
            full = [0] * len(shape)
            for a, v in zip(batch_axes, bidx):
                full[a] = v
            for a, v in zip(lay.order, tidx):
                full[a] = v
            want = sum(i * s for i, s in zip(full, strides))
            got = _address(tidx, lay.inp.embed, lay.inp.stride, lay.inp.dist, b)
            assert got == want
            seen.add(got)
    assert len(seen) == int(np.prod([logical_shape[a] for a in range(len(shape))]))


def test_normalize_axes():
    assert normalize_axes(None, 2) == (0, 1)
    assert normalize_axes((-1,), 3) == (2,)
    with pytest.raises(InvalidOperandError, match="axes must be in"):
        normalize_axes((3,), 3)
    with pytest.raises(InvalidOperandError, match="repeat"):
        normalize_axes((0, -2), 2)
    with pytest.raises(InvalidOperandError, match="between 1 and 3"):
        normalize_axes((0, 1, 2, 3), 4)
    with pytest.raises(InvalidOperandError, match="more than 3"):
        normalize_axes(None, 4)


def test_fft_lengths():
    assert fft_lengths((4, 10), (1,), "R2C", "even") == ((10,), (4, 6))
    assert fft_lengths((4, 6), (1,), "C2R", "even") == ((10,), (4, 10))
    assert fft_lengths((4, 6), (1,), "C2R", "odd") == ((11,), (4, 11))
    assert fft_lengths((4, 6), (0, 1), "C2C", "even") == ((4, 6), (4, 6))


LAYOUTS = {
    "C": lambda a: a,
    "F": np.asfortranarray,
    "T": lambda a: a.transpose(2, 0, 1),
    "sliced": lambda a: a[:, ::2, :],
    "padded": lambda a: np.zeros((a.shape[0], a.shape[1], a.shape[2] + 3), a.dtype)[..., :-3],
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("axes", [(2,), (1, 2), (0, 1, 2), (0,), (1,), (2, 0)])
def test_c2c_layouts_map_exactly(layout, axes):
    x = LAYOUTS[layout](np.zeros((3, 8, 5), np.complex64))
    shape, strides = x.shape, _elem_strides(x)
    try:
        lay = plan_layouts(shape, strides, axes, "C2C", shape, inplace=False,
                           result_layout="optimized")
    except UnsupportedLayoutError as e:
        # the suggested copy must be expressible
        perm = e.permutation
        y = np.ascontiguousarray(x.transpose(perm))
        k = len(axes)
        new_axes = tuple(range(3 - k, 3))
        plan_layouts(y.shape, _elem_strides(y), new_axes, "C2C", y.shape, inplace=False,
                     result_layout="optimized")
        return
    _check_mapping(shape, strides, lay, shape)


def test_unsupported_batch_layout_carries_permutation():
    x = np.zeros((4, 6, 5), np.complex64)  # transform the middle axis: batch axes 0 and 2
    with pytest.raises(UnsupportedLayoutError) as ei:
        plan_layouts(x.shape, _elem_strides(x), (1,), "C2C", x.shape, inplace=False,
                     result_layout="optimized")
    assert ei.value.permutation == (0, 2, 1)


def test_r2c_halved_axis_must_be_innermost():
    x = np.zeros((8, 6), np.float32)
    with pytest.raises(UnsupportedLayoutError):
        plan_layouts(x.shape, _elem_strides(x), (1, 0), "R2C", (5, 6), inplace=False,
                     result_layout="optimized")
    lay = plan_layouts(x.shape, _elem_strides(x), (0, 1), "R2C", (8, 4), inplace=False,
                       result_layout="optimized")
    assert lay.n == (8, 6) and lay.order == (0, 1)
    assert lay.out.embed == (8, 4) and lay.out.stride == 1


def test_natural_result_layout_keeps_axis_order():
    x = np.asfortranarray(np.zeros((4, 8), np.complex64))
    lay = plan_layouts(x.shape, _elem_strides(x), (0,), "C2C", x.shape, inplace=False,
                       result_layout="natural")
    assert lay.out_strides == (1, 4)
    lay = plan_layouts(x.shape, _elem_strides(x), (1,), "C2C", x.shape, inplace=False,
                       result_layout="optimized")
    assert lay.out_strides == (8, 1)


def test_overlapping_strides_rejected():
    with pytest.raises(UnsupportedLayoutError):
        plan_layouts((4, 8), (1, 1), (1,), "C2C", (4, 8), inplace=False,
                     result_layout="optimized")


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       data=st.data())
def test_random_dense_permutations_map_or_suggest(shape, data):
    ndim = len(shape)
    perm = data.draw(st.permutations(range(ndim)))
    k = data.draw(st.integers(1, min(3, ndim)))
    axes = tuple(data.draw(st.permutations(range(ndim)))[:k])
    x = np.zeros(shape, np.complex64).transpose(perm)
    shape_t, strides = x.shape, _elem_strides(x)
    try:
        lay = plan_layouts(shape_t, strides, axes, "C2C", shape_t, inplace=False,
                           result_layout="optimized")
    except UnsupportedLayoutError as e:
        y = np.ascontiguousarray(x.transpose(e.permutation))
        plan_layouts(y.shape, c_strides(y.shape), tuple(range(ndim - k, ndim)), "C2C",
                     y.shape, inplace=False, result_layout="optimized")
        return
    _check_mapping(shape_t, strides, lay, shape_t)
