"""Symmetric-memory helpers. cuweave's data planes never need a symmetric heap (CPU ranks move
data with MPI, GPU ranks with NCCL point-to-point transfers between ordinary allocations): these
allocate and release ordinary arrays, host or device (the package's own pool, on this process's
device), so programs written for NVSHMEM's symmetric heap run unchanged."""

from __future__ import annotations

import numpy as np

from .._internal.errors import InvalidOptionError
from .._internal.packages import package_adapter
from ._runtime import require_context

__all__ = ["allocate_symmetric_memory", "free_symmetric_memory"]


def _package_adapter(package):
    ad = package_adapter(package)
    if ad is None:
        raise InvalidOptionError(
            f"package must be the numpy, cupy or torch module, got {package!r}")
    return ad


def allocate_symmetric_memory(shape, package, *, dtype=None, axis_order="C", device_id=None,
                              make_symmetric=False, skip_symmetric_check=False, stream=None,
                              memory_space=None):
    """An uninitialized array of ``shape`` (local: no process waits for another).

    Parameters
    ----------
    shape : int or sequence of int
    package : module
        ``numpy``, ``cupy`` or ``torch``.
    dtype : optional
        Default float64.
    axis_order : {'C', 'F'}
    device_id : int, optional
        GPU arrays: the device (default: the one given to
        :func:`~cuweave.distributed.initialize`).
    make_symmetric, skip_symmetric_check : bool
        Accepted for compatibility (no symmetric heap is involved).
    stream : optional
        Accepted for compatibility: GPU work runs on the package's current stream.
    memory_space : {'cpu', 'cuda'}, optional
        A cuweave extension: where the array lives (default: ``'cpu'`` for NumPy, ``'cuda'``
        otherwise).

    Examples
    --------
    >>> import numpy as np, cuweave.distributed as dist  # doctest: +SKIP
    >>> a = dist.allocate_symmetric_memory((4, 8), np, dtype=np.complex64)  # doctest: +SKIP
    """
    ctx = require_context()
    ad = _package_adapter(package)
    name, fixed = ad.name, ad.device_memory  # fixed: None where arrays live in either space
    if axis_order not in ("C", "F"):
        raise InvalidOptionError(f"axis_order must be 'C' or 'F', got {axis_order!r}")
    space = memory_space or ("cpu" if fixed is False else "cuda")
    if space not in ("cpu", "cuda"):
        raise InvalidOptionError(f"memory_space must be 'cpu' or 'cuda', got {memory_space!r}")
    if fixed is not None and (space == "cuda") != fixed:
        raise InvalidOptionError(
            f"memory_space must be {'cuda' if fixed else 'cpu'} for {name} arrays, got "
            f"{space!r}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
               for n in shape):
        raise InvalidOptionError(f"shape must be non-negative ints, got {shape!r}")
    shape = tuple(int(n) for n in shape)
    if space == "cuda":
        device = ctx.device_id if device_id is None else device_id
        if not isinstance(device, int) or isinstance(device, bool) or device < 0:
            raise InvalidOptionError(
                "device_id must be a non-negative int (or given to initialize) for GPU memory, "
                f"got {device!r}")
        from ._gpu import GPU

        return GPU.empty(shape, name, dtype, axis_order, device)
    return ad.new_array(shape, np.float64 if dtype is None else dtype, None, order=axis_order)


def free_symmetric_memory(*tensors) -> None:
    """Release arrays from :func:`allocate_symmetric_memory`: nothing to do (they are ordinary
    arrays, freed by their package when the last reference goes); the arguments are checked.

    Parameters
    ----------
    *tensors : arrays
        Arrays from :func:`allocate_symmetric_memory`.
    """
    require_context()
    from ._backend import memory_space

    for t in tensors:
        memory_space(t)  # raises InvalidOperandError for anything but an array
