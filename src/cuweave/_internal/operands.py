"""One view over every array cuweave accepts, and outputs in the operands' own package.

:func:`wrap_operand` reads NumPy arrays, CuPy arrays, torch tensors (CPU and CUDA, incl.
bfloat16 and float8), and any producer of ``__cuda_array_interface__`` or ``__dlpack__``
(JAX, numba device arrays, cuda.core buffers...) into an :class:`Operand`. The package is
detected from ``type(x).__module__``: torch and CuPy are never imported to find out.

:func:`empty` creates an output in the package of a reference operand: NumPy → NumPy, torch →
torch on the same device, CuPy → CuPy, other producers → :class:`DeviceArray`, which exports
both ``__cuda_array_interface__`` and ``__dlpack__``.
"""

from __future__ import annotations

import sys

import numpy as np

from . import dlpack as _dl
from .dtypes import ITEMSIZE, canonical_name, numpy_dtype
from .errors import InvalidOperandError
from .memory import on_stream

__all__ = ["Operand", "wrap_operand", "check_same_place", "empty", "DeviceArray",
           "package_module", "c_strides"]

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
                 "device_id", "conj", "keepalive")

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
        x = self.obj
        if isinstance(x, np.ndarray):
            return x
        if self.package == "torch":
            torch = sys.modules["torch"]
            if self.conj:
                x = x.conj()  # the conjugate view of a lazy-conj tensor is its memory
            if self.dtype not in ("bfloat16", "float8_e4m3fn", "float8_e5m2", "complex32"):
                return x.detach().numpy()
            raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[self.itemsize]
            return x.detach().view(raw).numpy().view(numpy_dtype(self.dtype))
        arr = np.lib.stride_tricks.as_strided(
            np.frombuffer((np.ctypeslib.ctypes.c_char * max(self._nbytes_span(), 1))
                          .from_address(self.ptr + self.span()[0] * self.itemsize),
                          dtype=numpy_dtype(self.dtype)),
            shape=self.shape, strides=tuple(s * self.itemsize for s in self.strides))
        return arr

    def _nbytes_span(self) -> int:
        lo, hi = self.span()
        return (hi - lo) * self.itemsize

    def __repr__(self) -> str:
        where = "cpu" if self.device == "cpu" else f"cuda:{self.device_id}"
        return (f"Operand({self.package}, {self.dtype}, shape={self.shape}, "
                f"strides={self.strides}, {where})")


def _bytes_to_elems(strides, itemsize, name):
    out = tuple(s // itemsize for s in strides)
    if any(s % itemsize for s in strides):
        raise InvalidOperandError(
            f"{name} strides must be multiples of the item size {itemsize}, got {strides!r}")
    return out


_DTYPE_NAMES: dict = {}  # dtype object (NumPy or torch) -> canonical name; dtype.name is slow


def _dtype_name(dtype) -> str:
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
        if ctypes.c_void_p.from_address(id(probe) + offset).value == \
                probe.__array_interface__["data"][0]:
            from_address = ctypes.c_void_p.from_address
            return lambda x: from_address(id(x) + offset).value or 0
    except Exception:  # pragma: no cover - other interpreters
        pass
    return lambda x: x.__array_interface__["data"][0]  # pragma: no cover


_numpy_ptr = _numpy_data_pointer_reader()


def _new_operand(obj, package, ptr, shape, strides, dtype, device, device_id, conj=False,
                 keepalive=None) -> Operand:
    """Trusted constructor (shape/strides already tuples of ints): the per-call fast path."""
    op = Operand.__new__(Operand)
    op.obj, op.package, op.ptr, op.shape, op.strides = obj, package, ptr, shape, strides
    op.dtype, op.itemsize, op.device, op.device_id = dtype, ITEMSIZE[dtype], device, device_id
    op.conj, op.keepalive = conj, keepalive
    return op


def _wrap_numpy(x, name):
    itemsize = x.itemsize
    strides = x.strides
    if any(s % itemsize for s in strides):
        _bytes_to_elems(strides, itemsize, name)  # raises
    return _new_operand(x, "numpy", _numpy_ptr(x), x.shape,
                        tuple(s // itemsize for s in strides), _dtype_name(x.dtype), "cpu", None)


def _wrap_torch(x, name):
    if x.is_neg():  # lazy negation (e.g. ``t.conj().imag``): memory holds -values
        x = x.resolve_neg()
    dtype = _dtype_name(x.dtype)
    if x.is_cuda:
        return _new_operand(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(), dtype, "cuda",
                            x.get_device(), x.is_conj())
    if x.device.type != "cpu":
        raise InvalidOperandError(f"{name} must be on the CPU or a CUDA device, got {x.device}")
    return _new_operand(x, "torch", x.data_ptr(), tuple(x.shape), x.stride(), dtype, "cpu", None,
                        x.is_conj())


def _wrap_cupy(x, name):
    return _new_operand(x, "cupy", x.data.ptr, x.shape,
                        _bytes_to_elems(x.strides, x.itemsize, name), _dtype_name(x.dtype),
                        "cuda", x.device.id)


def _pointer_device(ptr: int) -> int:
    from . import cuda

    drv = cuda.driver()
    attr = drv.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
    return int(cuda.check(drv.cuPointerGetAttribute(attr, ptr), "cuPointerGetAttribute"))


def _wrap_cai(x, cai, name):
    shape = tuple(cai["shape"])
    try:
        np_dtype = np.dtype(cai["typestr"])
    except TypeError as e:
        raise InvalidOperandError(f"{name} typestr must be a NumPy type string, got "
                                  f"{cai['typestr']!r}") from e
    dtype = canonical_name(np_dtype)
    ptr = cai["data"][0] or 0
    itemsize = np_dtype.itemsize
    if cai.get("strides") is None:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    else:
        strides = _bytes_to_elems(cai["strides"], itemsize, name)
    device_id = _pointer_device(ptr) if ptr else 0
    return Operand(x, "cai", ptr, shape, strides, dtype, "cuda", device_id)


def _wrap_dlpack(x, name):
    try:
        dev_type, dev_id = x.__dlpack_device__()
    except Exception as e:
        raise InvalidOperandError(f"{name} must implement __dlpack_device__, got {e}") from e
    if dev_type == _dl.KDL_CPU:
        arr = np.from_dlpack(x)
        op = _wrap_numpy(arr, name)
        op.obj, op.package, op.keepalive = x, "dlpack", arr
        return op
    if dev_type not in (_dl.KDL_CUDA, _dl.KDL_CUDA_MANAGED):
        raise InvalidOperandError(f"{name} must live on the CPU or a CUDA device, got DLPack "
                                  f"device type {dev_type}")
    v = _dl.import_dlpack(x, name)
    return Operand(x, "dlpack", v.ptr, v.shape, v.strides, v.dtype, "cuda", int(dev_id),
                   keepalive=v.capsule)


def wrap_operand(x, name: str = "operand") -> Operand:
    """Describe ``x`` as an :class:`Operand`; ``name`` is used in error messages.

    Examples
    --------
    >>> import numpy as np
    >>> wrap_operand(np.zeros((2, 3), dtype=np.float32).T, "a")
    Operand(numpy, float32, shape=(3, 2), strides=(1, 3), cpu)
    """
    cls = type(x)
    if cls is np.ndarray:
        return _wrap_numpy(x, name)
    mod = cls.__module__
    if mod == "torch" or mod.startswith("torch."):
        if hasattr(x, "data_ptr"):
            return _wrap_torch(x, name)
    if isinstance(x, np.ndarray):
        return _wrap_numpy(x, name)
    if isinstance(x, DeviceArray):
        return Operand(x, "cuweave", x.ptr, x.shape, x.strides, x.dtype, "cuda", x.device_id)
    mod = mod.split(".", 1)[0]
    if mod == "cupy" and hasattr(x, "data") and hasattr(x, "device"):
        return _wrap_cupy(x, name)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _wrap_cai(x, cai, name)
    if hasattr(x, "__dlpack__"):
        return _wrap_dlpack(x, name)
    if isinstance(x, np.generic | int | float | complex | list | tuple):
        raise InvalidOperandError(f"{name} must be {_EXPECTED}, got a {type(x).__name__} "
                                  "(wrap it with numpy.asarray first)")
    raise InvalidOperandError(f"{name} must be {_EXPECTED}, got {type(x).__name__!r}")


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


def package_module(package: str):
    """The module of ``package`` if the user has imported it (never imports it)."""
    return sys.modules.get(package)


# ---- outputs ----------------------------------------------------------------------------
class DeviceArray:
    """A minimal device array returned for non-torch/CuPy producers.

    Exports ``__cuda_array_interface__`` (v3) and ``__dlpack__``; ``copy_to_host()`` gives a
    NumPy array. Its memory comes from :func:`cuweave._internal.memory.allocate`.
    """

    def __init__(self, shape, dtype: str, *, device_id: int = 0, strides=None, stream: int = 0,
                 allocator=None, memory=None):
        from .memory import allocate

        self.shape = tuple(int(s) for s in shape)
        self.dtype = canonical_name(dtype)
        self.device_id = device_id
        self.itemsize = ITEMSIZE[self.dtype]
        self.strides = tuple(strides) if strides is not None else c_strides(self.shape)
        nbytes = _extent(self.shape, self.strides) * self.itemsize
        self._mem = memory if memory is not None else allocate(
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

        event = cuda.Event(timing=False).record(self._stream)
        cuda.check(cuda.driver().cuStreamWaitEvent(consumer, event._h, 0), "cuStreamWaitEvent")

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


def _permuted(shape, perm):
    """(allocation shape, inverse permutation) for a dense array laid out in ``perm`` order."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(shape[p] for p in perm), tuple(inv)


def empty(ref: Operand, shape, dtype: str, *, perm=None, device_id=None, stream: int = 0,
          allocator=None) -> Operand:
    """A new uninitialized array in ``ref``'s package and memory space.

    ``perm`` orders the axes from outermost to innermost in memory (default C order): the array
    is dense and element ``idx`` lives at ``sum(idx[p] * stride[p])`` with strides growing from
    ``perm[-1]`` to ``perm[0]``. E.g. ``perm=(0, 2, 1)`` makes a batch of column-major matrices.
    """
    shape = tuple(int(s) for s in shape)
    perm = tuple(range(len(shape))) if perm is None else tuple(perm)
    alloc_shape, inv = _permuted(shape, perm)
    if ref.device == "cpu":
        if ref.package == "torch":
            torch = sys.modules["torch"]
            x = torch.empty(alloc_shape, dtype=_torch_dtype(torch, dtype)).permute(inv)
            return _wrap_torch(x, "result")
        x = np.empty(alloc_shape, dtype=numpy_dtype(dtype)).transpose(inv)
        return _wrap_numpy(x, "result")
    dev = ref.device_id if device_id is None else device_id
    if ref.package == "torch":  # from torch's pool, ordered on ``stream``
        torch = sys.modules["torch"]
        x = on_stream("torch", stream, dev, torch.empty, alloc_shape,
                      dtype=_torch_dtype(torch, dtype), device=torch.device("cuda", dev))
        return _wrap_torch(x.permute(inv), "result")
    if ref.package == "cupy" and dtype in ("float16", "float32", "float64", "complex64",
                                           "complex128", "int8", "uint8", "int32"):
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(dev):
            x = on_stream("cupy", stream, dev, cupy.empty, alloc_shape,
                          dtype=numpy_dtype(dtype)).transpose(inv)
        return _wrap_cupy(x, "result")
    alloc_strides = c_strides(alloc_shape)
    strides = tuple(alloc_strides[inv[i]] for i in range(len(shape)))
    arr = DeviceArray(shape, dtype, device_id=dev, strides=strides, stream=stream,
                      allocator=allocator)
    return Operand(arr, "cuweave", arr.ptr, shape, strides, dtype, "cuda", dev)


def _torch_dtype(torch, dtype: str):
    try:
        return getattr(torch, dtype)
    except AttributeError as e:
        raise InvalidOperandError(f"dtype must be supported by torch, got {dtype!r}") from e
