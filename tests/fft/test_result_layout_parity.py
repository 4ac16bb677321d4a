"""Result strides as nvmath-python 1.0 gives them, size-1 axes included (issue 33 item 1).

Each row was observed side by side on an H100 (scripts/nvmath_parity.py, the FFT group;
benchmarks/results/nvmath_parity_fft.json): nvmath-python's result strides, in elements, for a
C-ordered torch operand, where cuweave's once differed. The strides follow the operand's memory
order by stride, then extent, so a size-1 axis sits where a fresh C-order array has it. The CPU
path lays results out by the same rule as the GPU path (fft._layout.result_perm).
"""

from __future__ import annotations

import numpy as np
import pytest

import cuweave.fft as F

#: (function, shape, dtype, axes, result_layout, nvmath-python's result strides in elements)
OBSERVED = [
    ("fft", (1, 1, 32, 32, 1), "complex64", [4], "natural", (1024, 1024, 32, 1, 1)),
    ("fft", (1, 1, 32, 32, 1), "complex64", [3, 4], "natural", (1024, 1024, 32, 1, 1)),
    ("fft", (1, 1, 32, 32, 1), "complex64", [3, 4], "optimized", (1024, 1024, 32, 1, 1)),
    ("fft", (1, 1, 32, 32, 1), "complex128", [4], "natural", (1024, 1024, 32, 1, 1)),
    ("fft", (1, 1, 32, 32, 1), "complex128", [3, 4], "natural", (1024, 1024, 32, 1, 1)),
    ("fft", (1, 1, 32, 32, 1), "complex128", [3, 4], "optimized", (1024, 1024, 32, 1, 1)),
    ("rfft", (1, 1, 32, 32, 1), "float32", [4], "natural", (1024, 1024, 32, 1, 1)),
    ("rfft", (1, 1, 32, 32, 1), "float32", [3, 4], "natural", (1024, 1024, 32, 1, 1)),
    ("fft", (32, 1, 16), "complex64", [2], "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex64", [1, 2], "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex64", None, "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex64", [2], "optimized", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex64", None, "optimized", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex128", [2], "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex128", [1, 2], "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex128", None, "natural", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex128", [2], "optimized", (16, 16, 1)),
    ("fft", (32, 1, 16), "complex128", None, "optimized", (16, 16, 1)),
    ("rfft", (32, 1, 16), "float32", [2], "natural", (9, 9, 1)),
    ("rfft", (32, 1, 16), "float32", [1, 2], "natural", (9, 9, 1)),
    ("rfft", (32, 1, 16), "float32", None, "natural", (9, 9, 1)),
    ("rfft", (32, 1, 16), "float32", [2], "optimized", (9, 9, 1)),
    ("rfft", (32, 1, 16), "float32", None, "optimized", (9, 9, 1)),
    ("fft", (4, 1, 1, 8), "complex64", [3], "natural", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex64", [2, 3], "natural", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex64", [3], "optimized", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex64", [2, 3], "optimized", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex128", [3], "natural", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex128", [2, 3], "natural", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex128", [3], "optimized", (8, 8, 8, 1)),
    ("fft", (4, 1, 1, 8), "complex128", [2, 3], "optimized", (8, 8, 8, 1)),
    ("rfft", (4, 1, 1, 8), "float32", [3], "natural", (5, 5, 5, 1)),
    ("rfft", (4, 1, 1, 8), "float32", [2, 3], "natural", (5, 5, 5, 1)),
    ("rfft", (4, 1, 1, 8), "float32", [3], "optimized", (5, 5, 5, 1)),
    ("rfft", (4, 1, 1, 8), "float32", [2, 3], "optimized", (5, 5, 5, 1)),
    ("fft", (8, 8, 1, 1), "complex64", [2, 3], "natural", (8, 1, 1, 1)),
    ("fft", (8, 8, 1, 1), "complex128", [2, 3], "natural", (8, 1, 1, 1)),
    ("rfft", (8, 8, 1, 1), "float32", [2, 3], "natural", (8, 1, 1, 1)),
]


@pytest.mark.parametrize("fn,shape,dtype,axes,layout,want", OBSERVED)
def test_result_strides_match_nvmath(fn, shape, dtype, axes, layout, want):
    x = np.ones(shape, dtype) if dtype.startswith("float") else np.ones(shape, dtype) * (1 + 1j)
    y = getattr(F, fn)(x, axes=axes, options={"result_layout": layout}, execution="cpu")
    assert tuple(s // y.itemsize for s in y.strides) == want
    ref = (np.fft.rfftn if fn == "rfft" else np.fft.fftn)(
        x.astype(np.complex128 if fn == "fft" else np.float64),
        axes=axes if axes is not None else None)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
