"""Symmetric-memory helpers. On CPU ranks every process's memory is its own: these allocate
and release ordinary host arrays, so programs written for the GPU's symmetric heap run."""

from __future__ import annotations

import numpy as np

from .._internal.errors import InvalidOperandError, InvalidOptionError
from ._errors import UnsupportedMemorySpaceError
from ._runtime import require_context

__all__ = ["allocate_symmetric_memory", "free_symmetric_memory"]


def _package_name(package) -> str:
    name = getattr(package, "__name__", package)
    if name not in ("numpy", "torch", "cupy"):
        raise InvalidOptionError(
            f"package must be the numpy, cupy or torch module, got {package!r}")
    return name


def allocate_symmetric_memory(shape, package, *, dtype=None, axis_order="C", device_id=None,
                              make_symmetric=False, skip_symmetric_check=False, stream=None,
                              memory_space=None):
    """An uninitialized array of ``shape`` (collective on the GPU; local on CPU ranks).

    Parameters
    ----------
    shape : int or sequence of int
    package : module
        ``numpy`` (or ``torch`` with ``memory_space="cpu"``). GPU packages raise
        :class:`~cuweave.distributed.UnsupportedMemorySpaceError` in this build.
    dtype : optional
        Default float64.
    axis_order : {'C', 'F'}
    memory_space : {'cpu', 'cuda'}, optional
        EXT: where the array lives (default: ``'cpu'`` for NumPy, ``'cuda'`` otherwise).

    Examples
    --------
    >>> import numpy as np, cuweave.distributed as dist  # doctest: +SKIP
    >>> a = dist.allocate_symmetric_memory((4, 8), np, dtype=np.complex64)  # doctest: +SKIP
    """
    require_context()
    name = _package_name(package)
    if axis_order not in ("C", "F"):
        raise InvalidOptionError(f"axis_order must be 'C' or 'F', got {axis_order!r}")
    space = memory_space or ("cpu" if name == "numpy" else "cuda")
    if space not in ("cpu", "cuda"):
        raise InvalidOptionError(f"memory_space must be 'cpu' or 'cuda', got {memory_space!r}")
    if space == "cuda" or name == "cupy":
        raise UnsupportedMemorySpaceError(
            "allocate_symmetric_memory: GPU symmetric memory (NVSHMEM) is not supported by "
            "cuweave.distributed yet; allocate host arrays (package=numpy)")
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if name == "torch":
        import torch

        t = torch.empty(shape, dtype=dtype or torch.float64)
        return t if axis_order == "C" else t.T.contiguous().T
    return np.empty(shape, dtype=dtype or np.float64, order=axis_order)


def free_symmetric_memory(*tensors) -> None:
    """Release arrays from :func:`allocate_symmetric_memory` (host arrays: nothing to do)."""
    require_context()
    from ._backend import memory_space

    for t in tensors:
        if memory_space(t) != "cpu":
            raise InvalidOperandError(
                "free_symmetric_memory: tensors must be host arrays from "
                f"allocate_symmetric_memory in this build, got {type(t).__name__} on the GPU")
