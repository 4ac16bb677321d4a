"""CPU execution of a device operand (``execution="cpu"`` on a GPU array), as nvmath-python.

The operand is downloaded to the host through the shared pinned stager (its whole span, then
viewed with its own strides), transformed by the CPU plan, and the result uploaded into a new
array of the operand's package on its device, on the call's stream (in place: into the
operand itself, through a dense temporary where the operand is not dense).
"""

from __future__ import annotations

import numpy as np

from .._internal.dtypes import numpy_dtype
from .._internal.errors import UnsupportedLayoutError
from .._internal.packages import adapter, empty
from .._internal.staging import shared_stager

__all__ = ["check_writable", "download", "upload_result"]


def check_writable(op, inplace: bool) -> None:
    """An in-place result must be writable back into ``op`` (checked at plan time)."""
    if inplace and not op.is_dense() and not adapter(op.package).can_broadcast:
        raise UnsupportedLayoutError(
            f"operand must be dense to be transformed in place with CPU execution ({op.package} "
            f"device arrays are written back as one copy), got strides {op.strides!r}; "
            "pass a dense copy or use execution='cuda'")


def download(op, stream: int) -> np.ndarray:
    """A host copy of the device operand ``op`` with its own strides (synchronous)."""
    lo, hi = op.span()
    flat = np.empty(max(hi - lo, 1), dtype=numpy_dtype(op.dtype))
    shared_stager().download(op.ptr + lo * op.itemsize, flat, stream)
    return np.lib.stride_tricks.as_strided(
        flat[-lo:], shape=op.shape, strides=tuple(s * op.itemsize for s in op.strides))


def upload_result(op, res: np.ndarray, out_dtype: str, stream: int, *, inplace: bool,
                  allocator=None, perm=None):
    """``res`` on ``op``'s device: a new array of ``op``'s package (dense, its axes in
    ``perm`` order in memory, outermost first; ``None``: C order), or ``op`` itself."""
    if not inplace:
        out = empty(op, res.shape, out_dtype, perm=perm, stream=stream, allocator=allocator)
        src = res if perm is None else res.transpose(perm)
        shared_stager().upload(np.ascontiguousarray(src), out.ptr, stream)
        return out.obj
    if op.is_dense():  # in its own memory order, straight into the operand
        order = sorted(range(len(op.shape)), key=lambda a: (op.shape[a] != 1, -op.strides[a]))
        shared_stager().upload(np.ascontiguousarray(res.transpose(order)), op.ptr, stream)
        return op.obj
    tmp = empty(op, res.shape, out_dtype, stream=stream, allocator=allocator)
    shared_stager().upload(np.ascontiguousarray(res), tmp.ptr, stream)
    adapter(op.package).broadcast_into(op.obj, tmp.obj, op.shape, stream, op.device_id)
    return op.obj
