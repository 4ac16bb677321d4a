"""Error messages that start with nvmath-python 1.0's phrase (issue 33 items 3 and 6).

Each phrase is nvmath-python's own, as the side-by-side sweep on the GPU machine recorded it
(benchmarks/results/nvmath_parity_fft.json); cuweave keeps its fuller explanation after it.
The validation is the same on the CPU and the GPU, so these run on the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

import cuweave.fft as F
from cuweave.fft import FFTOptions

C64 = np.ones((8, 8), np.complex64)


def _overlapping():
    return as_strided(np.zeros(300, np.complex64), (16, 16), (64, 8))


CASES = [
    ("fft on real", F.fft, lambda: np.ones(8, np.float32), {}, ValueError,
     "This function expects complex operand, found float32"),
    ("ifft on real", F.ifft, lambda: np.ones(8, np.float64), {}, ValueError,
     "This function expects complex operand, found float64"),
    ("irfft on real", F.irfft, lambda: np.ones(8, np.float32), {}, ValueError,
     "This function expects complex operand, found float32"),
    ("rfft on complex", F.rfft, lambda: np.ones(8, np.complex64), {}, RuntimeError,
     "rfft expects a real input, but got complex64"),
    ("axes out of range", F.fft, lambda: C64, {"axes": [2]}, ValueError,
     "The specified FFT axes [2] are out of bounds for a 2-D tensor"),
    ("repeated axes", F.fft, lambda: C64, {"axes": [1, 1]}, ValueError,
     "The specified FFT axes = (1, 1) contains duplicate axis IDs, which is not supported"),
    ("4-D without axes", F.fft, lambda: np.ones((2, 2, 2, 2), np.complex64), {}, ValueError,
     "The tensor is 4-D and FFTs in number of dimensions > 3 is not supported"),
    ("empty irfft output", F.irfft, lambda: np.ones((8, 1), np.complex64), {}, ValueError,
     "The size of the last FFT axis in the result for FFT type 'C2R' is 0"),
    ("in place on overlapping memory", F.fft, _overlapping, {"options": {"inplace": True}},
     ValueError, "In-place transform is not supported because the tensor with shape (16, 16) "
     "and strides (8, 1) overlaps in memory"),
]


@pytest.mark.parametrize("name,fn,operand,kw,builtin,phrase", CASES, ids=[c[0] for c in CASES])
def test_message_starts_with_nvmath_phrase(name, fn, operand, kw, builtin, phrase):
    with pytest.raises(builtin) as info:
        fn(operand(), execution="cpu", **kw)
    assert str(info.value).startswith(phrase), str(info.value)


def test_bad_result_layout_phrase():
    with pytest.raises(ValueError) as info:
        FFTOptions(result_layout="x")
    assert str(info.value).startswith(
        "The value specified for 'result_layout' must be one of ['natural', 'optimized']")


def test_check_dtype_as_nvmath_takes_it():
    """``fft``/``ifft``/``rfft`` take nvmath-python 1.0's ``check_dtype`` (issue 33 item 5)."""
    x = np.random.default_rng(0).standard_normal(16)
    z = x.astype(np.complex128)
    # None: the operand's own type (a real operand gets the R2C transform)
    np.testing.assert_allclose(F.fft(x, check_dtype=None, execution="cpu"), np.fft.rfft(x))
    np.testing.assert_allclose(F.fft(z, check_dtype=None, execution="cpu"), np.fft.fft(z))
    np.testing.assert_allclose(F.rfft(z, check_dtype=None, execution="cpu"), np.fft.fft(z))
    np.testing.assert_allclose(F.fft(x, check_dtype="real", execution="cpu"), np.fft.rfft(x))
    with pytest.raises(ValueError, match="^This function expects real operand, found complex"):
        F.fft(z, check_dtype="real", execution="cpu")
    with pytest.raises(ValueError, match="^This function expects complex operand"):
        F.rfft(x, check_dtype="complex", execution="cpu")
    with pytest.raises(ValueError, match="check_dtype must be 'complex', 'real' or None"):
        F.ifft(z, check_dtype="yes", execution="cpu")
