"""The CuPy adapter: CuPy arrays in, results from CuPy's pool on its per-device current stream."""

from __future__ import annotations

import sys

from .adapters import (
    Adapter,
    NamespaceArrayOps,
    _all_slices,
    _shape_perm,
    _slices_then_full,
    inverse_perm,
)
from .arrays import Operand, bytes_to_elems, dtype_name, new_operand
from .dtypes import NUMPY_NATIVE, numpy_dtype
from .memory import MemoryPointer
from .registry import ADAPTERS
from .streams import Stream

__all__ = ["CupyAdapter", "CUPY"]


class CupyAdapter(NamespaceArrayOps, Adapter):
    name = "cupy"
    device_memory = True
    block_ops = True
    owns_stream = True
    #: dtypes CuPy arrays hold (others come back as DeviceArray)
    DTYPES = frozenset(NUMPY_NATIVE) - {"bool"}

    @staticmethod
    def _cupy():
        return sys.modules["cupy"]

    @property
    def xp(self):
        """The cupy module (for :class:`NamespaceArrayOps`)."""
        return sys.modules["cupy"]

    def memory_of(self, x) -> str:
        return "cuda"

    def wrap(self, x, name: str) -> Operand:
        return new_operand(x, "cupy", x.data.ptr, x.shape,
                           bytes_to_elems(x.strides, x.itemsize, name), dtype_name(x.dtype),
                           "cuda", x.device.id)

    def probe(self, x):
        return ("cupy", x.dtype, x.shape, x.strides, x.device.id), x.data.ptr

    def stream_getter(self, device_id: int):
        cupy = self._cupy()
        get, dev = cupy.cuda.get_current_stream, cupy.cuda.Device(device_id)
        current_device = cupy.cuda.runtime.getDevice

        def current():  # CuPy's current stream is per device: ``device_id``'s, made current
            if current_device() == device_id:  # only when it is not (~1 µs)
                return get().ptr
            with dev:
                return get().ptr

        return current

    def current_stream(self, device_id: int) -> Stream:
        cupy = self._cupy()
        with cupy.cuda.Device(device_id):
            s = cupy.cuda.get_current_stream()
        return Stream(s.ptr, s)

    def stream_of(self, obj) -> Stream | None:
        if hasattr(obj, "ptr"):
            return Stream(obj.ptr, obj)
        return None

    def stream_context(self, stream: int, device_id: int):
        cupy = self._cupy()
        with cupy.cuda.Device(device_id):
            if cupy.cuda.get_current_stream().ptr == stream:
                return None
            if not stream:
                return cupy.cuda.Stream.null
            # CuPy 14 deprecates ExternalStream for Stream.from_external (the CUDA stream
            # protocol; it asks the driver for the stream's device)
            from_external = getattr(cupy.cuda.Stream, "from_external", None)
            if from_external is None:
                return cupy.cuda.ExternalStream(stream, device_id)
            return from_external(_StreamHandle(stream))

    def allocate_bytes(self, nbytes, device_id, stream) -> MemoryPointer:
        mem = self.on_stream(stream, device_id, self._cupy().cuda.alloc, nbytes)
        ptr = MemoryPointer(mem.ptr, nbytes)
        ptr._owner = mem
        return ptr

    def empty(self, shape, dtype, perm, *, device_id, stream=0, allocator=None) -> Operand:
        if device_id is None or dtype not in self.DTYPES:
            return super().empty(shape, dtype, perm, device_id=device_id, stream=stream,
                                 allocator=allocator)
        cupy = self._cupy()
        alloc_shape = tuple(shape[p] for p in perm)
        with cupy.cuda.Device(device_id):
            x = self.on_stream(stream, device_id, cupy.empty, alloc_shape,
                               dtype=numpy_dtype(dtype)).transpose(inverse_perm(perm))
        return self.wrap(x, "result")

    def result_allocator(self, shape, dtype, perm, device_id):
        generic = super().result_allocator(shape, dtype, perm, device_id)
        if dtype not in self.DTYPES:
            return generic
        cupy = self._cupy()
        dev, np_dtype, new = cupy.cuda.Device(device_id), numpy_dtype(dtype), cupy.empty
        current_device = cupy.cuda.runtime.getDevice
        shape, perm = _shape_perm(shape, perm)
        alloc_shape = tuple(shape[p] for p in perm)
        inv = inverse_perm(perm)
        same = inv == tuple(range(len(inv)))

        def alloc(stream, foreign=False):
            if foreign:
                return generic(stream)
            if current_device() == device_id:  # CuPy allocates on the current device
                x = new(alloc_shape, np_dtype)
            else:
                with dev:
                    x = new(alloc_shape, np_dtype)
            return (x if same else x.transpose(inv)), x.data.ptr

        return alloc

    def on_stream(self, stream: int, device_id: int, fn, *args, **kwargs):
        with self._cupy().cuda.Device(device_id):  # CuPy works on the current device
            return super().on_stream(stream, device_id, fn, *args, **kwargs)

    def dense_copy(self, obj, shape, order, stream, device_id):
        def copy():
            cupy = self._cupy()
            x = cupy.broadcast_to(obj, tuple(shape))
            if order == "F":
                return cupy.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
            return cupy.ascontiguousarray(x)

        return self.on_stream(stream, device_id, copy)

    def broadcast_into(self, dst, src, shape, stream, device_id) -> None:
        def copy():
            dst[...] = self._cupy().broadcast_to(src, shape)

        self.on_stream(stream, device_id, copy)

    def scale_(self, obj, scale, stream, device_id) -> None:
        def scale_in_place():
            obj.__imul__(scale)

        self.on_stream(stream, device_id, scale_in_place)

    # ---- blocks (see Adapter): CuPy works on the current device (the caller's device_scope)
    def device_of(self, x):
        return x.device.id

    def device_count(self) -> int:
        try:
            return self._cupy().cuda.runtime.getDeviceCount()
        except Exception:  # CUDARuntimeError without a driver or device
            return 0

    def device_scope(self, device_id: int):
        return self._cupy().cuda.Device(device_id)

    def new_array(self, shape, dtype, device_id, *, order="C", zeros=False):
        cupy = self._cupy()
        with cupy.cuda.Device(device_id):
            return (cupy.zeros if zeros else cupy.empty)(tuple(shape), dtype=dtype, order=order)

    def block_index(self, idx, like) -> tuple:
        cupy = self._cupy()
        with cupy.cuda.Device(like.device.id):
            return tuple(i if isinstance(i, slice) else cupy.asarray(i) for i in idx)

    def take(self, x, idx):
        cupy = self._cupy()
        y = x[_slices_then_full(idx)]
        for axis, i in enumerate(idx):
            if not isinstance(i, slice):
                y = cupy.take(y, i, axis=axis)
        return cupy.ascontiguousarray(y)

    def region(self, out, idx):
        v = out[idx] if _all_slices(idx) else None
        return v if v is not None and v.flags.c_contiguous else None

    def put(self, out, idx, block) -> None:
        if _all_slices(idx):
            out[idx] = block
            return
        cupy = self._cupy()
        out[cupy.ix_(*[cupy.arange(i.start, i.stop) if isinstance(i, slice) else i
                       for i in idx])] = block

    def pointer(self, x) -> int:
        return x.data.ptr

    def matrix_op(self, x, transpose: bool, conjugate: bool):
        if not transpose:
            return x
        return x.T.conj() if conjugate else x.T


CUPY = CupyAdapter()
# registered here, where the class is defined (``packages`` imports this module at its end)
ADAPTERS["cupy"] = CUPY


class _StreamHandle:
    """A raw ``cudaStream_t`` under the CUDA stream protocol (``__cuda_stream__``)."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)
