"""Package-neutral records of arrays: :class:`Operand` (a user array described once) and
:class:`DeviceArray` (the result cuweave makes for producers other than torch and CuPy).

Which package an array comes from, and everything package-specific (wrapping, streams, pools),
lives in :mod:`cuweave._internal.packages`.
"""

from __future__ import annotations

import numpy as np

from . import dlpack as _dl
from . import memory as _memory
from .dtypes import ITEMSIZE, canonical_name, numpy_dtype
from .errors import InvalidOperandError
from .registry import adapter

__all__ = ["ALIGNMENT", "alignment", "Operand", "check_same_place", "DeviceArray", "c_strides",
           "new_operand", "bytes_to_elems", "dtype_name", "numpy_pointer"]

#: a device pointer's alignment in bytes as cuBLASLt/cuFFT see it, at most 256, read off its
#: low byte: ``ALIGNMENT[ptr & 255]`` (0, a pointer not bound yet, counts as 256)
ALIGNMENT = tuple(256 if v == 0 else v & -v for v in range(256))


def alignment(ptr: int) -> int:
    """:data:`ALIGNMENT` of ``ptr`` (hot paths index the table inline instead of calling)."""
    return ALIGNMENT[ptr & 255]


_EXPECTED = ("a NumPy or CuPy array, a torch tensor, or an object supporting __dlpack__ or "
             "__cuda_array_interface__")


class Operand:
    """A read-only description of a user array (strides in elements).

    ``package`` is one of ``"numpy"``, ``"cupy"``, ``"torch"``, ``"cai"`` (a
    ``__cuda_array_interface__`` producer), ``"dlpack"`` (another DLPack producer) or
    ``"cuweave"`` (a :class:`DeviceArray`). ``device`` is ``"cpu"`` or ``"cuda"``.
    ``conj`` is torch's lazy-conjugation bit: the logical values are the conjugates of memory.
    """

    __slots__ = ("obj", "package", "ptr", "shape", "strides", "dtype", "itemsize", "device",
                 "device_id", "conj", "keepalive", "readonly")

    def __init__(self, obj, package, ptr, shape, strides, dtype, device, device_id,
                 conj=False, keepalive=None):
        self.obj = obj
        self.package = package
        self.ptr = int(ptr)
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        self.dtype = dtype
        self.itemsize = ITEMSIZE[dtype]
        self.device = device
        self.device_id = device_id
        self.conj = conj
        self.keepalive = keepalive
        #: the producer declared the memory read-only (DLPack's READ_ONLY flag, the CUDA
        #: array interface's read-only bit): never an in-place target
        self.readonly = False

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def is_device(self) -> bool:
        return self.device == "cuda"

    @property
    def place(self) -> tuple:
        """``(device, device_id)``, comparable across operands."""
        return (self.device, self.device_id)

    def span(self) -> tuple[int, int]:
        """(lowest, highest+1) element offsets touched, relative to ``ptr``."""
        if self.size == 0:
            return (0, 0)
        lo = sum(s * (n - 1) for s, n in zip(self.strides, self.shape) if s < 0)
        hi = sum(s * (n - 1) for s, n in zip(self.strides, self.shape) if s > 0)
        return (lo, hi + 1)

    def is_dense(self) -> bool:
        """True when the elements fill ``[ptr, ptr + size*itemsize)`` exactly (any axis order)."""
        lo, hi = self.span()
        return lo == 0 and hi == self.size and len(set(
            s for s, n in zip(self.strides, self.shape) if n > 1)) == sum(
            1 for n in self.shape if n > 1)

    def host_array(self) -> np.ndarray:
        """Zero-copy NumPy view of a host operand (bfloat16/fp8 as ``numpy_dtype(dtype)``)."""
        if self.device != "cpu":
            raise InvalidOperandError(f"host_array needs a host operand, got one on {self.device}")
        if isinstance(self.obj, np.ndarray):
            return self.obj
        return adapter(self.package).host_array(self)

    def memory_view(self) -> np.ndarray:
        """NumPy view of the host memory at ``ptr`` with this operand's layout (no owner: the
        operand's object must outlive it)."""
        # the buffer covers every byte the operand touches, from its lowest address; the view
        # starts at the first element (``ptr``), which negative strides put above that address
        lo, _ = self.span()
        buffer = (np.ctypeslib.ctypes.c_char * max(self._nbytes_span(), 1)).from_address(
            self.ptr + lo * self.itemsize)
        return np.ndarray(self.shape, numpy_dtype(self.dtype), buffer=buffer,
                          offset=-lo * self.itemsize,
                          strides=tuple(s * self.itemsize for s in self.strides))

    def _nbytes_span(self) -> int:
        lo, hi = self.span()
        return (hi - lo) * self.itemsize

    def __repr__(self) -> str:
        where = "cpu" if self.device == "cpu" else f"cuda:{self.device_id}"
        return (f"Operand({self.package}, {self.dtype}, shape={self.shape}, "
                f"strides={self.strides}, {where})")


def bytes_to_elems(strides, itemsize, name):
    out = tuple(s // itemsize for s in strides)
    if any(s % itemsize for s in strides):
        raise InvalidOperandError(
            f"{name} strides must be multiples of the item size {itemsize}, got {strides!r}")
    return out


_DTYPE_NAMES: dict = {}  # dtype object (NumPy or torch) -> canonical name; dtype.name is slow


def dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = canonical_name(dtype)
    return name


def _numpy_data_pointer_reader():
    """Fast ``PyArray_DATA``: the data pointer follows the object header in PyArrayObject.

    Verified once against ``__array_interface__``; falls back to it if the layout differs.
    """
    import ctypes

    probe = np.arange(3.0)[1:]
    offset = object.__basicsize__
    try:
        if (ctypes.c_void_p.from_address(id(probe) + offset).value
                == probe.__array_interface__["data"][0]):
            from_address = ctypes.c_void_p.from_address
            return lambda x: from_address(id(x) + offset).value or 0
    except Exception:  # pragma: no cover - other interpreters
        pass
    return lambda x: x.__array_interface__["data"][0]  # pragma: no cover


numpy_pointer = _numpy_data_pointer_reader()


def new_operand(obj, package, ptr, shape, strides, dtype, device, device_id, conj=False,
                 keepalive=None) -> Operand:
    """Trusted constructor (shape/strides already tuples of ints): the per-call fast path."""
    op = Operand.__new__(Operand)
    op.obj, op.package, op.ptr, op.shape, op.strides = obj, package, ptr, shape, strides
    op.dtype, op.itemsize, op.device, op.device_id = dtype, ITEMSIZE[dtype], device, device_id
    op.conj, op.keepalive = conj, keepalive
    return op


def check_same_place(operands: dict) -> tuple[str, int | None, str]:
    """Check all operands share one memory space/device; return ``(device, device_id, package)``.

    ``operands`` maps parameter names to :class:`Operand` (``None`` values are ignored). Mixed
    host/device, mixed devices or mixed packages raise :class:`InvalidOperandError`.
    """
    first_name, first = None, None
    for name, op in operands.items():
        if op is None:
            continue
        if first is None:
            first_name, first = name, op
            continue
        if op.place != first.place:
            raise InvalidOperandError(
                f"{name} must be in the same memory space as {first_name} "
                f"({_where(first)}), got {_where(op)}")
        if op.package != first.package:
            raise InvalidOperandError(
                f"{name} must come from the same package as {first_name} "
                f"({first.package}), got {op.package}")
    if first is None:
        raise InvalidOperandError("at least one operand is required")
    return first.device, first.device_id, first.package


def _where(op) -> str:
    return "host memory" if op.device == "cpu" else f"cuda:{op.device_id}"


# ---- outputs ----------------------------------------------------------------------------
class DeviceArray:
    """A minimal device array returned for non-torch/CuPy producers.

    Exports ``__cuda_array_interface__`` (v3) and ``__dlpack__``; ``copy_to_host()`` gives a
    NumPy array. Its memory comes from :func:`cuweave._internal.memory.allocate`.
    """

    def __init__(self, shape, dtype: str, *, device_id: int = 0, strides=None, stream: int = 0,
                 allocator=None, memory=None):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = canonical_name(dtype)
        self.device_id = device_id
        self.itemsize = ITEMSIZE[self.dtype]
        self.strides = tuple(strides) if strides is not None else c_strides(self.shape)
        nbytes = _extent(self.shape, self.strides) * self.itemsize
        self._mem = memory if memory is not None else _memory.allocate(
            nbytes, package=None, device_id=device_id, stream=stream, allocator=allocator)
        self.ptr = self._mem.device_ptr
        self._stream = int(stream)  # where the data is (being) produced

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def __cuda_array_interface__(self) -> dict:
        np_dtype = numpy_dtype(self.dtype)
        return {
            "shape": self.shape,
            "typestr": np_dtype.str,
            "data": (self.ptr, False),
            "strides": tuple(s * self.itemsize for s in self.strides),
            "version": 3,
            # the producing stream (CAI: 1 is the legacy default stream, 0 is not allowed)
            "stream": self._stream or 1,
        }

    def __dlpack_device__(self):
        return (_dl.KDL_CUDA, self.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("DeviceArray.__dlpack__ does not copy (copy=True was requested)")
        self._order_for(stream)
        versioned = max_version is not None and tuple(max_version) >= (1, 0)
        return _dl.export_capsule(self, self.ptr, self.shape, self.strides, self.dtype,
                                  _dl.KDL_CUDA, self.device_id, versioned)

    def _order_for(self, consumer) -> None:
        """Make the DLPack consumer's stream wait for the work producing this array.

        ``consumer``: ``None`` or 1 (legacy default stream), 2 (per-thread default), a stream
        handle, or -1 (the consumer synchronizes itself), as the DLPack protocol says.
        """
        if consumer == -1:
            return
        consumer = 1 if consumer is None else int(consumer)
        if consumer == (self._stream or 1):
            return
        from . import cuda

        cuda.stream_wait_event(consumer, cuda.Event(timing=False).record(self._stream))

    def copy_to_host(self, stream: int | None = None) -> np.ndarray:
        """Synchronously copy to a new NumPy array (C order), ordered after the work on
        ``stream`` (default: the stream that produces this array)."""
        from . import cuda

        stream = self._stream if stream is None else stream

        out = np.empty(self.shape, dtype=numpy_dtype(self.dtype))
        if _is_c_contiguous(self.shape, self.strides):
            cuda.memcpy_async(out.ctypes.data, self.ptr, out.nbytes, stream)
            cuda.synchronize(stream)
            return out
        n = _extent(self.shape, self.strides)
        flat = np.empty(n, dtype=out.dtype)
        cuda.memcpy_async(flat.ctypes.data, self.ptr, flat.nbytes, stream)
        cuda.synchronize(stream)
        out[...] = np.lib.stride_tricks.as_strided(
            flat, self.shape, tuple(s * self.itemsize for s in self.strides))
        return out

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device=cuda:{self.device_id})"


def c_strides(shape) -> tuple[int, ...]:
    """Element strides of a C-ordered array of ``shape``."""
    acc, rev = 1, []
    for s in reversed(shape):
        rev.append(acc)
        acc *= s
    return tuple(reversed(rev))


def _is_c_contiguous(shape, strides) -> bool:
    return all(st == cs for st, cs, n in zip(strides, c_strides(shape), shape) if n > 1)


def _extent(shape, strides) -> int:
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))
