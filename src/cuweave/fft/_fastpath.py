"""Hot-path helpers built once per FFT object: current-stream getters, output allocators and
cheap metadata keys for torch/CuPy device tensors (no full operand wrapping per call).

Everything here is resolved at plan time into C-level callables where possible
(``functools.partial`` of torch's own functions, ``operator.attrgetter``), so a call adds no
Python frame of ours and no keyword dict building.
"""

from __future__ import annotations

import operator
import sys
from functools import partial

from .._internal.dtypes import numpy_dtype
from ._options import callback_key

__all__ = ["stream_getter", "output_allocator", "fast_key", "callback_fast_key", "FastOutput",
           "TORCH_DEVICE_TYPE"]

#: Device type of the tensors the torch allocator makes (the CPU-only tests set ``"cpu"``).
TORCH_DEVICE_TYPE = "cuda"


def stream_getter(package: str, device_id: int):
    """A no-argument callable returning the package's current stream handle, or ``None``."""
    if package == "torch":
        torch = sys.modules["torch"]
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is not None:
            return partial(raw, device_id)
        return lambda: torch.cuda.current_stream(device_id).cuda_stream
    if package == "cupy" and device_id == 0:
        cupy = sys.modules["cupy"]
        return lambda: cupy.cuda.get_current_stream().ptr
    return None


class FastOutput:
    """Allocates a result on the current stream (the package's caching allocator).

    ``new()`` returns the dense allocation (axes in memory order), ``ptr_of(a)`` its address,
    ``inv`` the permutation giving the logical result (``None`` for the identity) and
    ``reorder(a, inv)`` applies it. Calling the object returns ``(result, ptr)``.
    """

    __slots__ = ("new", "ptr_of", "inv", "reorder")

    def __init__(self, new, ptr_of, inv, reorder):
        self.new, self.ptr_of, self.inv, self.reorder = new, ptr_of, inv, reorder

    def __call__(self):
        a = self.new()
        ptr = self.ptr_of(a)
        return (a if self.inv is None else self.reorder(a, self.inv)), ptr


def output_allocator(package: str, device_id: int, shape, dtype: str, perm):
    """A :class:`FastOutput` for ``shape``/``dtype`` laid out in ``perm`` order, or ``None``."""
    alloc_shape = tuple(shape[p] for p in perm)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    inv = None if inv == list(range(len(inv))) else tuple(inv)
    if package == "torch":
        torch = sys.modules["torch"]
        # torch parses sizes passed as separate ints faster than one tuple
        new = partial(torch.empty, *alloc_shape, dtype=getattr(torch, dtype),
                      device=torch.device(TORCH_DEVICE_TYPE, device_id))
        return FastOutput(new, torch.Tensor.data_ptr, inv, torch.Tensor.permute)
    if package == "cupy" and device_id == 0 and dtype != "complex32":
        cupy = sys.modules["cupy"]
        new = partial(cupy.empty, alloc_shape, dtype=numpy_dtype(dtype))
        return FastOutput(new, operator.attrgetter("data.ptr"), inv, cupy.ndarray.transpose)
    return None


def fast_key(x, axes, fft_type, direction, norm):
    """Plan-cache key of a function-form call on a torch/CuPy device array, else ``None``.

    Built straight from the array's attributes (no operand wrapping); element 0 names the
    package.
    """
    mod = type(x).__module__
    if mod.startswith("torch"):
        if getattr(x, "is_cuda", False) and not x.is_conj():
            return ("torch", x.dtype, x.shape, x.stride(), x.get_device(), axes, fft_type,
                    direction, norm)
        return None
    if mod.startswith("cupy") and hasattr(x, "data") and getattr(x, "device", None) is not None \
            and x.device.id == 0:
        return ("cupy", x.dtype, x.shape, x.strides, 0, axes, fft_type, direction, norm)
    return None


def callback_fast_key(c):
    """The part of a function-form key naming a callback as given, equal to
    :meth:`~cuweave.fft.DeviceCallable.key` for the same callback as a dict: equal keys mean
    the same validated callback, so a hit skips re-validating it. A dict with other entries or
    any other object gets a key of its own identity, which misses: the full path reports it."""
    if c is None:
        return None
    if type(c) is dict:
        if c.keys() <= _CALLBACK_KEYS:
            return callback_key(c.get("ltoir"), c.get("size"), c.get("data"), c.get("symbol"))
        return ("unknown", id(c))
    key = getattr(c, "key", None)
    return key() if callable(key) else ("unknown", id(c))


_CALLBACK_KEYS = frozenset(["ltoir", "size", "data", "symbol"])
