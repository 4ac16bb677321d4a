"""Hot-path helpers built once per FFT object: current-stream getters, output allocators and
cheap metadata keys for torch/CuPy device tensors (no full operand wrapping per call)."""

from __future__ import annotations

import sys

from .._internal.dtypes import numpy_dtype

__all__ = ["stream_getter", "output_allocator", "fast_key"]


def stream_getter(package: str, device_id: int):
    """A no-argument callable returning the package's current stream handle, or ``None``."""
    if package == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return lambda: raw(device_id)
        return lambda: torch.cuda.current_stream(device_id).cuda_stream
    if package == "cupy" and device_id == 0:
        cupy = sys.modules["cupy"]
        return lambda: cupy.cuda.get_current_stream().ptr
    return None


def output_allocator(package: str, device_id: int, shape, dtype: str, perm):
    """A no-argument callable allocating the result on the current stream: ``(obj, ptr)``."""
    alloc_shape = tuple(shape[p] for p in perm)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    identity = list(inv) == list(range(len(inv)))
    if package == "torch":
        torch = sys.modules["torch"]
        tdt, dev, empty = getattr(torch, dtype), torch.device("cuda", device_id), torch.empty

        def alloc_torch():
            t = empty(alloc_shape, dtype=tdt, device=dev)
            return (t if identity else t.permute(inv)), t.data_ptr()

        return alloc_torch
    if package == "cupy" and device_id == 0 and dtype != "complex32":
        cupy = sys.modules["cupy"]
        ndt, empty = numpy_dtype(dtype), cupy.empty

        def alloc_cupy():
            x = empty(alloc_shape, dtype=ndt)
            return (x if identity else x.transpose(inv)), x.data.ptr

        return alloc_cupy
    return None


def fast_key(x):
    """Metadata key of a torch/CuPy device array (``None`` for anything else)."""
    mod = type(x).__module__
    if mod.startswith("torch") and getattr(x, "is_cuda", False) and not x.is_conj():
        return ("torch", x.dtype, x.shape, x.stride(), x.get_device())
    if mod.startswith("cupy") and hasattr(x, "data") and getattr(x, "device", None) is not None \
            and x.device.id == 0:
        return ("cupy", x.dtype, x.shape, x.strides, x.device.id)
    return None
