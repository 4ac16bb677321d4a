"""``nvmath.bindings.mathdx``'s version queries over NVIDIA's libmathdx
(``nvidia-libmathdx-cu13``), loaded on first call.

Examples
--------
>>> from cuweave.bindings import mathdx
>>> mathdx.get_version_ex() >= (0, 3, 2)  # doctest: +SKIP
True
"""

from __future__ import annotations

import ctypes

__all__ = ["get_version", "get_version_ex"]


def _library():
    from ..device._blas_mathdx import library

    return library()


def _check(status: int, function: str) -> None:
    if status != 0:
        from ..device._blas_mathdx import MathdxError, _last_error

        raise MathdxError(int(status), function, hint=_last_error() or None)


def get_version() -> int:
    """libmathdx's version as one integer (``major * 100 + minor * 10 + patch``-style, e.g.
    402 for 0.4.2)."""
    v = ctypes.c_int()
    _check(_library().mathdxGetVersion(ctypes.byref(v)), "mathdxGetVersion")
    return v.value


def get_version_ex() -> tuple[int, int, int]:
    """libmathdx's version as ``(major, minor, patch)``, e.g. ``(0, 4, 2)``."""
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    _check(_library().mathdxGetVersionEx(ctypes.byref(major), ctypes.byref(minor),
                                         ctypes.byref(patch)), "mathdxGetVersionEx")
    return major.value, minor.value, patch.value
