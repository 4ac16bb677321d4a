"""Host helpers for :mod:`cuweave.device.random`: Sobol direction vectors and scramble
constants, from cuRAND's host library (``libcurand``, the nvidia-curand wheel).

Examples
--------
>>> from cuweave.device import random_helpers as rh                   # doctest: +SKIP
>>> v = rh.get_direction_vectors32(rh.DirectionVectorSet.DIRECTION_VECTORS_32_JOEKUO6, 4)
>>> v.shape, v.dtype
((4, 32), dtype('uint32'))
"""

from __future__ import annotations

import ctypes
import enum
import functools

import numpy as np

from .._internal.errors import InvalidOptionError, LibraryError, LibraryNotFoundError

__all__ = ["DirectionVectorSet", "get_direction_vectors32", "get_direction_vectors64",
           "get_scramble_constants32", "get_scramble_constants64", "MAX_DIMENSIONS"]

MAX_DIMENSIONS = 20000  # cuRAND's JOEKUO6 sets


class DirectionVectorSet(enum.IntEnum):
    """``curandDirectionVectorSet_t`` values."""

    DIRECTION_VECTORS_32_JOEKUO6 = 101
    SCRAMBLED_DIRECTION_VECTORS_32_JOEKUO6 = 102
    DIRECTION_VECTORS_64_JOEKUO6 = 103
    SCRAMBLED_DIRECTION_VECTORS_64_JOEKUO6 = 104


class CurandError(LibraryError):
    """A cuRAND host call failed."""

    library = "cuRAND"


@functools.lru_cache(maxsize=1)
def libcurand() -> ctypes.CDLL:
    """The cuRAND host library (raises LibraryNotFoundError naming the extra)."""
    try:
        from cuda import pathfinder

        return ctypes.CDLL(pathfinder.load_nvidia_dynamic_lib("curand").abs_path)
    except Exception as e:  # not installed, or an older pathfinder
        try:
            return ctypes.CDLL("libcurand.so.10")
        except OSError:
            raise LibraryNotFoundError("nvidia-curand", "dx", str(e)) from e


def _check(status: int, function: str) -> None:
    if status != 0:
        raise CurandError(status, function)


def _count(n) -> int:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or not 1 <= n <= MAX_DIMENSIONS:
        raise InvalidOptionError(f"n must be an int in [1, {MAX_DIMENSIONS}], got {n!r}")
    return int(n)


def _table(getter: str, args, n: int, width: int, dtype) -> np.ndarray:
    ptr = ctypes.c_void_p()
    _check(getattr(libcurand(), getter)(ctypes.byref(ptr), *args), getter)
    count = n * width
    buf = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(ptr.value)
    return np.frombuffer(buf, dtype=dtype, count=count).reshape(n, width).copy() if width > 1 \
        else np.frombuffer(buf, dtype=dtype, count=count).copy()


def _vectors(bits: int, which, n) -> np.ndarray:
    which = DirectionVectorSet(which)
    if str(bits) not in which.name:
        raise InvalidOptionError(f"set must be a {bits}-bit DirectionVectorSet, got {which!r}")
    dtype = np.uint32 if bits == 32 else np.uint64
    return _table(f"curandGetDirectionVectors{bits}", (ctypes.c_int(which),), _count(n), bits,
                  dtype)


def get_direction_vectors32(set, n) -> np.ndarray:  # noqa: A002 - nvmath's name
    """``(n, 32)`` uint32 direction vectors of the first ``n`` dimensions of ``set``.

    Parameters
    ----------
    set : DirectionVectorSet or int
        cuRAND's ``curandDirectionVectorSet_t`` (a 32-bit set).
    n : int
        Number of dimensions (positive).

    Returns
    -------
    numpy.ndarray
    """
    return _vectors(32, set, n)


def get_direction_vectors64(set, n) -> np.ndarray:  # noqa: A002 - nvmath's name
    """``(n, 64)`` uint64 direction vectors of the first ``n`` dimensions of ``set``.

    Parameters
    ----------
    set : DirectionVectorSet or int
        cuRAND's ``curandDirectionVectorSet_t`` (a 64-bit set).
    n : int
        Number of dimensions (positive).

    Returns
    -------
    numpy.ndarray
    """
    return _vectors(64, set, n)


def get_scramble_constants32(n) -> np.ndarray:
    """``n`` uint32 scramble constants (one per dimension).

    Parameters
    ----------
    n : int
        Number of dimensions (positive).

    Returns
    -------
    numpy.ndarray
    """
    return _table("curandGetScrambleConstants32", (), _count(n), 1, np.uint32)


def get_scramble_constants64(n) -> np.ndarray:
    """``n`` uint64 scramble constants (one per dimension).

    Parameters
    ----------
    n : int
        Number of dimensions (positive).

    Returns
    -------
    numpy.ndarray
    """
    return _table("curandGetScrambleConstants64", (), _count(n), 1, np.uint64)
