"""Element types of device kernels, as nvmath-python's ``nvmath.device`` names them.

``complex32``, ``complex64`` and ``complex128`` (complex numbers of float16/32/64 parts) and the
half-precision vectors ``half2`` and ``half4`` are host objects that a numba kernel accepts as
``dtype=`` of ``cuda.local.array``/``cuda.shared.array``: ``complex64``/``complex128`` are numba's
complex types there, ``complex32`` is ``cuweave.device.float16x2_type`` and ``half2``/``half4``
are ``float16x2_type``/``float16x4_type``. On the host, ``.dtype`` is the NumPy dtype with the
same memory layout (a structured dtype for the half-precision ones; NumPy has no complex32).

Importing this module registers the types with numba-cuda when it is installed.

Examples
--------
>>> from cuweave.device.types import complex64, half4
>>> complex64.real_dtype, complex64.dtype
(<class 'numpy.float32'>, dtype('complex64'))
>>> half4.dtype.itemsize
8
"""

from __future__ import annotations

import importlib.util

import numpy as np

__all__ = ["Complex", "Vector", "complex32", "complex64", "complex128", "half2", "half4",
           "np_float16x2", "np_float16x4", "REAL_NP_TYPES", "INT_NP_TYPES"]

np_float16x2 = np.dtype([("x", np.float16), ("y", np.float16)], align=True)
np_float16x4 = np.dtype([("x", np.float16), ("y", np.float16), ("z", np.float16),
                         ("w", np.float16)], align=True)
REAL_NP_TYPES = [np.float16, np.float32, np.float64]
INT_NP_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


class Complex:
    """A complex element type with ``real_dtype`` parts (float16, float32 or float64).

    Parameters
    ----------
    real_dtype : numpy.float16, numpy.float32 or numpy.float64
        The type of the real and imaginary parts.
    """

    def __init__(self, real_dtype):
        if real_dtype not in REAL_NP_TYPES:
            raise ValueError(f"real_dtype must be one of {REAL_NP_TYPES}, got {real_dtype!r}")
        self._real_dtype = real_dtype

    @property
    def real_dtype(self):
        """The NumPy type of the real and imaginary parts."""
        return self._real_dtype

    @property
    def dtype(self) -> np.dtype:
        """The host NumPy dtype with this layout."""
        if self._real_dtype is np.float16:
            return np_float16x2
        return np.dtype(np.complex64 if self._real_dtype is np.float32 else np.complex128)

    def numba_type(self):
        """The numba type of elements inside kernels (imports numba)."""
        if self._real_dtype is np.float16:
            from ._vector_types import float16x2_type

            return float16x2_type
        from numba.cuda import types

        return types.complex64 if self._real_dtype is np.float32 else types.complex128

    def __repr__(self):
        bits = 2 * np.dtype(self._real_dtype).itemsize * 8
        return f"complex{bits}"


class Vector:
    """A vector element type of ``size`` (2 or 4) ``real_dtype`` (float16) values.

    Parameters
    ----------
    real_dtype : numpy.float16
        The components' type.
    size : {2, 4}
        The number of components.
    """

    def __init__(self, real_dtype, size):
        if size not in (2, 4):
            raise ValueError(f"size must be 2 or 4, got {size!r}")
        if real_dtype is not np.float16:
            raise ValueError(f"real_dtype must be numpy.float16, got {real_dtype!r}")
        self._real_dtype, self._size = real_dtype, size

    @property
    def real_dtype(self):
        """The NumPy type of the components."""
        return self._real_dtype

    @property
    def size(self) -> int:
        """The number of components (2 or 4)."""
        return self._size

    @property
    def dtype(self) -> np.dtype:
        """The host NumPy (structured) dtype with this layout."""
        return np_float16x2 if self._size == 2 else np_float16x4

    def numba_type(self):
        """The numba type of elements inside kernels (imports numba)."""
        from ._vector_types import float16x2_type, float16x4_type

        return float16x2_type if self._size == 2 else float16x4_type

    def __repr__(self):
        return f"half{self._size}"


complex32 = Complex(np.float16)
complex64 = Complex(np.float32)
complex128 = Complex(np.float64)
half2 = Vector(np.float16, 2)
half4 = Vector(np.float16, 4)


def _numba_present() -> bool:
    try:
        return importlib.util.find_spec("numba.cuda") is not None
    except (ImportError, ValueError):
        return False


if _numba_present():
    from . import _vector_types

    _vector_types.register_element_types(Complex, Vector)
