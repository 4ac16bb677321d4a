"""nvmath-python's ``nvmath.device.common`` names: the opaque-tensor functions used inside
kernels (``make_tensor``, ``copy``, ``copy_fragment``, ``clear``, ``axpby``, ``copy_wait``,
``make_fragment_like``) and :class:`~cuweave.device.Layout`.

The functions live with numba (imported on first use of a name, not with this module)."""

from __future__ import annotations

from .matmul import Layout

_NUMBA_NAMES = {"make_tensor": "_blas_numba", "copy": "_blas_numba",
                "copy_fragment": "_blas_numba", "clear": "_blas_numba", "axpby": "_blas_numba",
                "copy_wait": "_blas_numba", "OpaqueTensor": "_blas_numba",
                "make_fragment_like": "_blas_fragments"}
__all__ = ["Layout", *_NUMBA_NAMES]


def __getattr__(name):
    if name in _NUMBA_NAMES:
        import importlib

        module = importlib.import_module(f".{_NUMBA_NAMES[name]}", __package__)
        value = getattr(module, "OpaqueTensorType" if name == "OpaqueTensor" else name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
